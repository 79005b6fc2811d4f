/*
 * The checkpoint provider of MoE weights (nvfp4/moe.h nvf_moe_weights_open): one layer's
 * router, routed experts (through lib/ckpt's expert map: a 2-D tensor or a fused slice) and
 * shared experts, read one expert at a time as f32.
 *   1. BF16/F16/F32 as stored; FP8 block or per-tensor through lib/quant's source rows
 *      (bf16(RN(f32(fp8) * scale)), SPEC section 4);
 *   2. NVFP4 (ModelOpt, compressed-tensors): moe_nvfp4.c over lib/ckpt's validated view;
 *   3. W4A16/W4A4 of a source-precision checkpoint: each routed expert quantized as convert
 *      writes it (gate and up one global-scale group, down alone) and its NVFP4 values used.
 */
#include "moe_weights.h"

#include "ckpt/ckpt_source.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ckpt_provider {
    nvf_moe_weights base;
    const nvf_ckpt *ck;
    const nvf_moe_layer *layer;
    int quantize; /* W4A16/W4A4 of a source-precision checkpoint */
    nvf_quant_params quant;
    size_t shared[3], shared_gate; /* tensor indices or NVF_CKPT_NONE */
} ckpt_provider;

void nvf_moe_matrix_free(nvf_moe_matrix *m) {
    if (!m)
        return;
    free(m->w);
    memset(m, 0, sizeof *m);
}

/* Rows [row0, row0 + rows) of matrix `expert` of tensor `ti` as f32 source values. */
static int load_source(nvf_moe_matrix *out, const nvf_ckpt *ck, size_t ti, int64_t expert,
                       int64_t row0, int64_t rows) {
    const nvf_st_tensor *st = ck->tensors[ti].st;
    int nvfp4 = ck->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT ||
                ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT;
    if (st->dtype == NVF_DTYPE_U8 && nvfp4)
        return moe_nvfp4_load(out, ck, ti, expert, row0, rows);
    nvf_quant_source s;
    nvf_ckpt_source_view(&s, ck, ti, expert);
    int plain =
        st->dtype == NVF_DTYPE_BF16 || st->dtype == NVF_DTYPE_F16 || st->dtype == NVF_DTYPE_F32;
    if (!plain && !(st->dtype == NVF_DTYPE_F8_E4M3 && s.scale))
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "tensor '%s' (%s, checkpoint format %s): the MoE reference reads "
                             "BF16, F16, F32, FP8 with scales and NVFP4",
                             st->name, nvf_dtype_name(st->dtype),
                             nvf_ckpt_format_name(ck->quant.format));
    if (s.scale) {
        int rc = nvf_quant_source_check(&s, st->name);
        if (rc != NVF_OK)
            return rc;
    }
    if (row0 < 0 || rows < 0 || row0 + rows > s.rows)
        return nvf_error_set(NVF_E_FORMAT,
                             "tensor '%s': rows [%" PRId64 ", %" PRId64 ") are beyond its %" PRId64,
                             st->name, row0, row0 + rows, s.rows);
    out->w = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)s.cols * sizeof *out->w);
    if (!out->w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for tensor '%s'", st->name);
    out->rows = rows;
    out->cols = s.cols;
    out->alpha = 1.0f;
    for (int64_t r = 0; r < rows; r++)
        nvf_quant_source_load_row(out->w + r * s.cols, &s, row0 + r);
    return NVF_OK;
}

static int check_finite(const nvf_moe_matrix *m, const char *name) {
    uint64_t n = (uint64_t)m->rows * (uint64_t)m->cols;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(m->w[i]))
            return nvf_error_set(NVF_E_NONFINITE,
                                 "tensor '%s': value [%" PRIu64 ", %" PRIu64 "] is not finite",
                                 name, i / (uint64_t)m->cols, i % (uint64_t)m->cols);
    return NVF_OK;
}

static float amax_of(const nvf_moe_matrix *m) {
    float a = 0.0f;
    uint64_t n = (uint64_t)m->rows * (uint64_t)m->cols;
    for (uint64_t i = 0; i < n; i++)
        a = fabsf(m->w[i]) > a ? fabsf(m->w[i]) : a;
    return a;
}

/* Replace the values of `m` by their NVFP4 quantization with group scale gs
 * (nvf_quant_group_scale): the E2M1 x E4M3 products, alpha = weight_scale_2 (RN(1 / gs), or
 * ModelOpt's sf2). */
