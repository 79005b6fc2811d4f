/*
 * nvfp4tool merge DST: the union of the parts written by `convert SRC DST --shard I/N` (SPEC
 * section 6). The work is nvf_merge_run(); this file parses the options, turns SIGINT/SIGTERM
 * into a clean stop and prints the summary.
 */
#include "cli.h"

#include "nvfp4/convert.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

static cli_common g_common;
static int g_rehash;

static const cli_opt k_opts[] = {
    {"rehash", NULL, CLI_FLAG, &g_rehash,
     "hash every shard again (SHA-256, tensor CRC-32s) and compare with its part record"},
};

static const cli_spec k_spec = {
    .name = "merge",
    .usage = "DST [options]",
    .summary = "Write the index and manifest of the union of the outputs of convert --shard i/N.",
    .details =
        "After `convert SRC DST --shard I/N` ran for every I in 0 .. N-1, checks the part records\n"
        "DST/.nvfp4-parts/I-of-N.json: all N present and of one split, none still running, one\n"
        "fingerprint (source files, recipe, options, tool version), every planned output shard\n"
        "in exactly one part, its file in DST with the recorded size (--rehash: its SHA-256 and\n"
        "tensor CRC-32s too; otherwise the parts' hashes are trusted). Then writes the index,\n"
        "config.json, hf_quant_config.json (or the prepared target's files), the side files\n"
        "copied from SRC (the path part 0 recorded) and nvfp4-manifest.json: the same bytes a\n"
        "one-job `convert` writes. Removes DST/.nvfp4-parts at the end.\n"
        "Exit 3 naming the missing part, the part with another fingerprint, the shard in two\n"
        "parts or none, the missing or mis-sized shard file, or a SRC changed since the parts\n"
        "ran; exit 1 when a part still runs or DST is locked.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

static int print_summary(const nvf_merge_options *o, const nvf_merge_summary *s) {
    const nvf_convert_summary *c = &s->convert;
    if (!g_common.json) {
        if (!g_common.quiet)
            printf("%s: merged %llu parts of %s: %llu shards, %llu tensors, %.3f GB%s\n", o->dst,
                   (unsigned long long)s->parts, s->src, (unsigned long long)c->shards,
                   (unsigned long long)c->tensors_written, (double)c->bytes_out / 1e9,
                   o->rehash ? " (every shard hashed again)" : "");
        return EXIT_OK;
    }
    char *text = nvf_convert_summary_to_json(c);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!j) {
        fprintf(stderr, "nvfp4tool merge: error: out of memory writing the summary\n");
        return EXIT_RUNTIME;
    }
    cJSON_AddStringToObject(j, "destination", o->dst);
    cJSON_AddStringToObject(j, "source", s->src);
    cJSON_AddNumberToObject(j, "parts", (double)s->parts);
    cJSON_AddNumberToObject(j, "shards_rehashed", (double)s->shards_rehashed);
    int rc = cli_print_json(k_spec.name, j);
    cJSON_Delete(j);
    return rc;
}

int cmd_merge(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    if (g_common.threads > 1024)
        return cli_usage_error(&k_spec, "--threads is at most 1024, got %ld", g_common.threads);
    nvf_merge_options o = {
        .dst = pos[0],
        .rehash = g_rehash,
        .threads = (int)g_common.threads,
        .stop = cli_catch_stop_signals(),
    };
    nvf_merge_summary s;
    int st = nvf_merge_run(&s, &o);
    if (st < 0)
        return cli_fail(k_spec.name, st);
    return print_summary(&o, &s);
}
