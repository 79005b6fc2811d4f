/*
 * nvfp4tool validate (SPEC section 8): the CI gate of a checkpoint. Options, the findings table
 * and the JSON only; the checks are nvf_validate_run() (lib/validate).
 */
#include "cli.h"

#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"
#include "nvfp4/validate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cli_common g_common;
static int g_deep, g_require_manifest;

static const cli_opt k_opts[] = {
    {"deep", NULL, CLI_FLAG, &g_deep,
     "also run verify (structure, finiteness, prepared layout; no reference) on every MoE "
     "layer; its findings as verify.<id>"},
    {"require-manifest", NULL, CLI_FLAG, &g_require_manifest,
     "a missing nvfp4-manifest.json is an error finding (manifest.absent), not a warning"},
};

static const cli_spec k_spec = {
    .name = "validate",
    .usage = "CKPT [--deep] [--require-manifest] [options]",
    .summary = "CI gate: structure, loader compatibility, hashes against the manifest, finiteness.",
    .details =
        "CKPT is a checkpoint directory (ModelOpt NVFP4, compressed-tensors NVFP4, FP8-block,\n"
        "BF16, prepared with or without rank-0000r-of-0000N/ directories; ours or a third\n"
        "party's) or one .safetensors file. Every file is read once (--threads files at once):\n"
        "safetensors rules, SHA-256 and tensor CRC-32s against nvfp4-manifest.json, NaN/Inf in\n"
        "floating tensors, scales; then config.json / hf_quant_config.json, the index against\n"
        "the shards, the ModelOpt quantization config, every NVFP4 linear's four tensors,\n"
        "gate/up and q/k/v scale sharing, every expert of every MoE layer, the prepared layout\n"
        "and the expert-parallel split. Each finding has a stable id (README \"Finding ids\"),\n"
        "a severity, the file, the tensor and a message. Without nvfp4-manifest.json (a third\n"
        "party's checkpoint) everything else is checked and manifest.absent is a warning.\n"
        "Output: a table of findings and a summary line on stdout (--json: the report,\n"
        "schemas/validate.schema.json); the bytes read, seconds and GB/s on stderr.\n"
        "Exit codes: 0 no error finding (warnings alone keep 0), 3 at least one error finding,\n"
        "1 runtime error (CKPT unreadable, not a checkpoint at all), 2 usage error,\n"
        "5 interrupted (SIGINT/SIGTERM). --deep runs verify on the CPU (--device auto or cpu).\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

/* verify's options for --deep: the recipe's verify and quantization keys, W4A16, the CPU. */
static int deep_options(nvf_verify_opts *o) {
    memset(o, 0, sizeof *o);
    const char *dev = g_common.device ? g_common.device : "auto";
    if (strcmp(dev, "auto") != 0 && strcmp(dev, "cpu") != 0)
        return cli_usage_error(&k_spec,
                               "--deep runs verify on the CPU: --device takes auto or cpu, got "
                               "'%s'",
                               dev);
    nvf_recipe r;
    int st = nvf_recipe_init(&r);
    if (st == NVF_OK && g_common.recipe)
        st = nvf_recipe_load(&r, g_common.recipe);
    o->quant = r.quant;
    o->tokens = r.verify_tokens;
    o->seed = r.verify_seed;
    o->precision = NVF_MOE_PRECISION_W4A16;
    o->device = "cpu";
    nvf_recipe_free(&r);
    if (st == NVF_OK)
        return EXIT_OK;
    if (cli_exit_code(st) == EXIT_USAGE)
        return cli_usage_error(&k_spec, "%s", nvf_error_last());
    return cli_fail("validate", st);
}

static void print_table(const nvf_validate_report *r) {
    printf("validate %s: format %s, %zu file(s), %zu tensor(s), manifest %s%s\n", r->checkpoint,
           r->format, r->files, r->tensors, r->manifest ? "yes" : "no",
           r->n_ranks ? ", expert-parallel ranks" : "");
    if (r->findings.n > 0)
        printf("%-8s %-40s %-36s %s\n", "SEVERITY", "ID", "FILE", "TENSOR / MESSAGE");
    for (size_t i = 0; i < r->findings.n; i++) {
        const nvf_finding *f = &r->findings.v[i];
        printf("%-8s %-40s %-36s %s\n", f->severity, f->id, f->file[0] ? f->file : "-",
               f->tensor[0] ? f->tensor : "-");
        printf("         %s\n", f->message);
    }
    if (r->deep)
        printf("validate: %zu error(s), %zu warning(s), %zu MoE layer(s) verified: %s\n", r->errors,
               r->warnings, r->layers_verified, r->pass ? "PASS" : "FAIL");
    else
        printf("validate: %zu error(s), %zu warning(s): %s\n", r->errors, r->warnings,
               r->pass ? "PASS" : "FAIL");
}

int cmd_validate(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    if (g_common.threads > 1024)
        return cli_usage_error(&k_spec, "--threads is at most 1024, got %ld", g_common.threads);
    nvf_verify_opts vo;
    rc = deep_options(&vo);
    if (rc != EXIT_OK)
        return rc;
    nvf_validate_opts o = {(int)g_common.threads, g_require_manifest, g_deep, &vo,
                           cli_catch_stop_signals()};
    nvf_validate_report rep;
    int st = nvf_validate_run(&rep, pos[0], &o);
    if (st != NVF_OK) {
        nvf_validate_report_free(&rep);
        /* Not a checkpoint at all is a runtime error (exit 1), not a bad checkpoint. */
        return st == NVF_E_FORMAT ? (cli_fail("validate", st), EXIT_RUNTIME)
                                  : cli_fail("validate", st);
    }
    if (!g_common.quiet)
        fprintf(stderr, "validate: read %" PRIu64 " bytes in %zu file(s) in %.3f s (%.2f GB/s)\n",
                rep.bytes_read, rep.files, rep.seconds,
                rep.seconds > 0 ? (double)rep.bytes_read / rep.seconds / 1e9 : 0.0);
    rc = EXIT_OK;
    if (g_common.json) {
        char *text = NULL;
        st = nvf_validate_report_json(&text, &rep);
        if (st == NVF_OK)
            printf("%s\n", text);
        free(text);
        if (st != NVF_OK)
            rc = cli_fail("validate", st);
    } else {
        print_table(&rep);
    }
    if (rc == EXIT_OK && !rep.pass)
        rc = EXIT_INVALID;
    nvf_validate_report_free(&rep);
    return rc;
}
