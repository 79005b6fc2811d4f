/*
 * config.json of a synthetic checkpoint: field names as the model families' real configs spell
 * them, keys sorted, every cJSON allocation checked (io/json_build.h).
 */
#include "synth_internal.h"

#include "io/json_build.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *quantization_config(nvf_jb *b, const nvf_synth_plan *p) {
    cJSON *q = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_str(b, q, "activation_scheme", "dynamic");
    nvf_jb_str(b, q, "fmt", "e4m3");
    /* Qwen3-*-FP8 lists the modules left in BF16; DeepSeek-V3's config does not. */
    if (p->opt.preset == NVF_SYNTH_PRESET_QWEN3_MOE) {
        cJSON *keep = nvf_jb_arr(b, q, "modules_to_not_convert");
        for (size_t i = 0; keep && i < p->n_tensors; i++) {
            const nvf_synth_tensor *t = &p->tensors[i];
            if (t->dtype != NVF_DTYPE_BF16)
                continue;
            size_t n = strlen(t->name);
            char module[SYNTH_NAME_MAX];
            snprintf(module, sizeof module, "%.*s", (int)(n > 7 ? n - 7 : n), t->name);
            nvf_jb_push(b, keep, cJSON_CreateString(module));
        }
    }
    nvf_jb_str(b, q, "quant_method", "fp8");
    if (p->opt.scale_fmt == NVF_SYNTH_SCALE_UE8M0)
        nvf_jb_str(b, q, "scale_fmt", "ue8m0");
    const int block[2] = {SYNTH_FP8_BLOCK, SYNTH_FP8_BLOCK};
    nvf_jb_put(b, q, "weight_block_size", cJSON_CreateIntArray(block, 2));
    return q;
}

#define NUM(key, v)  nvf_jb_num(b, c, key, (double)(v))
#define STR(key, v)  nvf_jb_str(b, c, key, v)
#define BOOL(key, v) nvf_jb_bool(b, c, key, v)
#define NUL(key)     nvf_jb_null(b, c, key)

/* Qwen3-30B-A3B's config.json fields, in its (sorted) order. */
static void qwen3_config(nvf_jb *b, cJSON *c, const nvf_synth_plan *p) {
    const nvf_synth_options *o = &p->opt;
    const char *arch = "Qwen3MoeForCausalLM";
    nvf_jb_put(b, c, "architectures", cJSON_CreateStringArray(&arch, 1));
    BOOL("attention_bias", 0);
    NUM("attention_dropout", 0.0);
    NUM("bos_token_id", 256);
    NUM("decoder_sparse_step", 1);
    NUM("eos_token_id", 258);
    NUM("head_dim", p->head_dim);
    STR("hidden_act", "silu");
    NUM("hidden_size", o->hidden);
    NUM("initializer_range", 0.02);
    NUM("intermediate_size", o->intermediate);
    NUM("max_position_embeddings", 40960);
    NUM("max_window_layers", o->layers);
    nvf_jb_arr(b, c, "mlp_only_layers");
    STR("model_type", "qwen3_moe");
    NUM("moe_intermediate_size", o->moe_intermediate);
    BOOL("norm_topk_prob", 1);
    NUM("num_attention_heads", p->heads);
    NUM("num_experts", o->experts);
    NUM("num_experts_per_tok", p->top_k);
    NUM("num_hidden_layers", o->layers);
    NUM("num_key_value_heads", p->kv_heads);
    BOOL("output_router_logits", 0);
    if (o->dtype == NVF_SYNTH_DTYPE_FP8_BLOCK)
        nvf_jb_put(b, c, "quantization_config", quantization_config(b, p));
    NUM("rms_norm_eps", 1e-6);
    NUL("rope_scaling");
    NUM("rope_theta", 1000000.0);
    NUM("router_aux_loss_coef", 0.001);
    NUL("sliding_window");
    BOOL("tie_word_embeddings", 0);
    STR("torch_dtype", "bfloat16");
    STR("transformers_version", "4.51.0");
    BOOL("use_cache", 1);
    BOOL("use_sliding_window", 0);
    NUM("vocab_size", p->vocab);
}

