/*
 * The CUDA MoE kernels (nvf_backend_moe) against their CPU twin, lib/moe's nvf_moe_forward_ref,
 * on the same NVFP4 values: the test draws random E2M1 codes and E4M3 scales per expert, gives
 * the CPU forward their exact values in the linear layout through a provider of its own, and
 * gives the GPU the same bytes in the prepared layout it builds here with nvfp4/layout.h
 * (up/gate rows interleaved by 64, scales 128x4 swizzled, padding 0). The routing the GPU gets
 * is nvf_moe_route_ref on logits computed as the forward computes them (same f32 loop).
 * Cases: random routing; T = 1; T = 37, 64 and 200 (16-, 32-, 64- and, with kernel v7, 128-row
 * tiles, not multiples; 32-row tiles run the register kernel from v12, also tested with 150 rows
 * on one expert and on the DeepSeek-V3 shape); all tokens to one expert (top-1 on a zero router:
 * every logit ties, the lower id wins) and so experts with zero tokens; 600 slots all to one expert
 * and 1200 slots over 40 experts (the permutation's units of 256 slots, the last partial; more
 * experts than a warp's lanes); 8192 and 8400 slots (32 units, the most the one-block permutation
 * takes, and 33, three launches); top-40 (more slots per token than lanes); two expert-parallel
 * ranks (ep_check: slots routed to the other rank's experts contribute nothing, the two outputs add
 * up to the reference; with top-1 the other rank's rows are +0 exactly); H = 1040 (K not a multiple
 * of 64) and split K; the DeepSeek-V3 (7168, 2048) and GPT-OSS (2880, 2880) expert shapes; silu,
 * swiglu, situ, relu2 (non-gated); W4A16 and W4A4 (RTN, 4over6 and ModelOpt's RTN; W4A4 also with
 * each quantized block on one thread and on a quad of lanes, NVFP4_MOE_QUANT_LANES 1 and 4, the
 * bytes the same as the default's; W4A4 with the input scales, dynamic per-tensor scales and
 * per-token scales, the last two on token rows 2^-9 .. 2^9 in magnitude, each row within 5x the
 * tolerance on its own and, from 2 tokens, the other computed mode giving other bytes). Rel-L2 <=
 * 1e-3 for W4A16 (both sum in f32, in other orders) and <= 1e-2 for W4A4 (an order-dependent BF16
 * rounding of an FC1 output can move an FC2 input to the neighbouring E2M1 value); all outputs
 * finite; two GPU runs byte-identical. Seed fixed and printed. Exit 77 (skip) without a GPU.
 */
#include "check.h"

#define GPU_GEN_SEED 0x9E3779B97F4A7C15ull
#include "gpu_gen.h"

#include "moe/moe_weights.h"
#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static nvf_backend *g_gpu;

/* One projection of one expert: codes [rows, cols/2] and linear scales [rows, cols/16]. */
typedef struct proj {
    int64_t rows, cols;
    uint8_t *codes, *scales;
} proj;

typedef struct layer {
    int64_t E, H, I;
    int gated, w4a4;
    int scales; /* W4A4's activation scales: NVF_MOE_ACT_SCALES_* (INPUT: in13, fc2_in) */
    proj *gate, *up, *down; /* [E] each; gate NULL when not gated */
    float *alpha13, *alpha2, *in13, fc2_in;
    float *router; /* [E, H] */
} layer;

static void proj_make(proj *p, int64_t rows, int64_t cols) {
    p->rows = rows;
    p->cols = cols;
    p->codes = malloc((size_t)(rows * cols / 2));
    p->scales = malloc((size_t)(rows * cols / 16));
    for (int64_t i = 0; i < rows * cols / 2; i++)
        p->codes[i] = (uint8_t)rnd();
    /* E4M3 0x20..0x3F: 2^-4 .. 0.94 (subnormal-free), and a few subnormals */
    for (int64_t i = 0; i < rows * cols / 16; i++)
        p->scales[i] = (uint8_t)(rnd() % 16 == 0 ? 1 + rnd() % 7 : 0x20 + rnd() % 32);
}

static float proj_value(const proj *p, int64_t r, int64_t c) {
    return nvf_e2m1_to_f32(nvf_e2m1_unpack(p->codes + r * (p->cols / 2), c)) *
           nvf_e4m3_to_f32(p->scales[r * (p->cols / 16) + c / 16]);
}

