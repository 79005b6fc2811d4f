/*
 * The prepared-layout provider of MoE weights (nvfp4/moe.h nvf_moe_weights, SPEC section 5): the
 * routed experts of a prepared-w4a16/w4a4 checkpoint read through nvfp4/layout.h's index
 * functions, one expert at a time, giving the same nvf_moe_matrix values as the ModelOpt linear
 * provider. Per MoE layer P = "{prefix}.mlp.experts":
 *   1. P.w13_weight U8 [E, 2I, H/2]: row r of expert e is row nvf_w13_source_row(r) of up (w3)
 *      or gate (w1), in 64-row groups [up, gate, up, gate, ...]; two E2M1 codes a byte, low
 *      nibble first;
 *   2. P.w13_weight_scale F8_E4M3 [E, pad(2I), padc(H/16)]: each expert's bytes in the scale
 *      layout of config.json's quantization_config.scale_layout (128x4 or 8x4): scale (m, k) at
 *      nvf_layout_offset(layout, m, k, H/16), padding bytes 0;
 *   3. P.w13_alpha F32 [E]: W4A16 the decode scale weight_scale_2; W4A4 input_scale *
 *      weight_scale_2, with P.w13_input_scale F32 [E];
 *   4. P.w2_weight U8 [E, H, I/2], P.w2_weight_scale [E, pad(H), padc(I/16)], P.w2_alpha F32
 *      [E]; W4A4 also P.fc2_input_scale F32 [1].
 * A value is e2m1(code) * f32(scale) (lib/quant's row decode, as the ModelOpt provider); gate and
 * up get alpha w13_alpha[e], down w2_alpha[e] (W4A4: divided by the input scale, which goes in
 * the matrix's input_scale). The router, its bias and the shared experts are read by the
 * checkpoint provider (moe_weights.c), which this one wraps.
 * The inverse mode builds the same matrices the other way round: every scale byte of an expert
 * placed at nvf_layout_coord(offset), every projection row fetched from
 * nvf_w13_prepared_row(proj, i); it reads the same bytes through the inverse functions, so a
 * disagreement between the two modes is a disagreement of the index functions.
 */
#include "moe_weights.h"

#include "nvfp4/backend.h"
#include "nvfp4/layout.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prep_provider {
    nvf_moe_weights base;
    nvf_moe_weights *inner; /* the checkpoint provider: router, bias, shared experts */
    const nvf_ckpt *ck;
    char prefix[256]; /* "{layer prefix}.mlp.experts" */
    nvf_layout layout;
    int w4a4, inverse;
    int64_t first; /* the first expert of this rank */
    const nvf_st_tensor *w13, *s13, *a13, *w2, *s2, *a2, *is13, *is2;
} prep_provider;

static const nvf_st_tensor *find(const prep_provider *p, const char *suffix) {
    char name[320];
    snprintf(name, sizeof name, "%s.%s", p->prefix, suffix);
    size_t i = nvf_ckpt_find_index(p->ck, name);
    return i == NVF_CKPT_NONE ? NULL : p->ck->tensors[i].st;
}

static int need(const nvf_st_tensor *t, const prep_provider *p, const char *suffix, nvf_dtype dtype,
                int ndim, const int64_t *shape) {
    if (!t)
        return nvf_error_set(NVF_E_FORMAT, "%s: prepared checkpoint without '%s.%s'", p->ck->path,
                             p->prefix, suffix);
    int ok = t->dtype == dtype && (int)t->ndim == ndim;
    for (int d = 0; d < ndim && ok; d++)
        ok = t->shape[d] == shape[d];
    if (ok)
        return NVF_OK;
    char want[96];
    int at = 0;
    for (int d = 0; d < ndim; d++)
        at += snprintf(want + at, sizeof want - (size_t)at, "%s%" PRId64, d ? ", " : "", shape[d]);
    return nvf_error_set(NVF_E_FORMAT, "%s: tensor '%s' is %s with %d dimensions; expected %s [%s]",
                         p->ck->path, t->name, nvf_dtype_name(t->dtype), (int)t->ndim,
                         nvf_dtype_name(dtype), want);
}

static float f32_at(const nvf_st_tensor *t, int64_t i) {
    return moe_scalar_at(t, (uint64_t)i);
}

/* Rows of projection matrix `which` (0 w13, 1 w2) of local expert `le`: decode row `src` of the
 * prepared matrix into out (cols values), its scales gathered through the layout. */
