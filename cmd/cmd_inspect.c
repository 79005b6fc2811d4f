#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "inspect",
    .usage = "CKPT [options]",
    .summary = "Detect the format, list tensors, summarize the MoE structure.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_inspect(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
