/*
 * nvfp4tool quantize IN.safetensors OUT.safetensors: every floating 2-D tensor (or those named
 * by --tensor) becomes NVFP4 (SPEC section 2): X -> X (U8 [r, c/2]), X_scale (F8_E4M3
 * [r, c/16], linear), X_scale_2 (F32, shape []). Other tensors are copied unchanged; an FP8-block
 * source's X_scale_inv is consumed by its dequantization and dropped.
 */
#include "cli.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/device.h"
#include "nvfp4/quant_cuda.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/quant.h"
#include "nvfp4/recipe.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The CUDA device that quantizes (-1: the CPU). */
static int g_cuda_device = -1;
static cli_common g_common;
static cli_list g_tensors;
static const char *g_method, *g_error, *g_domain, *g_e4m3_max, *g_block_size;
static int g_allow_nonfinite, g_print_recipe;

static const cli_opt k_opts[] = {
    {"tensor", "NAME", CLI_LIST, &g_tensors, "quantize only this tensor"},
    {"method", "rtn|4over6", CLI_STRING, &g_method, "override quantization.method"},
    {"error", "mse|mae", CLI_STRING, &g_error, "override quantization.error (4over6)"},
    {"error-domain", "DOMAIN", CLI_STRING, &g_domain,
     "override quantization.error_domain: scaled|original"},
    {"e4m3-max", "256|448", CLI_STRING, &g_e4m3_max, "override quantization.e4m3_max"},
    {"weight-block-size", "R,C", CLI_STRING, &g_block_size,
     "FP8-block sources: rows,cols per scale (default 128,128)"},
    {"allow-nonfinite", NULL, CLI_FLAG, &g_allow_nonfinite,
     "pass NaN/Inf through instead of failing"},
    {"print-recipe", NULL, CLI_FLAG, &g_print_recipe,
     "print the effective recipe as JSON and exit (IN/OUT not needed)"},
};

static const cli_spec k_spec = {
    .name = "quantize",
    .usage = "IN.safetensors OUT.safetensors [options]",
    .summary =
        "Quantize every floating 2-D tensor (or those named by --tensor) of one file to NVFP4.",
    .details =
        "A tensor X [r, c] (F32, F16, BF16, F8_E4M3, F8_E5M2; c a multiple of 16) becomes\n"
        "X (U8 [r, c/2]), X_scale (F8_E4M3 [r, c/16], linear) and X_scale_2 (F32, shape []).\n"
        "F8_E4M3 X with X_scale_inv is an FP8-block source: dequantized to BF16 first, its\n"
        "X_scale_inv dropped. Gate/up (w1/w3) and q/k/v projections of one module share one\n"
        "global scale. Other tensors are copied unchanged. The recipe (--recipe) supplies the\n"
        "quantization keys; each flag below overrides one.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 0,
    .max_pos = 2,
    .common = &g_common,
};

/* What happens to each input tensor. */
enum { ACT_KEEP, ACT_QUANT, ACT_DROP };

