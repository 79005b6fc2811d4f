#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "synth",
    .usage = "DST --preset NAME --dtype bf16|fp8-block|nvfp4 [options]",
    .summary = "Write a small deterministic realistic checkpoint.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_synth(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