static int to_nvfp4(nvf_moe_matrix *m, float gs, const nvf_quant_params *p, const char *name) {
    if (m->cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_SHAPE,
                             "tensor '%s' has %" PRId64 " columns: NVFP4 needs a multiple of %d",
                             name, m->cols, NVF_BLOCK);
    size_t n = (size_t)m->rows * (size_t)m->cols;
    uint8_t *packed = malloc(n / 2 + 1), *scales = malloc(n / NVF_BLOCK + 1);
    int rc = packed && scales ? nvf_quant_rows_ref(packed, scales, m->w, m->rows, m->cols, gs, p, 0)
                              : nvf_error_set(NVF_E_NOMEM, "no memory for tensor '%s'", name);
    for (int64_t r = 0; r < m->rows && rc == NVF_OK; r++)
        nvf_quant_dequant_row_ref(m->w + r * m->cols, packed + (size_t)r * (size_t)m->cols / 2,
                                  scales + (size_t)r * (size_t)m->cols / NVF_BLOCK, m->cols, 1.0f);
    free(packed);
    free(scales);
    m->alpha = nvf_quant_group_decode(gs, p);
    m->nvfp4 = 1;
    return rc;
}

static int load_proj(ckpt_provider *p, nvf_moe_matrix *out, const nvf_moe_proj *pr) {
    int rc = load_source(out, p->ck, pr->tensor, pr->expert, pr->row0, pr->rows);
    if (rc == NVF_OK)
        rc = check_finite(out, p->ck->tensors[pr->tensor].st->name);
    return rc;
}

static int get_expert(ckpt_provider *p, nvf_moe_matrix out[3], int64_t e) {
    const nvf_moe_layer *l = p->layer;
    if (e < 0 || e >= l->n_experts)
        return nvf_error_set(NVF_E_INVALID, "%s: no expert %" PRId64 " (it has %" PRId64 ")",
                             l->prefix, e, l->n_experts);
    static const char *const names[3] = {"gate", "up", "down"};
    int rc = NVF_OK;
    for (int j = 0; j < 3 && rc == NVF_OK; j++) {
        const nvf_moe_proj *pr = &l->experts[e].proj[j];
        if (pr->tensor != NVF_CKPT_NONE)
            rc = load_proj(p, &out[j], pr);
        else if (j != NVF_PROJ_GATE)
            rc = nvf_error_set(NVF_E_FORMAT, "%s: expert %" PRId64 " has no %s projection",
                               l->prefix, e, names[j]);
    }
    if (rc != NVF_OK || !p->quantize)
        return rc;
    /* as convert writes it: gate and up share one global scale, down has its own */
    float a_gu = amax_of(&out[NVF_PROJ_UP]);
    if (out[NVF_PROJ_GATE].w) {
        float a = amax_of(&out[NVF_PROJ_GATE]);
        a_gu = a > a_gu ? a : a_gu;
    }
    float gs_gu = nvf_quant_group_scale(a_gu, &p->quant);
    float gs_d = nvf_quant_group_scale(amax_of(&out[NVF_PROJ_DOWN]), &p->quant);
    for (int j = 0; j < 3 && rc == NVF_OK; j++)
        if (out[j].w)
            rc = to_nvfp4(&out[j], j == NVF_PROJ_DOWN ? gs_d : gs_gu, &p->quant,
                          p->ck->tensors[l->experts[e].proj[j].tensor].st->name);
    return rc;
}

static int load_whole(ckpt_provider *p, nvf_moe_matrix *out, size_t ti) {
    const nvf_st_tensor *st = p->ck->tensors[ti].st;
    if (st->ndim != 2)
        return nvf_error_set(NVF_E_FORMAT, "tensor '%s' has %d dimensions, expected 2", st->name,
                             (int)st->ndim);
    nvf_moe_proj pr = {ti, 0, 0, 0, -1, 0, st->shape[0]};
    return load_proj(p, out, &pr);
}

static int ckpt_get(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part, int64_t expert) {
    ckpt_provider *p = (ckpt_provider *)w;
    memset(out, 0, 3 * sizeof *out);
    int rc = NVF_OK;
    switch (part) {
    case NVF_MOE_PART_EXPERT:
        rc = get_expert(p, out, expert);
        break;
    case NVF_MOE_PART_SHARED:
        for (int j = 0; j < 3 && rc == NVF_OK; j++)
            if (p->shared[j] != NVF_CKPT_NONE)
                rc = load_whole(p, &out[j], p->shared[j]);
        break;
    case NVF_MOE_PART_ROUTER:
        rc = load_whole(p, &out[0], p->layer->router);
        break;
    case NVF_MOE_PART_SHARED_GATE:
        rc = p->shared_gate != NVF_CKPT_NONE
                 ? load_whole(p, &out[0], p->shared_gate)
                 : nvf_error_set(NVF_E_FORMAT, "%s has no shared_expert_gate", p->layer->prefix);
        break;
    }
    if (rc != NVF_OK)
        for (int j = 0; j < 3; j++)
            nvf_moe_matrix_free(&out[j]);
    return rc;
}

