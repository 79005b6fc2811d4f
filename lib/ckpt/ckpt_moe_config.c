/*
 * The MoE fields of config.json (top level, or under `text_config`), by the names the model
 * families really use:
 *   1. expert count: num_experts (Qwen2/3-MoE), num_local_experts (Mixtral, GPT-OSS, Qwen3-MoE
 *      in transformers 5), n_routed_experts (DeepSeek-V3/V3.1, Kimi K2, GLM-4.5);
 *   2. routing: num_experts_per_tok, norm_topk_prob, scoring_func, topk_method, n_group,
 *      topk_group, routed_scaling_factor, and model_type (which decides where the fields are
 *      silent: transformers' DeepSeek-V3 config has no scoring_func);
 *   3. sizes: hidden_size, moe_intermediate_size, intermediate_size, n_shared_experts,
 *      shared_expert_intermediate_size (Qwen2-MoE), first_k_dense_replace;
 *   4. activation: hidden_act, swiglu_limit (GPT-OSS).
 */
#include "ckpt_internal.h"

#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Integer fields are read as exact non-negative integers up to 2^53 (an expert count up to
 * CKPT_MAX_EXPERTS): anything else ("eight", -8, 1e300, 8.5) is a warning and reads as absent
 * (-1). */
static int cfg_int(nvf_ckpt *ck, const char *key, int64_t max, int64_t *out) {
    const cJSON *v = ckpt_config_get(ck, key);
    *out = -1;
    if (!v)
        return NVF_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
        v->valuedouble != (double)(int64_t)v->valuedouble) {
        char expected[64];
        snprintf(expected, sizeof expected, "an integer from 0 to %" PRId64, max);
        return ckpt_config_warn_type(ck, key, v, expected);
    }
    *out = (int64_t)v->valuedouble;
    return NVF_OK;
}

static int cfg_str(nvf_ckpt *ck, const char *key, char *buf, size_t len) {
    const cJSON *v = ckpt_config_get(ck, key);
    buf[0] = '\0';
    if (!v)
        return NVF_OK;
    if (!cJSON_IsString(v))
        return ckpt_config_warn_type(ck, key, v, "a string");
    snprintf(buf, len, "%s", v->valuestring);
    return NVF_OK;
}

/* A positive finite number, < 0 when absent or not one (a warning). */
static int cfg_positive(nvf_ckpt *ck, const char *key, double *out) {
    const cJSON *v = ckpt_config_get(ck, key);
    int ok = cJSON_IsNumber(v) && v->valuedouble > 0 && isfinite(v->valuedouble);
    *out = ok ? v->valuedouble : -1.0;
    return v && !ok ? ckpt_config_warn_type(ck, key, v, "a positive number") : NVF_OK;
}

int ckpt_moe_read_config(nvf_ckpt *ck, nvf_moe_config *c) {
    static const char *const count_keys[] = {"num_experts", "num_local_experts",
                                             "n_routed_experts"};
    const struct {
        const char *key;
        int64_t *out;
    } ints[] = {
        {"num_experts_per_tok", &c->top_k},
        {"n_group", &c->n_group},
        {"topk_group", &c->topk_group},
        {"first_k_dense_replace", &c->first_k_dense_replace},
        {"hidden_size", &c->hidden_size},
        {"moe_intermediate_size", &c->moe_intermediate_size},
        {"intermediate_size", &c->intermediate_size},
        {"n_shared_experts", &c->n_shared_experts},
        {"shared_expert_intermediate_size", &c->shared_expert_intermediate_size},
    };
    const struct {
        const char *key;
        char *buf;
        size_t len;
    } strs[] = {
        {"hidden_act", c->hidden_act, sizeof c->hidden_act},
        {"scoring_func", c->scoring_func, sizeof c->scoring_func},
        {"model_type", c->model_type, sizeof c->model_type},
        {"topk_method", c->topk_method, sizeof c->topk_method},
    };
    const int64_t max_int = (int64_t)1 << 53;
    /* ckpt_config_get looks under text_config only when it is an object */
    const cJSON *cfg = nvf_ckpt_config_doc(ck);
    const cJSON *text = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "text_config") : NULL;
    int rc = text && !cJSON_IsNull(text) && !cJSON_IsObject(text)
                 ? ckpt_config_warn_type(ck, "text_config", text, "an object")
                 : NVF_OK;
    c->n_experts = -1;
    c->n_experts_key = NULL;
    for (size_t i = 0; i < 3 && c->n_experts < 0 && rc == NVF_OK; i++) {
        rc = cfg_int(ck, count_keys[i], CKPT_MAX_EXPERTS, &c->n_experts);
        if (c->n_experts >= 0)
            c->n_experts_key = count_keys[i];
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        *ints[i].out = -1;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0] && rc == NVF_OK; i++)
        rc = cfg_int(ck, ints[i].key, max_int, ints[i].out);
    const cJSON *norm = ckpt_config_get(ck, "norm_topk_prob");
    c->norm_topk_prob = cJSON_IsBool(norm) ? cJSON_IsTrue(norm) : -1;
    if (rc == NVF_OK && norm && !cJSON_IsBool(norm))
        rc = ckpt_config_warn_type(ck, "norm_topk_prob", norm, "true or false");
    c->routed_scaling_factor = c->swiglu_limit = -1.0;
    if (rc == NVF_OK)
        rc = cfg_positive(ck, "routed_scaling_factor", &c->routed_scaling_factor);
    if (rc == NVF_OK)
        rc = cfg_positive(ck, "swiglu_limit", &c->swiglu_limit);
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        strs[i].buf[0] = '\0';
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && rc == NVF_OK; i++)
        rc = cfg_str(ck, strs[i].key, strs[i].buf, strs[i].len);
    return rc;
}

nvf_router_kind ckpt_moe_router_kind(const nvf_moe_config *c, int any_bias) {
    /* The families whose router the fields alone do not name: GPT-OSS takes the top-k of the
     * logits first and a softmax over those; DeepSeek-V3/V3.1 (whose transformers config leaves
     * scoring_func out), Kimi K2 and GLM-4.5 route with sigmoid scores, a correction bias and
     * groups (GLM-4.5 with one group). */
    static const char *const v3_types[] = {"deepseek_v3", "kimi_k2", "glm4_moe"};
    if (strcmp(c->model_type, "gpt_oss") == 0)
        return NVF_ROUTER_TOPK_SOFTMAX;
    for (size_t i = 0; i < sizeof v3_types / sizeof v3_types[0]; i++)
        if (strcmp(c->model_type, v3_types[i]) == 0)
            return NVF_ROUTER_DEEPSEEK_V3;
    /* Otherwise by the fields: the correction bias implies sigmoid scores (it is only defined
     * for them). */
    int noaux = strcmp(c->topk_method, "noaux_tc") == 0;
    if (strcmp(c->scoring_func, "sigmoid") == 0 || any_bias)
        return c->n_group > 0 || noaux || any_bias ? NVF_ROUTER_DEEPSEEK_V3
                                                   : NVF_ROUTER_SIGMOID_TOPK;
    return NVF_ROUTER_SOFTMAX_TOPK;
}
