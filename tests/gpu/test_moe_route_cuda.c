/*
 * GPU MoE routing (nvf_backend_moe_route on the CUDA backend, kernels/moe_route.cu) against its
 * CPU twin, lib/moe's nvf_moe_route_ref, for the four routers. The kernels compute every score
 * as the reference does (same f32 operations, glibc's expf re-typed), so the bound is exact:
 * ids equal, and weights equal bit for bit (NaN where the reference has NaN); a mismatch is
 * reported with its case, token and slot, and the weight's distance in ulps.
 * Sizes: T in {1, 3, 17, 300} x E in {8, 64, 256} for each router, with and without
 * renormalization and bias, several top_k and (deepseek_v3) n_group / topk_group; E = 2048 (one
 * warp per block) and E = 7000 (refused). Logits: uniform (-4, 4); ties (a few distinct
 * values); 1-ulp neighbours; all-equal rows; NaN; -inf and +inf; rows all NaN; large values
 * where sigmoid rounds to 1 (ties in the scores that the logits do not have) and softmax
 * underflows. Seed fixed and printed. Exit 77 (skip) without a GPU.
 */
#include "check.h"

#define GPU_GEN_SEED 0x2545F4914F6CDD1Dull
#include "gpu_gen.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/moe.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static nvf_backend *g_gpu;

typedef enum fill_kind {
    FILL_UNIFORM,   /* (-4, 4) */
    FILL_TIES,      /* one of 4 values: many equal scores */
    FILL_NEIGHBOUR, /* x and its next floats up and down: ties after rounding of the scores */
    FILL_EQUAL,     /* every logit of a row equal */
    FILL_NAN,       /* uniform with 1 in 8 NaN, and every 5th row all NaN */
    FILL_INF,       /* uniform with some -inf and, in a few rows, +inf */
    FILL_LARGE,     /* (-60, 60): sigmoid 1.0f and softmax underflow, ties in the scores */
} fill_kind;

static const char *const k_fill_names[] = {
    "uniform", "ties", "1-ulp neighbours", "all equal", "NaN", "+-inf", "large"};

