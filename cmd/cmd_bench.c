/*
 * nvfp4tool bench quant|moe (SPEC section 9). `quant` times the quantizer of the chosen
 * device's backend (nvf_backend_bench_quant) on N(0,1)-like data for RTN and every 4over6
 * variant, with the global scale given (one quantizing pass) and for a whole tensor (amax pass
 * + quantizing pass), and reports GB/s of input. A backend that can time a device copy (a GPU)
 * also gets the copy bandwidth as the yardstick and FP8-block rows. `moe` (cmd_bench_moe.c)
 * times the MoE kernels of a GPU. SIGINT/SIGTERM stop it between runs with exit 5.
 */
#include "bench_moe.h"
#include "cli.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cli_common g_common;
static long g_size_mb = 0, g_runs = 0, g_cols = 7168, g_config = -1, g_ep = 0;
static int g_eager;
static const char *g_shape, *g_tokens, *g_precision, *g_baseline, *g_router_bias;

static const cli_opt k_opts[] = {
    {"size-mb", "N", CLI_INT, &g_size_mb,
     "quant: MB of BF16 input (default 64; 1024 with --device cuda)"},
    {"cols", "N", CLI_INT, &g_cols, "quant: columns of the tensor (default 7168)"},
    {"runs", "N", CLI_INT, &g_runs,
     "timed runs per case; the median is reported (default 5; 25 with --device cuda)"},
    {"config", "N", CLI_INT, &g_config,
     "quant on a GPU: launch configuration 0.. (default: the launcher's own; a usage error "
     "on the CPU)"},
    {"shape", "NAME", CLI_STRING, &g_shape,
     "moe: deepseek-v3 (default), qwen3-30b-a3b or gpt-oss-120b"},
    {"tokens", "LIST", CLI_STRING, &g_tokens, "moe: token counts, commas (default 1,2,4,...,4096)"},
    {"precision", "P", CLI_STRING, &g_precision, "moe: w4a16, w4a4 or all (default all)"},
    {"ep", "N", CLI_INT, &g_ep,
     "moe: expert-parallel ranks; one rank's experts are timed (default 8 for deepseek-v3, "
     "else 1)"},
    {"baseline", "FILE", CLI_STRING, &g_baseline,
     "moe: JSON of bench/moe_baseline.py (BF16 torch._grouped_mm): its ms and the speedup"},
    {"router-bias", "R", CLI_STRING, &g_router_bias,
     "moe, deepseek-v3: a correction bias uniform in (-R, R), drawn once (default 0: every "
     "expert equally likely, as the model's trained bias makes it)"},
    {"eager", NULL, CLI_FLAG, &g_eager,
     "moe: launch the block's kernels one by one (default: capture them once per token count "
     "and replay the CUDA graph, as bench/moe_baseline.py does the BF16 block)"},
};

