/*
 * nvfp4tool synth: write a small, deterministic, realistic checkpoint directory.
 */
#include "cli.h"

#include "nvfp4/status.h"
#include "nvfp4/synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cli_common g_common;
static const char *g_preset, *g_dtype, *g_seed, *g_max_shard, *g_scale_fmt;
static long g_layers, g_experts, g_hidden, g_intermediate, g_moe_intermediate;
static int g_fused, g_force;

static const cli_opt k_opts[] = {
    {"preset", "NAME", CLI_STRING, &g_preset, "qwen3-moe | deepseek-v3 (required)"},
    {"dtype", "DTYPE", CLI_STRING, &g_dtype, "bf16 | fp8-block | nvfp4 | nvfp4-ct (required)"},
    {"seed", "N", CLI_STRING, &g_seed, "value seed, 0..2^64-1 (default 0)"},
    {"layers", "N", CLI_INT, &g_layers, "num_hidden_layers (default 2; deepseek-v3 3)"},
    {"experts", "N", CLI_INT, &g_experts, "routed experts per MoE layer (default 8)"},
    {"hidden", "N", CLI_INT, &g_hidden, "hidden_size, multiple of 16 (default 320)"},
    {"intermediate", "N", CLI_INT, &g_intermediate, "dense intermediate_size (default 3*hidden)"},
    {"moe-intermediate", "N", CLI_INT, &g_moe_intermediate,
     "moe_intermediate_size, multiple of 16 (default 192)"},
    {"max-shard-size", "SIZE", CLI_STRING, &g_max_shard,
     "tensor bytes per shard, e.g. 5GB (default: a quarter of the total)"},
    {"fused-experts", NULL, CLI_FLAG, &g_fused,
     "fused mlp.experts.gate_up_proj [E,2I,H] and down_proj [E,H,I]"},
    {"scale-fmt", "FMT", CLI_STRING, &g_scale_fmt,
     "fp8-block scales: f32 (amax/448, default) | ue8m0 (powers of two)"},
    {"force", NULL, CLI_FLAG, &g_force, "write into a non-empty DST"},
};

static const cli_spec k_spec = {
    .name = "synth",
    .usage = "DST --preset NAME --dtype bf16|fp8-block|nvfp4|nvfp4-ct [options]",
    .summary = "Write a small deterministic realistic checkpoint.",
    .details =
        "Writes DST/config.json, generation_config.json, model.safetensors.index.json, the\n"
        "shards model-0000i-of-0000N.safetensors, a tokenizer stub and README.md. The same\n"
        "options and seed give byte-identical files on every machine. Shards are written\n"
        "first and config.json last: a directory without config.json is an interrupted run.\n"
        "fp8-block: every linear weight but the router is F8_E4M3 with an F32\n"
        "weight_scale_inv per 128x128 block, quantized from the bf16 values of the same seed.\n"
        "nvfp4: the bf16 checkpoint of the same options, written into DST.synth-bf16.tmp\n"
        "(removed afterwards) and converted into DST with the default recipe on the CPU:\n"
        "exactly what `convert` writes (ModelOpt names, hf_quant_config.json, manifest;\n"
        "fused experts come out per expert). nvfp4-ct: the same values rewritten as\n"
        "compressed-tensors nvfp4-pack-quantized (weight_packed, weight_scale,\n"
        "weight_global_scale = 1/weight_scale_2, input_global_scale), without the\n"
        "ModelOpt files and manifest.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

/* @return EXIT_OK, or EXIT_RUNTIME when out of memory for the document. */
static int print_json(const char *dst, const nvf_synth_options *o, const nvf_synth_summary *s) {
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "path", dst);
    cJSON_AddStringToObject(j, "preset", nvf_synth_preset_name(o->preset));
    cJSON_AddStringToObject(j, "dtype", nvf_synth_dtype_name(o->dtype));
    cJSON_AddRawToObject(j, "seed", seed);
    cJSON_AddNumberToObject(j, "shards", s->n_shards);
    cJSON_AddNumberToObject(j, "tensors", (double)s->n_tensors);
    cJSON_AddNumberToObject(j, "tensor_bytes", (double)s->tensor_bytes);
    cJSON_AddNumberToObject(j, "bytes", (double)s->file_bytes);
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (size_t i = 0; files && i < s->n_files; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", s->files[i].name);
        cJSON_AddNumberToObject(f, "bytes", (double)s->files[i].bytes);
        cJSON_AddItemToArray(files, f);
    }
    int rc = cli_print_json(k_spec.name, j);
    cJSON_Delete(j);
    return rc;
}

