/*
 * The host side of MoE routing on a backend (tests/gpu/test_moe_route_cuda.c compares the GPU
 * with the reference):
 *   1. kernels/route_expf.h, the expf the GPU routing computes with, compiled here as C: equal
 *      bit for bit to this C library's expf (glibc's, the reference's) on a sweep of every
 *      61st float in [-104, 89] and on the special values;
 *   2. the warp arg-max of kernels/moe_route.cu re-typed (32 lanes strided over the ids, then a
 *      butterfly under (value descending, id ascending)) picks the reference's id, the first
 *      largest non-NaN, on ties, NaN, +-0 and +-inf;
 *   3. nvf_backend_moe_route refuses what nvf_moe_route_ref refuses (checked before the
 *      backend), and the CPU backend, whose twin is the reference itself, answers
 *      NVF_E_UNSUPPORTED for the rest;
 *   4. moe_router_of carries every routing field of the spec.
 */
#include "check.h"

#include "moe/moe_weights.h"
#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/moe.h"
#include "nvfp4/status.h"
#include "route_expf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int same(float a, float b) {
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static void test_expf(void) {
    long bad = 0, n = 0;
    /* [-104, -0] and [+0, 89]: -104 is 0xC2D00000, 89 0x42B20000 */
    for (uint64_t u = 0x80000000u; u <= 0xC2D00000u; u += 61, n++)
        bad += !same(nvf_route_expf(from_bits((uint32_t)u)), expf(from_bits((uint32_t)u)));
    for (uint64_t u = 0; u <= 0x42B20000u; u += 61, n++)
        bad += !same(nvf_route_expf(from_bits((uint32_t)u)), expf(from_bits((uint32_t)u)));
    CHECK_MSG(bad == 0, "%ld of %ld differ from expf", bad, n);
    const float special[] = {0.0f,         -0.0f,         INFINITY,     -INFINITY,    NAN,
                             88.72283935f, 88.72284698f,  -103.972076f, -103.972084f, 1e-30f,
                             -1e-30f,      -87.33654785f, 200.0f,       -200.0f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        CHECK_MSG(same(nvf_route_expf(special[i]), expf(special[i])), "expf(%a): %a, libm %a",
                  (double)special[i], (double)nvf_route_expf(special[i]), (double)expf(special[i]));
}

/* kernels/moe_route.cu's warp_arg_max, 32 lanes simulated. */
static int32_t warp_arg_max(const float *s, int64_t n) {
    float v[32];
    int32_t id[32];
    for (int lane = 0; lane < 32; lane++) {
        v[lane] = 0.0f;
        id[lane] = -1;
        for (int64_t e = lane; e < n; e += 32)
            if (!isnan(s[e]) && (id[lane] < 0 || s[e] > v[lane])) {
                v[lane] = s[e];
                id[lane] = (int32_t)e;
            }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float nv[32];
        int32_t ni[32];
        for (int lane = 0; lane < 32; lane++) {
            float ov = v[lane ^ off];
            int32_t oi = id[lane ^ off];
            nv[lane] = v[lane];
            ni[lane] = id[lane];
            if (oi >= 0 && (ni[lane] < 0 || ov > nv[lane] || (ov == nv[lane] && oi < ni[lane]))) {
                nv[lane] = ov;
                ni[lane] = oi;
            }
        }
        memcpy(v, nv, sizeof v);
        memcpy(id, ni, sizeof id);
    }
    for (int lane = 1; lane < 32; lane++)
        if (id[lane] != id[0])
            return -2; /* lanes disagree */
    return id[0];
}

/* The reference's arg_max (lib/moe/moe_route.c), re-typed. */
static int32_t seq_arg_max(const float *s, int64_t n) {
    int32_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(s[i]) && (best < 0 || s[i] > s[best]))
            best = (int32_t)i;
    return best;
}

