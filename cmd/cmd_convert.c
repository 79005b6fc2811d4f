/*
 * nvfp4tool convert SRC DST: a whole checkpoint to a ModelOpt NVFP4 checkpoint (SPEC sections 5
 * and 6). The work is nvf_convert_run(); this file parses the options, resolves the recipe and
 * the device, turns SIGINT/SIGTERM into a clean stop, draws the progress and prints the summary.
 */
#include "cli.h"

#include "nvfp4/convert.h"
#include "nvfp4/device.h"
#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static cli_common g_common;
static cli_list g_include, g_exclude;
static const char *g_target, *g_max_shard, *g_input_amax, *g_max_host, *g_devices, *g_shard;
static const char *g_method, *g_error, *g_domain, *g_e4m3_max, *g_arith, *g_scale_layout, *g_ep;
static int g_keep_source, g_resume, g_force, g_allow_nonfinite, g_allow_empty, g_no_follow;
static int g_strict;

static const cli_opt k_opts[] = {
    {"target", "FORMAT", CLI_STRING, &g_target,
     "modelopt (default), prepared-w4a16 or prepared-w4a4 (kernel-ready MoE shards)"},
    {"include", "GLOB", CLI_LIST, &g_include,
     "quantize tensors matching GLOB (default *.mlp.experts.*)"},
    {"exclude", "GLOB", CLI_LIST, &g_exclude, "never quantize tensors matching GLOB"},
    {"keep-source-precision", NULL, CLI_FLAG, &g_keep_source,
     "keep FP8 tensors outside the scope as FP8 (quant_algo MIXED_PRECISION)"},
    {"max-shard-size", "SIZE", CLI_STRING, &g_max_shard,
     "tensor bytes per output shard (default 5GB, decimal units; KiB.. binary)"},
    {"input-amax", "FILE.json", CLI_STRING, &g_input_amax,
     "calibrated input amax per module {\"MODULE\": amax}: input_scale = amax / (6 * 448)"},
    {"resume", NULL, CLI_FLAG, &g_resume,
     "continue an interrupted conversion into DST (a complete one is verified and kept)"},
    {"force", NULL, CLI_FLAG, &g_force,
     "convert again into a DST that holds an earlier output of this conversion"},
    {"max-host-memory", "SIZE", CLI_STRING, &g_max_host,
     "tensor buffers in flight (default 8GiB; one job always proceeds)"},
    {"method", "rtn|4over6", CLI_STRING, &g_method, "override quantization.method"},
    {"error", "mse|mae", CLI_STRING, &g_error, "override quantization.error (4over6)"},
    {"error-domain", "DOMAIN", CLI_STRING, &g_domain,
     "override quantization.error_domain: scaled|original"},
    {"e4m3-max", "256|448", CLI_STRING, &g_e4m3_max, "override quantization.e4m3_max"},
    {"arithmetic", "flashinfer|modelopt", CLI_STRING, &g_arith,
     "override quantization.arithmetic (modelopt: ModelOpt's own export bytes, rtn only)"},
    {"scale-layout", "128x4|8x4", CLI_STRING, &g_scale_layout,
     "prepared targets' block-scale layout (default 128x4)"},
    {"ep", "N", CLI_STRING, &g_ep,
     "prepared targets: N expert-parallel ranks, one rank-0000r-of-0000N/ each (default 1)"},
    {"allow-nonfinite", NULL, CLI_FLAG, &g_allow_nonfinite,
     "pass NaN/Inf through instead of failing"},
    {"allow-empty", NULL, CLI_FLAG, &g_allow_empty,
     "convert even when the scope quantizes no tensor (default: exit 2)"},
    {"strict", NULL, CLI_FLAG, &g_strict,
     "NVFP4 source to a prepared target: an expert whose gate and up weight_scale_2 differ is an "
     "error (exit 3), not re-quantized onto the shared scale"},
    {"devices", "LIST", CLI_STRING, &g_devices,
     "spread tensors over these devices: GPU ordinals or cpu, e.g. 0,1 (overrides --device)"},
    {"shard", "I/N", CLI_STRING, &g_shard,
     "convert only part I (0-based) of N of the output shards, for N jobs into one DST; then "
     "`nvfp4tool merge DST`"},
    {"no-follow-outside", NULL, CLI_FLAG, &g_no_follow,
     "a file of SRC linking outside SRC (and its Hugging Face cache repo) is an error (exit 3), "
     "not a warning"},
};

#define MAX_DEVICES 64

