#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "merge",
    .usage = "DST [options]",
    .summary = "Write the index and manifest of the union of the outputs of convert --shard i/N.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_merge(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
