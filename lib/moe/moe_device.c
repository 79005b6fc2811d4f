/*
 * The MoE block with its routed experts on a backend's MoE kernels (moe_weights.h
 * moe_forward_device; `nvfp4tool moe --device cuda`). lib/moe sits above lib/backend: the CPU
 * reference stays here (moe_forward.c) and the device computes the routing (nvf_backend_moe_route,
 * the reference's ids and weights bit for bit) and the routed experts; the router logits and
 * the shared experts are the reference's own, so the kernels see exactly what the reference's
 * experts see.
 *
 * The kernels read the prepared layout (SPEC section 5), built here for the whole layer from
 * the provider's matrices: each 16-value block of exact NVFP4 values (e2m1 x e4m3 products) is
 * re-encoded as codes and an E4M3 scale (encode_block), rows of gate and up interleaved by 64
 * (nvf_w13_prepared_row), scales in the 128x4 order (nvf_layout_offset), padding 0. The whole
 * layer is held in host memory in that form (the NVFP4 bytes of all its routed experts).
 */
#include "moe_weights.h"

#include "nvfp4/backend.h"
#include "nvfp4/log.h"
#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Codes and scale of 16 exact NVFP4 values: the largest magnitude is an E2M1 magnitude m times
 * the scale, so one of the seven candidates max / m is a scale under which every value is an
 * E2M1 value, and any such scale gives the same products. @return 0, or -1 when none fits. */
static int encode_block(uint8_t *packed, uint8_t *scale, const float *v) {
    static const float mags[] = {6.0f, 4.0f, 3.0f, 2.0f, 1.5f, 1.0f, 0.5f};
    float mx = 0.0f;
    for (int j = 0; j < NVF_BLOCK; j++)
        mx = fabsf(v[j]) > mx ? fabsf(v[j]) : mx;
    memset(packed, 0, NVF_BLOCK_BYTES);
    *scale = 0;
    if (mx == 0.0f)
        return 0;
    for (size_t c = 0; c < sizeof mags / sizeof mags[0]; c++) {
        float s = mx / mags[c];
        uint8_t sb = nvf_f32_to_e4m3_sat(s);
        if (nvf_e4m3_to_f32(sb) != s)
            continue;
        int ok = 1;
        uint8_t codes[NVF_BLOCK];
        for (int j = 0; j < NVF_BLOCK && ok; j++) {
            codes[j] = nvf_e2m1_encode(v[j] / s);
            ok = nvf_e2m1_to_f32(codes[j]) * s == v[j];
        }
        if (!ok)
            continue;
        for (int j = 0; j < NVF_BLOCK_BYTES; j++)
            packed[j] = nvf_e2m1_pack(codes[2 * j], codes[2 * j + 1]);
        *scale = sb;
        return 0;
    }
    return -1;
}

/* Row `src` of `m` into prepared row `row`: codes at `codes` (cols/2 bytes), scales into the
 * 128x4 matrix `sf`. */
static int put_row(uint8_t *codes, uint8_t *sf, const nvf_moe_matrix *m, int64_t src, int64_t row,
                   const char *what, int64_t e) {
    int64_t kc = m->cols / NVF_BLOCK;
    for (int64_t k = 0; k < kc; k++) {
        uint8_t sb;
        if (encode_block(codes + k * NVF_BLOCK_BYTES, &sb, m->w + src * m->cols + k * NVF_BLOCK))
            return nvf_error_set(NVF_E_FORMAT,
                                 "expert %" PRId64 " %s row %" PRId64 " block %" PRId64
                                 ": not NVFP4 values (no E4M3 scale makes them E2M1)",
                                 e, what, src, k);
        sf[nvf_layout_offset(NVF_LAYOUT_128X4, row, k, kc)] = sb;
    }
    return NVF_OK;
}

typedef struct prepared_bufs {
    uint8_t *w13, *sf13, *w2, *sf2;
    float *a13, *a2, *in13, fc2;
} prepared_bufs;

