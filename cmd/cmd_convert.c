#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "convert",
    .usage = "SRC DST [options]",
    .summary = "Convert a whole checkpoint directory to an NVFP4 checkpoint directory.",
    .min_pos = 2,
    .max_pos = 2,
    .common = &g_common,
};

int cmd_convert(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