/* The CPU provider: the same values, linear, as f32. */
typedef struct test_weights {
    nvf_moe_weights base;
    const layer *l;
} test_weights;

static void matrix_of(nvf_moe_matrix *m, const proj *p, float alpha, float input_scale) {
    m->rows = p->rows;
    m->cols = p->cols;
    m->w = malloc((size_t)(p->rows * p->cols) * sizeof *m->w);
    for (int64_t r = 0; r < p->rows; r++)
        for (int64_t c = 0; c < p->cols; c++)
            m->w[r * p->cols + c] = proj_value(p, r, c);
    m->alpha = alpha;
    m->input_scale = input_scale;
    m->nvfp4 = 1;
}

static int tw_get(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part, int64_t e) {
    const layer *l = ((test_weights *)w)->l;
    memset(out, 0, 3 * sizeof *out);
    if (part == NVF_MOE_PART_ROUTER) {
        out[0].rows = l->E;
        out[0].cols = l->H;
        out[0].w = malloc((size_t)(l->E * l->H) * sizeof(float));
        memcpy(out[0].w, l->router, (size_t)(l->E * l->H) * sizeof(float));
        out[0].alpha = 1.0f;
        return NVF_OK;
    }
    if (part != NVF_MOE_PART_EXPERT)
        return nvf_error_set(NVF_E_FORMAT, "test provider: no part %d", (int)part);
    /* computed scales: no input_scale, so the reference takes the dynamic or (with per_token)
     * per-token scales */
    int fixed = l->w4a4 && l->scales == NVF_MOE_ACT_SCALES_INPUT;
    float in13 = fixed ? l->in13[e] : 0.0f, in2 = fixed ? l->fc2_in : 0.0f;
    if (l->gated)
        matrix_of(&out[NVF_PROJ_GATE], &l->gate[e], l->alpha13[e], in13);
    matrix_of(&out[NVF_PROJ_UP], &l->up[e], l->alpha13[e], in13);
    matrix_of(&out[NVF_PROJ_DOWN], &l->down[e], l->alpha2[e], in2);
    return NVF_OK;
}

static void tw_close(nvf_moe_weights *w) {
    free(w);
}

static const moe_weights_ops k_test_ops = {.get = tw_get, .bias = NULL, .close = tw_close};

static void layer_make(layer *l, int64_t E, int64_t H, int64_t I, int gated, int w4a4,
                       int zero_router) {
    memset(l, 0, sizeof *l);
    l->E = E;
    l->H = H;
    l->I = I;
    l->gated = gated;
    l->w4a4 = w4a4;
    l->gate = gated ? calloc((size_t)E, sizeof(proj)) : NULL;
    l->up = calloc((size_t)E, sizeof(proj));
    l->down = calloc((size_t)E, sizeof(proj));
    l->alpha13 = malloc((size_t)E * sizeof(float));
    l->alpha2 = malloc((size_t)E * sizeof(float));
    l->in13 = malloc((size_t)E * sizeof(float));
    for (int64_t e = 0; e < E; e++) {
        if (gated)
            proj_make(&l->gate[e], I, H);
        proj_make(&l->up[e], I, H);
        proj_make(&l->down[e], H, I);
        l->alpha13[e] = 0.05f + 0.01f * (float)e;
        l->alpha2[e] = 0.03f + 0.005f * (float)e;
        l->in13[e] = 1.0f / (200.0f + 50.0f * (float)e);
    }
    l->fc2_in = 1.0f / 300.0f;
    l->router = malloc((size_t)(E * H) * sizeof(float));
    for (int64_t i = 0; i < E * H; i++)
        l->router[i] = zero_router ? 0.0f : urand();
}

static void layer_free(layer *l) {
    for (int64_t e = 0; e < l->E; e++) {
        proj *ps[3] = {l->gate ? &l->gate[e] : NULL, &l->up[e], &l->down[e]};
        for (int j = 0; j < 3; j++)
            if (ps[j]) {
                free(ps[j]->codes);
                free(ps[j]->scales);
            }
    }
    free(l->gate);
    free(l->up);
    free(l->down);
    free(l->alpha13);
    free(l->alpha2);
    free(l->in13);
    free(l->router);
}