static int ckpt_bias(nvf_moe_weights *w, float *out) {
    ckpt_provider *p = (ckpt_provider *)w;
    const nvf_st_tensor *b = p->ck->tensors[p->layer->router_bias].st;
    int dt_ok =
        b->dtype == NVF_DTYPE_F32 || b->dtype == NVF_DTYPE_BF16 || b->dtype == NVF_DTYPE_F16;
    if (!dt_ok || b->numel != (uint64_t)w->n_experts)
        return nvf_error_set(NVF_E_FORMAT,
                             "router bias '%s' is %s with %" PRIu64 " elements; expected a "
                             "float tensor of %" PRId64,
                             b->name, nvf_dtype_name(b->dtype), b->numel, w->n_experts);
    for (int64_t e = 0; e < w->n_experts; e++)
        out[e] = moe_scalar_at(b, (uint64_t)e);
    return NVF_OK;
}

static void ckpt_close(nvf_moe_weights *w) {
    free(w);
}

static const moe_weights_ops k_ckpt_ops = {ckpt_get, ckpt_bias, ckpt_close, NULL};

/* The MoE layers of `ck` as "1, 2, 3" into buf. */
static void list_moe(char *buf, size_t len, const nvf_ckpt *ck) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ck->moe.n_layers && at < len; i++) {
        if (ck->moe.layers[i].kind != NVF_LAYER_MOE)
            continue;
        int n = snprintf(buf + at, len - at, "%s%" PRId64, at ? ", " : "", ck->moe.layers[i].index);
        at += n > 0 ? (size_t)n : 0;
    }
    if (!buf[0])
        snprintf(buf, len, "none");
}

static int find_layer(const nvf_moe_layer **out, const nvf_ckpt *ck, int64_t layer) {
    char list[256];
    for (size_t i = 0; i < ck->moe.n_layers; i++) {
        const nvf_moe_layer *l = &ck->moe.layers[i];
        if (l->index != layer)
            continue;
        if (l->kind == NVF_LAYER_MOE) {
            *out = l;
            return NVF_OK;
        }
        list_moe(list, sizeof list, ck);
        return nvf_error_set(NVF_E_INVALID,
                             "%s: layer %" PRId64 " (%s) is a dense MLP; MoE "
                             "layers: %s",
                             ck->path, layer, l->prefix, list);
    }
    list_moe(list, sizeof list, ck);
    return nvf_error_set(NVF_E_INVALID, "%s: no layer %" PRId64 "; MoE layers: %s", ck->path, layer,
                         list);
}

/* Refusals: what this reader would misread. */
static int check_readable(const nvf_ckpt *ck, const nvf_moe_layer *l) {
    if (strcmp(ck->moe.config.model_type, "gpt_oss") == 0)
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "%s: GPT-OSS stores its experts fused as gate_up_proj [E, H, 2I] "
                             "with gate and up interleaved and biases, a layout lib/ckpt does not "
                             "map; the MoE reference cannot read it",
                             ck->path);
    if (!l->has_router)
        return nvf_error_set(NVF_E_FORMAT, "%s: MoE layer has no router '%s.mlp.gate.weight'",
                             l->prefix, l->prefix);
    if (l->hidden <= 0 || l->intermediate <= 0 || l->n_experts <= 0)
        return nvf_error_set(NVF_E_FORMAT, "%s: the expert sizes are unknown", l->prefix);
    return NVF_OK;
}

/* The shared experts' tensors: PREFIX.mlp.shared_experts.* (DeepSeek) or .shared_expert.*
 * (Qwen2-MoE), and Qwen2-MoE's shared_expert_gate. */
static void find_shared(ckpt_provider *p) {
    static const char *const dirs[] = {"shared_experts", "shared_expert"};
    static const char *const projs[3] = {"gate_proj", "up_proj", "down_proj"};
    char name[512];
    for (int j = 0; j < 3; j++) {
        p->shared[j] = NVF_CKPT_NONE;
        for (int d = 0; d < 2 && p->shared[j] == NVF_CKPT_NONE; d++) {
            snprintf(name, sizeof name, "%s.mlp.%s.%s.weight", p->layer->prefix, dirs[d], projs[j]);
            p->shared[j] = nvf_ckpt_find_index(p->ck, name);
        }
    }
    snprintf(name, sizeof name, "%s.mlp.shared_expert_gate.weight", p->layer->prefix);
    p->shared_gate = nvf_ckpt_find_index(p->ck, name);
}

