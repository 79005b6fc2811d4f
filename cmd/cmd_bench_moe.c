/*
 * nvfp4tool bench moe (SPEC section 9): the MoE block of the backend (nvf_backend_bench_moe) on
 * a synthetic layer of a model's expert shape, per token count: median ms, TFLOP/s of the
 * routed rows, GB/s of the NVFP4 weight bytes of the experts the tokens reach, that rate as a %
 * of the device copy bandwidth measured in the same run, and, with --baseline, the BF16
 * torch._grouped_mm time that bench/moe_baseline.py measured on the same shape and token count
 * and the speedup over it.
 */
#include "bench_moe.h"

#include "nvfp4/fileio.h"
#include "nvfp4/moe.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct moe_shape {
    const char *name;
    int64_t hidden, inter, experts, top_k;
    long ep_default;
    nvf_moe_router router; /* the model's (n_experts and top_k set by the bench) */
    int biased;            /* the router takes a correction bias (DeepSeek-V3's) */
} moe_shape;

static const moe_shape k_shapes[] = {
    {"deepseek-v3", 7168, 2048, 256, 8, 8, {NVF_MOE_ROUTE_DEEPSEEK_V3, 1, 0, 0, 8, 4, 2.5f}, 1},
    {"qwen3-30b-a3b", 2048, 768, 128, 8, 1, {NVF_MOE_ROUTE_SOFTMAX_TOPK, 1, 0, 0, 1, 1, 1.0f}, 0},
    {"gpt-oss-120b", 2880, 2880, 128, 4, 1, {NVF_MOE_ROUTE_TOPK_SOFTMAX, 0, 0, 0, 1, 1, 1.0f}, 0},
};

#define MAX_TOKENS 32

/* "1,2,4" into out[]; the default 1, 2, 4, ..., 4096. @return the count, or -1. */
static int parse_tokens(int64_t *out, const char *s) {
    if (!s) {
        int n = 0;
        for (int64_t t = 1; t <= 4096; t *= 2)
            out[n++] = t;
        return n;
    }
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || v > 65536 || n == MAX_TOKENS || (*end && *end != ','))
            return -1;
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* --router-bias: R in [0, 1] (NULL: 0). @return 0, or -1. */
static int parse_router_bias(float *out, const char *s) {
    *out = 0.0f;
    if (!s)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= 0.0 && v <= 1.0))
        return -1;
    *out = (float)v;
    return 0;
}

/* The baseline's ms for `tokens` (-1: none): {"shape": NAME, "results": [{"tokens", "ms"}]}. */
static double baseline_ms(const cJSON *base, int64_t tokens) {
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(base, "results")) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "tokens");
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "ms");
        if (cJSON_IsNumber(t) && cJSON_IsNumber(ms) && (int64_t)t->valuedouble == tokens)
            return ms->valuedouble;
    }
    return -1;
}

#define BASELINE_MAX_BYTES ((size_t)16 << 20) /* a few KB per shape in practice */

/* The baseline's JSON for shape `sh`, `ep` and router bias `bias` ("router_bias"; a file
 * without it is from a script that drew DeepSeek-V3's bias in (-0.1, 0.1)). */
static int load_baseline(cJSON **out, const char *path, const moe_shape *sh, int ep, float bias) {
    const char *shape = sh->name;
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    int rc = nvf_file_read_all(&buf, &len, path, BASELINE_MAX_BYTES);
    if (rc != NVF_OK)
        return rc;
    cJSON *js = cJSON_Parse(buf);
    free(buf);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(js, "shape");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(js, "ep");
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(js, "router_bias");
    if (!js || !cJSON_IsString(s) || strcmp(s->valuestring, shape) != 0 ||
        (cJSON_IsNumber(e) && (int)e->valuedouble != ep)) {
        cJSON_Delete(js);
        return nvf_error_set(NVF_E_FORMAT,
                             "baseline '%s': not a bench/moe_baseline.py result of shape %s, "
                             "ep %d",
                             path, shape, ep);
    }
    double theirs = cJSON_IsNumber(rb) ? rb->valuedouble : sh->biased ? 0.1 : 0.0;
    if ((float)theirs != bias) {
        cJSON_Delete(js);
        return nvf_error_set(NVF_E_FORMAT,
                             "baseline '%s' was routed with router bias %g, this bench with %g: "
                             "run bench/moe_baseline.py with --router-bias %g",
                             path, theirs, (double)bias, (double)bias);
    }
    *out = js;
    return NVF_OK;
}

