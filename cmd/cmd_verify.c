/*
 * nvfp4tool verify (SPEC section 7): per MoE layer, seeded activations through the checkpoint's
 * weights, checked for structure, finiteness, the prepared layout and (with --reference) quality.
 * Options, the table and the JSON only; the checks are nvf_verify_run() (lib/verify).
 */
#include "cli.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"
#include "nvfp4/verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cli_common g_common;
static const char *g_reference, *g_input, *g_tokens, *g_seed, *g_layers, *g_precision;
static int g_per_token;

static const cli_opt k_opts[] = {
    {"reference", "SRC", CLI_STRING, &g_reference,
     "source checkpoint (BF16 or FP8): also compare with source-precision outputs, and take the "
     "layout check's linear NVFP4 values from it"},
    {"tokens", "N", CLI_STRING, &g_tokens,
     "seeded random activations per layer (verify.tokens, default 64)"},
    {"seed", "N", CLI_STRING, &g_seed, "activation seed (verify.seed, default 0)"},
    {"layers", "LIST", CLI_STRING, &g_layers, "the MoE layers to verify, e.g. \"1,3-5\" (all)"},
    {"precision", "P", CLI_STRING, &g_precision,
     "w4a16 | w4a4: the precision of the quality check (default w4a16)"},
    {"input", "X.safetensors", CLI_STRING, &g_input,
     "activations x [T, H] instead of random ones (not implemented yet)"},
    {"per-token-activations", NULL, CLI_FLAG, &g_per_token,
     "W4A4: per-token activation global scales instead of input_scale"},
};

