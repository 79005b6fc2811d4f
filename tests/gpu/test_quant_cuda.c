/*
 * GPU vs CPU: the CUDA backend's amax and quantize (nvfp4/backend.h) against nvf_quant_amax_ref /
 * nvf_quant_source_ref, byte for byte (memcmp; the first mismatching blocks are printed in hex,
 * at most 10), for every launch configuration, a default and a tiny staging chunk (many chunks,
 * rows split into pieces), every recipe variant, on hard cases (zeros, E2M1 ties, subnormal
 * E4M3 scales, amax beyond 448*6, 1e30 / 1e-30, NaN/Inf in both modes), random tensors of
 * awkward shapes (rows not a multiple of 128, 16*odd columns, one row, ~1 GB), F16/F32/FP8
 * sources and FP8-block sources with partial edge blocks. Exit 77 (skip) without a GPU.
 */
#include "check.h"

#define GPU_GEN_SEED 0x2545F4914F6CDD1Dull
#include "gpu_gen.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static int g_shown;
static nvf_backend *g_gpu;

static void compare_quant(const char *what, const nvf_quant_source *s, float gs,
                          const nvf_quant_params *p) {
    size_t n = (size_t)(s->rows * s->cols);
    uint8_t *pw = malloc(n / 2 + 1), *sw = malloc(n / 16 + 1);
    uint8_t *pg = malloc(n / 2 + 1), *sg = malloc(n / 16 + 1);
    if (!pw || !sw || !pg || !sg) {
        CHECK(!"out of memory");
        goto done;
    }
    memset(pg, 0xAA, n / 2 + 1);
    memset(sg, 0xAA, n / 16 + 1);
    CHECK(nvf_quant_source_ref(pw, sw, s, gs, p, 0) == 0);
    int rc = nvf_backend_quantize(g_gpu, pg, sg, s, gs, p);
    CHECK_MSG(rc == 0, "%s: %s", what, nvf_error_last());
    int same = memcmp(pw, pg, n / 2) == 0 && memcmp(sw, sg, n / 16) == 0;
    CHECK_MSG(same, "%s: method %d error %d domain %d gs %a: GPU bytes differ", what, p->method,
              p->error, p->domain, (double)gs);
    for (size_t b = 0; !same && b < n / 16 && g_shown < 10; b++) {
        if (memcmp(pw + 8 * b, pg + 8 * b, 8) == 0 && sw[b] == sg[b])
            continue;
        g_shown++;
        fprintf(stderr, "  block %zu (row %lld): cpu sf %02x codes", b,
                (long long)(b / (size_t)(s->cols / 16)), sw[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pw[8 * b + j]);
        fprintf(stderr, " | gpu sf %02x codes", sg[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pg[8 * b + j]);
        fprintf(stderr, "\n");
    }
done:
    free(pw);
    free(sw);
    free(pg);
    free(sg);
}

/* amax in both modes (codes, messages and values must agree), then quantize with the gs of
 * that amax and with given scales, for the listed variants. */
static void compare_all(const char *what, const nvf_quant_source *s, int all_variants) {
    static const nvf_quant_params variants[] = {
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
    };
    for (int allow = 0; allow < 2; allow++) {
        float aw = -1.0f, ag = -2.0f;
        int rw = nvf_quant_amax_ref(&aw, s, allow, 0, "t");
        char mw[512];
        snprintf(mw, sizeof mw, "%s", nvf_error_last());
        int rg = nvf_backend_amax(g_gpu, &ag, s, allow, "t");
        CHECK_MSG(rw == rg, "%s: amax status cpu %d gpu %d (%s)", what, rw, rg, nvf_error_last());
        if (rw == 0 && rg == 0)
            CHECK_MSG(nvf_f32_bits(aw) == nvf_f32_bits(ag), "%s: amax cpu %a gpu %a", what,
                      (double)aw, (double)ag);
        else if (rw < 0 && rg < 0)
            CHECK_EQ_STR(nvf_error_last(), mw);
    }
    float amax = 0.0f;
    if (nvf_quant_amax_ref(&amax, s, 1, 0, "t") < 0)
        return;
    int nv = all_variants ? 5 : 2;
    for (int v = 0; v < nv; v++) {
        compare_quant(what, s, nvf_quant_global_scale(amax, variants[v].e4m3_max), &variants[v]);
        if (all_variants) {
            compare_quant(what, s, 1.0f, &variants[v]);
            compare_quant(what, s, FLT_MAX, &variants[v]);
            compare_quant(what, s, 1e-30f, &variants[v]);
        }
    }
}

/* A plain tensor of `d` with rows x cols values from `gen` (0 gauss, 1 hard finite, 2 hard with
 * NaN/Inf). */
static void plain_case(const char *what, nvf_dtype d, int64_t rows, int64_t cols, int gen,
                       int all_variants) {
    size_t n = (size_t)(rows * cols), es = nvf_dtype_bits(d) / 8;
    uint8_t *buf = malloc(n * es + 1);
    if (!buf) {
        CHECK(!"out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        put(buf, d, i, gen == 0 ? gauss() : hard_tensor_value(gen == 2));
    nvf_quant_source s = {.dtype = d, .data = buf, .rows = rows, .cols = cols};
    CHECK(nvf_quant_source_check(&s, "t") == 0);
    compare_all(what, &s, all_variants);
    free(buf);
}

/* An FP8-block tensor with br x bc blocks and scales of `sd`. */
static void fp8_case(const char *what, int64_t rows, int64_t cols, int64_t br, int64_t bc,
                     nvf_dtype sd, int nonfinite) {
    size_t n = (size_t)(rows * cols);
    int64_t nsr = (rows + br - 1) / br, nsc = (cols + bc - 1) / bc;
    size_t ns = (size_t)(nsr * nsc), ses = nvf_dtype_bits(sd) / 8;
    uint8_t *buf = malloc(n + 1), *sc = malloc(ns * ses + 1);
    if (!buf || !sc) {
        CHECK(!"out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(rnd32() & 0xFF) & (nonfinite ? 0xFF : 0xFE); /* 0x7E max w/o NaN */
    if (!nonfinite)
        for (size_t i = 0; i < n; i++)
            buf[i] = (buf[i] & 0x7F) == 0x7F ? 0x7E : buf[i];
    for (size_t i = 0; i < ns; i++) {
        float m = ldexpf(1.0f, (int)(rnd32() % 24) - 16);
        if (sd == NVF_DTYPE_F8_E8M0)
            sc[i] = (uint8_t)(127 + (int)(rnd32() % 24) - 16);
        else
            put(sc, sd, i, (rnd32() & 1) ? m : m * 1.37f);
    }
    nvf_quant_source s = {.dtype = NVF_DTYPE_F8_E4M3,
                          .data = buf,
                          .rows = rows,
                          .cols = cols,
                          .scale = sc,
                          .scale_dtype = sd,
                          .scale_numel = ns,
                          .block_rows = br,
                          .block_cols = bc};
    CHECK(nvf_quant_source_check(&s, "t") == 0);
    compare_all(what, &s, 1);
done:
    free(buf);
    free(sc);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_quant_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device dev;
    CHECK(nvf_device_select(&dev, "cuda:0") == 0);
    int rc = nvf_backend_open(&g_gpu, &dev, 0);
    CHECK_MSG(rc == 0, "open cuda:0: %s", nvf_error_last());
    if (rc != 0)
        return check_summary("test_quant_cuda");
    int ncfg = nvf_backend_config_count(g_gpu);
    CHECK(ncfg > 0);
    printf("test_quant_cuda: seed 0x%016llx, %d launch configurations\n",
           (unsigned long long)GPU_GEN_SEED, ncfg);
    const size_t chunks[] = {0, 4096};
    for (int c = 0; c < ncfg; c++) {
        for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
            CHECK(nvf_backend_set_config(g_gpu, c, chunks[k]) == 0);
            printf("config %d, chunk %zu\n", c, chunks[k]);
            plain_case("bf16 gauss 300x208", NVF_DTYPE_BF16, 300, 16 * 13, 0, 1);
            plain_case("bf16 1x16016", NVF_DTYPE_BF16, 1, 16 * 1001, 0, 0);
            plain_case("bf16 hard 129x48", NVF_DTYPE_BF16, 129, 48, 1, 1);
            plain_case("bf16 nonfinite 67x80", NVF_DTYPE_BF16, 67, 80, 2, 1);
            plain_case("f32 hard 37x112", NVF_DTYPE_F32, 37, 112, 1, 1);
            plain_case("f32 nonfinite 21x16", NVF_DTYPE_F32, 21, 16, 2, 1);
            plain_case("f16 hard 33x80", NVF_DTYPE_F16, 33, 80, 1, 0);
            plain_case("e5m2 hard 17x48", NVF_DTYPE_F8_E5M2, 17, 48, 1, 0);
            plain_case("e4m3 hard 19x64", NVF_DTYPE_F8_E4M3, 19, 64, 1, 0);
            plain_case("bf16 empty", NVF_DTYPE_BF16, 0, 32, 0, 0);
            fp8_case("fp8 128x128 f32 200x336", 200, 336, 128, 128, NVF_DTYPE_F32, 0);
            fp8_case("fp8 128x128 e8m0 130x272", 130, 272, 128, 128, NVF_DTYPE_F8_E8M0, 0);
            fp8_case("fp8 64x48 bf16 100x208", 100, 208, 64, 48, NVF_DTYPE_BF16, 0);
            /* rows wider than the tiny chunk: pieces of one row (col0 > 0) */
            fp8_case("fp8 128x128 f32 3x8448", 3, 8448, 128, 128, NVF_DTYPE_F32, 0);
            fp8_case("fp8 64x48 f32 9x4800", 9, 4800, 64, 48, NVF_DTYPE_F32, 0);
            fp8_case("fp8 7x40 f32 50x160 (generic)", 50, 160, 7, 40, NVF_DTYPE_F32, 0);
            fp8_case("fp8 nonfinite 40x96", 40, 96, 32, 32, NVF_DTYPE_F32, 1);
        }
    }
    CHECK(nvf_backend_set_config(g_gpu, ncfg, 0) == NVF_E_INVALID);
    CHECK(nvf_backend_set_config(g_gpu, -2, 0) == NVF_E_INVALID);
    CHECK(nvf_backend_set_config(g_gpu, -1, 0) == 0);
    /* One very large tensor (about 1 GB of BF16), default configuration. */
    plain_case("bf16 gauss 8200x65536", NVF_DTYPE_BF16, 8200, 65536, 0, 0);
    nvf_backend_close(g_gpu);
    return check_summary("test_quant_cuda");
}
