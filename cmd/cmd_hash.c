#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "hash",
    .usage = "CKPT [--check] [options]",
    .summary = "Write or check the SHA-256 manifest of a checkpoint.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_hash(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
