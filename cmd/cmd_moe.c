#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "moe",
    .usage = "CKPT --layer N --input X.safetensors --output Y.safetensors [options]",
    .summary =
        "Run one MoE block (router + routed experts + shared experts) on activations x [T, H].",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_moe(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
