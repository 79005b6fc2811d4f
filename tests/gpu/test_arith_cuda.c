/*
 * GPU vs CPU for ModelOpt's arithmetic (NVF_QUANT_METHOD_RTN_MODELOPT, SPEC section 4): the CUDA
 * backend's quantize and quantize_group against the CPU backend, byte for byte (memcmp; the
 * first mismatching blocks printed in hex, at most 10), and the group's sf2 bit for bit, for
 * every launch configuration with the default and a tiny staging chunk, and groups both
 * device-resident and chunked (a tiny group budget). Inputs: BF16, F32, F16 and FP8-block
 * sources of awkward shapes (1, 127 and 129 rows; 16 * odd columns), Student-t-like heavy
 * tails, exact zeros (whole blocks and whole groups: the fallback to the default arithmetic),
 * tiny values (scales clamped at 2^-9) and given group scales (0, 1e-30, 1, FLT_MAX / 2688).
 * The default arithmetic's RTN runs alongside on the same inputs. Exit 77 (skip) without a GPU.
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

static int g_shown;
static nvf_backend *g_cpu, *g_gpu;

static const nvf_quant_params k_mo = {NVF_QUANT_METHOD_RTN_MODELOPT, NVF_QUANT_ERROR_MSE,
                                      NVF_QUANT_DOMAIN_SCALED, 448};
static const nvf_quant_params k_fi = {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE,
                                      NVF_QUANT_DOMAIN_SCALED, 448};

static double uniform(void) {
    return ((double)rnd32() + 0.5) / 4294967296.0;
}

/* Student-t with 3 degrees of freedom: a normal over the root of a chi-square / 3. */
static float student_t(void) {
    double z[4];
    for (int k = 0; k < 4; k++)
        z[k] = sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
    double chi = (z[1] * z[1] + z[2] * z[2] + z[3] * z[3]) / 3.0;
    return (float)(z[0] / sqrt(chi + 1e-12));
}

/* kind 0: heavy tails; 1: heavy tails with zero blocks, exact zeros and tiny values; 2: all
 * zero; 3: tiny values only (1e-9 scale). */
static float value(int kind, size_t i, int64_t cols) {
    if (kind == 2)
        return (i & 1) ? -0.0f : 0.0f;
    if (kind == 3)
        return student_t() * 1e-9f;
    if (kind == 1) {
        size_t blk = (i % (size_t)cols) / 16;
        if (blk % 5 == 1)
            return 0.0f;
        switch (rnd32() % 8) {
        case 0:
            return 0.0f;
        case 1:
            return student_t() * 1e-9f;
        case 2:
            return student_t() * 1e-30f;
        default:
            break;
        }
    }
    return student_t() * 0.02f;
}

