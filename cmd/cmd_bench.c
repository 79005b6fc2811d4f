#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "bench",
    .usage = "quant|moe [options]",
    .summary = "Performance tables (SPEC section 9).",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_bench(int argc, char **argv) {
    return cli_not_implemented(&k_spec, argc, argv);
}
