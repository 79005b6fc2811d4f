/*
 * nvfp4tool moe: run one MoE block of a checkpoint on given activations (SPEC sections 2, 7)
 * with the CPU reference of lib/moe, or its routed experts on a GPU's MoE kernels (--device
 * cuda). Options and messages only; the pipeline is
 * nvf_moe_run_file().
 */
#include "cli.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/log.h"
#include "nvfp4/moe.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static cli_common g_common;
static const char *g_input, *g_output, *g_precision;
static long g_layer = -1;
static int g_per_token;

static const cli_opt k_opts[] = {
    {"layer", "N", CLI_INT, &g_layer, "the MoE layer (model.layers.N) to run (required)"},
    {"input", "X.safetensors", CLI_STRING, &g_input,
     "activations x [T, H], BF16 or F32: the file's only tensor, or the one named 'x' (required)"},
    {"output", "Y.safetensors", CLI_STRING, &g_output,
     "where the block's output goes: one tensor 'y' F32 [T, H] (required)"},
    {"precision", "P", CLI_STRING, &g_precision,
     "bf16 | w4a16 | w4a4 (default bf16: the weights as stored)"},
    {"per-token-activations", NULL, CLI_FLAG, &g_per_token,
     "W4A4: one activation global scale per token instead of per tensor"},
};