static void show_diff(const uint8_t *pc, const uint8_t *sc, const uint8_t *pg, const uint8_t *sg,
                      size_t nblocks, int64_t cols) {
    for (size_t b = 0; b < nblocks && g_shown < 10; b++) {
        if (memcmp(pc + 8 * b, pg + 8 * b, 8) == 0 && sc[b] == sg[b])
            continue;
        g_shown++;
        fprintf(stderr, "  block %zu (row %lld): cpu sf %02x codes", b,
                (long long)(b / (size_t)(cols / 16)), sc[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pc[8 * b + j]);
        fprintf(stderr, " | gpu sf %02x codes", sg[b]);
        for (int j = 0; j < 8; j++)
            fprintf(stderr, " %02x", pg[8 * b + j]);
        fprintf(stderr, "\n");
    }
}

/* quantize with group scale g on both backends. */
static void compare_quant(const char *what, const nvf_quant_source *s, float g,
                          const nvf_quant_params *p) {
    size_t n = (size_t)(s->rows * s->cols);
    uint8_t *pc = malloc(n / 2 + 1), *sc = malloc(n / 16 + 1);
    uint8_t *pg = malloc(n / 2 + 1), *sg = malloc(n / 16 + 1);
    if (!pc || !sc || !pg || !sg) {
        CHECK(!"out of memory");
        goto done;
    }
    memset(pg, 0xAA, n / 2 + 1);
    memset(sg, 0xAA, n / 16 + 1);
    CHECK(nvf_backend_quantize(g_cpu, pc, sc, s, g, p) == 0);
    int rc = nvf_backend_quantize(g_gpu, pg, sg, s, g, p);
    CHECK_MSG(rc == 0, "%s: %s", what, nvf_error_last());
    int same = memcmp(pc, pg, n / 2) == 0 && memcmp(sc, sg, n / 16) == 0;
    CHECK_MSG(same, "%s: method %d, group scale %a: GPU bytes differ", what, p->method, (double)g);
    if (!same)
        show_diff(pc, sc, pg, sg, n / 16, s->cols);
done:
    free(pc);
    free(sc);
    free(pg);
    free(sg);
}

/* A gate/up-like group of two members on both backends: the group scale and every byte. */
static void compare_group(const char *what, const nvf_quant_source *srcs,
                          const nvf_quant_params *p) {
    size_t n[2] = {(size_t)(srcs[0].rows * srcs[0].cols), (size_t)(srcs[1].rows * srcs[1].cols)};
    uint8_t *buf[8] = {NULL};
    for (int k = 0; k < 2; k++) {
        buf[4 * k + 0] = malloc(n[k] / 2 + 1);
        buf[4 * k + 1] = malloc(n[k] / 16 + 1);
        buf[4 * k + 2] = calloc(1, n[k] / 2 + 1);
        buf[4 * k + 3] = calloc(1, n[k] / 16 + 1);
    }
    for (int i = 0; i < 8; i++)
        if (!buf[i]) {
            CHECK(!"out of memory");
            goto done;
        }
    uint8_t *pc[2] = {buf[0], buf[4]}, *scc[2] = {buf[1], buf[5]};
    uint8_t *pg[2] = {buf[2], buf[6]}, *scg[2] = {buf[3], buf[7]};
    const char *names[2] = {"e.gate_proj.weight", "e.up_proj.weight"};
    float gc = -1.0f, gg = -2.0f;
    CHECK(nvf_backend_quantize_group(g_cpu, &gc, pc, scc, srcs, names, 2, p, 0) == 0);
    int rc = nvf_backend_quantize_group(g_gpu, &gg, pg, scg, srcs, names, 2, p, 0);
    CHECK_MSG(rc == 0, "%s: group: %s", what, nvf_error_last());
    CHECK_MSG(nvf_f32_bits(gc) == nvf_f32_bits(gg), "%s: group scale cpu %a gpu %a", what,
              (double)gc, (double)gg);
    for (int k = 0; k < 2; k++) {
        int same = memcmp(pc[k], pg[k], n[k] / 2) == 0 && memcmp(scc[k], scg[k], n[k] / 16) == 0;
        CHECK_MSG(same, "%s: group member %d: GPU bytes differ", what, k);
        if (!same)
            show_diff(pc[k], scc[k], pg[k], scg[k], n[k] / 16, srcs[k].cols);
    }
done:
    for (int i = 0; i < 8; i++)
        free(buf[i]);
}

/* One source of `d`, rows x cols values of `kind`; FP8 sources get 128x128 F32 block scales. */
static uint8_t *make_source(nvf_quant_source *s, float **scale, nvf_dtype d, int64_t rows,
                            int64_t cols, int kind) {
    size_t n = (size_t)(rows * cols), es = nvf_dtype_bits(d) / 8;
    uint8_t *buf = malloc(n * es + 1);
    *scale = NULL;
    if (!buf)
        return NULL;
    for (size_t i = 0; i < n; i++) { /* E4M3 holds the values scaled to its range (0.2 -> 448) */
        float v = value(kind, i, cols);
        put(buf, d, i, d == NVF_DTYPE_F8_E4M3 ? v * 448.0f / 0.2f : v);
    }
    memset(s, 0, sizeof *s);
    s->dtype = d;
    s->data = buf;
    s->rows = rows;
    s->cols = cols;
    if (d == NVF_DTYPE_F8_E4M3) {
        int64_t ns = ((rows + 127) / 128) * ((cols + 127) / 128);
        *scale = malloc((size_t)ns * sizeof(float));
        if (!*scale) {
            free(buf);
            return NULL;
        }
        for (int64_t i = 0; i < ns; i++)
            (*scale)[i] = (kind == 3 ? 1e-9f : 1.0f) * (0.2f / 448.0f) * (float)(1 + i % 3);
        s->scale = *scale;
        s->scale_dtype = NVF_DTYPE_F32;
        s->scale_numel = (uint64_t)ns;
        s->block_rows = s->block_cols = 128;
    }
    return buf;
}

static void run_case(nvf_dtype d, int64_t rows, int64_t cols, int kind) {
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lld kind %d", nvf_dtype_name(d), (long long)rows,
             (long long)cols, kind);
    nvf_quant_source s[2];
    float *sc[2];
    uint8_t *b0 = make_source(&s[0], &sc[0], d, rows, cols, kind);
    uint8_t *b1 = make_source(&s[1], &sc[1], d, rows + 2, cols, kind == 2 ? 2 : 0);
    if (!b0 || !b1) {
        CHECK(!"out of memory");
        goto done;
    }
    CHECK(nvf_quant_source_check(&s[0], "t") == 0 && nvf_quant_source_check(&s[1], "t") == 0);
    float amax = 0.0f;
    CHECK(nvf_backend_amax(g_cpu, &amax, &s[0], 0, "t") == 0);
    compare_quant(what, &s[0], nvf_quant_group_scale(amax, &k_mo), &k_mo);
    compare_quant(what, &s[0], nvf_quant_group_scale(amax, &k_fi), &k_fi);
    static const float given[] = {0.0f, 1e-30f, 1.0f, FLT_MAX / 2688.0f};
    for (size_t k = 0; k < sizeof given / sizeof given[0]; k++)
        compare_quant(what, &s[0], given[k], &k_mo);
    compare_group(what, s, &k_mo);
    compare_group(what, s, &k_fi);
done:
    free(b0);
    free(b1);
    free(sc[0]);
    free(sc[1]);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_arith_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device cpu, dev;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_device_select(&dev, "cuda:0") == 0);
    CHECK(nvf_backend_open(&g_cpu, &cpu, 0) == 0);
    int rc = nvf_backend_open(&g_gpu, &dev, 0);
    CHECK_MSG(rc == 0, "open cuda:0: %s", nvf_error_last());
    if (rc != 0 || !g_cpu) {
        nvf_backend_close(g_cpu);
        return check_summary("test_arith_cuda");
    }
    int ncfg = nvf_backend_config_count(g_gpu);
    printf("test_arith_cuda: seed 0x%016llx, %d launch configurations\n",
           (unsigned long long)GPU_GEN_SEED, ncfg);
    static const int64_t rows[] = {1, 127, 129};
    static const int64_t cols[] = {16, 16 * 13, 16 * 63};
    static const nvf_dtype dtypes[] = {NVF_DTYPE_BF16, NVF_DTYPE_F32, NVF_DTYPE_F16,
                                       NVF_DTYPE_F8_E4M3};
    const size_t chunks[] = {0, 4096};
    const size_t budgets[] = {0,
                              1024}; /* default, and so small that groups take the chunked path */
    for (int c = 0; c < ncfg; c++)
        for (size_t k = 0; k < 2; k++) {
            CHECK(nvf_backend_set_config(g_gpu, c, chunks[k]) == 0);
            nvf_backend_set_group_budget(budgets[k]);
            printf("config %d, chunk %zu, group budget %zu\n", c, chunks[k], budgets[k]);
            for (size_t r = 0; r < 3; r++)
                for (size_t q = 0; q < 3; q++)
                    for (int kind = 0; kind < 4; kind++)
                        run_case(dtypes[(r + q + (size_t)kind) % 4], rows[r], cols[q], kind);
        }
    nvf_backend_set_group_budget(0);
    CHECK(nvf_backend_set_config(g_gpu, -1, 0) == 0);
    /* Every source kind at one awkward shape in the default configuration. */
    for (size_t d = 0; d < 4; d++)
        for (int kind = 0; kind < 4; kind++)
            run_case(dtypes[d], 129, 16 * 63, kind);
    /* A larger tensor: 4099 x 16 * 255 BF16 heavy tails. */
    run_case(NVF_DTYPE_BF16, 4099, 16 * 255, 1);
    nvf_backend_close(g_gpu);
    nvf_backend_close(g_cpu);
    return check_summary("test_arith_cuda");
}
