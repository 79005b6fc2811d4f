/*
 * nvfp4tool bench quant|moe (SPEC section 9). `quant` times the quantizer on BF16 N(0,1)-like
 * data for RTN and every 4over6 variant, with the global scale given (one quantizing pass) and
 * for a whole tensor (amax pass + quantizing pass), and reports GB/s of BF16 input.
 * `moe` is not implemented yet.
 */
#include "cli.h"

#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/quant_cuda.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static cli_common g_common;
static long g_size_mb = 0, g_runs = 0, g_cols = 7168, g_config = -1;

static const cli_opt k_opts[] = {
    {"size-mb", "N", CLI_INT, &g_size_mb,
     "quant: MB of BF16 input (default 64; 1024 with --device cuda)"},
    {"cols", "N", CLI_INT, &g_cols, "quant: columns of the tensor (default 7168)"},
    {"runs", "N", CLI_INT, &g_runs,
     "timed runs per case; the median is reported (default 5; 25 with --device cuda)"},
    {"config", "N", CLI_INT, &g_config,
     "quant --device cuda: launch configuration 0.. (default: the launcher's own)"},
};

static const cli_spec k_spec = {
    .name = "bench",
    .usage = "quant|moe [options]",
    .summary = "Performance tables (SPEC section 9).",
    .details = "bench quant: quantize BF16 N(0,1)-like data with RTN and every 4over6 variant,\n"
               "with the global scale given (quantize) and for a whole tensor (amax+quantize);\n"
               "median of --runs runs; GB/s of BF16 input, in all and per thread.\n"
               "bench moe: not implemented yet.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

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

typedef struct bench_case {
    const char *label;
    nvf_quant_params p;
} bench_case;

/* RTN and every 4over6 variant; "4over6 mse scaled" with E = 256 is the default recipe. */
static const bench_case cases[] = {
    {"rtn", {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448}},
    {"4over6 mse scaled",
     {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256}},
    {"4over6 mse original",
     {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL, 256}},
    {"4over6 mae scaled",
     {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED, 256}},
    {"4over6 mae original",
     {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL, 256}},
};

/* The benchmark tensor's shape from --size-mb (of BF16) and --cols; a usage error when they or
 * --runs are out of range. */
static int bench_shape(int64_t *rows, int64_t *cols) {
    if (g_cols <= 0 || g_cols % NVF_BLOCK != 0 || g_size_mb <= 0 || g_runs <= 0)
        return cli_usage_error(&k_spec, "--cols must be a positive multiple of 16, --size-mb and "
                                        "--runs positive");
    *cols = g_cols;
    *rows = (int64_t)g_size_mb * 1000000 / (2 * *cols);
    if (*rows < 1)
        *rows = 1;
    return EXIT_OK;
}

static int bench_quant(int threads) {
    int64_t rows, cols;
    int us = bench_shape(&rows, &cols);
    if (us != EXIT_OK)
        return us;
    size_t n = (size_t)(rows * cols);
    uint16_t *x = malloc(n * 2);
    uint8_t *packed = malloc(n / 2), *scales = malloc(n / NVF_BLOCK);
    double *times = calloc((size_t)g_runs, sizeof *times);
    cJSON *js = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(js, "results");
    int rc = 0;
    if (!x || !packed || !scales || !times || !results) {
        rc = cli_fail(k_spec.name, nvf_error_set(NVF_E_NOMEM, "out of memory for %zu values", n));
        goto done;
    }
    fill_bf16(x, n);
    nvf_quant_source src = {.dtype = NVF_DTYPE_BF16, .data = x, .rows = rows, .cols = cols};
    double bytes = (double)n * 2;
    cJSON_AddStringToObject(js, "bench", "quant");
    cJSON_AddStringToObject(js, "device", "cpu");
    cJSON_AddNumberToObject(js, "threads", threads);
    cJSON_AddStringToObject(js, "dtype", "BF16");
    cJSON_AddNumberToObject(js, "rows", (double)rows);
    cJSON_AddNumberToObject(js, "cols", (double)cols);
    cJSON_AddNumberToObject(js, "bytes", bytes);
    cJSON_AddNumberToObject(js, "runs", (double)g_runs);
    if (!g_common.json) {
        printf("bench quant: BF16 [%lld, %lld] (%.1f MB), device cpu, %d thread%s, median of %ld "
               "runs\n",
               (long long)rows, (long long)cols, bytes / 1e6, threads, threads == 1 ? "" : "s",
               g_runs);
        printf("%-22s %-15s %10s %9s %11s\n", "method", "pass", "median ms", "GB/s", "GB/s/core");
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int whole = 0; whole < 2; whole++) {
            float amax = 4.0f;
            for (long r = 0; r < g_runs; r++) {
                double t0 = now_s();
                int st = 0;
                if (whole)
                    st = nvf_quant_amax_ref(&amax, &src, 0, threads, "bench");
                float gs = nvf_quant_global_scale(amax, cases[c].p.e4m3_max);
                if (st == 0)
                    st = nvf_quant_source_ref(packed, scales, &src, gs, &cases[c].p, threads);
                if (st < 0) {
                    rc = cli_fail(k_spec.name, st);
                    goto done;
                }
                times[r] = now_s() - t0;
            }
            qsort(times, (size_t)g_runs, sizeof *times, cmp_double);
            double med =
                g_runs % 2 ? times[g_runs / 2] : 0.5 * (times[g_runs / 2 - 1] + times[g_runs / 2]);
            double gbs = bytes / med / 1e9;
            const char *pass = whole ? "amax+quantize" : "quantize";
            if (!g_common.json)
                printf("%-22s %-15s %10.2f %9.3f %11.3f\n", cases[c].label, pass, med * 1e3, gbs,
                       gbs / threads);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "method", cases[c].label);
            cJSON_AddStringToObject(o, "pass", pass);
            cJSON_AddNumberToObject(o, "median_s", med);
            cJSON_AddNumberToObject(o, "gb_per_s", gbs);
            cJSON_AddNumberToObject(o, "gb_per_s_per_core", gbs / threads);
            cJSON_AddItemToArray(results, o);
        }
    }
    if (g_common.json)
        rc = cli_print_json(k_spec.name, js);