static void bufs_free(prepared_bufs *p) {
    free(p->w13);
    free(p->sf13);
    free(p->w2);
    free(p->sf2);
    free(p->a13);
    free(p->a2);
    free(p->in13);
}

/* Expert e's matrices m into the prepared buffers. */
static int put_expert(prepared_bufs *p, const nvf_moe_matrix *m, int64_t e, int64_t n_h,
                      int64_t n_i, int gated, int w4a4, int scales) {
    const nvf_moe_matrix *g = &m[NVF_PROJ_GATE], *u = &m[NVF_PROJ_UP], *d = &m[NVF_PROJ_DOWN];
    int64_t n1 = gated ? 2 * n_i : n_i;
    int64_t s13 = nvf_layout_bytes(NVF_LAYOUT_128X4, n1, n_h / NVF_BLOCK);
    int64_t s2 = nvf_layout_bytes(NVF_LAYOUT_128X4, n_h, n_i / NVF_BLOCK);
    if (!u->nvfp4 || !d->nvfp4 || (gated && !g->nvfp4))
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "expert %" PRId64 " is not NVFP4: the MoE kernels run NVFP4 "
                             "experts (give --precision w4a16 or w4a4 for a source-precision "
                             "checkpoint)",
                             e);
    if (gated && g->alpha != u->alpha)
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "expert %" PRId64 ": gate and up decode scales differ (%g, %g); the "
                             "prepared w13 has one alpha",
                             e, (double)g->alpha, (double)u->alpha);
    float in13 = gated ? g->input_scale : u->input_scale;
    if (w4a4 && scales == NVF_MOE_ACT_SCALES_INPUT &&
        (!(in13 > 0.0f) || !(d->input_scale > 0.0f) || (e > 0 && d->input_scale != p->fc2)))
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "expert %" PRId64 ": W4A4 on the GPU takes the checkpoint's "
                             "input_scale (one per expert for FC1, one per layer for FC2) or "
                             "none at all (dynamic scales); this one has %g and %g where expert "
                             "0 has input scales",
                             e, (double)in13, (double)d->input_scale);
    if (w4a4 && scales == NVF_MOE_ACT_SCALES_TENSOR && (in13 > 0.0f || d->input_scale > 0.0f))
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "expert %" PRId64 ": W4A4 on the GPU takes input scales on every "
                             "expert or on none (dynamic scales); this one has %g and %g where "
                             "expert 0 has none",
                             e, (double)in13, (double)d->input_scale);
    int rc = NVF_OK;
    for (int64_t r = 0; r < n1 && rc == NVF_OK; r++) {
        int pj = 1;
        int64_t src = gated ? nvf_w13_source_row(r, &pj) : r;
        rc = put_row(p->w13 + (e * n1 + r) * (n_h / 2), p->sf13 + e * s13, pj ? u : g, src, r,
                     pj ? "up" : "gate", e);
    }
    for (int64_t r = 0; r < n_h && rc == NVF_OK; r++)
        rc = put_row(p->w2 + (e * n_h + r) * (n_i / 2), p->sf2 + e * s2, d, r, r, "down", e);
    /* W4A4: the kernels' inputs are E2M1 x E4M3 values, so alpha carries the input scale as the
     * reference's alpha * dec does (SPEC section 5: input_scale * weight_scale_2); with
     * computed scales the kernels multiply alpha by each row's decode scale */
    int fixed = w4a4 && scales == NVF_MOE_ACT_SCALES_INPUT;
    p->a13[e] = fixed ? u->alpha * in13 : u->alpha;
    p->a2[e] = fixed ? d->alpha * d->input_scale : d->alpha;
    p->in13[e] = in13;
    p->fc2 = d->input_scale;
    return rc;
}

