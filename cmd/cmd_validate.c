/*
 * nvfp4tool validate: not built yet. It takes the options of its usage line (SPEC section 8)
 * and checks them, the recipe included (--deep runs verify with it), so scripts written for it
 * fail today only on "not implemented yet" (exit 1).
 */
#include "cli.h"

static cli_common g_common;
static int g_deep, g_require_manifest;

static const cli_opt k_opts[] = {
    {"deep", NULL, CLI_FLAG, &g_deep, "also run verify on every MoE layer"},
    {"require-manifest", NULL, CLI_FLAG, &g_require_manifest,
     "a missing nvfp4-manifest.json is a finding, not a warning"},
};

static const cli_spec k_spec = {
    .name = "validate",
    .usage = "CKPT [--deep] [--require-manifest] [options]",
    .summary = "CI gate: structure, loader compatibility, hashes against the manifest, finiteness.",
    .details = "Not implemented yet: the options are checked, then it exits 1.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_validate(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    rc = cli_check_recipe(&k_spec, NULL, NULL, 0);
    return rc != EXIT_OK ? rc : cli_not_implemented(&k_spec);
}