static void decode_row(float *out, const prep_provider *p, int which, int64_t le, int64_t src,
                       int64_t cols, uint8_t *tmp, const uint8_t *linear_scales) {
    const nvf_st_tensor *w = which ? p->w2 : p->w13, *s = which ? p->s2 : p->s13;
    int64_t kc = cols / NVF_BLOCK;
    const uint8_t *packed =
        w->data + ((uint64_t)le * (uint64_t)w->shape[1] + (uint64_t)src) * (uint64_t)(cols / 2);
    if (linear_scales) {
        nvf_quant_dequant_row_ref(out, packed, linear_scales + src * kc, cols, 1.0f);
        return;
    }
    const uint8_t *sc = s->data + (uint64_t)le * (uint64_t)(s->shape[1] * s->shape[2]);
    for (int64_t k = 0; k < kc; k++)
        tmp[k] = sc[nvf_layout_offset(p->layout, src, k, kc)];
    nvf_quant_dequant_row_ref(out, packed, tmp, cols, 1.0f);
}

/* Inverse mode: the expert's scales of matrix `which` in linear order [rows, kc], every byte of
 * the laid-out block placed at its coordinate; padding must be 0. */
static int unswizzle(uint8_t *lin, const prep_provider *p, int which, int64_t le, int64_t rows,
                     int64_t kc) {
    const nvf_st_tensor *s = which ? p->s2 : p->s13;
    int64_t bytes = s->shape[1] * s->shape[2];
    const uint8_t *sc = s->data + (uint64_t)le * (uint64_t)bytes;
    for (int64_t off = 0; off < bytes; off++) {
        int64_t m, k;
        nvf_layout_coord(p->layout, off, kc, &m, &k);
        if (m < rows && k < kc)
            lin[m * kc + k] = sc[off];
        else if (sc[off] != 0)
            return nvf_error_set(NVF_E_FORMAT,
                                 "tensor '%s': expert %" PRId64 " padding byte %" PRId64
                                 " (row %" PRId64 ", scale column %" PRId64 ") is 0x%02x, not 0",
                                 s->name, p->first + le, off, m, k, sc[off]);
    }
    return NVF_OK;
}

static int alloc_matrix(nvf_moe_matrix *m, int64_t rows, int64_t cols, float alpha, float is) {
    m->w = malloc((size_t)rows * (size_t)cols * sizeof *m->w + 1);
    if (!m->w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a %" PRId64 " x %" PRId64 " matrix", rows,
                             cols);
    m->rows = rows;
    m->cols = cols;
    m->alpha = alpha;
    m->input_scale = is;
    m->nvfp4 = 1;
    return NVF_OK;
}

/* alpha and input scale of matrix `which` of local expert le, checked finite and positive. */
static int alpha_of(const prep_provider *p, int which, int64_t le, float *alpha, float *is) {
    const nvf_st_tensor *a = which ? p->a2 : p->a13;
    *alpha = f32_at(a, le);
    *is = 0.0f;
    if (p->w4a4) {
        *is = which ? f32_at(p->is2, 0) : f32_at(p->is13, le);
        if (!(isfinite(*is) && *is > 0.0f))
            return nvf_error_set(NVF_E_NONFINITE,
                                 "tensor '%s': expert %" PRId64 " input scale %g is not a "
                                 "finite positive number",
                                 (which ? p->is2 : p->is13)->name, p->first + le, (double)*is);
        *alpha = *alpha / *is;
    }
    if (!(isfinite(*alpha) && *alpha > 0.0f))
        return nvf_error_set(NVF_E_NONFINITE,
                             "tensor '%s': expert %" PRId64 " alpha %g is not a finite positive "
                             "number",
                             a->name, p->first + le, (double)f32_at(a, le));
    return NVF_OK;
}

static int check_finite(const nvf_moe_matrix *m, const char *name, int64_t e) {
    uint64_t n = (uint64_t)m->rows * (uint64_t)m->cols;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(m->w[i]))
            return nvf_error_set(NVF_E_NONFINITE,
                                 "tensor '%s': expert %" PRId64 " value [%" PRIu64 ", %" PRIu64
                                 "] is not finite (a NaN scale byte)",
                                 name, e, i / (uint64_t)m->cols, i % (uint64_t)m->cols);
    return NVF_OK;
}