static const cli_spec k_spec = {
    .name = "bench",
    .usage = "quant|moe [options]",
    .summary = "Performance tables (SPEC section 9).",
    .details = "bench quant: quantize BF16 N(0,1)-like data with RTN and every 4over6 variant,\n"
               "with the global scale given (quantize) and for a whole tensor (amax+quantize);\n"
               "median of --runs runs; GB/s of BF16 input, in all and per thread. On a GPU\n"
               "also FP8-block input and each pass against the device copy bandwidth.\n"
               "SIGINT/SIGTERM stop it between runs (exit 5).\n"
               "bench moe: the MoE block (routing excluded) on random weights in the prepared\n"
               "layout of a model's expert shape, per token count: median ms (CUDA events, 3\n"
               "warm-up runs, fresh random routing per run, activations rotated through\n"
               "256 MiB), TFLOP/s, GB/s of the NVFP4 weight bytes of the experts reached, that\n"
               "rate as a % of the device copy bandwidth measured in the same run, and with\n"
               "--baseline the BF16 torch._grouped_mm ms and speedup. GPU only (--device cuda).\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

typedef struct bench_case {
    const char *label;
    nvf_quant_params p;
} bench_case;

/* RTN, RTN in ModelOpt's arithmetic and every 4over6 variant; "4over6 mse scaled" with E = 256
 * is the default recipe. */
static const bench_case cases[] = {
    {"rtn", {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448}},
    {"rtn modelopt",
     {NVF_QUANT_METHOD_RTN_MODELOPT, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448}},
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

/* The copy bandwidth as the yardstick of a GPU run: every row then reports the bytes the pass
 * must move (reads + writes) and their rate as a % of the copy's (read + write) rate. */
typedef struct bench_run {
    nvf_backend *b;
    const nvf_device *dev;
    int64_t rows, cols;
    int threads;
    double copy_bw; /* bytes/s of the device copy; 0: not timed (the CPU) */
    const volatile sig_atomic_t *stop;
    cJSON *results;
} bench_run;

#define BENCH_SKIP (-1)

/* One row: `dtype` input, case `c`, pass `whole` (amax+quantize) or not. BENCH_SKIP when the
 * backend does not time this input; else EXIT_OK or the exit code of a failure. */
static int bench_row(bench_run *r, nvf_dtype dtype, const bench_case *c, int whole) {
    double t = 0;
    int st = nvf_backend_bench_quant(
        r->b, &t, dtype, r->rows, r->cols, &c->p,
        whole ? NVF_BACKEND_BENCH_AMAX_QUANTIZE : NVF_BACKEND_BENCH_QUANTIZE, (int)g_runs, r->stop);
    if (st == NVF_E_UNSUPPORTED)
        return BENCH_SKIP;
    if (st < 0)
        return cli_fail(k_spec.name, st);
    double n = (double)r->rows * (double)r->cols, es = dtype == NVF_DTYPE_BF16 ? 2.0 : 1.0;
    double in_b = n * es, gbs = in_b / t / 1e9;
    const char *pass = whole ? "amax+quantize" : "quantize";
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", c->label);
    cJSON_AddStringToObject(o, "pass", pass);
    cJSON_AddNumberToObject(o, "median_s", t);
    if (r->copy_bw > 0) {
        double moved = (whole ? 2 * in_b : in_b) + n / 2 + n / 16;
        double pct = 100.0 * moved / t / r->copy_bw;
        int fp8 = dtype == NVF_DTYPE_F8_E4M3;
        if (!g_common.json)
            printf("%-8s %-22s %-15s %10.3f %12.1f %12.0f %7.1f%%\n", fp8 ? "fp8blk" : "bf16",
                   c->label, pass, t * 1e3, gbs, moved, pct);
        cJSON_AddStringToObject(o, "input", fp8 ? "F8_E4M3 (128x128 blocks)" : "BF16");
        cJSON_AddNumberToObject(o, "input_gb_per_s", gbs);
        cJSON_AddNumberToObject(o, "bytes_moved", moved);
        cJSON_AddNumberToObject(o, "pct_of_copy", pct);
    } else {
        if (!g_common.json)
            printf("%-22s %-15s %10.2f %9.3f %11.3f\n", c->label, pass, t * 1e3, gbs,
                   gbs / r->threads);
        cJSON_AddNumberToObject(o, "gb_per_s", gbs);
        cJSON_AddNumberToObject(o, "gb_per_s_per_core", gbs / r->threads);
    }
    cJSON_AddItemToArray(r->results, o);
    return EXIT_OK;
}

static void bench_header(const bench_run *r, cJSON *js) {
    double bytes = (double)r->rows * (double)r->cols * 2;
    cJSON_AddStringToObject(js, "bench", "quant");
    cJSON_AddStringToObject(js, "device", r->dev->name);
    if (r->copy_bw > 0) {
        cJSON_AddNumberToObject(js, "rows", (double)r->rows);
        cJSON_AddNumberToObject(js, "cols", (double)r->cols);
        cJSON_AddNumberToObject(js, "runs", (double)g_runs);
        cJSON_AddNumberToObject(js, "config", (double)g_config);
        cJSON_AddNumberToObject(js, "copy_gb_per_s", r->copy_bw / 1e9);
        if (!g_common.json) {
            printf("bench quant: [%lld, %lld], device %s, median of %ld runs (CUDA events)\n",
                   (long long)r->rows, (long long)r->cols, r->dev->name, g_runs);
            printf("device-to-device copy: %.1f GB/s (read + write)\n", r->copy_bw / 1e9);
            printf("%-8s %-22s %-15s %10s %12s %12s %8s\n", "input", "method", "pass", "median ms",
                   "input GB/s", "bytes moved", "% copy");
        }
        return;
    }
    cJSON_AddNumberToObject(js, "threads", r->threads);
    cJSON_AddStringToObject(js, "dtype", "BF16");
    cJSON_AddNumberToObject(js, "rows", (double)r->rows);
    cJSON_AddNumberToObject(js, "cols", (double)r->cols);
    cJSON_AddNumberToObject(js, "bytes", bytes);
    cJSON_AddNumberToObject(js, "runs", (double)g_runs);
    if (!g_common.json) {
        printf("bench quant: BF16 [%lld, %lld] (%.1f MB), device %s, %d thread%s, median of %ld "
               "runs\n",
               (long long)r->rows, (long long)r->cols, bytes / 1e6, r->dev->name, r->threads,
               r->threads == 1 ? "" : "s", g_runs);
        printf("%-22s %-15s %10s %9s %11s\n", "method", "pass", "median ms", "GB/s", "GB/s/core");
    }
}

static int bench_quant(nvf_backend *b, const nvf_device *dev, int threads) {
    bench_run r = {.b = b, .dev = dev, .threads = threads};
    int rc = bench_shape(&r.rows, &r.cols);
    if (rc != EXIT_OK)
        return rc;
    if (g_config >= 0) {
        if (nvf_backend_config_count(b) == 0)
            return cli_usage_error(&k_spec,
                                   "--config picks a GPU launch configuration; device "
                                   "%s has none",
                                   dev->name);
        int cs = nvf_backend_set_config(b, (int)g_config, 0);
        if (cs < 0)
            return cli_fail(k_spec.name, cs);
    }
    r.stop = cli_catch_stop_signals();
    nvf_log(NVF_LOG_INFO, "bench quant: [%lld, %lld] on %s, %ld runs per case", (long long)r.rows,
            (long long)r.cols, dev->name, g_runs);
    cJSON *js = cJSON_CreateObject();
    r.results = cJSON_AddArrayToObject(js, "results");
    if (!r.results) {
        cJSON_Delete(js);
        return cli_fail(k_spec.name, nvf_error_set(NVF_E_NOMEM, "out of memory"));
    }
    /* The copy of the BF16 tensor's bytes: read + write (the recipe does not matter for it). */
    double copy_s = 0;
    int st = nvf_backend_bench_quant(b, &copy_s, NVF_DTYPE_BF16, r.rows, r.cols, &cases[2].p,
                                     NVF_BACKEND_BENCH_COPY, (int)g_runs, r.stop);
    if (st < 0 && st != NVF_E_UNSUPPORTED) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    if (st == 0)
        r.copy_bw = 2.0 * (double)r.rows * (double)r.cols * 2.0 / copy_s;
    bench_header(&r, js);
    static const nvf_dtype inputs[] = {NVF_DTYPE_BF16, NVF_DTYPE_F8_E4M3};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        int skip = 0; /* this input is not timed on this device */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0] && !skip; c++)
            for (int whole = 0; whole < 2 && !skip; whole++) {
                rc = bench_row(&r, inputs[i], &cases[c], whole);
                skip = rc == BENCH_SKIP;
                if (skip)
                    rc = EXIT_OK;
                else if (rc != EXIT_OK)
                    goto done;
            }
    }
    if (g_common.json)
        rc = cli_print_json(k_spec.name, js);