typedef struct plan_item {
    const nvf_st_tensor *t;
    int action;
    const nvf_st_tensor *scale_inv; /* FP8-block sources */
    nvf_quant_source src;
    char group[512];
    float amax, gs;
    char *name_scale, *name_scale_2; /* owned */
} plan_item;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int apply_overrides(nvf_recipe *r) {
    const struct {
        const char *flag, *value;
    } ov[] = {{"method", g_method},
              {"error", g_error},
              {"error-domain", g_domain},
              {"e4m3-max", g_e4m3_max}};
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        if (ov[i].value) {
            int rc = nvf_recipe_set(r, ov[i].flag, ov[i].value);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int parse_block_size(int64_t *br, int64_t *bc) {
    *br = *bc = 128;
    if (!g_block_size)
        return 0;
    long long a, b;
    char tail;
    if (sscanf(g_block_size, "%lld,%lld%c", &a, &b, &tail) != 2 || a <= 0 || b <= 0 ||
        a > (1 << 20) || b > (1 << 20))
        return nvf_error_set(NVF_E_INVALID, "--weight-block-size takes R,C (positive), got '%s'",
                             g_block_size);
    *br = a;
    *bc = b;
    return 0;
}

static int is_value_dtype(nvf_dtype d) {
    return d == NVF_DTYPE_F32 || d == NVF_DTYPE_F16 || d == NVF_DTYPE_BF16 ||
           d == NVF_DTYPE_F8_E4M3 || d == NVF_DTYPE_F8_E5M2;
}

/* Fill item->src for a candidate; 0 when quantizable, else the status (message set). */
static int make_source(plan_item *it, const nvf_st_file *f, int64_t br, int64_t bc) {
    const nvf_st_tensor *t = it->t;
    if (!is_value_dtype(t->dtype))
        return nvf_error_set(NVF_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be quantized",
                             t->name, nvf_dtype_name(t->dtype));
    if (t->ndim != 2)
        return nvf_error_set(NVF_E_SHAPE, "tensor '%s': %d-D, only 2-D tensors are quantized",
                             t->name, (int)t->ndim);
    memset(&it->src, 0, sizeof it->src);
    it->src.dtype = t->dtype;
    it->src.data = t->data;
    it->src.rows = t->shape[0];
    it->src.cols = t->shape[1];
    if (t->dtype == NVF_DTYPE_F8_E4M3) {
        char sname[1024];
        snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
        const nvf_st_tensor *s = nvf_st_find(f, sname);
        if (s) {
            it->scale_inv = s;
            it->src.scale = s->data;
            it->src.scale_dtype = s->dtype;
            it->src.scale_numel = s->numel;
            it->src.block_rows = br;
            it->src.block_cols = bc;
        }
    }
    return nvf_quant_source_check(&it->src, t->name);
}

/* The FP8-block scale companion of a quantized tensor in the plan, if `t` is one. */
static int is_consumed_scale(const plan_item *items, size_t n, const nvf_st_tensor *t) {
    for (size_t i = 0; i < n; i++) {
        if (items[i].action == ACT_QUANT && items[i].scale_inv == t)
            return 1;
    }
    return 0;
}

static int build_plan(plan_item *items, const nvf_st_file *f, int64_t br, int64_t bc) {
    size_t n = f->n_tensors;
    for (size_t i = 0; i < n; i++) {
        items[i].t = &f->tensors[i];
        items[i].action = ACT_KEEP;
    }
    if (g_tensors.n > 0) {
        for (size_t k = 0; k < g_tensors.n; k++) {
            const nvf_st_tensor *t = nvf_st_find(f, g_tensors.items[k]);
            if (!t)
                return nvf_error_set(NVF_E_INVALID, "--tensor '%s': no such tensor in '%s'",
                                     g_tensors.items[k], f->path);
            plan_item *it = &items[t - f->tensors];
            int rc = make_source(it, f, br, bc);
            if (rc < 0)
                return nvf_error_set(NVF_E_INVALID, "--tensor '%s' cannot be quantized: %s",
                                     t->name, nvf_error_last());
            it->action = ACT_QUANT;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            plan_item *it = &items[i];
            if (!is_value_dtype(it->t->dtype) || it->t->ndim != 2)
                continue;
            size_t len = strlen(it->t->name);
            if (len > 10 && strcmp(it->t->name + len - 10, "_scale_inv") == 0)
                continue; /* an FP8-block scale, whether or not its weight is here */
            int rc = make_source(it, f, br, bc);
            if (rc == NVF_E_SHAPE || rc == NVF_E_UNSUPPORTED) {
                nvf_log(NVF_LOG_INFO, "keeping %s", nvf_error_last());
                nvf_error_clear();
                continue;
            }
            if (rc < 0)
                return rc;
            it->action = ACT_QUANT;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].action == ACT_KEEP && is_consumed_scale(items, n, items[i].t))
            items[i].action = ACT_DROP;
    }
    return 0;
}

/* Output names and their collisions with tensors that are kept. */
static int name_outputs(plan_item *items, size_t n, const nvf_st_file *f) {
    for (size_t i = 0; i < n; i++) {
        plan_item *it = &items[i];
        if (it->action != ACT_QUANT)
            continue;
        size_t len = strlen(it->t->name);
        it->name_scale = malloc(len + 9);
        it->name_scale_2 = malloc(len + 9);
        if (!it->name_scale || !it->name_scale_2)
            return nvf_error_set(NVF_E_NOMEM, "out of memory");
        snprintf(it->name_scale, len + 9, "%s_scale", it->t->name);
        snprintf(it->name_scale_2, len + 9, "%s_scale_2", it->t->name);
        const char *outs[2] = {it->name_scale, it->name_scale_2};
        for (int k = 0; k < 2; k++) {
            const nvf_st_tensor *clash = nvf_st_find(f, outs[k]);
            if (clash && items[clash - f->tensors].action != ACT_DROP)
                return nvf_error_set(NVF_E_SHAPE,
                                     "'%s': output tensor '%s' would collide with the input "
                                     "tensor of that name",
                                     f->path, outs[k]);
        }
        int rc = nvf_ckpt_group_key(it->group, sizeof it->group, it->t->name);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Bytes of one quantized row chunk: rows per call to the quantizer. FP8-block sources are
 * split at block-row boundaries so each chunk's scales start at a whole block row. */
static int64_t chunk_rows(const nvf_quant_source *s) {
    int64_t rows = (64 << 20) / (s->cols > 0 ? s->cols : 1);
    if (rows < 1)
        rows = 1;
    if (s->scale) {
        rows = rows / s->block_rows * s->block_rows;
        if (rows < s->block_rows)
            rows = s->block_rows;
    }
    return rows;
}

static size_t scale_elem_size(nvf_dtype d) {
    return d == NVF_DTYPE_F32 ? 4 : d == NVF_DTYPE_BF16 ? 2 : 1;
}

/* Quantize one planned tensor in row chunks, writing X as it goes and then X_scale, X_scale_2. */
static int write_quantized(nvf_st_writer *w, const plan_item *it, const nvf_quant_params *p,
                           int threads) {
    const nvf_quant_source *s = &it->src;
    int64_t step = chunk_rows(s), cols = s->cols;
    size_t esize = nvf_dtype_bits(s->dtype) / 8;
    uint8_t *packed = malloc((size_t)(step * cols / 2));
    uint8_t *scales = malloc((size_t)(s->rows * cols / NVF_BLOCK) + 1);
    int rc = 0;
    if (!packed || !scales) {
        rc = nvf_error_set(NVF_E_NOMEM, "out of memory quantizing '%s'", it->t->name);
        goto done;
    }
    for (int64_t r0 = 0; r0 < s->rows; r0 += step) {
        nvf_quant_source sub = *s;
        sub.rows = s->rows - r0 < step ? s->rows - r0 : step;
        sub.data = (const uint8_t *)s->data + (uint64_t)r0 * (uint64_t)cols * esize;
        if (s->scale) {
            uint64_t ncb = (uint64_t)((cols + s->block_cols - 1) / s->block_cols);
            uint64_t first = (uint64_t)(r0 / s->block_rows) * ncb;
            sub.scale = (const uint8_t *)s->scale + first * scale_elem_size(s->scale_dtype);
            sub.scale_numel = (uint64_t)((sub.rows + s->block_rows - 1) / s->block_rows) * ncb;
        }
        uint8_t *sc = scales + r0 * cols / NVF_BLOCK;
        if (g_cuda_device >= 0)
            rc = nvf_quant_source_cuda(packed, sc, &sub, it->gs, p, g_cuda_device);
        else
            rc = nvf_quant_source_ref(packed, sc, &sub, it->gs, p, threads);
        if (rc < 0)
            goto done;
        rc = nvf_st_writer_write(w, packed, (size_t)(sub.rows * cols / 2));
        if (rc < 0)
            goto done;
    }
    rc = nvf_st_writer_write(w, scales, (size_t)(s->rows * cols / NVF_BLOCK));
    if (rc < 0)
        goto done;
    float s2 = nvf_quant_decode_scale(it->gs);
    uint8_t le[4];
    uint32_t b;
    memcpy(&b, &s2, 4);
    for (int k = 0; k < 4; k++)
        le[k] = (uint8_t)(b >> (8 * k));
    rc = nvf_st_writer_write(w, le, 4);
done:
    free(packed);
    free(scales);
    return rc;
}

static int resolve_device(void) {
    nvf_device dev;
    const char *spec = g_common.device ? g_common.device : "auto";
    int rc = nvf_device_select(&dev, spec);
    if (rc < 0)
        return rc;
    g_cuda_device = dev.kind == NVF_DEVICE_CUDA ? dev.index : -1;
    return 0;
}

static cJSON *summary_json(const char *in, const char *out, const plan_item *items, size_t n,
                           const nvf_recipe *r, uint64_t bytes_in, uint64_t bytes_out, double secs,
                           int threads) {
    size_t nq = 0, nk = 0, nd = 0;
    for (size_t i = 0; i < n; i++) {
        nq += items[i].action == ACT_QUANT;
        nk += items[i].action == ACT_KEEP;
        nd += items[i].action == ACT_DROP;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "input", in);
    cJSON_AddStringToObject(o, "output", out);
    char devname[32] = "cpu";
    if (g_cuda_device >= 0)
        snprintf(devname, sizeof devname, "cuda:%d", g_cuda_device);
    cJSON_AddStringToObject(o, "device", devname);
    cJSON_AddNumberToObject(o, "threads", threads);
    cJSON_AddNumberToObject(o, "tensors_quantized", (double)nq);
    cJSON_AddNumberToObject(o, "tensors_kept", (double)nk);
    cJSON_AddNumberToObject(o, "tensors_dropped", (double)nd);
    cJSON_AddNumberToObject(o, "bytes_quantized", (double)bytes_in);
    cJSON_AddNumberToObject(o, "bytes_written", (double)bytes_out);
    cJSON_AddNumberToObject(o, "seconds", secs);
    cJSON_AddNumberToObject(o, "gb_per_s", secs > 0 ? (double)bytes_in / secs / 1e9 : 0.0);
    char *rj = nvf_recipe_to_json(r);
    if (rj) {
        cJSON_AddItemToObject(o, "recipe", cJSON_Parse(rj));
        free(rj);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "tensors");
    for (size_t i = 0; i < n; i++) {
        const plan_item *it = &items[i];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", it->t->name);
        cJSON_AddStringToObject(t, "dtype", nvf_dtype_name(it->t->dtype));
        cJSON_AddStringToObject(t, "action",
                                it->action == ACT_QUANT  ? "quantized"
                                : it->action == ACT_KEEP ? "kept"
                                                         : "dropped");
        if (it->action == ACT_QUANT) {
            cJSON_AddStringToObject(t, "source", it->scale_inv ? "fp8-block" : "plain");
            cJSON_AddStringToObject(t, "group", it->group);
            cJSON_AddNumberToObject(t, "amax", it->amax);
            cJSON_AddNumberToObject(t, "global_scale", it->gs);
            cJSON_AddNumberToObject(t, "scale_2", nvf_quant_decode_scale(it->gs));
        }
        cJSON_AddItemToArray(arr, t);
    }
    return o;
}

static int run(const char *in, const char *out, const nvf_recipe *r, int64_t br, int64_t bc) {
    nvf_st_file *f = NULL;
    plan_item *items = NULL;
    nvf_st_entry *entries = NULL;
    nvf_st_writer *w = NULL;
    size_t n = 0, ne = 0;
    uint64_t bytes_in = 0;
    int threads = (int)g_common.threads;
    double t0 = now_s();
    int rc = nvf_st_open(&f, in);
    if (rc < 0)
        goto done;
    n = f->n_tensors;
    items = calloc(n ? n : 1, sizeof *items);
    entries = calloc(3 * n + 1, sizeof *entries);
    if (!items || !entries) {
        rc = nvf_error_set(NVF_E_NOMEM, "out of memory planning '%s'", in);
        goto done;
    }
    if ((rc = build_plan(items, f, br, bc)) < 0 || (rc = name_outputs(items, n, f)) < 0)
        goto done;
    /* Pass 1: amax of every quantized tensor, then one global scale per group. */
    for (size_t i = 0; i < n; i++) {
        if (items[i].action != ACT_QUANT)
            continue;
        if (g_cuda_device >= 0)
            rc = nvf_quant_amax_cuda(&items[i].amax, &items[i].src, g_allow_nonfinite,
                                     g_cuda_device, items[i].t->name);
        else
            rc = nvf_quant_amax_ref(&items[i].amax, &items[i].src, g_allow_nonfinite, threads,
                                    items[i].t->name);
        if (rc < 0) {
            nvf_error_prefix("'%s'", in);
            goto done;
        }
        bytes_in += items[i].t->end - items[i].t->begin;
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].action != ACT_QUANT)
            continue;
        float amax = 0.0f;
        for (size_t j = 0; j < n; j++) {
            if (items[j].action == ACT_QUANT && strcmp(items[j].group, items[i].group) == 0 &&
                items[j].amax > amax)
                amax = items[j].amax;
        }
        items[i].gs = nvf_quant_global_scale(amax, r->quant.e4m3_max);
    }
    /* Declare the output: input order, each quantized X expanded into X, X_scale, X_scale_2. */
    for (size_t i = 0; i < n; i++) {
        const nvf_st_tensor *t = items[i].t;
        if (items[i].action == ACT_DROP)
            continue;
        nvf_st_entry *e = &entries[ne++];
        e->name = t->name;
        if (items[i].action == ACT_KEEP) {
            e->dtype = t->dtype;
            e->ndim = t->ndim;
            memcpy(e->shape, t->shape, sizeof e->shape);
            continue;
        }
        e->dtype = NVF_DTYPE_U8;
        e->ndim = 2;
        e->shape[0] = t->shape[0];
        e->shape[1] = t->shape[1] / 2;
        e = &entries[ne++];
        e->name = items[i].name_scale;
        e->dtype = NVF_DTYPE_F8_E4M3;
        e->ndim = 2;
        e->shape[0] = t->shape[0];
        e->shape[1] = t->shape[1] / NVF_BLOCK;
        e = &entries[ne++];
        e->name = items[i].name_scale_2;
        e->dtype = NVF_DTYPE_F32;
        e->ndim = 0;
    }
    rc = nvf_st_writer_open(&w, out, entries, ne, NULL, NULL, 0);
    if (rc < 0)
        goto done;
    /* Pass 2: quantize and write, in declaration order. */
    for (size_t i = 0; i < n; i++) {
        const nvf_st_tensor *t = items[i].t;
        if (items[i].action == ACT_KEEP)
            rc = nvf_st_writer_write(w, t->data, (size_t)(t->end - t->begin));
        else if (items[i].action == ACT_QUANT)
            rc = write_quantized(w, &items[i], &r->quant, threads);
        if (rc < 0)
            goto done;
        if (items[i].action == ACT_QUANT)
            nvf_log(NVF_LOG_DEBUG, "quantized %s (amax %g, global scale %g)", t->name,
                    (double)items[i].amax, (double)items[i].gs);
    }
    uint64_t bytes_out = nvf_st_writer_file_size(w);
    rc = nvf_st_writer_finish(w);
    w = NULL;
    if (rc < 0)
        goto done;
    double secs = now_s() - t0;
    cJSON *js = summary_json(in, out, items, n, r, bytes_in, bytes_out, secs, threads);
    if (g_common.json) {
        if (cli_print_json(k_spec.name, js) != EXIT_OK) {
            cJSON_Delete(js);
            rc = nvf_error_set(NVF_E_NOMEM, "out of memory writing the summary");
            goto done;
        }
    } else {
        cJSON *q = cJSON_GetObjectItem(js, "tensors_quantized");
        cJSON *k = cJSON_GetObjectItem(js, "tensors_kept");
        printf("%s: quantized %d tensors (%.3f GB), kept %d, wrote %s (%llu bytes) in %.3f s "
               "(%.3f GB/s)\n",
               in, q ? q->valueint : 0, (double)bytes_in / 1e9, k ? k->valueint : 0, out,
               (unsigned long long)bytes_out, secs, secs > 0 ? (double)bytes_in / secs / 1e9 : 0.0);
    }
    cJSON_Delete(js);
done:
    nvf_st_writer_abort(w);
    for (size_t i = 0; items && i < n; i++) {
        free(items[i].name_scale);
        free(items[i].name_scale_2);
    }
    free(items);
    free(entries);
    nvf_st_close(f);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[2];
    int np = 0;
    int rc = cli_parse(&k_spec, argc, argv, pos, &np);
    if (rc != EXIT_OK) {
        cli_free_lists(&k_spec);
        return rc == CLI_HELP_SHOWN ? EXIT_OK : rc;
    }
    nvf_recipe r;
    int64_t br, bc;
    int st = nvf_recipe_init(&r);
    if (st == 0 && g_common.recipe)
        st = nvf_recipe_load(&r, g_common.recipe);
    if (st == 0)
        st = apply_overrides(&r);
    if (st == 0)
        st = parse_block_size(&br, &bc);
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    if (g_print_recipe) {
        char *js = nvf_recipe_to_json(&r);
        if (!js) {
            rc = cli_fail(k_spec.name, NVF_E_NOMEM);
            goto done;
        }
        printf("%s\n", js);
        free(js);
        rc = EXIT_OK;
        goto done;
    }
    if (np != 2) {
        rc = cli_usage_error(&k_spec, "expected IN and OUT, got %d argument%s", np,
                             np == 1 ? "" : "s");
        goto done;
    }
    st = resolve_device();
    if (st == 0)
        st = run(pos[0], pos[1], &r, br, bc);
    rc = st < 0 ? cli_fail(k_spec.name, st) : EXIT_OK;
done:
    nvf_recipe_free(&r);
    cli_free_lists(&k_spec);
    return rc;
}