static int get_expert(prep_provider *p, nvf_moe_matrix out[3], int64_t e) {
    int64_t le = e - p->first, n_h = p->base.hidden, n_i = p->base.intermediate;
    if (le < 0 || le >= p->w13->shape[0])
        return nvf_error_set(NVF_E_INVALID,
                             "%s: expert %" PRId64 " is not in this checkpoint (experts %" PRId64
                             "..%" PRId64 ")",
                             p->prefix, e, p->first, p->first + p->w13->shape[0] - 1);
    float a13, is13, a2, is2;
    int rc = alpha_of(p, 0, le, &a13, &is13);
    if (rc == NVF_OK)
        rc = alpha_of(p, 1, le, &a2, &is2);
    for (int j = 0; j < 3 && rc == NVF_OK; j++)
        rc = j == NVF_PROJ_DOWN ? alloc_matrix(&out[j], n_h, n_i, a2, is2)
                                : alloc_matrix(&out[j], n_i, n_h, a13, is13);
    int64_t kmax = n_h > n_i ? n_h : n_i;
    uint8_t *tmp = malloc((size_t)kmax / NVF_BLOCK + 1), *lin = NULL;
    if (rc == NVF_OK && !tmp)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK && p->inverse) {
        lin = malloc((size_t)(2 * n_i * (n_h / NVF_BLOCK) + n_h * (n_i / NVF_BLOCK)) + 1);
        rc = lin ? unswizzle(lin, p, 0, le, 2 * n_i, n_h / NVF_BLOCK)
                 : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (rc == NVF_OK)
            rc = unswizzle(lin + 2 * n_i * (n_h / NVF_BLOCK), p, 1, le, n_h, n_i / NVF_BLOCK);
    }
    if (rc == NVF_OK && p->inverse) {
        for (int proj = 0; proj < 2; proj++)
            for (int64_t i = 0; i < n_i; i++)
                decode_row(out[proj].w + i * n_h, p, 0, le, nvf_w13_prepared_row(proj, i), n_h, tmp,
                           lin);
    } else if (rc == NVF_OK) {
        for (int64_t r = 0; r < 2 * n_i; r++) {
            int proj;
            int64_t i = nvf_w13_source_row(r, &proj);
            decode_row(out[proj].w + i * n_h, p, 0, le, r, n_h, tmp, NULL);
        }
    }
    for (int64_t r = 0; r < n_h && rc == NVF_OK; r++)
        decode_row(out[NVF_PROJ_DOWN].w + r * n_i, p, 1, le, r, n_i, tmp,
                   lin ? lin + 2 * n_i * (n_h / NVF_BLOCK) : NULL);
    for (int j = 0; j < 3 && rc == NVF_OK; j++)
        rc = check_finite(&out[j], (j == NVF_PROJ_DOWN ? p->w2 : p->w13)->name, e);
    free(tmp);
    free(lin);
    return rc;
}

static int prep_get(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part, int64_t expert) {
    prep_provider *p = (prep_provider *)w;
    if (part != NVF_MOE_PART_EXPERT)
        return nvf_moe_weights_get(p->inner, out, part, expert);
    memset(out, 0, 3 * sizeof *out);
    int rc = get_expert(p, out, expert);
    if (rc != NVF_OK)
        for (int j = 0; j < 3; j++)
            nvf_moe_matrix_free(&out[j]);
    return rc;
}

static int prep_bias(nvf_moe_weights *w, float *out) {
    return nvf_moe_weights_bias(((prep_provider *)w)->inner, out);
}

static void prep_close(nvf_moe_weights *w) {
    prep_provider *p = (prep_provider *)w;
    nvf_moe_weights_close(p->inner);
    free(p);
}

/* The stored bytes themselves, for the kernels (moe_forward_device): the SPEC section 5 tensors
 * are what nvf_moe_prepared takes when the scales are 128x4 and the precision is the run's. */
static int prep_raw(nvf_moe_weights *w, nvf_moe_prepared *out, int w4a4) {
    prep_provider *p = (prep_provider *)w;
    const nvf_st_tensor *f32[4] = {p->a13, p->a2, w4a4 ? p->is13 : NULL, w4a4 ? p->is2 : NULL};
    int ok = !p->inverse && p->layout == NVF_LAYOUT_128X4 && p->w4a4 == w4a4 &&
             p->w2->shape[0] == p->base.n_experts && p->w13->data && p->s13->data && p->w2->data &&
             p->s2->data;
    for (int i = 0; i < 4 && ok; i++)
        ok = !f32[i] || (f32[i]->data && ((uintptr_t)f32[i]->data & 3u) == 0);
    if (!ok)
        return NVF_E_UNSUPPORTED;
    *out = (nvf_moe_prepared){
        .n_experts = p->base.n_experts,
        .hidden = p->base.hidden,
        .inter = p->base.intermediate,
        .gated = 1,
        .w13 = p->w13->data,
        .w13_sf = p->s13->data,
        .w2 = p->w2->data,
        .w2_sf = p->s2->data,
        .w13_alpha = (const float *)(const void *)p->a13->data,
        .w2_alpha = (const float *)(const void *)p->a2->data,
        .w13_input_scale = w4a4 ? (const float *)(const void *)p->is13->data : NULL,
        .fc2_input_scale = w4a4 ? (const float *)(const void *)p->is2->data : NULL,
    };
    return NVF_OK;
}

static const moe_weights_ops k_prep_ops = {prep_get, prep_bias, prep_close, prep_raw};

