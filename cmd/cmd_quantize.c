/*
 * nvfp4tool quantize IN.safetensors OUT.safetensors: options, printing and exit codes. The
 * conversion itself is nvf_quantize_file (nvfp4/convert.h): every floating 2-D tensor (or
 * those named by --tensor) becomes NVFP4 (SPEC section 2).
 */
#include "cli.h"

#include "nvfp4/convert.h"
#include "nvfp4/device.h"
#include "nvfp4/quant.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static cli_common g_common;
static cli_list g_tensors;
static const char *g_method, *g_error, *g_domain, *g_e4m3_max, *g_arith, *g_block_size;
static int g_allow_nonfinite, g_print_recipe, g_force;
static int64_t g_block[2]; /* --weight-block-size; 0: the default */

static const cli_opt k_opts[] = {
    {"tensor", "NAME", CLI_LIST, &g_tensors, "quantize only this tensor"},
    {"method", "rtn|4over6", CLI_STRING, &g_method, "override quantization.method"},
    {"error", "mse|mae", CLI_STRING, &g_error, "override quantization.error (4over6)"},
    {"error-domain", "DOMAIN", CLI_STRING, &g_domain,
     "override quantization.error_domain: scaled|original"},
    {"e4m3-max", "256|448", CLI_STRING, &g_e4m3_max, "override quantization.e4m3_max"},
    {"arithmetic", "flashinfer|modelopt", CLI_STRING, &g_arith,
     "override quantization.arithmetic (modelopt: ModelOpt's own export bytes, rtn only)"},
    {"weight-block-size", "R,C", CLI_STRING, &g_block_size,
     "FP8-block sources: rows,cols per scale (default 128,128)"},
    {"allow-nonfinite", NULL, CLI_FLAG, &g_allow_nonfinite,
     "pass NaN/Inf through instead of failing"},
    {"force", NULL, CLI_FLAG, &g_force, "replace OUT when it exists (never IN itself)"},
    {"print-recipe", NULL, CLI_FLAG, &g_print_recipe,
     "print the effective recipe as JSON and exit (IN/OUT not needed)"},
};