/* The checkpoint provider of layer `l`, with `hidden` for a layer whose experts lib/ckpt does
 * not map (prepared shards: H comes from their tensors). */
static int open_ckpt(nvf_moe_weights **out, const nvf_ckpt *ck, const nvf_moe_layer *l,
                     int64_t hidden, nvf_moe_precision precision, const nvf_quant_params *quant) {
    ckpt_provider *p = calloc(1, sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    p->base.ops = &k_ckpt_ops;
    p->base.hidden = hidden;
    p->base.intermediate = l->intermediate;
    p->base.n_experts = l->n_experts;
    p->base.has_bias = l->has_router_bias;
    p->ck = ck;
    p->layer = l;
    p->quant = *quant;
    p->quantize = precision != NVF_MOE_PRECISION_BF16 &&
                  ck->quant.format != NVF_CKPT_FORMAT_NVFP4_MODELOPT &&
                  ck->quant.format != NVF_CKPT_FORMAT_NVFP4_CT;
    find_shared(p);
    p->base.has_shared = p->shared[NVF_PROJ_UP] != NVF_CKPT_NONE;
    p->base.has_shared_gate = p->shared_gate != NVF_CKPT_NONE;
    if (p->base.has_shared && p->shared[NVF_PROJ_DOWN] == NVF_CKPT_NONE) {
        free(p);
        return nvf_error_set(NVF_E_FORMAT, "%s: shared experts without a down_proj", l->prefix);
    }
    *out = &p->base;
    return NVF_OK;
}

int moe_ckpt_open_layer(nvf_moe_weights **out, const nvf_ckpt *ck, const nvf_moe_layer *l,
                        int64_t hidden) {
    nvf_quant_params q;
    memset(&q, 0, sizeof q);
    *out = NULL;
    if (!l->has_router)
        return nvf_error_set(NVF_E_FORMAT, "%s: MoE layer has no router '%s.mlp.gate.weight'",
                             l->prefix, l->prefix);
    return open_ckpt(out, ck, l, hidden, NVF_MOE_PRECISION_BF16, &q);
}

static int open_layer(nvf_moe_weights **out, const nvf_ckpt *ck, int64_t layer,
                      nvf_moe_precision precision, const nvf_quant_params *quant, int inverse) {
    const nvf_moe_layer *l = NULL;
    *out = NULL;
    int rc = find_layer(&l, ck, layer);
    if (rc == NVF_OK && ck->quant.format == NVF_CKPT_FORMAT_PREPARED)
        return moe_prepared_open(out, ck, l, inverse);
    if (rc == NVF_OK && inverse)
        rc = nvf_error_set(NVF_E_INVALID, "%s is not a prepared checkpoint (format %s)", ck->path,
                           nvf_ckpt_format_name(ck->quant.format));
    if (rc == NVF_OK)
        rc = check_readable(ck, l);
    if (rc != NVF_OK)
        return rc;
    return open_ckpt(out, ck, l, l->hidden, precision, quant);
}

int nvf_moe_weights_open(nvf_moe_weights **out, const nvf_ckpt *ck, int64_t layer,
                         nvf_moe_precision precision, const nvf_quant_params *quant) {
    return open_layer(out, ck, layer, precision, quant, 0);
}

int nvf_moe_weights_open_inverse(nvf_moe_weights **out, const nvf_ckpt *ck, int64_t layer) {
    return open_layer(out, ck, layer, NVF_MOE_PRECISION_W4A16, NULL, 1);
}

void nvf_moe_weights_close(nvf_moe_weights *w) {
    if (w)
        w->ops->close(w);
}

void nvf_moe_weights_shape(const nvf_moe_weights *w, int64_t *hidden, int64_t *intermediate,
                           int *has_bias, int *has_shared, int *has_shared_gate) {
    *hidden = w->hidden;
    *intermediate = w->intermediate;
    *has_bias = w->has_bias;
    *has_shared = w->has_shared;
    *has_shared_gate = w->has_shared_gate;
}

int nvf_moe_weights_get(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part,
                        int64_t expert) {
    return w->ops->get(w, out, part, expert);
}

int nvf_moe_weights_bias(nvf_moe_weights *w, float *out) {
    if (!w->has_bias)
        return nvf_error_set(NVF_E_FORMAT, "the layer has no router correction bias");
    return w->ops->bias(w, out);
}
