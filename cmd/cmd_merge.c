/*
 * nvfp4tool merge: not built yet. It takes the options of its usage line (SPEC section 2), so
 * scripts written for it fail today only on "not implemented yet" (exit 1).
 */
#include "cli.h"

static cli_common g_common;

static const cli_spec k_spec = {
    .name = "merge",
    .usage = "DST [options]",
    .summary = "Write the index and manifest of the union of the outputs of convert --shard i/N.",
    .details = "Not implemented yet: the options are checked, then it exits 1.\n",
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

int cmd_merge(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    return cli_not_implemented(&k_spec);
}