/* --shard "I/N": decimal, 0 <= I < N <= NVF_CONVERT_MAX_PARTS. @return 0, or -1 when not. */
static int parse_shard(int *index, int *count, const char *s) {
    char *end;
    long v[2];
    for (int k = 0; k < 2; k++) {
        if (*s < '0' || *s > '9')
            return -1;
        v[k] = strtol(s, &end, 10);
        if (end - s > 6 || *end != (k == 0 ? '/' : '\0'))
            return -1;
        s = end + 1;
    }
    if (v[1] < 1 || v[1] > NVF_CONVERT_MAX_PARTS || v[0] >= v[1])
        return -1;
    *index = (int)v[0];
    *count = (int)v[1];
    return 0;
}

/* --devices "0,1" | "cuda:0,cuda:1" | "cpu,cpu": the whole list is checked first, then each
 * entry resolved like --device (an absent GPU is exit 4). */
static int parse_devices(nvf_device *out, size_t *n, const char *list) {
    char spec[MAX_DEVICES][32];
    size_t k = 0;
    for (const char *s = list;; k++) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || len >= sizeof spec[0] - 5 || k == MAX_DEVICES)
            return nvf_error_set(NVF_E_INVALID,
                                 "--devices: bad list '%s' (expected up to %d entries like 0,1 or "
                                 "cpu,cpu)",
                                 list, MAX_DEVICES);
        snprintf(spec[k], sizeof spec[k], "%s%.*s", s[0] >= '0' && s[0] <= '9' ? "cuda:" : "",
                 (int)len, s);
        if (strcmp(spec[k], "auto") == 0)
            return nvf_error_set(NVF_E_INVALID, "--devices: name each device, not 'auto'");
        if (!e)
            break;
        s = e + 1;
    }
    for (*n = 0; *n <= k; (*n)++) {
        int rc = nvf_device_select(&out[*n], spec[*n]);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

static const cli_spec k_spec = {
    .name = "convert",
    .usage = "SRC DST [options]",
    .summary = "Convert a whole checkpoint directory to an NVFP4 checkpoint directory.",
    .details =
        "Reads BF16/FP16/F32, FP8-block (incl. ue8m0 scales) and FP8 per-tensor checkpoints and\n"
        "writes ModelOpt NVFP4: each linear in scope (default: routed experts) becomes weight,\n"
        "weight_scale, weight_scale_2 and input_scale; fused 3-D experts are split per expert;\n"
        "an expert's gate and up projections share one global scale. Other tensors keep their\n"
        "values (FP8 ones become BF16 unless --keep-source-precision). Writes shards, the\n"
        "index, config.json, hf_quant_config.json, copies the other files of SRC, and\n"
        "nvfp4-manifest.json last. Streaming with bounded memory. A single shard file takes\n"
        "config.json and the side files from its directory (none there: exit 2).\n"
        "--target prepared-w4a16|prepared-w4a4 writes per MoE layer P.experts.w13_weight (up/gate\n"
        "rows interleaved in groups of 64), w13_weight_scale (swizzled, --scale-layout),\n"
        "w13_alpha, w2_weight, w2_weight_scale, w2_alpha (W4A4: w13_input_scale,\n"
        "fc2_input_scale), dense linears as weight, weight_scale (swizzled), alpha; no\n"
        "hf_quant_config.json. --ep N splits the experts over N rank directories, each a\n"
        "checkpoint of its own, under one manifest. I not a multiple of 64, or E not divisible\n"
        "by N: exit 2 before anything is written.\n"
        "An NVFP4 source (ModelOpt, compressed-tensors) to a prepared target is laid out from\n"
        "its stored bytes, not re-quantized; an expert whose gate and up weight_scale_2 differ\n"
        "has the smaller-scaled one re-quantized onto the shared scale and reported (manifest\n"
        "target.requantized_experts), or, with --strict, is exit 3 before anything is written.\n"
        "DST is locked while a conversion runs (DST/.nvfp4-convert.lock, removed at the end):\n"
        "a second conversion into it stops with exit 1. With --resume or --force, DST may hold\n"
        "only files the conversion writes (anything else: exit 2).\n"
        "Progress counts source tensor bytes read (or reused) and their rate, like the summary's\n"
        "GB/s. SIGINT/SIGTERM stop cleanly (exit 5), keeping the finished shards; --resume\n"
        "continues from them (hashed again), and finds a complete DST complete (nothing is\n"
        "rewritten).\n"
        "Links in SRC are followed; one pointing outside SRC (and outside the Hugging Face cache\n"
        "repository holding SRC) is named in a warning, or is an error with --no-follow-outside\n"
        "(exit 3, before DST is touched).\n"
        "--shard I/N (0 <= I < N) converts the I-th of N parts of the output shards (contiguous,\n"
        "balanced by bytes; the same split whatever the machine) and writes its part record\n"
        "DST/.nvfp4-parts/I-of-N.json, but no index, config, side file or manifest: run all N\n"
        "(side by side, on machines sharing DST), then `nvfp4tool merge DST`. Each part locks\n"
        "and journals on its own (.nvfp4-parts/I-of-N.lock, .progress.json); --resume per part.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 2,
    .max_pos = 2,
    .common = &g_common,
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct progress_state {
    int tty;
    double t0, last;
} progress_state;

static void on_progress(const nvf_convert_progress *p, int final, void *user) {
    progress_state *ps = user;
    double t = now_s(), el = t - ps->t0;
    if (!final && t - ps->last < (ps->tty ? 0.2 : 5.0))
        return;
    ps->last = t;
    double rate = el > 0 ? (double)p->bytes_done / el : 0.0;
    double eta = rate > 0 ? (double)(p->bytes_total - p->bytes_done) / rate : 0.0;
    double frac = p->bytes_total ? (double)p->bytes_done / (double)p->bytes_total : 1.0;
    if (ps->tty) {
        char bar[31];
        int fill = (int)(frac * 30.0);
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '#' : ' ';
        bar[30] = '\0';
        fprintf(stderr,
                "\r[%s] %3.0f%% %.2f/%.2f GB in  %llu/%llu tensors  %.0f MB/s in  ETA %d:%02d  %s",
                bar, frac * 100.0, (double)p->bytes_done / 1e9, (double)p->bytes_total / 1e9,
                (unsigned long long)p->tensors_done, (unsigned long long)p->tensors_total,
                rate / 1e6, (int)(eta / 60), (int)eta % 60, final ? "\n" : "");
    } else if (!final) {
        nvf_log(NVF_LOG_INFO,
                "progress: %.1f%% %.2f/%.2f GB in, %llu/%llu tensors, shard %llu/%llu, %.0f MB/s "
                "in, ETA %.0f s",
                frac * 100.0, (double)p->bytes_done / 1e9, (double)p->bytes_total / 1e9,
                (unsigned long long)p->tensors_done, (unsigned long long)p->tensors_total,
                (unsigned long long)p->shards_done, (unsigned long long)p->shards_total, rate / 1e6,
                eta);
    }
}

static int build_recipe(nvf_recipe *r) {
    int rc = nvf_recipe_init(r);
    if (rc == 0 && g_common.recipe)
        rc = nvf_recipe_load(r, g_common.recipe);
    const struct {
        const char *flag, *value;
    } ov[] = {{"method", g_method},
              {"error", g_error},
              {"error-domain", g_domain},
              {"e4m3-max", g_e4m3_max},
              {"arithmetic", g_arith},
              {"target", g_target},
              {"max-shard-size", g_max_shard},
              {"scale-layout", g_scale_layout},
              {"ep", g_ep}};
    for (size_t i = 0; rc == 0 && i < sizeof ov / sizeof ov[0]; i++)
        if (ov[i].value)
            rc = nvf_recipe_set(r, ov[i].flag, ov[i].value);
    if (rc == 0 && g_include.n)
        rc = nvf_recipe_set_globs(r, 0, g_include.items, g_include.n);
    if (rc == 0 && g_exclude.n)
        rc = nvf_recipe_set_globs(r, 1, g_exclude.items, g_exclude.n);
    if (rc == 0)
        rc = nvf_recipe_check(r);
    return rc;
}

/* @return EXIT_OK, or EXIT_RUNTIME when out of memory for the --json document. */
static int print_summary(const nvf_convert_options *o, const nvf_convert_summary *s, double secs) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss = (double)ru.ru_maxrss * 1024.0; /* kilobytes on Linux */
    double gbs = secs > 0 ? (double)s->bytes_in / secs / 1e9 : 0.0;
    if (!g_common.json) {
        printf("%s -> %s: %llu tensors quantized (%llu linears), %llu kept, %llu dequantized to "
               "BF16, %llu dropped; %llu shard%s (%llu reused), %.3f GB in, %.3f GB out in %.2f s "
               "(%.3f GB/s), peak RSS %.0f MB\n",
               o->src, o->dst, (unsigned long long)s->tensors_quantized,
               (unsigned long long)s->linears_quantized, (unsigned long long)s->tensors_kept,
               (unsigned long long)s->tensors_dequantized, (unsigned long long)s->tensors_dropped,
               (unsigned long long)s->shards, s->shards == 1 ? "" : "s",
               (unsigned long long)s->shards_reused, (double)s->bytes_in / 1e9,
               (double)s->bytes_out / 1e9, secs, gbs, rss / 1e6);
        return EXIT_OK;
    }
    char *text = nvf_convert_summary_to_json(s);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!j) {
        fprintf(stderr, "nvfp4tool convert: error: out of memory writing the summary\n");
        return EXIT_RUNTIME;
    }
    cJSON_AddStringToObject(j, "source", o->src);
    cJSON_AddStringToObject(j, "destination", o->dst);
    cJSON_AddStringToObject(j, "device", o->device.kind == NVF_DEVICE_CUDA ? "cuda" : "cpu");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cJSON_AddNumberToObject(j, "threads", o->threads > 0 ? o->threads : (cores > 0 ? cores : 1));
    cJSON_AddNumberToObject(j, "shards_reused", (double)s->shards_reused);
    cJSON_AddNumberToObject(j, "devices", o->n_devices > 1 ? (double)o->n_devices : 1.0);
    if (o->shard_count > 0) {
        cJSON_AddNumberToObject(j, "part", o->shard_index);
        cJSON_AddNumberToObject(j, "parts", o->shard_count);
    }
    cJSON_AddNumberToObject(j, "seconds", secs);
    cJSON_AddNumberToObject(j, "gb_per_s", gbs);
    cJSON_AddNumberToObject(j, "peak_rss_bytes", rss);
    char *prof = nvf_convert_profile_to_json();
    cJSON *pj = prof ? cJSON_Parse(prof) : NULL;
    free(prof);
    if (!pj || !cJSON_AddItemToObject(j, "profile", pj)) {
        cJSON_Delete(pj);
        cJSON_Delete(j);
        fprintf(stderr, "nvfp4tool convert: error: out of memory writing the summary\n");
        return EXIT_RUNTIME;
    }
    int rc = cli_print_json(k_spec.name, j);
    cJSON_Delete(j);
    return rc;
}

