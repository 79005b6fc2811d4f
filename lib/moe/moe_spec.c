/*
 * What a checkpoint's MoE block computes, from its config.json as lib/ckpt read it
 * (nvf_moe_config): the routing, the activation and the shared experts of each family.
 */
#include "nvfp4/log.h"
#include "nvfp4/moe.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* GPT-OSS's gated activation [openai/gpt-oss, transformers GptOssExperts]: alpha 1.702, the up
 * value offset by 1, both clamped at swiglu_limit (7.0 in its config). */
#define GPT_OSS_ALPHA 1.702f
#define GPT_OSS_BETA  1.0f

const char *nvf_moe_precision_name(nvf_moe_precision p) {
    switch (p) {
    case NVF_MOE_PRECISION_BF16:
        return "bf16";
    case NVF_MOE_PRECISION_W4A16:
        return "w4a16";
    case NVF_MOE_PRECISION_W4A4:
        return "w4a4";
    }
    return "bf16";
}

/* The model types whose routing and activation this file knows by name. */
static int known_type(const char *t) {
    static const char *const known[] = {"qwen3_moe", "qwen2_moe", "mixtral", "deepseek_v3",
                                        "kimi_k2",   "glm4_moe",  "gpt_oss", "qwen3_next"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(t, known[i]) == 0)
            return 1;
    return 0;
}

static int set_activation(nvf_moe_spec *s, const nvf_moe_config *c) {
    const char *act = c->hidden_act[0] ? c->hidden_act : "silu";
    if (strcmp(c->model_type, "gpt_oss") == 0) {
        s->act = NVF_MOE_ACT_SWIGLU;
        s->swiglu_alpha = GPT_OSS_ALPHA;
        s->swiglu_beta = GPT_OSS_BETA;
        s->swiglu_limit = c->swiglu_limit > 0 ? (float)c->swiglu_limit : INFINITY;
        return NVF_OK;
    }
    if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0) {
        s->act = NVF_MOE_ACT_SILU;
        return NVF_OK;
    }
    if (strcmp(act, "relu2") == 0) {
        s->act = NVF_MOE_ACT_RELU2;
        return NVF_OK;
    }
    return nvf_error_set(NVF_E_UNSUPPORTED,
                         "config.json hidden_act '%s' (model_type '%s'): the MoE reference "
                         "computes silu, swiglu, situ and relu2",
                         act, c->model_type);
}

int nvf_moe_spec_from_ckpt(nvf_moe_spec *out, const nvf_ckpt *ck) {
    const nvf_moe_config *c = &ck->moe.config;
    memset(out, 0, sizeof *out);
    snprintf(out->model_type, sizeof out->model_type, "%s", c->model_type);
    if (ck->moe.n_moe == 0)
        return nvf_error_set(NVF_E_FORMAT, "%s: no MoE layer", ck->path);
    int64_t n = -1;
    for (size_t i = 0; i < ck->moe.n_layers && n < 0; i++)
        if (ck->moe.layers[i].kind == NVF_LAYER_MOE)
            n = ck->moe.layers[i].n_experts;
    if (c->top_k < 1)
        return nvf_error_set(NVF_E_FORMAT, "%s: config.json gives no num_experts_per_tok",
                             ck->path);
    out->n_experts = n;
    out->top_k = c->top_k;
    out->routed_scaling_factor =
        c->routed_scaling_factor > 0 ? (float)c->routed_scaling_factor : 1.0f;
    out->n_group = c->n_group > 0 ? c->n_group : 1;
    out->topk_group = c->topk_group > 0 ? c->topk_group : out->n_group;
    out->swiglu_limit = INFINITY;
    out->situ_beta = 1.0f;
    switch (c->router) {
    case NVF_ROUTER_DEEPSEEK_V3:
        /* transformers' DeepseekV3Config defaults norm_topk_prob to true */
        out->route = NVF_MOE_ROUTE_DEEPSEEK_V3;
        out->renormalize = c->norm_topk_prob != 0;
        break;
    case NVF_ROUTER_SIGMOID_TOPK:
        out->route = NVF_MOE_ROUTE_SIGMOID_TOPK;
        out->renormalize = c->norm_topk_prob == 1;
        break;
    case NVF_ROUTER_TOPK_SOFTMAX:
        out->route = NVF_MOE_ROUTE_TOPK_SOFTMAX;
        break;
    default:
        /* Mixtral always renormalizes (it has no norm_topk_prob); Qwen says which */
        out->route = NVF_MOE_ROUTE_SOFTMAX_TOPK;
        out->renormalize = strcmp(c->model_type, "mixtral") == 0 ? 1 : c->norm_topk_prob == 1;
        break;
    }
    for (size_t i = 0; i < ck->moe.n_layers; i++)
        out->shared_gate |= ck->moe.layers[i].has_shared_gate;
    if (!known_type(c->model_type))
        nvf_log(NVF_LOG_INFO,
                "%s: model_type '%s' is not one the MoE reference knows by name: routing %s "
                "from its fields (norm_topk_prob %s)",
                ck->path, c->model_type, nvf_moe_route_name(out->route),
                out->renormalize ? "true" : "false");
    return set_activation(out, c);
}
