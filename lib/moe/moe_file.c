/*
 * `nvfp4tool moe` as a library call (nvfp4/moe.h nvf_moe_run_file): activations from a
 * safetensors file, one MoE layer of a checkpoint, the output to a safetensors file.
 *   in:  the file's only tensor, or the one named "x": BF16 or F32 [T, H];
 *   out: one tensor "y" F32 [T, H]; __metadata__ {"format": "pt", "layer", "precision",
 *        "checkpoint_format", "tokens"}; written as OUT.tmp, fsynced, renamed.
 */
#include "moe_weights.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/moe.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x as f32 [t, h] from the input file. */
static int read_input(float **out, int64_t *t, int64_t *h, const nvf_st_file *f, const char *path,
                      int64_t want_h) {
    const nvf_st_tensor *x = f->n_tensors == 1 ? &f->tensors[0] : nvf_st_find(f, "x");
    if (!x)
        return nvf_error_set(NVF_E_INVALID, "input '%s' holds %zu tensors and none is named 'x'",
                             path, f->n_tensors);
    if (x->dtype != NVF_DTYPE_BF16 && x->dtype != NVF_DTYPE_F32)
        return nvf_error_set(NVF_E_INVALID, "input '%s' tensor '%s' is %s; expected BF16 or F32",
                             path, x->name, nvf_dtype_name(x->dtype));
    if (x->ndim != 2 || x->shape[1] != want_h || x->shape[0] < 1)
        return nvf_error_set(NVF_E_INVALID,
                             "input '%s' tensor '%s' has shape [%" PRId64 "%s%" PRId64
                             "]; the layer needs [T, %" PRId64 "] with T >= 1",
                             path, x->name, x->ndim > 0 ? x->shape[0] : 0, x->ndim > 1 ? ", " : "",
                             x->ndim > 1 ? x->shape[1] : 0, want_h);
    *t = x->shape[0];
    *h = x->shape[1];
    float *v = malloc((size_t)x->numel * sizeof *v);
    if (!v)
        return nvf_error_set(NVF_E_NOMEM, "no memory for input '%s'", path);
    for (uint64_t i = 0; i < x->numel; i++) {
        const uint8_t *p = x->data;
        v[i] = x->dtype == NVF_DTYPE_BF16
                   ? nvf_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)))
                   : nvf_f32_from_bits((uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                                       ((uint32_t)p[4 * i + 2] << 16) |
                                       ((uint32_t)p[4 * i + 3] << 24));
    }
    *out = v;
    return NVF_OK;
}

static int write_output(const char *path, const float *y, int64_t t, int64_t h, int64_t layer,
                        const char *precision, const char *format) {
    char layer_s[32], tokens_s[32];
    snprintf(layer_s, sizeof layer_s, "%" PRId64, layer);
    snprintf(tokens_s, sizeof tokens_s, "%" PRId64, t);
    const char *keys[] = {"layer", "precision", "checkpoint_format", "tokens"};
    const char *vals[] = {layer_s, precision, format, tokens_s};
    nvf_st_entry e = {.name = "y", .dtype = NVF_DTYPE_F32, .ndim = 2, .shape = {t, h}};
    size_t n = (size_t)t * (size_t)h;
    uint8_t *bytes = malloc(n * 4);
    if (!bytes)
        return nvf_error_set(NVF_E_NOMEM, "no memory for output '%s'", path);
    for (size_t i = 0; i < n; i++) {
        uint32_t b = nvf_f32_bits(y[i]);
        for (int j = 0; j < 4; j++)
            bytes[4 * i + (size_t)j] = (uint8_t)(b >> (8 * j));
    }
    nvf_st_writer *w = NULL;
    int rc = nvf_st_writer_open(&w, path, &e, 1, keys, vals, 4);
    if (rc == NVF_OK)
        rc = nvf_st_writer_write(w, bytes, n * 4);
    if (rc == NVF_OK)
        rc = nvf_st_writer_finish(w);
    else
        nvf_st_writer_abort(w);
    free(bytes);
    return rc;
}

int nvf_moe_run_file(nvf_moe_run_info *info, const char *ckpt_path, int64_t layer,
                     const char *in_path, const char *out_path, const nvf_moe_opts *o) {
    nvf_ckpt *ck = NULL;
    nvf_st_file *in = NULL;
    nvf_moe_weights *w = NULL;
    float *x = NULL, *y = NULL;
    nvf_moe_spec spec;
    nvf_moe_opts run = *o;
    int64_t t = 0, h = 0, hidden, inter;
    int has_bias, has_shared, has_gate;
    int rc = nvf_ckpt_open(&ck, ckpt_path);
    if (rc != NVF_OK)
        goto done;
    int nvfp4 = ck->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT ||
                ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT;
    if (nvfp4 && run.precision == NVF_MOE_PRECISION_BF16) {
        nvf_log(NVF_LOG_INFO, "%s is NVFP4: it runs as stored (w4a16)", ckpt_path);
        run.precision = NVF_MOE_PRECISION_W4A16;
    }
    rc = nvf_moe_weights_open(&w, ck, layer, run.precision, &run.quant);
    if (rc == NVF_OK)
        rc = nvf_moe_spec_from_ckpt(&spec, ck);
    if (rc == NVF_OK)
        rc = nvf_st_open(&in, in_path);
    if (rc != NVF_OK)
        goto done;
    nvf_moe_weights_shape(w, &hidden, &inter, &has_bias, &has_shared, &has_gate);
    rc = read_input(&x, &t, &h, in, in_path, hidden);
    if (rc != NVF_OK)
        goto done;
    nvf_log(NVF_LOG_INFO,
            "layer %" PRId64 ": %" PRId64 " tokens, H %" PRId64 ", I %" PRId64 ", %" PRId64
            " experts top-%" PRId64 " (%s%s), %s, shared experts %s, precision %s, %s",
            layer, t, h, inter, spec.n_experts, spec.top_k, nvf_moe_route_name(spec.route),
            spec.renormalize ? ", renormalized" : "", nvf_moe_act_name(spec.act),
            has_shared ? (has_gate ? "gated" : "yes") : "no", nvf_moe_precision_name(run.precision),
            run.backend ? "routed experts on the device" : "on the CPU");
    y = malloc((size_t)t * (size_t)h * sizeof *y);
    rc = !y ? nvf_error_set(NVF_E_NOMEM, "no memory for the output")
            : nvf_moe_forward(y, x, t, h, &spec, w, &run);
    if (rc == NVF_OK)
        rc = write_output(out_path, y, t, h, layer, nvf_moe_precision_name(run.precision),
                          nvf_ckpt_format_name(ck->quant.format));
    if (rc == NVF_OK && info)
        *info = (nvf_moe_run_info){t,
                                   h,
                                   inter,
                                   spec.n_experts,
                                   spec.top_k,
                                   run.precision,
                                   spec.route,
                                   spec.act,
                                   spec.renormalize,
                                   has_shared,
                                   has_gate && spec.shared_gate,
                                   ck->quant.format};
done:
    free(x);
    free(y);
    nvf_moe_weights_close(w);
    nvf_st_close(in);
    nvf_ckpt_close(ck);
    return rc;
}