static int prepare_layer(prepared_bufs *p, nvf_moe_weights *w, const nvf_moe_spec *spec, int w4a4,
                         int *scales_io, int *gated_out) {
    int64_t n_e = w->n_experts, n_h = w->hidden, n_i = w->intermediate;
    int gated = spec->act != NVF_MOE_ACT_RELU2;
    int64_t n1 = gated ? 2 * n_i : n_i;
    int scales = *scales_io; /* -1: from expert 0 (input scales, else dynamic) */
    if (n_h % NVF_BLOCK || n_i % NVF_BLOCK || (gated && n_i % NVF_W13_GROUP))
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "H %" PRId64 ", I %" PRId64 ": the prepared layout needs multiples "
                             "of 16 (and I of 64 for gated experts)",
                             n_h, n_i);
    size_t s13 = (size_t)nvf_layout_bytes(NVF_LAYOUT_128X4, n1, n_h / NVF_BLOCK);
    size_t s2 = (size_t)nvf_layout_bytes(NVF_LAYOUT_128X4, n_h, n_i / NVF_BLOCK);
    p->w13 = malloc((size_t)(n_e * n1 * n_h / 2));
    p->sf13 = calloc((size_t)n_e, s13);
    p->w2 = malloc((size_t)(n_e * n_h * n_i / 2));
    p->sf2 = calloc((size_t)n_e, s2);
    p->a13 = malloc((size_t)n_e * sizeof(float));
    p->a2 = malloc((size_t)n_e * sizeof(float));
    p->in13 = malloc((size_t)n_e * sizeof(float));
    if (!p->w13 || !p->sf13 || !p->w2 || !p->sf2 || !p->a13 || !p->a2 || !p->in13)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the prepared layer (%" PRId64 " experts)",
                             n_e);
    int rc = NVF_OK;
    for (int64_t e = 0; e < n_e && rc == NVF_OK; e++) {
        nvf_moe_matrix m[3];
        rc = nvf_moe_weights_get(w, m, NVF_MOE_PART_EXPERT, e);
        if (rc != NVF_OK)
            break;
        int ok = m[NVF_PROJ_UP].rows == n_i && m[NVF_PROJ_UP].cols == n_h &&
                 m[NVF_PROJ_DOWN].rows == n_h && m[NVF_PROJ_DOWN].cols == n_i &&
                 (!gated || (m[NVF_PROJ_GATE].w && m[NVF_PROJ_GATE].rows == n_i &&
                             m[NVF_PROJ_GATE].cols == n_h));
        if (ok && scales < 0) {
            float in13 = gated ? m[NVF_PROJ_GATE].input_scale : m[NVF_PROJ_UP].input_scale;
            scales = in13 > 0.0f ? NVF_MOE_ACT_SCALES_INPUT : NVF_MOE_ACT_SCALES_TENSOR;
        }
        rc = ok ? put_expert(p, m, e, n_h, n_i, gated, w4a4, scales)
                : nvf_error_set(NVF_E_FORMAT,
                                "expert %" PRId64
                                ": its matrices do not make a %s MLP of H %" PRId64 ", I %" PRId64,
                                e, nvf_moe_act_name(spec->act), n_h, n_i);
        for (int j = 0; j < 3; j++)
            nvf_moe_matrix_free(&m[j]);
    }
    *gated_out = gated;
    *scales_io = scales < 0 ? NVF_MOE_ACT_SCALES_INPUT : scales;
    return rc;
}

int nvf_moe_forward(float *y, const float *x, int64_t t, int64_t hidden, const nvf_moe_spec *spec,
                    nvf_moe_weights *w, const nvf_moe_opts *o) {
    return o->backend ? moe_forward_device(y, x, t, hidden, spec, w, o)
                      : nvf_moe_forward_ref(y, x, t, hidden, spec, w, o);
}

