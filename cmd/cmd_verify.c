/*
 * nvfp4tool verify: not built yet. It takes the options of its usage line (SPEC section 7) and
 * checks them, the recipe included (verify.tokens and verify.seed are its keys), so scripts
 * written for it fail today only on "not implemented yet" (exit 1), never on a usage error.
 */
#include "cli.h"

static cli_common g_common;
static const char *g_reference, *g_input, *g_tokens, *g_seed;
static int g_per_token;

static const cli_opt k_opts[] = {
    {"reference", "SRC", CLI_STRING, &g_reference,
     "source checkpoint: also compare NVFP4 outputs with source-precision outputs"},
    {"tokens", "N", CLI_STRING, &g_tokens, "seeded random activations per layer (verify.tokens)"},
    {"seed", "N", CLI_STRING, &g_seed, "activation seed (verify.seed)"},
    {"input", "X.safetensors", CLI_STRING, &g_input, "activations x [T, H] instead of random ones"},
    {"per-token-activations", NULL, CLI_FLAG, &g_per_token,
     "W4A4: per-token activation global scales instead of input_scale"},
};

static const cli_spec k_spec = {
    .name = "verify",
    .usage = "CKPT [--reference SRC] [--tokens N] [--seed N] [--input X.safetensors] [options]",
    .summary =
        "Run every MoE layer's kernels on the prepared weights and compare against references.",
    .details = "Not implemented yet: the options are checked, then it exits 1.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_verify(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    if (g_input && g_tokens)
        return cli_usage_error(&k_spec, "--input and --tokens exclude each other");
    const char *const flags[] = {"tokens", "seed"}, *const values[] = {g_tokens, g_seed};
    rc = cli_check_recipe(&k_spec, flags, values, 2);
    return rc != EXIT_OK ? rc : cli_not_implemented(&k_spec);
}
