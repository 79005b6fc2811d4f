#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "validate",
    .usage = "CKPT [--deep] [--require-manifest] [options]",
    .summary = "CI gate: structure, loader compatibility, hashes against the manifest, finiteness.",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_validate(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