/* Scales of `p` (linear) into `dst` (128x4 of a matrix with `rows` rows) at row `row`. */
static void put_scales(uint8_t *dst, int64_t rows_unused, const proj *p, int64_t src_row,
                       int64_t row) {
    (void)rows_unused;
    int64_t kc = p->cols / 16;
    for (int64_t k = 0; k < kc; k++)
        dst[nvf_layout_offset(NVF_LAYOUT_128X4, row, k, kc)] = p->scales[src_row * kc + k];
}

/* The prepared bytes (SPEC section 5) of `l` into `w` (buffers owned by the caller, freed with
 * prepared_free). */
static void prepared_make(nvf_moe_prepared *w, const layer *l) {
    int64_t E = l->E, H = l->H, I = l->I, N1 = l->gated ? 2 * I : I;
    int64_t s13 = nvf_layout_bytes(NVF_LAYOUT_128X4, N1, H / 16);
    int64_t s2 = nvf_layout_bytes(NVF_LAYOUT_128X4, H, I / 16);
    uint8_t *w13 = malloc((size_t)(E * N1 * H / 2)), *sf13 = calloc((size_t)(E * s13), 1);
    uint8_t *w2 = malloc((size_t)(E * H * I / 2)), *sf2 = calloc((size_t)(E * s2), 1);
    float *a13 = malloc((size_t)E * sizeof(float)), *a2 = malloc((size_t)E * sizeof(float));
    float *in13 = malloc((size_t)E * sizeof(float)), *fc2 = malloc(sizeof(float));
    for (int64_t e = 0; e < E; e++) {
        for (int64_t r = 0; r < N1; r++) {
            int pj = 1;
            int64_t src = l->gated ? nvf_w13_source_row(r, &pj) : r;
            const proj *p = pj == 1 ? &l->up[e] : &l->gate[e];
            memcpy(w13 + (e * N1 + r) * (H / 2), p->codes + src * (H / 2), (size_t)(H / 2));
            put_scales(sf13 + e * s13, N1, p, src, r);
        }
        memcpy(w2 + e * H * (I / 2), l->down[e].codes, (size_t)(H * I / 2));
        for (int64_t r = 0; r < H; r++)
            put_scales(sf2 + e * s2, H, &l->down[e], r, r);
        /* W4A4: the prepared alpha is input_scale * weight_scale_2 (SPEC section 5); with
         * computed scales weight_scale_2 alone */
        int fixed = l->w4a4 && l->scales == NVF_MOE_ACT_SCALES_INPUT;
        a13[e] = fixed ? l->in13[e] * l->alpha13[e] : l->alpha13[e];
        a2[e] = fixed ? l->fc2_in * l->alpha2[e] : l->alpha2[e];
        in13[e] = l->in13[e];
    }
    *fc2 = l->fc2_in;
    memset(w, 0, sizeof *w);
    w->n_experts = E;
    w->hidden = H;
    w->inter = I;
    w->gated = l->gated;
    w->w13 = w13;
    w->w13_sf = sf13;
    w->w2 = w2;
    w->w2_sf = sf2;
    w->w13_alpha = a13;
    w->w2_alpha = a2;
    int fixed = l->w4a4 && l->scales == NVF_MOE_ACT_SCALES_INPUT;
    w->w13_input_scale = fixed ? in13 : NULL;
    w->fc2_input_scale = fixed ? fc2 : NULL;
    w->act_scales = l->w4a4 ? l->scales : NVF_MOE_ACT_SCALES_INPUT;
    if (!fixed) {
        free(in13);
        free(fc2);
    }
}

static void prepared_free(nvf_moe_prepared *w) {
    free((void *)w->w13);
    free((void *)w->w13_sf);
    free((void *)w->w2);
    free((void *)w->w2_sf);
    free((void *)w->w13_alpha);
    free((void *)w->w2_alpha);
    free((void *)w->w13_input_scale);
    free((void *)w->fc2_input_scale);
}

typedef struct tcase {
    const char *name;
    int64_t E, H, I, T, top_k;
    nvf_moe_act act;
    int w4a4, zero_router;
    nvf_quant_method method;
    int ep;     /* also run as two expert-parallel ranks (ep_check) */
    int scales; /* W4A4: NVF_MOE_ACT_SCALES_* (computed ones: the token rows' magnitudes spread) */
} tcase;