/* Shapes of every tensor against E, H, I taken from w2_weight. */
static int check_tensors(prep_provider *p) {
    const nvf_ckpt_quant *q = &p->ck->quant;
    if (!p->w2 || p->w2->ndim != 3)
        return need(p->w2, p, "w2_weight", NVF_DTYPE_U8, 3, (int64_t[3]){0, 0, 0});
    int64_t n_e = p->w2->shape[0], n_h = p->w2->shape[1], n_i = 2 * p->w2->shape[2];
    if (n_i % NVF_W13_GROUP != 0 || n_h % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_FORMAT,
                             "%s: tensor '%s' gives H %" PRId64 ", I %" PRId64
                             ": a prepared layer needs I %% %d == 0 and H %% %d == 0",
                             p->ck->path, p->w2->name, n_h, n_i, NVF_W13_GROUP, NVF_BLOCK);
    int64_t kh = n_h / NVF_BLOCK, ki = n_i / NVF_BLOCK;
    nvf_layout l = p->layout;
    int rc = need(p->w13, p, "w13_weight", NVF_DTYPE_U8, 3, (int64_t[3]){n_e, 2 * n_i, n_h / 2});
    if (rc == NVF_OK)
        rc = need(
            p->s13, p, "w13_weight_scale", NVF_DTYPE_F8_E4M3, 3,
            (int64_t[3]){n_e, nvf_layout_rows_padded(l, 2 * n_i), nvf_layout_cols_padded(l, kh)});
    if (rc == NVF_OK)
        rc = need(p->s2, p, "w2_weight_scale", NVF_DTYPE_F8_E4M3, 3,
                  (int64_t[3]){n_e, nvf_layout_rows_padded(l, n_h), nvf_layout_cols_padded(l, ki)});
    if (rc == NVF_OK)
        rc = need(p->a13, p, "w13_alpha", NVF_DTYPE_F32, 1, (int64_t[1]){n_e});
    if (rc == NVF_OK)
        rc = need(p->a2, p, "w2_alpha", NVF_DTYPE_F32, 1, (int64_t[1]){n_e});
    if (rc == NVF_OK && p->w4a4)
        rc = need(p->is13, p, "w13_input_scale", NVF_DTYPE_F32, 1, (int64_t[1]){n_e});
    if (rc == NVF_OK && p->w4a4)
        rc = need(p->is2, p, "fc2_input_scale", NVF_DTYPE_F32, 1, (int64_t[1]){1});
    if (rc == NVF_OK && q->expert_count > 0 && q->expert_count != n_e)
        rc = nvf_error_set(
            NVF_E_FORMAT, "%s: '%s' holds %" PRId64 " experts, config.json's expert_range %" PRId64,
            p->ck->path, p->w13->name, n_e, q->expert_count);
    p->base.hidden = n_h;
    p->base.intermediate = n_i;
    return rc;
}

int moe_prepared_open(nvf_moe_weights **out, const nvf_ckpt *ck, const nvf_moe_layer *l,
                      int inverse) {
    *out = NULL;
    const nvf_ckpt_quant *q = &ck->quant;
    nvf_layout layout;
    if (!nvf_layout_from_name(q->prep_scale_layout, &layout))
        return nvf_error_set(NVF_E_FORMAT,
                             "%s: config.json's quantization_config.scale_layout is '%s'; "
                             "expected 128x4 or 8x4",
                             ck->path, q->prep_scale_layout);
    prep_provider *p = calloc(1, sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    p->ck = ck;
    p->layout = layout;
    p->inverse = inverse;
    p->w4a4 = strcmp(q->prep_precision, "w4a4") == 0;
    p->first = q->expert_first > 0 ? q->expert_first : 0;
    snprintf(p->prefix, sizeof p->prefix, "%s.mlp.experts", l->prefix);
    p->w13 = find(p, "w13_weight");
    p->s13 = find(p, "w13_weight_scale");
    p->a13 = find(p, "w13_alpha");
    p->w2 = find(p, "w2_weight");
    p->s2 = find(p, "w2_weight_scale");
    p->a2 = find(p, "w2_alpha");
    p->is13 = find(p, "w13_input_scale");
    p->is2 = find(p, "fc2_input_scale");
    int rc = check_tensors(p);
    if (rc == NVF_OK)
        rc = moe_ckpt_open_layer(&p->inner, ck, l, p->base.hidden);
    if (rc != NVF_OK) {
        free(p);
        return rc;
    }
    p->base.ops = &k_prep_ops;
    p->base.n_experts = l->n_experts;
    p->base.has_bias = p->inner->has_bias;
    p->base.has_shared = p->inner->has_shared;
    p->base.has_shared_gate = p->inner->has_shared_gate;
    *out = &p->base;
    return NVF_OK;
}
