/*
 * The CUDA backend against the CPU backend (nvfp4/backend.h), byte for byte: amax (status,
 * value bits and message, NaN/Inf refused and allowed), quantize (every recipe variant, the
 * group's global scale and the extreme scales 1, FLT_MAX, 1e-30), quantize_group (the
 * device-resident path and the chunked path, forced through nvf_backend_set_group_budget
 * and NVFP4_CUDA_GROUP_BUDGET; the group's gs also checked against nvf_quant_global_scale of
 * the members' nvf_quant_amax_ref) and dequant_bf16 (check_finite both ways), on hard inputs:
 * E2M1 ties, zeros, subnormal E4M3 scales, amax beyond 448*6, 1e30 / 1e-30, NaN/Inf, values
 * that overflow BF16, odd shapes (one block, one row, rows not a multiple of 128, 16*odd
 * columns, a group bigger than a staging chunk), BF16/F16/F32/E4M3/E5M2 and FP8-block sources (F32,
 * BF16 and E8M0 scales, partial edge blocks, block widths not a multiple of 16), with the default
 * staging chunk and a 4 KiB one (rows split into pieces). The first mismatching blocks are
 * printed in hex (at most 10). Exit 77
 * (skip) without a GPU.
 */
#include "check.h"

#define GPU_GEN_SEED 0x9E3779B97F4A7C15ull
#include "gpu_gen.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static nvf_backend *g_cpu, *g_gpu;
static int g_shown;