/* Rank r of two: experts [e0, E) of `w` (r 1) or [0, e0) (r 0), the same bytes in place. */
static nvf_moe_prepared rank_view(const nvf_moe_prepared *w, int64_t e0, int r) {
    int64_t H = w->hidden, I = w->inter, N1 = w->gated ? 2 * I : I;
    nvf_moe_prepared v = *w;
    if (r == 0) {
        v.n_experts = e0;
        return v;
    }
    v.n_experts = w->n_experts - e0;
    v.w13 += e0 * N1 * (H / 2);
    v.w13_sf += e0 * nvf_layout_bytes(NVF_LAYOUT_128X4, N1, H / 16);
    v.w2 += e0 * H * (I / 2);
    v.w2_sf += e0 * nvf_layout_bytes(NVF_LAYOUT_128X4, H, I / 16);
    v.w13_alpha += e0;
    v.w2_alpha += e0;
    if (v.w13_input_scale)
        v.w13_input_scale += e0;
    return v;
}

/* Expert parallelism: the experts split in two ranks at E / 2, each run on the whole routing
 * with its expert0, so that every rank sees slots routed elsewhere (ids below expert0 on rank
 * 1, at or beyond its experts on rank 0). The ranks' sum must match the CPU reference as the
 * single run does; with top-1 every token's row on the rank without its expert is +0 exactly
 * (no local slot: nothing is added), and the row on the other rank is that token's output. */
static void ep_check(const tcase *c, const nvf_moe_prepared *w, const float *ref,
                     const uint16_t *xb, const int32_t *ids, const float *wts, double tol,
                     const nvf_moe_act_params *act, const nvf_quant_params *q) {
    int64_t T = c->T, H = c->H, k = c->top_k, e0 = c->E / 2;
    float *y[2] = {malloc((size_t)(T * H) * sizeof(float)),
                   malloc((size_t)(T * H) * sizeof(float))};
    int ok = 1;
    for (int r = 0; r < 2; r++) {
        nvf_moe_prepared v = rank_view(w, e0, r);
        int rc = nvf_backend_moe(g_gpu, y[r], xb, T, ids, wts, k, r ? e0 : 0, &v, act, q);
        CHECK_MSG(rc == 0, "%s: rank %d: %s", c->name, r, nvf_error_last());
        ok = ok && rc == 0;
    }
    if (ok) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < T * H; i++) {
            double d = ((double)y[0][i] + (double)y[1][i]) - (double)ref[i];
            num += d * d;
            den += (double)ref[i] * ref[i];
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        printf("%-28s two ranks at expert %lld: rel-L2 %.3g (<= %g)\n", c->name, (long long)e0, rel,
               tol);
        CHECK_MSG(rel <= tol, "%s: two ranks: rel-L2 %g > %g", c->name, rel, tol);
        int64_t bad = 0, local0 = 0;
        for (int64_t t = 0; t < T && k == 1; t++) {
            int other = ids[t] < e0 ? 1 : 0; /* the rank without the token's expert */
            local0 += other == 1;
            for (int64_t i = 0; i < H; i++) {
                uint32_t bits;
                memcpy(&bits, &y[other][t * H + i], 4);
                bad += bits != 0;
            }
        }
        CHECK_MSG(bad == 0, "%s: %lld outputs of tokens without a local slot are not +0", c->name,
                  (long long)bad);
        CHECK_MSG(k != 1 || (local0 > 0 && local0 < T),
                  "%s: the routing does not reach both ranks (%lld of %lld on rank 0)", c->name,
                  (long long)local0, (long long)T);
    }
    free(y[0]);
    free(y[1]);
}

