/*
 * nvfp4tool moe: not built yet. It takes the options of its usage line (SPEC section 2) and
 * checks them, so scripts written for it fail today only on "not implemented yet" (exit 1).
 */
#include "cli.h"

#include <string.h>

static cli_common g_common;
static const char *g_input, *g_output, *g_precision;
static long g_layer = -1;
static int g_per_token;

static const cli_opt k_opts[] = {
    {"layer", "N", CLI_INT, &g_layer, "the MoE layer (model.layers.N) to run (required)"},
    {"input", "X.safetensors", CLI_STRING, &g_input, "activations x [T, H] (required)"},
    {"output", "Y.safetensors", CLI_STRING, &g_output, "where the block's output goes (required)"},
    {"precision", "P", CLI_STRING, &g_precision, "bf16 | w4a16 | w4a4 (default w4a16)"},
    {"per-token-activations", NULL, CLI_FLAG, &g_per_token,
     "W4A4: per-token activation global scales instead of input_scale"},
};

static const cli_spec k_spec = {
    .name = "moe",
    .usage = "CKPT --layer N --input X.safetensors --output Y.safetensors [--precision P] "
             "[options]",
    .summary =
        "Run one MoE block (router + routed experts + shared experts) on activations x [T, H].",
    .details = "Not implemented yet: the options are checked, then it exits 1.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_moe(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    if (g_layer < 0)
        return cli_usage_error(&k_spec, "--layer N (N >= 0) is required");
    if (!g_input || !g_output)
        return cli_usage_error(&k_spec, "--input and --output are required");
    if (g_precision && strcmp(g_precision, "bf16") != 0 && strcmp(g_precision, "w4a16") != 0 &&
        strcmp(g_precision, "w4a4") != 0)
        return cli_usage_error(&k_spec, "--precision takes bf16, w4a16 or w4a4, got '%s'",
                               g_precision);
    if (g_per_token && (!g_precision || strcmp(g_precision, "w4a4") != 0))
        return cli_usage_error(&k_spec, "--per-token-activations needs --precision w4a4");
    rc = cli_check_recipe(&k_spec, NULL, NULL, 0);
    return rc != EXIT_OK ? rc : cli_not_implemented(&k_spec);
}