static void fill(float *l, int64_t t, int64_t n, fill_kind f) {
    for (int64_t i = 0; i < t; i++) {
        float base = 4.0f * urand();
        for (int64_t e = 0; e < n; e++) {
            float *v = &l[i * n + e];
            *v = 4.0f * urand();
            switch (f) {
            case FILL_UNIFORM:
                break;
            case FILL_TIES:
                *v = 0.5f * (float)(rnd() % 4);
                break;
            case FILL_NEIGHBOUR: {
                uint32_t r = rnd() % 3;
                *v = r == 0 ? base : nextafterf(base, r == 1 ? INFINITY : -INFINITY);
                break;
            }
            case FILL_EQUAL:
                *v = base;
                break;
            case FILL_NAN:
                if (rnd() % 8 == 0 || i % 5 == 4)
                    *v = NAN;
                break;
            case FILL_INF:
                if (rnd() % 6 == 0)
                    *v = -INFINITY;
                else if (i % 7 == 3 && rnd() % 16 == 0)
                    *v = INFINITY;
                break;
            case FILL_LARGE:
                *v = 60.0f * urand();
                break;
            }
        }
    }
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Distance in ulps between two non-NaN floats of one sign (else a large number). */
static int64_t ulps(float a, float b) {
    if ((bits(a) >> 31) != (bits(b) >> 31))
        return a == b ? 0 : INT64_MAX;
    int64_t d = (int64_t)(bits(a) & 0x7fffffffu) - (int64_t)(bits(b) & 0x7fffffffu);
    return d < 0 ? -d : d;
}

typedef struct rcase {
    nvf_moe_route route;
    int64_t n, k;
    int renorm;
    int64_t n_group, topk_group;
    float scale;
    int with_bias;
} rcase;

static void run(const rcase *c, int64_t t, fill_kind f) {
    int64_t n = c->n, k = c->k;
    float *l = malloc((size_t)(t * n) * sizeof *l);
    float *bias = malloc((size_t)n * sizeof *bias);
    int32_t *id_ref = malloc((size_t)(t * k) * sizeof *id_ref);
    int32_t *id_gpu = malloc((size_t)(t * k) * sizeof *id_gpu);
    float *w_ref = malloc((size_t)(t * k) * sizeof *w_ref);
    float *w_gpu = malloc((size_t)(t * k) * sizeof *w_gpu);
    CHECK(l && bias && id_ref && id_gpu && w_ref && w_gpu);
    if (!(l && bias && id_ref && id_gpu && w_ref && w_gpu))
        goto out;
    fill(l, t, n, f);
    for (int64_t e = 0; e < n; e++)
        bias[e] = f == FILL_TIES ? 0.25f * (float)(rnd() % 2) : 0.1f * urand();
    const float *b = c->with_bias ? bias : NULL;
    nvf_moe_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.route = c->route;
    spec.n_experts = n;
    spec.top_k = k;
    spec.renormalize = c->renorm;
    spec.n_group = c->n_group;
    spec.topk_group = c->topk_group;
    spec.routed_scaling_factor = c->scale;
    nvf_moe_router r = {(int32_t)c->route, c->renorm, n, k, c->n_group, c->topk_group, c->scale};
    memset(id_gpu, 0x7f, (size_t)(t * k) * sizeof *id_gpu);
    memset(w_gpu, 0x7f, (size_t)(t * k) * sizeof *w_gpu);
    CHECK(nvf_moe_route_ref(id_ref, w_ref, l, b, t, &spec) == 0);
    int rc = nvf_backend_moe_route(g_gpu, id_gpu, w_gpu, l, b, t, &r);
    CHECK_MSG(rc == 0, "%s E %lld k %lld T %lld: %s", nvf_moe_route_name(c->route), (long long)n,
              (long long)k, (long long)t, nvf_error_last());
    if (rc != 0)
        goto out;
    int reported = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < t * k; i++) {
        int same_w = bits(w_ref[i]) == bits(w_gpu[i]) || (isnan(w_ref[i]) && isnan(w_gpu[i]));
        if (id_ref[i] == id_gpu[i] && same_w)
            continue;
        int64_t u = isnan(w_ref[i]) || isnan(w_gpu[i]) ? INT64_MAX : ulps(w_ref[i], w_gpu[i]);
        worst = u > worst ? u : worst;
        if (reported++ < 5)
            CHECK_MSG(0,
                      "%s E %lld k %lld renorm %d groups %lld/%lld bias %d, %s, T %lld: token "
                      "%lld slot %lld: id %d weight %a (GPU) vs %d %a (CPU), %lld ulp",
                      nvf_moe_route_name(c->route), (long long)n, (long long)k, c->renorm,
                      (long long)c->n_group, (long long)c->topk_group, c->with_bias,
                      k_fill_names[f], (long long)t, (long long)(i / k), (long long)(i % k),
                      id_gpu[i], (double)w_gpu[i], id_ref[i], (double)w_ref[i], (long long)u);
    }
    if (reported > 5)
        CHECK_MSG(0, "... %d mismatching slots in all, worst %lld ulp", reported, (long long)worst);
    CHECK(reported == 0);
out:
    free(l);
    free(bias);
    free(id_ref);
    free(id_gpu);
    free(w_ref);
    free(w_gpu);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_moe_route_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device gpu;
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    int rg = nvf_backend_open(&g_gpu, &gpu, 0);
    CHECK_MSG(rg == 0, "open cuda:0: %s", nvf_error_last());
    if (rg != 0)
        return check_summary("test_moe_route_cuda");
    printf("test_moe_route_cuda: seed 0x%016llx\n", (unsigned long long)GPU_GEN_SEED);
    const nvf_moe_route S = NVF_MOE_ROUTE_SOFTMAX_TOPK, G = NVF_MOE_ROUTE_SIGMOID_TOPK,
                        D = NVF_MOE_ROUTE_DEEPSEEK_V3, X = NVF_MOE_ROUTE_TOPK_SOFTMAX;
    /* route, E, top_k, renormalize, n_group, topk_group, scale, bias */
    const rcase cases[] = {
        {S, 8, 2, 1, 0, 0, 1.0f, 0},   {S, 8, 8, 0, 0, 0, 1.0f, 0},
        {S, 64, 6, 1, 0, 0, 1.0f, 0},  {S, 64, 4, 0, 0, 0, 1.0f, 0},
        {S, 256, 8, 1, 0, 0, 1.0f, 0}, {S, 256, 1, 0, 0, 0, 1.0f, 0},
        {G, 8, 2, 1, 0, 0, 1.0f, 1},   {G, 64, 8, 0, 0, 0, 1.0f, 0},
        {G, 256, 8, 1, 0, 0, 2.5f, 1}, {D, 8, 2, 1, 4, 2, 2.5f, 1},
        {D, 8, 3, 0, 1, 1, 1.0f, 1},   {D, 64, 6, 1, 8, 3, 2.5f, 1},
        {D, 64, 8, 1, 64, 8, 1.5f, 1}, {D, 256, 8, 1, 8, 4, 2.5f, 1},
        {D, 256, 8, 1, 8, 4, 2.5f, 0}, {D, 256, 32, 0, 16, 2, 1.0f, 1},
        {X, 8, 2, 0, 0, 0, 1.0f, 0},   {X, 64, 4, 0, 0, 0, 1.0f, 1},
        {X, 256, 8, 0, 0, 0, 1.0f, 0}, {X, 256, 4, 0, 0, 0, 2.0f, 1},
    };
    const int64_t tokens[] = {1, 3, 17, 300};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++)
            for (int f = FILL_UNIFORM; f <= FILL_LARGE; f++)
                run(&cases[c], tokens[ti], (fill_kind)f);
    /* more experts than four warps' shared memory: one warp per block */
    const rcase wide[] = {{S, 2048, 8, 1, 0, 0, 1.0f, 0}, {D, 2048, 8, 1, 8, 4, 2.5f, 1}};
    for (size_t c = 0; c < 2; c++)
        for (int f = FILL_UNIFORM; f <= FILL_LARGE; f++)
            run(&wide[c], 9, (fill_kind)f);
    /* refused: more experts than one warp's shared memory; nothing to do: no tokens */
    float one = 0.0f, w = 0.0f;
    int32_t id = 0;
    nvf_moe_router big = {(int32_t)S, 1, 7000, 8, 0, 0, 1.0f};
    CHECK(nvf_backend_moe_route(g_gpu, &id, &w, &one, NULL, 1, &big) == NVF_E_INVALID);
    nvf_moe_router small = {(int32_t)S, 1, 8, 2, 0, 0, 1.0f};
    CHECK(nvf_backend_moe_route(g_gpu, &id, &w, &one, NULL, 0, &small) == 0);
    nvf_backend_close(g_gpu);
    return check_summary("test_moe_route_cuda");
}