static const cli_spec k_spec = {
    .name = "quantize",
    .usage = "IN.safetensors OUT.safetensors [options]",
    .summary =
        "Quantize every floating 2-D tensor (or those named by --tensor) of one file to NVFP4.",
    .details =
        "A tensor X [r, c] (F32, F16, BF16, F8_E4M3, F8_E5M2; c a multiple of 16) becomes\n"
        "X (U8 [r, c/2]), X_scale (F8_E4M3 [r, c/16], linear) and X_scale_2 (F32, shape []).\n"
        "F8_E4M3 X with X_scale_inv (FP8 block scales; --weight-block-size) or a per-tensor\n"
        "weight_scale is dequantized to BF16 first and that scale dropped; a scale that does\n"
        "not fit its tensor is bad input (exit 3). Gate/up (w1/w3) and q/k/v projections of\n"
        "one module share one global scale. Other tensors (scales, empty tensors, ...) are\n"
        "copied unchanged. The recipe (--recipe) supplies the quantization keys; each flag\n"
        "below overrides one.\n"
        "OUT is written as OUT.tmp and renamed when complete. OUT may not be IN (also through a\n"
        "link) and may not exist unless --force. SIGINT/SIGTERM stop it (exit 5, no OUT.tmp\n"
        "left, OUT untouched).\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 0,
    .max_pos = 2,
    .common = &g_common,
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int apply_overrides(nvf_recipe *r) {
    const struct {
        const char *flag, *value;
    } ov[] = {{"method", g_method},
              {"error", g_error},
              {"error-domain", g_domain},
              {"e4m3-max", g_e4m3_max},
              {"arithmetic", g_arith}};
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        if (ov[i].value) {
            int rc = nvf_recipe_set(r, ov[i].flag, ov[i].value);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

/* --weight-block-size R,C into g_block (left 0, the default, without the flag). */
static int parse_block_size(void) {
    if (!g_block_size)
        return 0;
    long long a, b;
    char tail;
    if (sscanf(g_block_size, "%lld,%lld%c", &a, &b, &tail) != 2 || a <= 0 || b <= 0 ||
        a > (1 << 20) || b > (1 << 20))
        return nvf_error_set(NVF_E_INVALID, "--weight-block-size takes R,C (positive), got '%s'",
                             g_block_size);
    g_block[0] = a;
    g_block[1] = b;
    return 0;
}

static cJSON *summary_json(const nvf_quantize_file_options *o, const nvf_quantize_file_summary *s,
                           double secs) {
    cJSON *js = cJSON_CreateObject();
    char devname[32] = "cpu";
    if (o->device.kind == NVF_DEVICE_CUDA)
        snprintf(devname, sizeof devname, "cuda:%d", o->device.index);
    cJSON_AddStringToObject(js, "input", o->in);
    cJSON_AddStringToObject(js, "output", o->out);
    cJSON_AddStringToObject(js, "device", devname);
    cJSON_AddNumberToObject(js, "threads", o->threads);
    cJSON_AddNumberToObject(js, "tensors_quantized", (double)s->tensors_quantized);
    cJSON_AddNumberToObject(js, "tensors_kept", (double)s->tensors_kept);
    cJSON_AddNumberToObject(js, "tensors_dropped", (double)s->tensors_dropped);
    cJSON_AddNumberToObject(js, "bytes_quantized", (double)s->bytes_quantized);
    cJSON_AddNumberToObject(js, "bytes_written", (double)s->bytes_written);
    cJSON_AddNumberToObject(js, "seconds", secs);
    cJSON_AddNumberToObject(js, "gb_per_s",
                            secs > 0 ? (double)s->bytes_quantized / secs / 1e9 : 0.0);
    char *rj = nvf_recipe_to_json(o->recipe);
    if (rj) {
        cJSON_AddItemToObject(js, "recipe", cJSON_Parse(rj));
        free(rj);
    }
    cJSON *arr = cJSON_AddArrayToObject(js, "tensors");
    for (size_t i = 0; i < s->n_tensors; i++) {
        const nvf_quantize_file_tensor *t = &s->tensors[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", t->name);
        cJSON_AddStringToObject(e, "dtype", nvf_dtype_name(t->dtype));
        cJSON_AddStringToObject(e, "action",
                                t->action == NVF_QUANTIZE_QUANT  ? "quantized"
                                : t->action == NVF_QUANTIZE_KEEP ? "kept"
                                                                 : "dropped");
        if (t->action == NVF_QUANTIZE_QUANT) {
            cJSON_AddStringToObject(e, "source", t->source);
            cJSON_AddStringToObject(e, "group", t->group);
            cJSON_AddNumberToObject(e, "amax", t->amax);
            cJSON_AddNumberToObject(e, "global_scale", t->gs);
            cJSON_AddNumberToObject(e, "scale_2", nvf_quant_group_decode(t->gs, &o->recipe->quant));
        }
        cJSON_AddItemToArray(arr, e);
    }
    return js;
}

/* Print the summary (one JSON line with --json). */
static int print_summary(const nvf_quantize_file_options *o, const nvf_quantize_file_summary *s,
                         double secs) {
    if (!g_common.json) {
        printf("%s: quantized %llu tensors (%.3f GB), kept %llu, wrote %s (%llu bytes) in %.3f s "
               "(%.3f GB/s)\n",
               o->in, (unsigned long long)s->tensors_quantized, (double)s->bytes_quantized / 1e9,
               (unsigned long long)s->tensors_kept, o->out, (unsigned long long)s->bytes_written,
               secs, secs > 0 ? (double)s->bytes_quantized / secs / 1e9 : 0.0);
        return EXIT_OK;
    }
    cJSON *js = summary_json(o, s, secs);
    int rc = js ? cli_print_json(k_spec.name, js) : EXIT_RUNTIME;
    if (!js)
        fprintf(stderr, "nvfp4tool %s: error: out of memory writing the summary\n", k_spec.name);
    cJSON_Delete(js);
    return rc;
}

static int run(const char *in, const char *out, const nvf_recipe *r) {
    nvf_quantize_file_options o;
    nvf_quantize_file_summary s;
    nvf_quantize_file_options_init(&o, in, out, r);
    int st = nvf_device_select(&o.device, g_common.device ? g_common.device : "auto");
    if (st < 0)
        return cli_fail(k_spec.name, st);
    o.block[0] = g_block[0];
    o.block[1] = g_block[1];
    o.tensors = g_tensors.items;
    o.n_tensors = g_tensors.n;
    o.threads = (int)g_common.threads;
    o.allow_nonfinite = g_allow_nonfinite;
    o.force = g_force;
    o.stop = cli_catch_stop_signals();
    double t0 = now_s();
    st = nvf_quantize_file(&s, &o);
    if (st < 0)
        return cli_fail(k_spec.name, st);
    int rc = print_summary(&o, &s, now_s() - t0);
    nvf_quantize_file_summary_free(&s);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[2];
    int np = 0;
    int rc = cli_parse(&k_spec, argc, argv, pos, &np);
    if (rc != EXIT_OK) {
        cli_free_lists(&k_spec);
        return rc == CLI_HELP_SHOWN ? EXIT_OK : rc;
    }
    nvf_recipe r;
    int st = nvf_recipe_init(&r);
    if (st == 0 && g_common.recipe)
        st = nvf_recipe_load(&r, g_common.recipe);
    if (st == 0)
        st = apply_overrides(&r);
    if (st == 0)
        st = nvf_recipe_check(&r);
    if (st == 0)
        st = parse_block_size();
    if (st < 0) {
        rc = cli_fail(k_spec.name, st);
        goto done;
    }
    if (g_print_recipe) {
        char *js = nvf_recipe_to_json(&r);
        if (!js) {
            rc = cli_fail(k_spec.name, NVF_E_NOMEM);
            goto done;
        }
        printf("%s\n", js);
        free(js);
        rc = EXIT_OK;
        goto done;
    }
    if (np != 2) {
        rc = cli_usage_error(&k_spec, "expected IN and OUT, got %d argument%s", np,
                             np == 1 ? "" : "s");
        goto done;
    }
    rc = run(pos[0], pos[1], &r);
done:
    nvf_recipe_free(&r);
    cli_free_lists(&k_spec);
    return rc;
}