done:
    cJSON_Delete(js);
    free(x);
    free(packed);
    free(scales);
    free(times);
    return rc;
}

/* GPU: device-resident data, CUDA events, the D2D copy bandwidth of the same run as the
 * yardstick: every row reports GB/s of input, the bytes the pass must move (reads + writes)
 * and their rate as a % of the copy's (read + write) rate. */
static int bench_quant_cuda(int device, const char *devname) {
    int64_t rows, cols;
    int us = bench_shape(&rows, &cols);
    if (us != EXIT_OK)
        return us;
    double n = (double)rows * (double)cols;
    if (g_config >= 0) {
        int cs = nvf_quant_cuda_set_config((int)g_config, 0);
        if (cs < 0)
            return cli_fail(k_spec.name, cs);
    }
    cJSON *js = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(js, "results");
    int rc = 0;
    double copy_s = 0;
    /* Copy of the BF16 tensor's bytes: read + write (the recipe does not matter for it). */
    int st = nvf_quant_cuda_bench(&copy_s, NVF_DTYPE_BF16, rows, cols, &cases[1].p,
                                  NVF_QUANT_CUDA_COPY, (int)g_runs, device);
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    double copy_bw = 2.0 * n * 2.0 / copy_s;
    cJSON_AddStringToObject(js, "bench", "quant");
    cJSON_AddStringToObject(js, "device", devname);
    cJSON_AddNumberToObject(js, "rows", (double)rows);
    cJSON_AddNumberToObject(js, "cols", (double)cols);
    cJSON_AddNumberToObject(js, "runs", (double)g_runs);
    cJSON_AddNumberToObject(js, "config", (double)g_config);
    cJSON_AddNumberToObject(js, "copy_gb_per_s", copy_bw / 1e9);
    if (!g_common.json) {
        printf("bench quant: [%lld, %lld], device %s, median of %ld runs (CUDA events)\n",
               (long long)rows, (long long)cols, devname, g_runs);
        printf("device-to-device copy: %.1f GB/s (read + write)\n", copy_bw / 1e9);
        printf("%-8s %-22s %-15s %10s %12s %12s %8s\n", "input", "method", "pass", "median ms",
               "input GB/s", "bytes moved", "% copy");
    }
    for (int fp8 = 0; fp8 < 2; fp8++) {
        double in_b = n * (fp8 ? 1.0 : 2.0), out_b = n / 2 + n / 16;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int whole = 0; whole < 2; whole++) {
                double t = 0;
                st = nvf_quant_cuda_bench(
                    &t, fp8 ? NVF_DTYPE_F8_E4M3 : NVF_DTYPE_BF16, rows, cols, &cases[c].p,
                    whole ? NVF_QUANT_CUDA_AMAX_QUANTIZE : NVF_QUANT_CUDA_QUANTIZE, (int)g_runs,
                    device);
                if (st < 0) {
                    rc = cli_fail(k_spec.name, st);
                    goto done;
                }
                double moved = (whole ? 2 * in_b : in_b) + out_b;
                double pct = 100.0 * moved / t / copy_bw;
                const char *input = fp8 ? "fp8blk" : "bf16";
                const char *pass = whole ? "amax+quantize" : "quantize";
                if (!g_common.json)
                    printf("%-8s %-22s %-15s %10.3f %12.1f %12.0f %7.1f%%\n", input, cases[c].label,
                           pass, t * 1e3, in_b / t / 1e9, moved, pct);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "input", fp8 ? "F8_E4M3 (128x128 blocks)" : "BF16");
                cJSON_AddStringToObject(o, "method", cases[c].label);
                cJSON_AddStringToObject(o, "pass", pass);
                cJSON_AddNumberToObject(o, "median_s", t);
                cJSON_AddNumberToObject(o, "input_gb_per_s", in_b / t / 1e9);
                cJSON_AddNumberToObject(o, "bytes_moved", moved);
                cJSON_AddNumberToObject(o, "pct_of_copy", pct);
                cJSON_AddItemToArray(results, o);
            }
        }
    }
    if (g_common.json)
        rc = cli_print_json(k_spec.name, js);
