/* The CPU backend: the reference implementations of lib/quant (SPEC section 4). */
#include "backend_internal.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <stdlib.h>
#include <time.h>

/* The benchmark's data, kept between calls (bench quant times ten cases on one tensor). */
typedef struct cpu_state {
    uint16_t *x;
    uint8_t *packed, *scales;
    size_t n;
} cpu_state;

static void cpu_close(nvf_backend *b) {
    cpu_state *st = b->state;
    if (!st)
        return;
    free(st->x);
    free(st->packed);
    free(st->scales);
    free(st);
    b->state = NULL;
}

static int cpu_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                    const char *name) {
    return nvf_quant_amax_ref(out, s, allow_nonfinite, b->threads, name);
}

static int cpu_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales, const nvf_quant_source *s,
                        float gs, const nvf_quant_params *p) {
    return nvf_quant_source_ref(packed, scales, s, gs, p, b->threads);
}

int nvf_backend_cpu_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                                 int check_finite, const char *name) {
    (void)b;
    float *row = malloc((size_t)(s->cols > 0 ? s->cols : 1) * sizeof *row);
    if (!row)
        return nvf_error_set(NVF_E_NOMEM, "no memory to dequantize '%s'", name);
    uint8_t *p = out;
    for (int64_t r = 0; r < s->rows; r++) {
        nvf_quant_source_load_row(row, s, r);
        for (int64_t c = 0; c < s->cols; c++) {
            uint16_t h = nvf_f32_to_bf16_rn(row[c]);
            if (check_finite && (h & 0x7F80u) == 0x7F80u) {
                double v = (double)row[c];
                free(row);
                return nvf_error_set(NVF_E_NONFINITE,
                                     "tensor '%s': non-finite value %g at index [%lld, %lld] (use "
                                     "--allow-nonfinite to pass such values through)",
                                     name, v, (long long)r, (long long)c);
            }
            *p++ = (uint8_t)h;
            *p++ = (uint8_t)(h >> 8);
        }
    }
    free(row);
    return NVF_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* BF16 values close to N(0,1): the sum of four uniforms, scaled to unit variance
 * (deterministic, fast; the quantizer's speed does not depend on the exact distribution). */
static void fill_bf16(uint16_t *x, size_t n) {
    uint64_t s = 0x853C49E6748FEA9Bull;
    for (size_t i = 0; i < n; i++) {
        double acc = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            acc += (double)(s >> 11) / 9007199254740992.0;
        }
        x[i] = nvf_f32_to_bf16_rn((float)((acc - 2.0) * 1.7320508075688772));
    }
}

/* The benchmark tensor of n values, generated once per size. */
static int bench_data(nvf_backend *b, cpu_state **out, size_t n) {
    cpu_state *st = b->state;
    if (st && st->n == n) {
        *out = st;
        return NVF_OK;
    }
    cpu_close(b);
    st = calloc(1, sizeof *st);
    if (st) {
        b->state = st;
        st->x = malloc(n * 2);
        st->packed = malloc(n / 2);
        st->scales = malloc(n / NVF_BLOCK);
    }
    if (!st || !st->x || !st->packed || !st->scales) {
        cpu_close(b);
        return nvf_error_set(NVF_E_NOMEM, "bench quant: out of memory for %zu values", n);
    }
    st->n = n;
    fill_bf16(st->x, n);
    *out = st;
    return NVF_OK;
}

static int cpu_bench_quant(nvf_backend *b, double *out_s, nvf_dtype dtype, int64_t rows,
                           int64_t cols, const nvf_quant_params *p, nvf_backend_bench_pass pass,
                           int runs, const volatile sig_atomic_t *stop) {
    if (dtype != NVF_DTYPE_BF16 || pass == NVF_BACKEND_BENCH_COPY)
        return nvf_error_set(NVF_E_UNSUPPORTED, "bench quant: the cpu backend times BF16 "
                                                "quantization only");
    cpu_state *st = NULL;
    int rc = bench_data(b, &st, (size_t)rows * (size_t)cols);
    if (rc != NVF_OK)
        return rc;
    double *times = calloc((size_t)runs, sizeof *times);
    if (!times)
        return nvf_error_set(NVF_E_NOMEM, "bench quant: out of memory");
    nvf_quant_source src = {.dtype = NVF_DTYPE_BF16, .data = st->x, .rows = rows, .cols = cols};
    for (int r = 0; r < runs && rc == NVF_OK; r++) {
        if (stop && *stop) {
            rc = nvf_error_set(NVF_E_INTERRUPTED, "bench quant: interrupted");
            break;
        }
        double t0 = now_s();
        float amax = 4.0f;
        if (pass == NVF_BACKEND_BENCH_AMAX_QUANTIZE)
            rc = nvf_quant_amax_ref(&amax, &src, 0, b->threads, "bench");
        float gs = nvf_quant_group_scale(amax, p);
        if (rc == NVF_OK)
            rc = nvf_quant_source_ref(st->packed, st->scales, &src, gs, p, b->threads);
        times[r] = now_s() - t0;
    }
    if (rc == NVF_OK) {
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        *out_s = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
    }
    free(times);
    return rc;
}

const nvf_backend_ops nvf_backend_cpu_ops = {
    .name = "cpu",
    .close = cpu_close,
    .amax = cpu_amax,
    .quantize = cpu_quantize,
    .dequant_bf16 = nvf_backend_cpu_dequant_bf16,
    .layout = nvf_backend_cpu_layout,
    .bench_quant = cpu_bench_quant,
};