int moe_forward_device(float *y, const float *x, int64_t t, int64_t hidden,
                       const nvf_moe_spec *spec, nvf_moe_weights *w, const nvf_moe_opts *o) {
    if (hidden != w->hidden || spec->n_experts != w->n_experts)
        return nvf_error_set(NVF_E_SHAPE,
                             "activations of hidden size %" PRId64 " and %" PRId64
                             " routed experts; the layer has %" PRId64 " and %" PRId64,
                             hidden, spec->n_experts, w->hidden, w->n_experts);
    int w4a4 = o->precision == NVF_MOE_PRECISION_W4A4;
    /* W4A4's activation scales: per token, or the checkpoint's input scales where expert 0 has
     * them (a prepared checkpoint's as stored), else dynamic (prepare_layer) */
    int scales = !w4a4 ? NVF_MOE_ACT_SCALES_INPUT : o->per_token ? NVF_MOE_ACT_SCALES_TOKEN : -1;
    int64_t n_e = spec->n_experts, k = spec->top_k;
    prepared_bufs p;
    memset(&p, 0, sizeof p);
    int32_t *ids = malloc((size_t)(t * k) * sizeof *ids + 1);
    float *wts = malloc((size_t)(t * k) * sizeof *wts + 1);
    uint16_t *xb = malloc((size_t)(t * hidden) * sizeof *xb + 1);
    int rc = ids && wts && xb
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory for routing %" PRId64 " tokens", t);
    float x_amax = 0.0f;
    for (int64_t i = 0; i < t * hidden && rc == NVF_OK; i++) {
        if (!isfinite(x[i]))
            rc = nvf_error_set(NVF_E_NONFINITE,
                               "activation [%" PRId64 ", %" PRId64 "] is not finite", i / hidden,
                               i % hidden);
        x_amax = fabsf(x[i]) > x_amax ? fabsf(x[i]) : x_amax;
        xb[i] = nvf_f32_to_bf16_rn(x[i]); /* exact for BF16 inputs */
    }
    int gated = 1;
    if (rc == NVF_OK)
        rc = moe_route_layer(ids, wts, x, t, hidden, spec, w, o->backend);
    /* a prepared checkpoint in the kernels' own layout and precision: its bytes as stored (what
     * proves the layout, SPEC section 7); else a 128x4 layout built from the layer's values */
    nvf_moe_prepared raw;
    int stored = rc == NVF_OK && scales != NVF_MOE_ACT_SCALES_TOKEN && w->ops->prepared &&
                 w->ops->prepared(w, &raw, w4a4) == NVF_OK && spec->act != NVF_MOE_ACT_RELU2;
    if (stored)
        scales = NVF_MOE_ACT_SCALES_INPUT;
    if (rc == NVF_OK && !stored)
        rc = prepare_layer(&p, w, spec, w4a4, &scales, &gated);
    if (rc == NVF_OK) {
        nvf_log(NVF_LOG_DEBUG, "MoE kernels read %s",
                stored ? "the checkpoint's prepared bytes as stored"
                       : "a 128x4 prepared layout built from the layer's values");
        nvf_moe_prepared pw = {
            .n_experts = n_e,
            .hidden = hidden,
            .inter = w->intermediate,
            .gated = gated,
            .w13 = p.w13,
            .w13_sf = p.sf13,
            .w2 = p.w2,
            .w2_sf = p.sf2,
            .w13_alpha = p.a13,
            .w2_alpha = p.a2,
            .w13_input_scale = w4a4 && scales == NVF_MOE_ACT_SCALES_INPUT ? p.in13 : NULL,
            .fc2_input_scale = w4a4 && scales == NVF_MOE_ACT_SCALES_INPUT ? &p.fc2 : NULL,
            .act_scales = w4a4 ? scales : NVF_MOE_ACT_SCALES_INPUT,
        };
        if (stored)
            pw = raw;
        nvf_moe_act_params act = {(int32_t)spec->act, spec->swiglu_alpha, spec->swiglu_beta,
                                  spec->swiglu_limit, spec->situ_beta,    spec->situ_beta_l};
        rc = nvf_backend_moe(o->backend, y, xb, t, ids, wts, k, 0, &pw, &act, &o->quant);
    }
    if (rc == NVF_OK && w->has_shared)
        rc = moe_run_shared(y, x, t, hidden, spec, w, o, x_amax,
                            spec->shared_gate && w->has_shared_gate);
    bufs_free(&p);
    free(ids);
    free(wts);
    free(xb);
    return rc;
}