static void test_arg_max(void) {
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 0.5f};
    long bad = 0;
    for (int trial = 0; trial < 20000; trial++) {
        float s[300];
        int64_t n = 1 + trial % 300;
        for (int64_t i = 0; i < n; i++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            /* few distinct values: ties everywhere */
            s[i] = vals[(rng >> 40) % (trial % 3 == 0 ? 8 : 3 + trial % 5)];
        }
        bad += warp_arg_max(s, n) != seq_arg_max(s, n);
    }
    CHECK_MSG(bad == 0, "%ld of 20000 arg-max differ", bad);
    float all_nan[40];
    for (int i = 0; i < 40; i++)
        all_nan[i] = NAN;
    CHECK(warp_arg_max(all_nan, 40) == -1);
    /* equal largest values: the lower id, even when a later lane holds it first */
    float tie[64] = {0};
    tie[33] = 2.0f;
    tie[40] = 2.0f;
    tie[7] = 2.0f;
    CHECK(warp_arg_max(tie, 64) == 7);
}

static void test_backend_checks(void) {
    nvf_device cpu;
    nvf_backend *b = NULL;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_backend_open(&b, &cpu, 1) == 0);
    if (!b)
        return;
    /* kind, E, top_k, n_group, topk_group */
    const int64_t cfg[][5] = {
        {0, 8, 2, 0, 0},  {0, 8, 0, 0, 0},   {0, 8, 9, 0, 0},   {0, 0, 1, 0, 0},    {3, 8, 8, 0, 0},
        {1, 8, 8, 4, 9},  {2, 8, 2, 4, 2},   {2, 8, 5, 4, 2},   {2, 9, 2, 4, 2},    {2, 8, 2, 4, 0},
        {2, 8, 2, 4, 5},  {2, 8, 2, 1, 0},   {2, 256, 8, 8, 4}, {2, 256, 33, 8, 1}, {4, 8, 2, 0, 0},
        {-1, 8, 2, 0, 0}, {2, 64, 8, 64, 8}, {2, 64, 9, 64, 8},
    };
    float logits[2 * 256] = {0}, w[2 * 256];
    int32_t ids[2 * 256];
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        nvf_moe_spec s;
        memset(&s, 0, sizeof s);
        s.route = (nvf_moe_route)cfg[i][0];
        s.n_experts = cfg[i][1];
        s.top_k = cfg[i][2];
        s.n_group = cfg[i][3];
        s.topk_group = cfg[i][4];
        s.routed_scaling_factor = 1.0f;
        nvf_moe_router r = moe_router_of(&s);
        int known = cfg[i][0] >= 0 && cfg[i][0] <= 3;
        int ref = known ? nvf_moe_route_ref(ids, w, logits, NULL, 2, &s) : NVF_E_INVALID;
        int got = nvf_backend_moe_route(b, ids, w, logits, NULL, 2, &r);
        CHECK_MSG(got == (ref == 0 ? NVF_E_UNSUPPORTED : NVF_E_INVALID),
                  "config %zu: backend %d, reference %d", i, got, ref);
    }
    nvf_moe_router ok = {0, 1, 8, 2, 0, 0, 1.0f};
    CHECK(nvf_backend_moe_route(b, ids, w, logits, NULL, -1, &ok) == NVF_E_INVALID);
    CHECK(nvf_backend_moe_route(b, ids, w, logits, NULL, 0, &ok) == NVF_E_UNSUPPORTED);
    CHECK_CONTAINS(nvf_error_last(), "moe_route");
    nvf_backend_close(b);
}

static void test_router_of(void) {
    nvf_moe_spec s;
    memset(&s, 0, sizeof s);
    s.route = NVF_MOE_ROUTE_DEEPSEEK_V3;
    s.n_experts = 256;
    s.top_k = 8;
    s.renormalize = 7; /* any true value */
    s.n_group = 8;
    s.topk_group = 4;
    s.routed_scaling_factor = 2.5f;
    nvf_moe_router r = moe_router_of(&s);
    CHECK(r.kind == 2 && r.renormalize == 1 && r.n_experts == 256 && r.top_k == 8);
    CHECK(r.n_group == 8 && r.topk_group == 4 && r.routed_scaling_factor == 2.5f);
    s.route = NVF_MOE_ROUTE_TOPK_SOFTMAX;
    s.renormalize = 0;
    r = moe_router_of(&s);
    CHECK(r.kind == 3 && r.renormalize == 0);
}

int main(void) {
    test_expf();
    test_arg_max();
    test_backend_checks();
    test_router_of();
    return check_summary("test_moe_route");
}
