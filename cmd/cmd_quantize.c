#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "quantize",
    .usage = "IN.safetensors OUT.safetensors [options]",
    .summary =
        "Quantize every floating 2-D tensor (or those named by --tensor) of one file to NVFP4.",
    .min_pos = 2,
    .max_pos = 2,
    .common = &g_common,
};

int cmd_quantize(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