static const cli_spec k_spec = {
    .name = "verify",
    .usage = "CKPT [--reference SRC] [--tokens N] [--seed N] [--layers LIST] [--precision P] "
             "[options]",
    .summary = "Run every MoE layer on seeded activations and check it: structure, finiteness, "
               "the prepared layout, and quality against the source.",
    .details =
        "Per MoE layer, N(0,1) activations (BF16, seeded by --seed and the layer) routed by the\n"
        "checkpoint's own router through the CPU MoE reference:\n"
        "  structure   missing experts, a router correction bias the routing needs\n"
        "              (deepseek_v3) but the checkpoint lacks, gate/up weight_scale_2 differing\n"
        "              (ModelOpt), unreadable or non-finite weights, scales, alphas;\n"
        "  finite      the layer's output has no NaN/Inf;\n"
        "  layout      (prepared checkpoints) the prepared-layout reader (method\n"
        "              cpu-prepared-reader) against the\n"
        "              linear NVFP4 values: the reference quantized with the conversion's\n"
        "              recipe (CKPT/nvfp4-manifest.json; --recipe overrides) when --reference\n"
        "              is given, else the same bytes read\n"
        "              through the layout's inverse functions (then it checks the reader, not\n"
        "              the values); W4A16; rel-L2 <= 1e-2 for the layer and every expert;\n"
        "  quality     (--reference) against the source in its own precision, routed by ITS\n"
        "              router and bias: rel-L2, cosine, max-abs, and the share of elements\n"
        "              within FlashInfer's tolerance (|d| < max(0.05, 1.5 max(std(ref), 0.01))\n"
        "              or |d|/|ref| < 0.5) >= 97%; per expert, on the tokens routed to it (or\n"
        "              the first 4 when none), rel-L2 <= 0.35, naming the expert that is wrong.\n"
        "A table on stdout (--json: the report, schemas/report.schema.json); progress per layer\n"
        "on a TTY. Exit 0 every layer passed, 3 a layer failed (the findings name layer,\n"
        "expert, check), 2 usage, 1 runtime error, 4 the asked GPU is unavailable.\n"
        "Device: cpu or auto run everything on the CPU. --device cuda[:N] runs each layer's\n"
        "routed experts on the GPU MoE kernels (a 128x4 prepared checkpoint at its own\n"
        "precision as its bytes are stored; any other NVFP4 layer through a 128x4 layout built\n"
        "from its values) and adds the check kernel_rel_l2: the kernels' output against the\n"
        "CPU reference on the same NVFP4 values, rel-L2 <= 1e-2 (SPEC 7 a); the finite, layout "
        "and\n"
        "quality checks then use the kernels' output; the per-expert checks stay on the CPU.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

static void progress(void *ctx, int64_t layer, size_t done, size_t total) {
    (void)ctx;
    if (layer < 0)
        fprintf(stderr, "\rverify: %zu/%zu layers done%20s\n", done, total, "");
    else
        fprintf(stderr, "\rverify: layer %" PRId64 " (%zu/%zu)...", layer, done + 1, total);
    fflush(stderr);
}

static void print_value(const nvf_verify_check *c, char *buf, size_t len, int threshold) {
    int has = threshold ? c->has_threshold : c->has_value;
    double v = threshold ? c->threshold : c->value;
    if (has)
        snprintf(buf, len, "%.4g", v);
    else
        snprintf(buf, len, "-");
}

static void print_table(const nvf_verify_report *r) {
    printf("verify %s%s%s: format %s, %s, %" PRId64 " tokens, seed %" PRIu64 ", method %s%s%s\n",
           r->checkpoint, r->reference ? " against " : "", r->reference ? r->reference : "",
           r->format, nvf_moe_precision_name(r->precision), r->tokens, r->seed, r->method,
           r->layout_source ? ", layout values from " : "",
           r->layout_source ? r->layout_source : "");
    printf("%-6s %-18s %-12s %-10s %-5s %s\n", "LAYER", "CHECK", "VALUE", "THRESHOLD", "PASS",
           "MESSAGE");
    for (size_t i = 0; i < r->n_layers; i++) {
        const nvf_verify_layer *l = &r->layers[i];
        for (size_t j = 0; j < l->n_checks; j++) {
            char v[32], t[32];
            print_value(&l->checks[j], v, sizeof v, 0);
            print_value(&l->checks[j], t, sizeof t, 1);
            printf("%-6" PRId64 " %-18s %-12s %-10s %-5s %s\n", l->layer, l->checks[j].id, v, t,
                   l->checks[j].pass ? "yes" : "NO", l->checks[j].message);
        }
    }
    for (size_t i = 0; i < r->findings.n; i++) {
        const nvf_verify_finding *f = &r->findings.v[i];
        printf("finding: %s [%s]: %s", f->severity, f->id, f->message);
        if (f->expert >= 0 && f->layer >= 0)
            printf(" (layer %" PRId64 ", expert %" PRId64 ")", f->layer, f->expert);
        printf("\n");
    }
    printf("verify: %zu layer(s), %zu passed, %zu failed: %s\n", r->n_layers, r->passed, r->failed,
           r->pass ? "PASS" : "FAIL");
}

/* Without --recipe: the quantization keys of the recipe the conversion used, from CKPT's
 * nvfp4-manifest.json (SPEC section 5), so that the layout check quantizes the reference as the
 * conversion did. No manifest, or none recorded: the defaults. */
static int conversion_recipe(nvf_recipe *r, const char *ckpt) {
    char path[4096];
    snprintf(path, sizeof path, "%s/nvfp4-manifest.json", ckpt);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NVF_OK;
    char *text = malloc(1 << 24);
    size_t n = text ? fread(text, 1, (1 << 24) - 1, f) : 0;
    fclose(f);
    if (!text)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    text[n] = '\0';
    cJSON *doc = cJSON_Parse(text);
    free(text);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(doc, "recipe"), "quantization");
    static const char *const keys[][2] = {
        {"method", "method"}, {"error", "error"}, {"error_domain", "error-domain"}};
    int st = NVF_OK;
    for (size_t i = 0; i < 3 && st == NVF_OK && cJSON_IsObject(q); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(q, keys[i][0]);
        if (cJSON_IsString(v))
            st = nvf_recipe_set(r, keys[i][1], v->valuestring);
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(q, "e4m3_max");
    if (st == NVF_OK && cJSON_IsNumber(e)) {
        char num[32];
        snprintf(num, sizeof num, "%d", e->valueint);
        st = nvf_recipe_set(r, "e4m3-max", num);
    }
    if (st == NVF_OK && cJSON_IsObject(q))
        nvf_log(NVF_LOG_INFO, "the reference is quantized with the recipe of %s", path);
    cJSON_Delete(doc);
    return st;
}

/* Options into `o` (the recipe's quantization and verify defaults under the flags). */
static int options(nvf_verify_opts *o, int64_t **layers, const char *ckpt) {
    memset(o, 0, sizeof *o);
    if (g_input && g_tokens)
        return cli_usage_error(&k_spec, "--input and --tokens exclude each other");
    if (g_input)
        return cli_fail("verify", nvf_error_set(NVF_E_NOTIMPL,
                                                "--input %s: verify on given activations is not "
                                                "implemented yet; use --tokens and --seed",
                                                g_input));
    if (!g_precision || strcmp(g_precision, "w4a16") == 0)
        o->precision = NVF_MOE_PRECISION_W4A16;
    else if (strcmp(g_precision, "w4a4") == 0)
        o->precision = NVF_MOE_PRECISION_W4A4;
    else
        return cli_usage_error(&k_spec, "--precision takes w4a16 or w4a4, got '%s'", g_precision);
    if (g_per_token && o->precision != NVF_MOE_PRECISION_W4A4)
        return cli_usage_error(&k_spec, "--per-token-activations needs --precision w4a4");
    const char *dev = g_common.device ? g_common.device : "auto";
    if (strncmp(dev, "cuda", 4) != 0 && strcmp(dev, "auto") != 0 && strcmp(dev, "cpu") != 0)
        return cli_usage_error(&k_spec, "--device takes auto, cpu or cuda[:N], got '%s'", dev);
    if (strcmp(dev, "auto") == 0)
        nvf_log(NVF_LOG_INFO, "device auto: the CPU (--device cuda runs the layers' routed "
                              "experts on the GPU kernels)");
    o->device = strncmp(dev, "cuda", 4) == 0 ? dev : "cpu";
    o->per_token = g_per_token;
    if (g_layers) {
        int st = nvf_verify_parse_layers(layers, &o->n_layers, g_layers);
        if (st != NVF_OK)
            return cli_usage_error(&k_spec, "%s", nvf_error_last());
        o->layers = *layers;
    }
    nvf_recipe r;
    int st = nvf_recipe_init(&r);
    if (st == NVF_OK && g_common.recipe)
        st = nvf_recipe_load(&r, g_common.recipe);
    else if (st == NVF_OK && g_reference)
        st = conversion_recipe(&r, ckpt);
    if (st == NVF_OK && g_tokens)
        st = nvf_recipe_set(&r, "tokens", g_tokens);
    if (st == NVF_OK && g_seed)
        st = nvf_recipe_set(&r, "seed", g_seed);
    o->quant = r.quant;
    o->tokens = r.verify_tokens;
    o->seed = r.verify_seed;
    nvf_recipe_free(&r);
    if (st == NVF_OK)
        return EXIT_OK;
    if (cli_exit_code(st) == EXIT_USAGE)
        return cli_usage_error(&k_spec, "%s", nvf_error_last());
    return cli_fail("verify", st);
}

int cmd_verify(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    nvf_verify_opts o;
    int64_t *layers = NULL;
    rc = options(&o, &layers, pos[0]);
    if (rc != EXIT_OK) {
        free(layers);
        return rc;
    }
    if (isatty(STDERR_FILENO) && !g_common.quiet)
        o.progress = progress;
    nvf_backend *b = NULL;
    int st = NVF_OK;
    if (strncmp(o.device, "cuda", 4) == 0) {
        nvf_device d;
        st = nvf_device_select(&d, o.device);
        if (st == NVF_OK)
            st = nvf_backend_open(&b, &d, 0);
        if (st != NVF_OK) {
            free(layers);
            return cli_fail("verify", st);
        }
        o.backend = b;
    }
    nvf_verify_report rep;
    st = nvf_verify_run(&rep, pos[0], g_reference, &o);
    nvf_backend_close(b);
    free(layers);
    if (st != NVF_OK) {
        nvf_verify_report_free(&rep);
        return cli_fail("verify", st);
    }
    if (g_common.json) {
        char *text = NULL;
        st = nvf_verify_report_json(&text, &rep);
        if (st == NVF_OK)
            printf("%s\n", text);
        free(text);
    } else {
        print_table(&rep);
    }
    int pass = rep.pass;
    nvf_verify_report_free(&rep);
    if (st != NVF_OK)
        return cli_fail("verify", st);
    return pass ? EXIT_OK : EXIT_INVALID;
}