static void run_case(const tcase *c) {
    layer l;
    int gated = c->act != NVF_MOE_ACT_RELU2;
    layer_make(&l, c->E, c->H, c->I, gated, c->w4a4, c->zero_router);
    l.scales = c->scales;
    nvf_moe_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.route = NVF_MOE_ROUTE_SOFTMAX_TOPK;
    spec.n_experts = c->E;
    spec.top_k = c->top_k;
    spec.renormalize = 1;
    spec.routed_scaling_factor = 1.0f;
    spec.act = c->act;
    spec.swiglu_alpha = 1.702f;
    spec.swiglu_beta = 1.0f;
    spec.swiglu_limit = 7.0f;
    spec.situ_beta = 2.0f;
    spec.situ_beta_l = 3.0f;
    nvf_moe_opts o;
    memset(&o, 0, sizeof o);
    o.precision = c->w4a4 ? NVF_MOE_PRECISION_W4A4 : NVF_MOE_PRECISION_W4A16;
    o.quant.method = c->method;
    o.quant.e4m3_max = NVF_QUANT_E4M3_MAX_448;
    o.per_token = c->scales == NVF_MOE_ACT_SCALES_TOKEN;

    int64_t T = c->T, H = c->H, k = c->top_k, E = c->E;
    float *x = malloc((size_t)(T * H) * sizeof *x), *ref = malloc((size_t)(T * H) * sizeof *ref);
    float *y1 = malloc((size_t)(T * H) * sizeof *y1), *y2 = malloc((size_t)(T * H) * sizeof *y2);
    uint16_t *xb = malloc((size_t)(T * H) * sizeof *xb);
    float *logits = malloc((size_t)(T * E) * sizeof *logits), *wts = malloc((size_t)(T * k) * 4);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
    for (int64_t i = 0; i < T * H; i++) {
        /* computed scales: token rows 2^-9 .. 2^9 apart, where a per-tensor scale leaves the
         * small rows' blocks on few E4M3 steps and a per-token one does not */
        float mag = c->scales ? ldexpf(1.0f, (int)(i / H % 7) * 3 - 9) : 1.0f;
        xb[i] = nvf_f32_to_bf16_rn(urand() * 2.0f * mag);
        x[i] = nvf_bf16_to_f32(xb[i]);
    }
    /* the routing the forward makes: logits as its router_logits loop computes them */
    for (int64_t t = 0; t < T; t++)
        for (int64_t e = 0; e < E; e++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < H; i++)
                acc = acc + x[t * H + i] * l.router[e * H + i];
            logits[t * E + e] = acc * 1.0f;
        }
    CHECK(nvf_moe_route_ref(ids, wts, logits, NULL, T, &spec) == 0);
    if (c->zero_router)
        for (int64_t t = 0; t < T; t++)
            CHECK_MSG(ids[t * k] == 0, "%s: token %lld routed to %d", c->name, (long long)t,
                      ids[t * k]);

    test_weights *tw = calloc(1, sizeof *tw);
    tw->base.ops = &k_test_ops;
    tw->base.hidden = H;
    tw->base.intermediate = c->I;
    tw->base.n_experts = E;
    tw->l = &l;
    int rc = nvf_moe_forward_ref(ref, x, T, H, &spec, &tw->base, &o);
    CHECK_MSG(rc == 0, "%s: cpu forward: %s", c->name, nvf_error_last());

    nvf_moe_prepared w;
    prepared_make(&w, &l);
    nvf_moe_act_params act = {(int32_t)spec.act, spec.swiglu_alpha, spec.swiglu_beta,
                              spec.swiglu_limit, spec.situ_beta,    spec.situ_beta_l};
    int rg = nvf_backend_moe(g_gpu, y1, xb, T, ids, wts, k, 0, &w, &act, &o.quant);
    CHECK_MSG(rg == 0, "%s: gpu: %s", c->name, nvf_error_last());
    int rg2 = nvf_backend_moe(g_gpu, y2, xb, T, ids, wts, k, 0, &w, &act, &o.quant);
    CHECK_MSG(rg2 == 0, "%s: gpu (second run): %s", c->name, nvf_error_last());
    if (rc == 0 && rg == 0 && rg2 == 0) {
        double num = 0, den = 0;
        int finite = 1;
        for (int64_t i = 0; i < T * H; i++) {
            double d = (double)y1[i] - (double)ref[i];
            num += d * d;
            den += (double)ref[i] * ref[i];
            finite = finite && isfinite(y1[i]);
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        double tol = c->w4a4 ? 1e-2 : 1e-3;
        printf("%-28s T %4lld H %4lld I %4lld E %2lld k %lld: rel-L2 %.3g (<= %g)\n", c->name,
               (long long)T, (long long)H, (long long)c->I, (long long)E, (long long)k, rel, tol);
        CHECK_MSG(finite, "%s: non-finite output", c->name);
        CHECK_MSG(den > 0, "%s: the reference is all zero", c->name);
        CHECK_MSG(rel <= tol, "%s: rel-L2 %g > %g", c->name, rel, tol);
        int shown = 0;
        for (int64_t i = 0; i < T * H && rel > tol && shown < 10; i++)
            if (fabsf(y1[i] - ref[i]) > 1e-2f * (fabsf(ref[i]) + 1e-3f)) {
                printf("  [%lld, %lld] gpu %a cpu %a\n", (long long)(i / H), (long long)(i % H),
                       y1[i], ref[i]);
                shown++;
            }
        CHECK_MSG(memcmp(y1, y2, (size_t)(T * H) * sizeof *y1) == 0,
                  "%s: two runs differ in their bytes", c->name);
        /* W4A4: a block quantized by one thread or by a quad of lanes (moe_steps.cu picks by
         * the rows; NVFP4_MOE_QUANT_LANES forces one) gives the same bytes */
        for (int lanes = 1; c->w4a4 && lanes <= 4; lanes += 3) {
            setenv("NVFP4_MOE_QUANT_LANES", lanes == 1 ? "1" : "4", 1);
            int rl = nvf_backend_moe(g_gpu, y2, xb, T, ids, wts, k, 0, &w, &act, &o.quant);
            unsetenv("NVFP4_MOE_QUANT_LANES");
            CHECK_MSG(rl == 0, "%s: gpu (%d lanes a block): %s", c->name, lanes, nvf_error_last());
            CHECK_MSG(rl != 0 || memcmp(y1, y2, (size_t)(T * H) * sizeof *y1) == 0,
                      "%s: %d lanes a block differ from the default in their bytes", c->name,
                      lanes);
        }
        /* W4A16 FC1 in one K range on the wgmma kernel with the activation fused into its
         * store (nvf_cuda_moe_gemm_wg_fc1, NVFP4_MOE_FUSE=1) and as the f32 sums and the
         * epilogue kernel (NVFP4_MOE_FUSE=0): the same bytes as the default's */
        for (int fuse = 0; !c->w4a4 && gated && fuse <= 1; fuse++) {
            setenv("NVFP4_MOE_FUSE", fuse ? "1" : "0", 1);
            int rf = nvf_backend_moe(g_gpu, y2, xb, T, ids, wts, k, 0, &w, &act, &o.quant);
            unsetenv("NVFP4_MOE_FUSE");
            CHECK_MSG(rf == 0, "%s: gpu (NVFP4_MOE_FUSE=%d): %s", c->name, fuse, nvf_error_last());
            CHECK_MSG(rf != 0 || memcmp(y1, y2, (size_t)(T * H) * sizeof *y1) == 0,
                      "%s: NVFP4_MOE_FUSE=%d differs from the default in its bytes", c->name, fuse);
        }
        if (c->scales) {
            /* each token row on its own: the small rows as close to the reference as the
             * large ones (the rel-L2 above is the large rows') */
            double worst = 0;
            for (int64_t t = 0; t < T; t++) {
                double n = 0, d = 0;
                for (int64_t i = t * H; i < (t + 1) * H; i++) {
                    n += ((double)y1[i] - ref[i]) * ((double)y1[i] - ref[i]);
                    d += (double)ref[i] * ref[i];
                }
                double r = d > 0 ? sqrt(n / d) : sqrt(n);
                worst = r > worst ? r : worst;
            }
            printf("%-28s worst token row: rel-L2 %.3g (<= %g)\n", c->name, worst, 5 * tol);
            CHECK_MSG(worst <= 5 * tol, "%s: a token row's rel-L2 %g > %g", c->name, worst,
                      5 * tol);
            /* the other computed mode gives other bytes: the scales are taken as asked (with
             * one token both are the same: its row is all of x, and each expert's rows) */
            if (T > 1) {
                w.act_scales = c->scales == NVF_MOE_ACT_SCALES_TOKEN ? NVF_MOE_ACT_SCALES_TENSOR
                                                                     : NVF_MOE_ACT_SCALES_TOKEN;
                int ro = nvf_backend_moe(g_gpu, y2, xb, T, ids, wts, k, 0, &w, &act, &o.quant);
                w.act_scales = c->scales;
                CHECK_MSG(ro == 0, "%s: gpu (the other scales): %s", c->name, nvf_error_last());
                CHECK_MSG(ro != 0 || memcmp(y1, y2, (size_t)(T * H) * sizeof *y1) != 0,
                          "%s: per-token and per-tensor scales give the same bytes", c->name);
            }
        }
        if (c->ep)
            ep_check(c, &w, ref, xb, ids, wts, tol, &act, &o.quant);
    }
    prepared_free(&w);
    tw_close(&tw->base);
    layer_free(&l);
    free(x);
    free(ref);
    free(y1);
    free(y2);
    free(xb);
    free(logits);
    free(wts);
    free(ids);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_moe_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device gpu;
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    int rg = nvf_backend_open(&g_gpu, &gpu, 0);
    CHECK_MSG(rg == 0, "open cuda:0: %s", nvf_error_last());
    if (rg != 0)
        return check_summary("test_moe_cuda");
    printf("test_moe_cuda: seed 0x%016llx\n", (unsigned long long)GPU_GEN_SEED);
    const nvf_quant_method rtn = NVF_QUANT_METHOD_RTN, fo6 = NVF_QUANT_METHOD_4OVER6;
    const nvf_quant_method mo = NVF_QUANT_METHOD_RTN_MODELOPT;
    const int tensor = NVF_MOE_ACT_SCALES_TENSOR, token = NVF_MOE_ACT_SCALES_TOKEN;
    const tcase cases[] = {
        {"random silu", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"T=1 silu", 8, 256, 128, 1, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"split-K, K%64!=0", 6, 1040, 192, 5, 3, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        /* 100 rows per expert: 64-row tiles (v6), 128-row tiles (v7); 50: 64-row tiles */
        {"64/128-row tiles", 4, 512, 128, 200, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"64-row tiles", 8, 512, 128, 200, 2, NVF_MOE_ACT_SWIGLU, 0, 0, rtn, 0, 0},
        /* 16 rows per expert on average: 32-row tiles, on the register kernel from v12 where
         * K % 128 == 0 (some experts fill the second 16-row half, some leave it empty) */
        {"32-row tiles", 8, 256, 128, 64, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"all to one, 32-row tiles", 8, 256, 128, 150, 1, NVF_MOE_ACT_SILU, 0, 1, rtn, 0, 0},
        {"DeepSeek-V3 shape, 32-row tiles", 2, 7168, 2048, 16, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0,
         0},
        {"w4a4 32-row tiles", 8, 512, 128, 64, 2, NVF_MOE_ACT_SWIGLU, 1, 0, fo6, 0, 0},
        {"all to one expert", 8, 256, 128, 37, 1, NVF_MOE_ACT_SILU, 0, 1, rtn, 0, 0},
        {"all to one, 64/128-row tiles", 4, 256, 64, 200, 1, NVF_MOE_ACT_SILU, 0, 1, rtn, 0, 0},
        {"swiglu", 8, 256, 128, 37, 2, NVF_MOE_ACT_SWIGLU, 0, 0, rtn, 0, 0},
        {"situ", 8, 256, 128, 37, 2, NVF_MOE_ACT_SITU, 0, 0, rtn, 0, 0},
        {"relu2 (not gated)", 8, 256, 96, 37, 2, NVF_MOE_ACT_RELU2, 0, 0, rtn, 0, 0},
        {"w4a4 rtn", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 1, 0, rtn, 0, 0},
        {"w4a4 4over6", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 1, 0, fo6, 0, 0},
        {"w4a4 64/128-row tiles", 4, 512, 128, 200, 2, NVF_MOE_ACT_SWIGLU, 1, 0, rtn, 0, 0},
        {"w4a4 T=1 split-K", 6, 1040, 192, 1, 3, NVF_MOE_ACT_SILU, 1, 0, rtn, 0, 0},
        /* DeepSeek-V3's expert shape: 32 x 112 scale tiles per w13, split K on both GEMMs */
        {"DeepSeek-V3 shape", 3, 7168, 2048, 2, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"GPT-OSS shape, swiglu", 2, 2880, 2880, 3, 1, NVF_MOE_ACT_SWIGLU, 0, 0, rtn, 0, 0},
        /* the permutation works on units of 256 slots: several units, the last one partial,
         * every slot to expert 0 (its rows span units) and the other experts empty */
        {"all to one, 600 slots", 8, 256, 128, 600, 1, NVF_MOE_ACT_SILU, 0, 1, rtn, 0, 0},
        /* more experts than a warp's lanes, 1200 slots (no split K), 5 units */
        {"40 experts, 1200 slots", 40, 256, 64, 300, 4, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        /* the permutation in one block up to 32 units (8192 slots), in three launches beyond */
        {"8192 slots, one-block permutation", 8, 256, 64, 2048, 4, NVF_MOE_ACT_SILU, 0, 0, rtn, 0,
         0},
        {"8400 slots, three launches", 8, 256, 64, 2100, 4, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        /* more slots per token than a warp's lanes (the finalize walks them 32 at a time) */
        {"top-40 of 48", 48, 256, 64, 20, 40, NVF_MOE_ACT_SILU, 0, 0, rtn, 1, 0},
        /* expert parallelism: slots routed to other ranks' experts */
        {"two ranks, top-1", 8, 256, 128, 37, 1, NVF_MOE_ACT_SILU, 0, 0, rtn, 1, 0},
        {"two ranks, top-3, 900 slots", 16, 256, 128, 300, 3, NVF_MOE_ACT_SWIGLU, 0, 0, rtn, 1, 0},
        {"two ranks, w4a4 split-K", 6, 1040, 192, 5, 2, NVF_MOE_ACT_SILU, 1, 0, rtn, 1, 0},
        /* ModelOpt's arithmetic (its group scale is the decode scale: the input scale as it
         * is, not its reciprocal) */
        {"w4a4 modelopt", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 1, 0, mo, 0, 0},
        {"w4a4 modelopt 64/128-row", 4, 512, 128, 200, 2, NVF_MOE_ACT_SWIGLU, 1, 0, mo, 0, 0},
        {"w4a4 modelopt per token", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 1, 0, mo, 0, token},
        /* more than 1024 slots (one K range) on the wgmma kernel's 128-, 64- and (K % 128 != 0)
         * 32-row tiles: FC1's activation fused into its store, each activation */
        {"fused FC1 swiglu, 128-row", 8, 256, 128, 640, 2, NVF_MOE_ACT_SWIGLU, 0, 0, rtn, 0, 0},
        {"fused FC1 situ, 128-row", 8, 256, 128, 640, 2, NVF_MOE_ACT_SITU, 0, 0, rtn, 0, 0},
        {"fused FC1 silu, 64-row", 40, 256, 128, 600, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 0, 0},
        {"fused FC1 silu, 32-row", 64, 320, 64, 600, 2, NVF_MOE_ACT_SILU, 0, 0, rtn, 1, 0},
        /* W4A4 with computed activation scales: dynamic per tensor (FC1 from all of x, FC2 from
         * each expert's FC1 output) and per token, on every tile kind, split K and two ranks */
        {"w4a4 dynamic", 8, 256, 128, 37, 2, NVF_MOE_ACT_SILU, 1, 0, rtn, 0, tensor},
        {"w4a4 per token 4over6", 8, 256, 128, 37, 2, NVF_MOE_ACT_SWIGLU, 1, 0, fo6, 0, token},
        {"w4a4 per token relu2", 8, 256, 96, 37, 2, NVF_MOE_ACT_RELU2, 1, 0, rtn, 0, token},
        {"w4a4 per token 32-row tiles", 8, 512, 128, 64, 2, NVF_MOE_ACT_SILU, 1, 0, rtn, 0, token},
        {"w4a4 per token 64/128-row", 4, 512, 128, 200, 2, NVF_MOE_ACT_SILU, 1, 0, fo6, 0, token},
        {"w4a4 dynamic 64/128-row", 4, 512, 128, 200, 2, NVF_MOE_ACT_SWIGLU, 1, 0, rtn, 0, tensor},
        {"w4a4 per token T=1 split-K", 6, 1040, 192, 1, 3, NVF_MOE_ACT_SILU, 1, 0, rtn, 0, token},
        {"two ranks, w4a4 dynamic", 6, 1040, 192, 5, 2, NVF_MOE_ACT_SILU, 1, 0, rtn, 1, tensor},
        {"two ranks, w4a4 per token", 16, 256, 128, 300, 3, NVF_MOE_ACT_SWIGLU, 1, 0, rtn, 1,
         token},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    nvf_backend_close(g_gpu);
    return check_summary("test_moe_cuda");
}