/* DeepSeek-V3's config.json fields (without auto_map: no modeling code ships here). */
static void deepseek_config(nvf_jb *b, cJSON *c, const nvf_synth_plan *p) {
    const nvf_synth_options *o = &p->opt;
    const char *arch = "DeepseekV3ForCausalLM";
    nvf_jb_put(b, c, "architectures", cJSON_CreateStringArray(&arch, 1));
    BOOL("attention_bias", 0);
    NUM("attention_dropout", 0.0);
    NUM("aux_loss_alpha", 0.001);
    NUM("bos_token_id", 256);
    NUM("eos_token_id", 257);
    NUM("ep_size", 1);
    NUM("first_k_dense_replace", p->first_dense);
    STR("hidden_act", "silu");
    NUM("hidden_size", o->hidden);
    NUM("initializer_range", 0.02);
    NUM("intermediate_size", o->intermediate);
    NUM("kv_lora_rank", p->kv_lora_rank);
    NUM("max_position_embeddings", 163840);
    STR("model_type", "deepseek_v3");
    NUM("moe_intermediate_size", o->moe_intermediate);
    NUM("moe_layer_freq", 1);
    NUM("n_group", p->n_group);
    NUM("n_routed_experts", o->experts);
    NUM("n_shared_experts", 1);
    BOOL("norm_topk_prob", 1);
    NUM("num_attention_heads", p->heads);
    NUM("num_experts_per_tok", p->top_k);
    NUM("num_hidden_layers", o->layers);
    NUM("num_key_value_heads", p->kv_heads);
    NUM("num_nextn_predict_layers", 0);
    NUM("pretraining_tp", 1);
    NUM("q_lora_rank", p->q_lora_rank);
    NUM("qk_nope_head_dim", p->qk_nope);
    NUM("qk_rope_head_dim", p->qk_rope);
    if (o->dtype == NVF_SYNTH_DTYPE_FP8_BLOCK)
        nvf_jb_put(b, c, "quantization_config", quantization_config(b, p));
    NUM("rms_norm_eps", 1e-6);
    cJSON *rope = nvf_jb_obj(b, c, "rope_scaling");
    nvf_jb_num(b, rope, "beta_fast", 32);
    nvf_jb_num(b, rope, "beta_slow", 1);
    nvf_jb_num(b, rope, "factor", 40);
    nvf_jb_num(b, rope, "mscale", 1.0);
    nvf_jb_num(b, rope, "mscale_all_dim", 1.0);
    nvf_jb_num(b, rope, "original_max_position_embeddings", 4096);
    nvf_jb_str(b, rope, "type", "yarn");
    NUM("rope_theta", 10000);
    NUM("routed_scaling_factor", 2.5);
    STR("scoring_func", "sigmoid");
    BOOL("seq_aux", 1);
    BOOL("tie_word_embeddings", 0);
    NUM("topk_group", p->topk_group);
    STR("topk_method", "noaux_tc");
    STR("torch_dtype", "bfloat16");
    STR("transformers_version", "4.33.1");
    BOOL("use_cache", 1);
    NUM("v_head_dim", p->v_head);
    NUM("vocab_size", p->vocab);
}

#undef NUM
#undef STR
#undef BOOL
#undef NUL

char *nvf_synth_config_json(const nvf_synth_plan *plan) {
    nvf_jb b = {0};
    cJSON *c = nvf_jb_take(&b, cJSON_CreateObject());
    if (plan->opt.preset == NVF_SYNTH_PRESET_DEEPSEEK_V3)
        deepseek_config(&b, c, plan);
    else
        qwen3_config(&b, c, plan);
    c = nvf_jb_done(&b, c);
    char *text = c ? cJSON_Print(c) : NULL;
    cJSON_Delete(c);
    if (!text)
        nvf_error_set(NVF_E_NOMEM, "no memory for config.json");
    return text;
}