static const cli_spec k_spec = {
    .name = "moe",
    .usage = "CKPT --layer N --input X.safetensors --output Y.safetensors [--precision P] "
             "[options]",
    .summary =
        "Run one MoE block (router + routed experts + shared experts) on activations x [T, H].",
    .details =
        "The CPU reference (f32 accumulation, deterministic): router logits x.Wr^T in f32,\n"
        "routing from config.json (softmax top-k with or without renormalization, DeepSeek-V3\n"
        "sigmoid + correction bias + groups + routed_scaling_factor, sigmoid top-k), each\n"
        "chosen expert's FC1 and activation in f32, its output rounded to BF16, FC2, the\n"
        "weighted sum in each token's top-k order, plus shared experts. The output 'y' is F32.\n"
        "Weights: BF16/F16/F32 as stored, FP8 block as bf16(fp8 * scale_inv), NVFP4 (ModelOpt,\n"
        "compressed-tensors) as stored (the decode scale applied after the accumulation).\n"
        "--precision applies to source-precision checkpoints: w4a16 quantizes each routed\n"
        "expert with the recipe (--recipe) as convert would (gate+up one global scale) and\n"
        "uses its NVFP4 values; w4a4 also quantizes the FC1 and FC2 inputs to NVFP4, with the\n"
        "checkpoint's input_scale where it has one, else a dynamic scale from the activations'\n"
        "amax (all of x for FC1, the expert's FC1 output for FC2; per token with\n"
        "--per-token-activations). An NVFP4 checkpoint runs as stored (bf16 means w4a16).\n"
        "Shared experts, router and gates always run as stored, their inputs unquantized.\n"
        "Device: cpu or auto run the CPU reference; cuda[:N] runs the routed experts on the\n"
        "GPU kernels from the prepared layout (built in memory from the layer's NVFP4 values)\n"
        "and routes on the GPU (the same ids and weights); router logits and shared experts\n"
        "stay on the CPU. The GPU takes NVFP4 experts\n"
        "(an NVFP4 checkpoint, or --precision w4a16/w4a4) and, for w4a4, input scales on\n"
        "every expert or on none (dynamic), or --per-token-activations: else exit 1.\n"
        "An input whose H differs from the layer's, or a layer that is not MoE, is exit 2.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

/* One line on stdout, or one JSON object with --json. */
static int print_summary(const char *ckpt, const nvf_moe_run_info *in, const char *device) {
    const char *prec = nvf_moe_precision_name(in->precision);
    if (!g_common.json) {
        if (!g_common.quiet)
            printf("%s: layer %ld, %" PRId64 " tokens x %" PRId64 ", %s top-%" PRId64 " of %" PRId64
                   ", %s, precision %s -> %s\n",
                   ckpt, g_layer, in->tokens, in->hidden, nvf_moe_route_name(in->route), in->top_k,
                   in->n_experts, nvf_moe_act_name(in->act), prec, g_output);
        return EXIT_OK;
    }
    cJSON *js = cJSON_CreateObject();
    if (js) {
        cJSON_AddStringToObject(js, "checkpoint", ckpt);
        cJSON_AddStringToObject(js, "checkpoint_format", nvf_ckpt_format_name(in->format));
        cJSON_AddNumberToObject(js, "layer", (double)g_layer);
        cJSON_AddStringToObject(js, "input", g_input);
        cJSON_AddStringToObject(js, "output", g_output);
        cJSON_AddStringToObject(js, "precision", prec);
        cJSON_AddStringToObject(js, "device", device);
        cJSON_AddNumberToObject(js, "tokens", (double)in->tokens);
        cJSON_AddNumberToObject(js, "hidden", (double)in->hidden);
        cJSON_AddNumberToObject(js, "intermediate", (double)in->intermediate);
        cJSON_AddNumberToObject(js, "experts", (double)in->n_experts);
        cJSON_AddNumberToObject(js, "top_k", (double)in->top_k);
        cJSON_AddStringToObject(js, "routing", nvf_moe_route_name(in->route));
        cJSON_AddBoolToObject(js, "renormalize", in->renormalize);
        cJSON_AddStringToObject(js, "activation", nvf_moe_act_name(in->act));
        cJSON_AddBoolToObject(js, "shared_experts", in->has_shared);
        cJSON_AddBoolToObject(js, "shared_expert_gate", in->has_shared_gate);
    }
    int rc = js ? cli_print_json(k_spec.name, js) : EXIT_RUNTIME;
    if (!js)
        fprintf(stderr, "nvfp4tool %s: error: out of memory writing the summary\n", k_spec.name);
    cJSON_Delete(js);
    return rc;
}

int cmd_moe(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    if (g_layer < 0)
        return cli_usage_error(&k_spec, "--layer N (N >= 0) is required");
    if (!g_input || !g_output)
        return cli_usage_error(&k_spec, "--input and --output are required");
    nvf_moe_opts o;
    memset(&o, 0, sizeof o);
    if (!g_precision || strcmp(g_precision, "bf16") == 0)
        o.precision = NVF_MOE_PRECISION_BF16;
    else if (strcmp(g_precision, "w4a16") == 0)
        o.precision = NVF_MOE_PRECISION_W4A16;
    else if (strcmp(g_precision, "w4a4") == 0)
        o.precision = NVF_MOE_PRECISION_W4A4;
    else
        return cli_usage_error(&k_spec, "--precision takes bf16, w4a16 or w4a4, got '%s'",
                               g_precision);
    if (g_per_token && o.precision != NVF_MOE_PRECISION_W4A4)
        return cli_usage_error(&k_spec, "--per-token-activations needs --precision w4a4");
    const char *dev = g_common.device ? g_common.device : "auto";
    if (strncmp(dev, "cuda", 4) != 0 && strcmp(dev, "auto") != 0 && strcmp(dev, "cpu") != 0)
        return cli_usage_error(&k_spec, "--device takes auto, cpu or cuda[:N], got '%s'", dev);
    if (strcmp(dev, "auto") == 0)
        nvf_log(NVF_LOG_INFO, "device auto: the CPU reference (--device cuda runs the routed "
                              "experts on the GPU kernels)");
    nvf_recipe r;
    int st = nvf_recipe_init(&r);
    if (st == NVF_OK && g_common.recipe)
        st = nvf_recipe_load(&r, g_common.recipe);
    if (st == NVF_OK)
        st = nvf_recipe_check(&r);
    if (st != NVF_OK) {
        nvf_recipe_free(&r);
        return cli_fail("moe", st);
    }
    o.quant = r.quant;
    o.per_token = g_per_token;
    nvf_recipe_free(&r);
    nvf_backend *b = NULL;
    if (strncmp(dev, "cuda", 4) == 0) {
        nvf_device d;
        st = nvf_device_select(&d, dev);
        if (st == NVF_OK)
            st = nvf_backend_open(&b, &d, 0);
        if (st != NVF_OK)
            return cli_fail("moe", st);
        o.backend = b;
    }
    nvf_moe_run_info info;
    st = nvf_moe_run_file(&info, pos[0], g_layer, g_input, g_output, &o);
    int on_gpu = b != NULL;
    nvf_backend_close(b);
    if (st != NVF_OK)
        return cli_fail("moe", st);
    return print_summary(pos[0], &info, on_gpu ? dev : "cpu");
}