done:
    cJSON_Delete(js);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    int moe = strcmp(pos[0], "moe") == 0;
    if (!moe && strcmp(pos[0], "quant") != 0)
        return cli_usage_error(&k_spec, "unknown benchmark '%s' (expected quant or moe)", pos[0]);
    nvf_device dev;
    int st = nvf_device_select(&dev, g_common.device ? g_common.device : "cpu");
    if (st < 0)
        return cli_fail(k_spec.name, st);
    int gpu = dev.kind == NVF_DEVICE_CUDA; /* only the defaults differ */
    g_size_mb = g_size_mb ? g_size_mb : gpu ? 1024 : 64;
    g_runs = g_runs ? g_runs : gpu ? 25 : 5;
    int threads = (int)g_common.threads;
    if (threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 0 ? (int)nc : 1;
    }
    nvf_backend *b = NULL;
    st = nvf_backend_open(&b, &dev, threads);
    if (st < 0)
        return cli_fail(k_spec.name, st);
    if (moe) {
        bench_moe_args a = {g_shape, g_tokens, g_precision, g_baseline,   g_router_bias,
                            g_eager, g_ep,     g_runs,      g_common.json};
        rc = bench_moe(b, &dev, &a, &k_spec);
    } else {
        rc = bench_quant(b, &dev, threads);
    }
    nvf_backend_close(b);
    return rc;
}