int cmd_convert(int argc, char **argv) {
    const char *pos[2];
    int np = 0;
    int rc = cli_parse(&k_spec, argc, argv, pos, &np);
    if (rc != EXIT_OK) {
        cli_free_lists(&k_spec);
        return rc == CLI_HELP_SHOWN ? EXIT_OK : rc;
    }
    nvf_recipe r;
    nvf_convert_options o;
    nvf_convert_summary sum;
    uint64_t host = (uint64_t)8 << 30;
    int st = build_recipe(&r);
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    if (g_max_host && cli_parse_size(&host, g_max_host) != 0) {
        rc = cli_usage_error(&k_spec, "--max-host-memory: cannot read '%s' as a size", g_max_host);
        goto done;
    }
    int shard_index = 0, shard_count = 0;
    if (g_shard && parse_shard(&shard_index, &shard_count, g_shard) != 0) {
        rc =
            cli_usage_error(&k_spec, "--shard: bad value '%s' (expected I/N with 0 <= I < N <= %d)",
                            g_shard, NVF_CONVERT_MAX_PARTS);
        goto done;
    }
    nvf_convert_options_init(&o, pos[0], pos[1], &r);
    o.shard_index = shard_index;
    o.shard_count = shard_count;
    o.keep_source_precision = g_keep_source;
    o.input_amax_path = g_input_amax;
    o.resume = g_resume;
    o.force = g_force;
    o.no_follow_outside = g_no_follow;
    o.threads = (int)g_common.threads;
    o.max_host_memory = host;
    o.allow_nonfinite = g_allow_nonfinite;
    o.allow_empty = g_allow_empty;
    o.strict = g_strict;
    nvf_device devices[MAX_DEVICES];
    st = g_devices ? parse_devices(devices, &o.n_devices, g_devices)
                   : nvf_device_select(&o.device, g_common.device);
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    if (g_devices) {
        o.devices = devices;
        o.device = devices[0];
    }
    progress_state ps = {isatty(STDERR_FILENO) && !g_common.quiet, now_s(), now_s()};
    o.progress = on_progress;
    o.progress_user = &ps;
    o.stop = cli_catch_stop_signals();
    double t0 = now_s();
    st = nvf_convert_run(&sum, &o);
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    const char *prof = getenv("NVFP4_CONVERT_PROFILE");
    if (prof && strcmp(prof, "0") != 0 && *prof)
        nvf_convert_profile_print(stderr);
    rc = print_summary(&o, &sum, now_s() - t0);
done:
    nvf_recipe_free(&r);
    cli_free_lists(&k_spec);
    return rc;
}
