#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "verify",
    .usage = "CKPT [--reference SRC] [options]",
    .summary =
        "Run every MoE layer's kernels on the prepared weights and compare against references.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_verify(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