int cmd_synth(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    g_preset = g_dtype = g_seed = g_max_shard = g_scale_fmt = NULL;
    g_layers = g_experts = g_hidden = g_intermediate = g_moe_intermediate = 0;
    g_fused = g_force = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;

    nvf_synth_options o;
    nvf_synth_options_init(&o);
    if (!g_preset)
        return cli_usage_error(&k_spec, "--preset is required; presets: %s",
                               nvf_synth_preset_list());
    if (nvf_synth_preset_from_name(&o.preset, g_preset) != 0)
        return cli_usage_error(&k_spec, "%s", nvf_error_last());
    if (!g_dtype)
        return cli_usage_error(&k_spec, "--dtype is required: bf16, fp8-block, nvfp4 or nvfp4-ct");
    if (nvf_synth_dtype_from_name(&o.dtype, g_dtype) != 0)
        return cli_usage_error(&k_spec, "%s", nvf_error_last());
    if (g_seed) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(g_seed, &end, 10);
        if (errno != 0 || end == g_seed || *end != '\0' || g_seed[0] == '-')
            return cli_usage_error(&k_spec, "--seed takes an integer in 0..2^64-1, got '%s'",
                                   g_seed);
        o.seed = v;
    }
    const struct {
        const char *name;
        long v;
        int64_t *target;
    } dims[] = {{"layers", g_layers, &o.layers},
                {"experts", g_experts, &o.experts},
                {"hidden", g_hidden, &o.hidden},
                {"intermediate", g_intermediate, &o.intermediate},
                {"moe-intermediate", g_moe_intermediate, &o.moe_intermediate}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].v < 0)
            return cli_usage_error(&k_spec, "--%s must be positive, got %ld", dims[i].name,
                                   dims[i].v);
        *dims[i].target = dims[i].v;
    }
    if (g_max_shard &&
        (cli_parse_size(&o.max_shard_size, g_max_shard) != 0 || o.max_shard_size == 0))
        return cli_usage_error(&k_spec, "--max-shard-size takes a size such as 5GB, got '%s'",
                               g_max_shard);
    if (g_scale_fmt) {
        if (strcmp(g_scale_fmt, "ue8m0") == 0)
            o.scale_fmt = NVF_SYNTH_SCALE_UE8M0;
        else if (strcmp(g_scale_fmt, "f32") != 0)
            return cli_usage_error(&k_spec, "--scale-fmt takes f32 or ue8m0, got '%s'",
                                   g_scale_fmt);
    }
    o.fused_experts = g_fused;
    o.force = g_force;
    o.threads = (int)(g_common.threads > 1024 ? 1024 : g_common.threads);
    o.stop = cli_catch_stop_signals();

    nvf_synth_summary s;
    int st = nvf_synth_write(&s, pos[0], &o);
    if (st != NVF_OK) {
        if (cli_exit_code(st) == EXIT_USAGE)
            return cli_usage_error(&k_spec, "%s", nvf_error_last());
        return cli_fail("synth", st);
    }
    rc = EXIT_OK;
    if (g_common.json)
        rc = print_json(pos[0], &o, &s);
    else if (!g_common.quiet)
        printf("wrote %s: %zu files, %u shards, %zu tensors, %llu bytes\n", pos[0], s.n_files,
               s.n_shards, s.n_tensors, (unsigned long long)s.file_bytes);
    nvf_synth_summary_free(&s);
    return rc;
}