static const nvf_quant_params k_variants[] = {
    {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
    {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
    {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
    {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
    {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED, 256},
    {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL, 448},
};
#define N_VARIANTS ((int)(sizeof k_variants / sizeof k_variants[0]))

/* gen: 0 gauss, 1 hard finite, 2 hard with NaN/Inf, 3 zeros, 4 beyond BF16 (F32 only). */
static float value(int gen) {
    if (gen == 0)
        return gauss();
    if (gen == 3)
        return 0.0f;
    if (gen == 4)
        return (rnd32() % 64 == 0) ? 3.4e38f : gauss();
    return hard_tensor_value(gen == 2);
}

/* A test tensor: its source and the buffers it owns. */
typedef struct tensor {
    nvf_quant_source s;
    uint8_t *data, *scale;
} tensor;

static void plain(tensor *t, nvf_dtype d, int64_t rows, int64_t cols, int gen) {
    size_t n = (size_t)(rows * cols), es = nvf_dtype_bits(d) / 8;
    memset(t, 0, sizeof *t);
    t->data = malloc(n * es + 1);
    for (size_t i = 0; t->data && i < n; i++)
        put(t->data, d, i, value(gen));
    t->s = (nvf_quant_source){.dtype = d, .data = t->data, .rows = rows, .cols = cols};
    CHECK(t->data && nvf_quant_source_check(&t->s, "t") == 0);
}

/* FP8-block: br x bc blocks, scales of `sd`; bytes 0x7F/0xFF (NaN) only when `nonfinite`; every
 * third scale huge when `overflow` is 1 (products beyond BF16), NaN when it is 2 (with some
 * infinite F32 scales too). */
static void fp8(tensor *t, int64_t rows, int64_t cols, int64_t br, int64_t bc, nvf_dtype sd,
                int nonfinite, int overflow) {
    size_t n = (size_t)(rows * cols);
    int64_t nsr = (rows + br - 1) / br, nsc = (cols + bc - 1) / bc;
    size_t ns = (size_t)(nsr * nsc), ses = nvf_dtype_bits(sd) / 8;
    memset(t, 0, sizeof *t);
    t->data = malloc(n + 1);
    t->scale = malloc(ns * ses + 1);
    if (!t->data || !t->scale) {
        CHECK(!"out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)(rnd32() & 0xFF);
        t->data[i] = (!nonfinite && (b & 0x7F) == 0x7F) ? (uint8_t)(b - 1) : b;
    }
    for (size_t i = 0; i < ns; i++) {
        float m = ldexpf(1.0f, (int)(rnd32() % 24) - 16);
        if (overflow && i % 3 == 0)
            m = overflow == 2 ? -NAN : 1e36f;
        if (overflow == 2 && i % 3 == 1 && i % 2 == 0)
            m = INFINITY; /* 0 * inf: the default NaN */
        if (sd == NVF_DTYPE_F8_E8M0)
            t->scale[i] = (uint8_t)(overflow && i % 3 == 0 ? (overflow == 2 ? 255 : 250)
                                                           : 127 + (int)(rnd32() % 24) - 16);
        else
            put(t->scale, sd, i, (rnd32() & 1) ? m : m * 1.37f);
    }
    t->s = (nvf_quant_source){.dtype = NVF_DTYPE_F8_E4M3,
                              .data = t->data,
                              .rows = rows,
                              .cols = cols,
                              .scale = t->scale,
                              .scale_dtype = sd,
                              .scale_numel = ns,
                              .block_rows = br,
                              .block_cols = bc};
    CHECK(nvf_quant_source_check(&t->s, "t") == 0);
}

static void tensor_free(tensor *t) {
    free(t->data);
    free(t->scale);
}

/* The bytes of both backends, with the first differing 16-value blocks shown. */
static void same_bytes(const char *what, const uint8_t *pc, const uint8_t *sc, const uint8_t *pg,
                       const uint8_t *sg, size_t n) {
    int same = memcmp(pc, pg, n / 2) == 0 && memcmp(sc, sg, n / 16) == 0;
    CHECK_MSG(same, "%s: GPU bytes differ", what);
    for (size_t b = 0; !same && b < n / 16 && g_shown < 10; b++) {
        if (memcmp(pc + 8 * b, pg + 8 * b, 8) == 0 && sc[b] == sg[b])
            continue;
        g_shown++;
        fprintf(stderr, "  block %zu: cpu sf %02x codes", b, sc[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pc[8 * b + j]);
        fprintf(stderr, " | gpu sf %02x codes", sg[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pg[8 * b + j]);
        fprintf(stderr, "\n");
    }
}

static void compare_amax(const char *what, const nvf_quant_source *s) {
    for (int allow = 0; allow < 2; allow++) {
        float ac = -1.0f, ag = -2.0f;
        int rc = nvf_backend_amax(g_cpu, &ac, s, allow, "t");
        char mc[512];
        snprintf(mc, sizeof mc, "%s", nvf_error_last());
        int rg = nvf_backend_amax(g_gpu, &ag, s, allow, "t");
        CHECK_MSG(rc == rg, "%s: amax status cpu %d gpu %d (%s)", what, rc, rg, nvf_error_last());
        if (rc == 0 && rg == 0)
            CHECK_MSG(nvf_f32_bits(ac) == nvf_f32_bits(ag), "%s: amax cpu %a gpu %a", what,
                      (double)ac, (double)ag);
        else if (rc < 0 && rg < 0)
            CHECK_EQ_STR(nvf_error_last(), mc);
    }
}

static void compare_quant(const char *what, const nvf_quant_source *s, float gs,
                          const nvf_quant_params *p) {
    size_t n = (size_t)(s->rows * s->cols);
    uint8_t *pc = malloc(n / 2 + 1), *sc = malloc(n / 16 + 1);
    uint8_t *pg = malloc(n / 2 + 1), *sg = malloc(n / 16 + 1);
    if (pc && sc && pg && sg) {
        memset(pg, 0xAA, n / 2 + 1);
        memset(sg, 0xAA, n / 16 + 1);
        CHECK(nvf_backend_quantize(g_cpu, pc, sc, s, gs, p) == 0);
        int rc = nvf_backend_quantize(g_gpu, pg, sg, s, gs, p);
        CHECK_MSG(rc == 0, "%s: %s", what, nvf_error_last());
        same_bytes(what, pc, sc, pg, sg, n);
    } else {
        CHECK(!"out of memory");
    }
    free(pc);
    free(sc);
    free(pg);
    free(sg);
}

static void compare_dequant(const char *what, const nvf_quant_source *s) {
    size_t n = (size_t)(s->rows * s->cols);
    uint8_t *oc = malloc(2 * n + 1), *og = malloc(2 * n + 1);
    if (!oc || !og) {
        CHECK(!"out of memory");
        goto done;
    }
    for (int check = 0; check < 2; check++) {
        memset(og, 0xAA, 2 * n + 1);
        int rc = nvf_backend_dequant_bf16(g_cpu, oc, s, check, "t");
        char mc[512];
        snprintf(mc, sizeof mc, "%s", nvf_error_last());
        int rg = nvf_backend_dequant_bf16(g_gpu, og, s, check, "t");
        CHECK_MSG(rc == rg, "%s: dequant status cpu %d gpu %d (%s)", what, rc, rg,
                  nvf_error_last());
        if (rc == 0 && rg == 0)
            CHECK_MSG(memcmp(oc, og, 2 * n) == 0, "%s: dequant check %d: GPU BF16 differs", what,
                      check);
        else if (rc < 0 && rg < 0)
            CHECK_EQ_STR(nvf_error_last(), mc);
    }
done:
    free(oc);
    free(og);
}

/* Amax both ways, dequant both ways, then quantize with the tensor's gs (all variants) and,
 * when `extremes`, with gs 1, FLT_MAX and 1e-30. */
static void compare_all(const char *what, const nvf_quant_source *s, int extremes) {
    compare_amax(what, s);
    compare_dequant(what, s);
    float amax = 0.0f;
    if (nvf_quant_amax_ref(&amax, s, 1, 1, "t") < 0)
        return;
    for (int v = 0; v < N_VARIANTS; v++) {
        compare_quant(what, s, nvf_quant_global_scale(amax, k_variants[v].e4m3_max),
                      &k_variants[v]);
        if (extremes) {
            compare_quant(what, s, 1.0f, &k_variants[v]);
            compare_quant(what, s, FLT_MAX, &k_variants[v]);
            compare_quant(what, s, 1e-30f, &k_variants[v]);
        }
    }
}

/* One group through both backends (and, on the GPU, with `budget`): status, message, gs bits
 * and every member's bytes; gs also against the members' reference amax. */
static void compare_group(const char *what, const tensor *ts, size_t n, const nvf_quant_params *p,
                          int allow, size_t budget) {
    static const char *const names[] = {"g.gate_proj.weight", "g.up_proj.weight",
                                        "g.v_proj.weight"};
    nvf_quant_source srcs[3];
    uint8_t *pc[3] = {0}, *sc[3] = {0}, *pg[3] = {0}, *sg[3] = {0};
    float amax_ref = 0.0f;
    int ref_rc = 0;
    for (size_t k = 0; k < n; k++) {
        srcs[k] = ts[k].s;
        size_t nv = (size_t)(srcs[k].rows * srcs[k].cols);
        pc[k] = malloc(nv / 2 + 1);
        sc[k] = malloc(nv / 16 + 1);
        pg[k] = calloc(1, nv / 2 + 1);
        sg[k] = calloc(1, nv / 16 + 1);
        float a = 0.0f;
        if (ref_rc == 0)
            ref_rc = nvf_quant_amax_ref(&a, &srcs[k], allow, 1, names[k]);
        if (a > amax_ref)
            amax_ref = a;
    }
    float gc = -1.0f, gg = -2.0f;
    int rc = nvf_backend_quantize_group(g_cpu, &gc, pc, sc, srcs, names, n, p, allow);
    char mc[512];
    snprintf(mc, sizeof mc, "%s", nvf_error_last());
    nvf_backend_set_group_budget(budget);
    int rg = nvf_backend_quantize_group(g_gpu, &gg, pg, sg, srcs, names, n, p, allow);
    nvf_backend_set_group_budget(0);
    CHECK_MSG(rc == ref_rc, "%s: cpu group status %d, reference amax %d", what, rc, ref_rc);
    CHECK_MSG(rc == rg, "%s (budget %zu): group status cpu %d gpu %d (%s)", what, budget, rc, rg,
              nvf_error_last());
    if (rc < 0 && rg < 0)
        CHECK_EQ_STR(nvf_error_last(), mc);
    if (rc == 0 && rg == 0) {
        float want = nvf_quant_global_scale(amax_ref, p->e4m3_max);
        CHECK_MSG(nvf_f32_bits(gc) == nvf_f32_bits(want), "%s: cpu gs %a, expected %a", what,
                  (double)gc, (double)want);
        CHECK_MSG(nvf_f32_bits(gg) == nvf_f32_bits(want), "%s (budget %zu): gpu gs %a, expected %a",
                  what, budget, (double)gg, (double)want);
        for (size_t k = 0; k < n; k++)
            same_bytes(what, pc[k], sc[k], pg[k], sg[k], (size_t)(srcs[k].rows * srcs[k].cols));
    }
    for (size_t k = 0; k < n; k++) {
        free(pc[k]);
        free(sc[k]);
        free(pg[k]);
        free(sg[k]);
    }
}

/* Every group case: the device-resident path (default budget, and a budget a little above the
 * group's size),
 * the chunked path (budget 1 byte), for every variant, NaN/Inf refused and allowed. */
static void group_cases(void) {
    tensor t[3];
    struct {
        const char *what;
        int n;
    } cases[] = {{"bf16 gate+up", 2},  {"fp8 gate+up", 2},   {"mixed q/k/v", 3},
                 {"nan in up", 2},     {"zeros gate+up", 2}, {"single", 1},
                 {"inf in fp8 up", 2}, {"empty + gauss", 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        switch (c) {
        case 0:
            plain(&t[0], NVF_DTYPE_BF16, 96, 208, 1);
            plain(&t[1], NVF_DTYPE_BF16, 96, 208, 0);
            break;
        case 1:
            fp8(&t[0], 200, 336, 128, 128, NVF_DTYPE_F32, 0, 0);
            fp8(&t[1], 200, 336, 128, 128, NVF_DTYPE_F8_E8M0, 0, 0);
            break;
        case 2:
            plain(&t[0], NVF_DTYPE_F32, 37, 112, 1);
            fp8(&t[1], 50, 160, 7, 40, NVF_DTYPE_BF16, 0, 0);
            plain(&t[2], NVF_DTYPE_F16, 33, 80, 1);
            break;
        case 3:
            plain(&t[0], NVF_DTYPE_BF16, 40, 64, 0);
            plain(&t[1], NVF_DTYPE_BF16, 67, 80, 2);
            break;
        case 4:
            plain(&t[0], NVF_DTYPE_BF16, 16, 32, 3);
            plain(&t[1], NVF_DTYPE_F32, 8, 48, 3);
            break;
        case 5:
            plain(&t[0], NVF_DTYPE_BF16, 1, 16016, 0);
            break;
        case 6:
            plain(&t[0], NVF_DTYPE_BF16, 30, 48, 1);
            fp8(&t[1], 40, 96, 32, 32, NVF_DTYPE_F32, 0, 1);
            break;
        default:
            plain(&t[0], NVF_DTYPE_BF16, 0, 32, 0);
            plain(&t[1], NVF_DTYPE_F8_E4M3, 19, 64, 1);
            break;
        }
        size_t fit = 0;
        for (int k = 0; k < cases[c].n; k++)
            fit += (size_t)(t[k].s.rows * t[k].s.cols) * 4 + 4096;
        for (int v = 0; v < N_VARIANTS; v++)
            for (int allow = 0; allow < 2; allow++) {
                compare_group(cases[c].what, t, (size_t)cases[c].n, &k_variants[v], allow, 0);
                compare_group(cases[c].what, t, (size_t)cases[c].n, &k_variants[v], allow, fit);
                compare_group(cases[c].what, t, (size_t)cases[c].n, &k_variants[v], allow, 1);
            }
        for (int k = 0; k < cases[c].n; k++)
            tensor_free(&t[k]);
    }
    /* The environment's budget (read at each group call): 1 byte forces the chunked path. */
    plain(&t[0], NVF_DTYPE_BF16, 64, 96, 1);
    plain(&t[1], NVF_DTYPE_BF16, 64, 96, 2);
    setenv("NVFP4_CUDA_GROUP_BUDGET", "1", 1);
    for (int allow = 0; allow < 2; allow++)
        compare_group("env budget", t, 2, &k_variants[0], allow, 0);
    setenv("NVFP4_CUDA_GROUP_BUDGET", "not-a-number", 1);
    compare_group("bad env budget", t, 2, &k_variants[0], 1, 0);
    unsetenv("NVFP4_CUDA_GROUP_BUDGET");
    tensor_free(&t[0]);
    tensor_free(&t[1]);
}

/* A group larger than one staging chunk (64 MiB of BF16 per member) on both paths, and the
 * smallest tensors (one block). */
static void big_group(void) {
    tensor t[2];
    plain(&t[0], NVF_DTYPE_BF16, 2048, 16384, 0);
    plain(&t[1], NVF_DTYPE_BF16, 2050, 16384, 1);
    compare_group("big bf16 gate+up", t, 2, &k_variants[0], 0, 0);
    compare_group("big bf16 gate+up", t, 2, &k_variants[1], 0, 1);
    tensor_free(&t[0]);
    tensor_free(&t[1]);
    plain(&t[0], NVF_DTYPE_BF16, 1, 16, 1);
    fp8(&t[1], 1, 16, 128, 128, NVF_DTYPE_F32, 0, 0);
    compare_all("bf16 1x16", &t[0].s, 1);
    compare_all("fp8 1x16", &t[1].s, 1);
    for (int v = 0; v < N_VARIANTS; v++) {
        compare_group("1x16 pair", t, 2, &k_variants[v], 0, 0);
        compare_group("1x16 pair", t, 2, &k_variants[v], 0, 1);
    }
    tensor_free(&t[0]);
    tensor_free(&t[1]);
}

static void single_cases(void) {
    tensor t;
    plain(&t, NVF_DTYPE_BF16, 300, 208, 0);
    compare_all("bf16 gauss 300x208", &t.s, 1);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_BF16, 129, 48, 1);
    compare_all("bf16 hard 129x48", &t.s, 1);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_BF16, 67, 80, 2);
    compare_all("bf16 nonfinite 67x80", &t.s, 1);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_BF16, 24, 64, 3);
    compare_all("bf16 zeros 24x64", &t.s, 1);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F32, 37, 112, 1);
    compare_all("f32 hard 37x112", &t.s, 1);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F32, 21, 16, 2);
    compare_all("f32 nonfinite 21x16", &t.s, 0);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F32, 45, 96, 4);
    compare_all("f32 beyond bf16 45x96", &t.s, 0);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F16, 33, 80, 2);
    compare_all("f16 nonfinite 33x80", &t.s, 0);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F8_E5M2, 17, 48, 2);
    compare_all("e5m2 nonfinite 17x48", &t.s, 0);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_F8_E4M3, 19, 64, 2);
    compare_all("e4m3 nonfinite 19x64", &t.s, 0);
    tensor_free(&t);
    plain(&t, NVF_DTYPE_BF16, 0, 32, 0);
    compare_all("bf16 empty", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 200, 336, 128, 128, NVF_DTYPE_F32, 0, 0);
    compare_all("fp8 128x128 f32 200x336", &t.s, 1);
    tensor_free(&t);
    fp8(&t, 130, 272, 128, 128, NVF_DTYPE_F8_E8M0, 0, 0);
    compare_all("fp8 128x128 e8m0 130x272", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 100, 208, 64, 48, NVF_DTYPE_BF16, 0, 0);
    compare_all("fp8 64x48 bf16 100x208", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 3, 8448, 128, 128, NVF_DTYPE_F32, 0, 0);
    compare_all("fp8 128x128 f32 3x8448", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 50, 160, 7, 40, NVF_DTYPE_F32, 0, 0);
    compare_all("fp8 7x40 f32 50x160 (generic)", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 40, 96, 32, 32, NVF_DTYPE_F32, 1, 0);
    compare_all("fp8 nonfinite 40x96", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 64, 256, 16, 64, NVF_DTYPE_F32, 0, 1);
    compare_all("fp8 overflowing scales 64x256", &t.s, 0);
    tensor_free(&t);
    fp8(&t, 64, 256, 16, 64, NVF_DTYPE_F8_E8M0, 0, 1);
    compare_all("fp8 e8m0 overflowing scales 64x256", &t.s, 0);
    tensor_free(&t);
    /* NaN scales (a NaN value with a finite scale is "fp8 nonfinite" above): amax and BF16 */
    fp8(&t, 64, 256, 16, 64, NVF_DTYPE_F32, 0, 2);
    compare_amax("fp8 f32 nan scales 64x256", &t.s);
    compare_dequant("fp8 f32 nan scales 64x256", &t.s);
    tensor_free(&t);
    fp8(&t, 64, 256, 16, 64, NVF_DTYPE_F8_E8M0, 0, 2);
    compare_amax("fp8 e8m0 nan scales 64x256", &t.s);
    compare_dequant("fp8 e8m0 nan scales 64x256", &t.s);
    tensor_free(&t);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_backend: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device cpu, gpu;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    int rc = nvf_backend_open(&g_cpu, &cpu, 2);
    CHECK_MSG(rc == 0, "open cpu: %s", nvf_error_last());
    int rg = nvf_backend_open(&g_gpu, &gpu, 0);
    CHECK_MSG(rg == 0, "open cuda:0: %s", nvf_error_last());
    if (rc != 0 || rg != 0)
        return check_summary("test_backend");
    printf("test_backend: seed 0x%016llx\n", (unsigned long long)GPU_GEN_SEED);
    const size_t chunks[] = {0, 4096};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        printf("chunk %zu\n", chunks[k]);
        CHECK(nvf_backend_set_config(g_gpu, -1, chunks[k]) == 0);
        single_cases();
        group_cases();
    }
    CHECK(nvf_backend_set_config(g_gpu, -1, 0) == 0);
    big_group();
    nvf_backend_close(g_gpu);
    nvf_backend_close(g_cpu);
    return check_summary("test_backend");
}