int bench_moe(nvf_backend *b, const nvf_device *dev, const bench_moe_args *a,
              const cli_spec *spec) {
    if (dev->kind != NVF_DEVICE_CUDA)
        return cli_usage_error(spec, "bench moe times the GPU kernels: give --device cuda[:N]");
    const moe_shape *sh = NULL;
    const char *name = a->shape ? a->shape : "deepseek-v3";
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
        if (strcmp(k_shapes[i].name, name) == 0)
            sh = &k_shapes[i];
    if (!sh)
        return cli_usage_error(
            spec, "--shape %s: expected deepseek-v3, qwen3-30b-a3b or gpt-oss-120b", name);
    int64_t tokens[MAX_TOKENS];
    int nt = parse_tokens(tokens, a->tokens);
    if (nt <= 0)
        return cli_usage_error(spec, "--tokens %s: expected up to %d counts 1..65536, commas",
                               a->tokens, MAX_TOKENS);
    long ep = a->ep ? a->ep : sh->ep_default;
    if (ep < 1 || sh->experts % ep != 0)
        return cli_usage_error(spec, "--ep %ld does not divide the %lld experts of %s", ep,
                               (long long)sh->experts, sh->name);
    const char *prec = a->precision ? a->precision : "all";
    int do16 = strcmp(prec, "w4a16") == 0 || strcmp(prec, "all") == 0;
    int do4 = strcmp(prec, "w4a4") == 0 || strcmp(prec, "all") == 0;
    if (!do16 && !do4)
        return cli_usage_error(spec, "--precision %s: expected w4a16, w4a4 or all", prec);
    float bias;
    if (parse_router_bias(&bias, a->router_bias) < 0)
        return cli_usage_error(spec, "--router-bias %s: expected a number in [0, 1]",
                               a->router_bias);
    if (bias > 0 && !sh->biased)
        return cli_usage_error(spec, "--router-bias %s: the %s router takes no correction bias",
                               a->router_bias, sh->name);
    cJSON *base = NULL;
    if (a->baseline) {
        int lb = load_baseline(&base, a->baseline, sh, (int)ep, bias);
        if (lb < 0)
            return cli_fail(spec->name, lb);
    }
    const volatile sig_atomic_t *stop = cli_catch_stop_signals();
    nvf_moe_bench_shape s = {sh->hidden, sh->inter,  sh->experts, sh->experts / ep,
                             sh->top_k,  sh->router, bias,        a->eager};
    nvf_moe_bench_result r16[MAX_TOKENS], r4[MAX_TOKENS];
    int rc = EXIT_OK, st = 0;
    if (do16)
        st = nvf_backend_bench_moe(b, r16, &s, tokens, (size_t)nt, 0, (int)a->runs, stop);
    if (st == 0 && do4)
        st = nvf_backend_bench_moe(b, r4, &s, tokens, (size_t)nt, 1, (int)a->runs, stop);
    if (st < 0) {
        cJSON_Delete(base);
        return cli_fail(spec->name, st);
    }
    double copy = do16 ? r16[0].copy_gbps : r4[0].copy_gbps;
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "bench", "moe");
    cJSON_AddStringToObject(js, "device", dev->name);
    cJSON_AddStringToObject(js, "shape", sh->name);
    cJSON_AddNumberToObject(js, "hidden", (double)sh->hidden);
    cJSON_AddNumberToObject(js, "intermediate", (double)sh->inter);
    cJSON_AddNumberToObject(js, "experts", (double)sh->experts);
    cJSON_AddNumberToObject(js, "local_experts", (double)s.n_local);
    cJSON_AddNumberToObject(js, "top_k", (double)sh->top_k);
    cJSON_AddStringToObject(js, "routing", nvf_moe_route_name((nvf_moe_route)sh->router.kind));
    cJSON_AddNumberToObject(js, "router_bias", (double)bias);
    cJSON_AddBoolToObject(js, "graph", !a->eager);
    cJSON_AddNumberToObject(js, "ep", (double)ep);
    cJSON_AddNumberToObject(js, "runs", (double)a->runs);
    cJSON_AddNumberToObject(js, "copy_gb_per_s", copy);
    cJSON *arr = cJSON_AddArrayToObject(js, "results");
    if (!a->json) {
        printf("bench moe: %s (H %lld, I %lld, %lld of %lld experts, top-%lld, %s routing, "
               "router bias %g), device %s, median of %ld runs (CUDA events, %s)\n",
               sh->name, (long long)sh->hidden, (long long)sh->inter, (long long)s.n_local,
               (long long)sh->experts, (long long)sh->top_k,
               nvf_moe_route_name((nvf_moe_route)sh->router.kind), (double)bias, dev->name, a->runs,
               a->eager ? "kernels launched one by one" : "a CUDA graph replayed");
        printf("device-to-device copy: %.1f GB/s (read + write)\n", copy);
        printf("%7s %-6s %9s %9s %10s %7s %8s %9s %7s\n", "tokens", "prec", "ms", "TFLOP/s",
               "weight GB/s", "% HBM", "experts", "BF16 ms", "x BF16");
    }
    for (int p = 0; p < 2; p++) {
        if ((p == 0 && !do16) || (p == 1 && !do4))
            continue;
        const nvf_moe_bench_result *r = p == 0 ? r16 : r4;
        for (int i = 0; i < nt; i++) {
            double ms = r[i].ms, tflops = r[i].flops / (ms * 1e-3) / 1e12;
            double gbs = r[i].weight_bytes / (ms * 1e-3) / 1e9, pct = 100.0 * gbs / copy;
            double bms = base ? baseline_ms(base, tokens[i]) : -1;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "tokens", (double)tokens[i]);
            cJSON_AddStringToObject(o, "precision", p == 0 ? "w4a16" : "w4a4");
            cJSON_AddNumberToObject(o, "ms", ms);
            cJSON_AddNumberToObject(o, "tflops", tflops);
            cJSON_AddNumberToObject(o, "weight_bytes", r[i].weight_bytes);
            cJSON_AddNumberToObject(o, "weight_gb_per_s", gbs);
            cJSON_AddNumberToObject(o, "pct_of_copy", pct);
            cJSON_AddNumberToObject(o, "active_experts", r[i].active_experts);
            if (bms > 0) {
                cJSON_AddNumberToObject(o, "bf16_ms", bms);
                cJSON_AddNumberToObject(o, "speedup_vs_bf16", bms / ms);
            }
            cJSON_AddItemToArray(arr, o);
            if (a->json)
                continue;
            printf("%7lld %-6s %9.4f %9.1f %10.0f %6.1f%% %8.1f", (long long)tokens[i],
                   p == 0 ? "w4a16" : "w4a4", ms, tflops, gbs, pct, r[i].active_experts);
            if (bms > 0)
                printf(" %9.4f %6.2fx\n", bms, bms / ms);
            else
                printf(" %9s %7s\n", "-", "-");
        }
    }
    if (a->json)
        rc = cli_print_json(spec->name, js);
    cJSON_Delete(js);
    cJSON_Delete(base);
    return rc;
}