done:
    cJSON_Delete(js);
    nvf_quant_cuda_shutdown();
    return rc;
}

int cmd_bench(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc = cli_parse(&k_spec, argc, argv, pos, &np);
    if (rc == CLI_HELP_SHOWN)
        return EXIT_OK;
    if (rc != EXIT_OK)
        return rc;
    if (strcmp(pos[0], "moe") == 0) {
        fprintf(stderr, "nvfp4tool bench: 'bench moe' is not implemented yet\n");
        return EXIT_RUNTIME;
    }
    if (strcmp(pos[0], "quant") != 0)
        return cli_usage_error(&k_spec, "unknown benchmark '%s' (expected quant or moe)", pos[0]);
    nvf_device dev;
    int st = nvf_device_select(&dev, g_common.device ? g_common.device : "cpu");
    if (st < 0)
        return cli_fail(k_spec.name, st);
    if (dev.kind == NVF_DEVICE_CUDA) {
        g_size_mb = g_size_mb ? g_size_mb : 1024;
        g_runs = g_runs ? g_runs : 25;
        return bench_quant_cuda(dev.index, dev.name);
    }
    g_size_mb = g_size_mb ? g_size_mb : 64;
    g_runs = g_runs ? g_runs : 5;
    int threads = (int)g_common.threads;
    if (threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 0 ? (int)nc : 1;
    }
    return bench_quant(threads);
}
