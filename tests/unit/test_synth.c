/*
 * Synthetic checkpoints: presets' tensor lists and config fields (expected names and shapes
 * written out by hand from the model families' layouts), shard split and index against what
 * the safetensors reader finds, determinism, fused == per-expert values, and the FP8 blocks
 * recomputed here from the BF16 checkpoint of the same seed.
 */
/* nftw() for the clean-up. */
#define _XOPEN_SOURCE 700

#include "check.h"

#include "nvfp4/fileio.h"
#include "nvfp4/format.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"
#include "nvfp4/synth.h"

#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static char g_root[] = "/tmp/test_synth_XXXXXX";

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *dir_of(const char *name) {
    return nvf_path_join(g_root, name);
}

static const nvf_synth_tensor *plan_find(const nvf_synth_plan *p, const char *name) {
    for (size_t i = 0; i < p->n_tensors; i++)
        if (strcmp(p->tensors[i].name, name) == 0)
            return &p->tensors[i];
    return NULL;
}

/* The tensor has this dtype and shape (ndim = number of dims given, up to 3; -1 ends). */
static void check_tensor(const nvf_synth_plan *p, const char *name, nvf_dtype dtype, int64_t d0,
                         int64_t d1, int64_t d2) {
    const nvf_synth_tensor *t = plan_find(p, name);
    CHECK_MSG(t != NULL, "missing tensor %s", name);
    if (!t)
        return;
    int32_t ndim = d0 < 0 ? 0 : d1 < 0 ? 1 : d2 < 0 ? 2 : 3;
    const int64_t d[3] = {d0, d1, d2};
    CHECK_MSG(t->dtype == dtype, "%s dtype %s", name, nvf_dtype_name(t->dtype));
    CHECK_MSG(t->ndim == ndim, "%s ndim %d, expected %d", name, t->ndim, ndim);
    for (int i = 0; i < ndim && i < t->ndim; i++)
        CHECK_MSG(t->shape[i] == d[i], "%s dim %d = %lld, expected %lld", name, i,
                  (long long)t->shape[i], (long long)d[i]);
}

static void test_names(void) {
    nvf_synth_preset p;
    nvf_synth_dtype d;
    CHECK(nvf_synth_preset_from_name(&p, "deepseek-v3") == 0 && p == NVF_SYNTH_PRESET_DEEPSEEK_V3);
    CHECK(nvf_synth_preset_from_name(&p, "llama") == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "qwen3-moe, deepseek-v3");
    CHECK(nvf_synth_dtype_from_name(&d, "fp8-block") == 0 && d == NVF_SYNTH_DTYPE_FP8_BLOCK);
    CHECK(nvf_synth_dtype_from_name(&d, "fp8") == NVF_E_INVALID);
    CHECK_EQ_STR(nvf_synth_preset_name(NVF_SYNTH_PRESET_QWEN3_MOE), "qwen3-moe");
    CHECK_EQ_STR(nvf_synth_dtype_name(NVF_SYNTH_DTYPE_NVFP4), "nvfp4");
    CHECK(nvf_synth_dtype_from_name(&d, "nvfp4-ct") == 0 && d == NVF_SYNTH_DTYPE_NVFP4_CT);
}

static void test_options(void) {
    nvf_synth_options o;
    nvf_synth_plan *p = NULL;
    nvf_synth_options_init(&o);
    o.dtype = NVF_SYNTH_DTYPE_NVFP4;
    /* the plan of the bf16 checkpoint that is converted: BF16 expert weights */
    CHECK(nvf_synth_plan_build(&p, &o) == 0 && p != NULL);
    for (size_t i = 0; p && i < p->n_tensors; i++) {
        if (strstr(p->tensors[i].name, ".mlp.experts.0.gate_proj.weight"))
            CHECK(p->tensors[i].dtype == NVF_DTYPE_BF16);
    }
    nvf_synth_plan_free(p);
    p = NULL;
    nvf_synth_options_init(&o);
    o.hidden = 100;
    CHECK(nvf_synth_plan_build(&p, &o) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "--hidden 100");
    nvf_synth_options_init(&o);
    o.experts = 5000;
    CHECK(nvf_synth_plan_build(&p, &o) == NVF_E_INVALID);
    nvf_synth_options_init(&o);
    o.scale_fmt = NVF_SYNTH_SCALE_UE8M0;
    CHECK(nvf_synth_plan_build(&p, &o) == NVF_E_INVALID);
}

/* Qwen3 default: 2 layers x (4 norms + q/k/v/o + router + 8 experts x 3) + embed, norm, head. */
static void test_qwen3_plan(void) {
    nvf_synth_options o;
    nvf_synth_plan *p = NULL;
    nvf_synth_options_init(&o);
    CHECK(nvf_synth_plan_build(&p, &o) == 0);
    if (!p)
        return;
    CHECK_EQ_U64(p->n_tensors, 1 + 2 * (9 + 24) + 2);
    check_tensor(p, "model.embed_tokens.weight", NVF_DTYPE_BF16, 1024, 320, -1);
    check_tensor(p, "lm_head.weight", NVF_DTYPE_BF16, 1024, 320, -1);
    check_tensor(p, "model.norm.weight", NVF_DTYPE_BF16, 320, -1, -1);
    check_tensor(p, "model.layers.1.input_layernorm.weight", NVF_DTYPE_BF16, 320, -1, -1);
    check_tensor(p, "model.layers.1.self_attn.q_proj.weight", NVF_DTYPE_BF16, 256, 320, -1);
    check_tensor(p, "model.layers.1.self_attn.k_proj.weight", NVF_DTYPE_BF16, 128, 320, -1);
    check_tensor(p, "model.layers.1.self_attn.v_proj.weight", NVF_DTYPE_BF16, 128, 320, -1);
    check_tensor(p, "model.layers.1.self_attn.o_proj.weight", NVF_DTYPE_BF16, 320, 256, -1);
    check_tensor(p, "model.layers.1.self_attn.q_norm.weight", NVF_DTYPE_BF16, 64, -1, -1);
    check_tensor(p, "model.layers.1.self_attn.k_norm.weight", NVF_DTYPE_BF16, 64, -1, -1);
    check_tensor(p, "model.layers.0.mlp.gate.weight", NVF_DTYPE_BF16, 8, 320, -1);
    check_tensor(p, "model.layers.0.mlp.experts.7.gate_proj.weight", NVF_DTYPE_BF16, 192, 320, -1);
    check_tensor(p, "model.layers.0.mlp.experts.7.up_proj.weight", NVF_DTYPE_BF16, 192, 320, -1);
    check_tensor(p, "model.layers.0.mlp.experts.7.down_proj.weight", NVF_DTYPE_BF16, 320, 192, -1);
    CHECK(plan_find(p, "model.layers.0.mlp.experts.8.up_proj.weight") == NULL);
    CHECK(plan_find(p, "model.layers.2.input_layernorm.weight") == NULL);
    /* total: embed + head 2*1024*320, per layer 4 norms (2*320+2*64), attention
     * (256+128+128)*320 + 320*256, router 8*320, experts 8*3*192*320; 2 bytes each. */
    uint64_t per_layer = 2 * 320 + 2 * 64 + 512 * 320 + 320 * 256 + 8 * 320 + 24 * 192 * 320;
    CHECK_EQ_U64(p->total_size, 2 * (2 * 1024 * 320 + 320 + 2 * per_layer));
    /* Automatic shard size: a quarter of the total rounded up to a decimal MB. */
    CHECK_EQ_U64(p->max_shard_size, (p->total_size / 4 / 1000000 + 1) * 1000000);
    CHECK(p->n_shards >= 3);

    char *cfg = nvf_synth_config_json(p);
    cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
    CHECK(c != NULL);
    if (c) {
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "model_type")->valuestring, "qwen3_moe");
        CHECK_EQ_STR(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "architectures"), 0)->valuestring,
                     "Qwen3MoeForCausalLM");
        CHECK(cJSON_GetObjectItem(c, "num_experts")->valueint == 8);
        CHECK(cJSON_GetObjectItem(c, "num_experts_per_tok")->valueint == 2);
        CHECK(cJSON_GetObjectItem(c, "moe_intermediate_size")->valueint == 192);
        CHECK(cJSON_GetObjectItem(c, "hidden_size")->valueint == 320);
        CHECK(cJSON_GetObjectItem(c, "head_dim")->valueint == 64);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(c, "norm_topk_prob")));
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(c, "tie_word_embeddings")));
        CHECK(cJSON_GetObjectItem(c, "decoder_sparse_step")->valueint == 1);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(c, "mlp_only_layers")) == 0);
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "hidden_act")->valuestring, "silu");
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "torch_dtype")->valuestring, "bfloat16");
        CHECK(cJSON_GetObjectItem(c, "quantization_config") == NULL);
    }
    cJSON_Delete(c);
    free(cfg);
    nvf_synth_plan_free(p);
}

static void test_deepseek_plan(void) {
    nvf_synth_options o;
    nvf_synth_plan *p = NULL;
    nvf_synth_options_init(&o);
    o.preset = NVF_SYNTH_PRESET_DEEPSEEK_V3;
    o.dtype = NVF_SYNTH_DTYPE_FP8_BLOCK;
    CHECK(nvf_synth_plan_build(&p, &o) == 0);
    if (!p)
        return;
    const nvf_dtype F8 = NVF_DTYPE_F8_E4M3, F32 = NVF_DTYPE_F32, B = NVF_DTYPE_BF16;
    /* MLA with q_lora_rank 192, kv_lora_rank 128, 4 heads, nope 32, rope 16, v 32. */
    check_tensor(p, "model.layers.1.self_attn.q_a_proj.weight", F8, 192, 320, -1);
    check_tensor(p, "model.layers.1.self_attn.q_a_proj.weight_scale_inv", F32, 2, 3, -1);
    check_tensor(p, "model.layers.1.self_attn.q_a_layernorm.weight", B, 192, -1, -1);
    check_tensor(p, "model.layers.1.self_attn.q_b_proj.weight", F8, 4 * 48, 192, -1);
    check_tensor(p, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", F8, 144, 320, -1);
    check_tensor(p, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight_scale_inv", F32, 2, 3, -1);
    check_tensor(p, "model.layers.1.self_attn.kv_a_layernorm.weight", B, 128, -1, -1);
    check_tensor(p, "model.layers.1.self_attn.kv_b_proj.weight", F8, 4 * 64, 128, -1);
    check_tensor(p, "model.layers.1.self_attn.kv_b_proj.weight_scale_inv", F32, 2, 1, -1);
    check_tensor(p, "model.layers.1.self_attn.o_proj.weight", F8, 320, 128, -1);
    /* Layer 0 dense (first_k_dense_replace 1), intermediate 3 * 320. */
    check_tensor(p, "model.layers.0.mlp.gate_proj.weight", F8, 960, 320, -1);
    check_tensor(p, "model.layers.0.mlp.down_proj.weight", F8, 320, 960, -1);
    check_tensor(p, "model.layers.0.mlp.down_proj.weight_scale_inv", F32, 3, 8, -1);
    CHECK(plan_find(p, "model.layers.0.mlp.gate.weight") == NULL);
    check_tensor(p, "model.layers.2.mlp.gate.weight", B, 8, 320, -1);
    CHECK(plan_find(p, "model.layers.2.mlp.gate.weight_scale_inv") == NULL);
    check_tensor(p, "model.layers.2.mlp.gate.e_score_correction_bias", F32, 8, -1, -1);
    check_tensor(p, "model.layers.2.mlp.experts.7.down_proj.weight", F8, 320, 192, -1);
    check_tensor(p, "model.layers.2.mlp.experts.7.down_proj.weight_scale_inv", F32, 3, 2, -1);
    check_tensor(p, "model.layers.2.mlp.shared_experts.up_proj.weight", F8, 192, 320, -1);
    check_tensor(p, "model.layers.2.mlp.shared_experts.down_proj.weight_scale_inv", F32, 3, 2, -1);
    check_tensor(p, "model.embed_tokens.weight", B, 1024, 320, -1);
    check_tensor(p, "lm_head.weight", B, 1024, 320, -1);
    CHECK(plan_find(p, "model.layers.3.input_layernorm.weight") == NULL);

    char *cfg = nvf_synth_config_json(p);
    cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
    CHECK(c != NULL);
    if (c) {
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "model_type")->valuestring, "deepseek_v3");
        CHECK(cJSON_GetObjectItem(c, "n_routed_experts")->valueint == 8);
        CHECK(cJSON_GetObjectItem(c, "n_shared_experts")->valueint == 1);
        CHECK(cJSON_GetObjectItem(c, "first_k_dense_replace")->valueint == 1);
        CHECK(cJSON_GetObjectItem(c, "n_group")->valueint == 4);
        CHECK(cJSON_GetObjectItem(c, "topk_group")->valueint == 2);
        CHECK(cJSON_GetObjectItem(c, "routed_scaling_factor")->valuedouble == 2.5);
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "scoring_func")->valuestring, "sigmoid");
        CHECK_EQ_STR(cJSON_GetObjectItem(c, "topk_method")->valuestring, "noaux_tc");
        CHECK(cJSON_GetObjectItem(c, "kv_lora_rank")->valueint == 128);
        CHECK(cJSON_GetObjectItem(c, "qk_rope_head_dim")->valueint == 16);
        cJSON *q = cJSON_GetObjectItem(c, "quantization_config");
        CHECK(q != NULL);
        if (q) {
            CHECK_EQ_STR(cJSON_GetObjectItem(q, "quant_method")->valuestring, "fp8");
            CHECK_EQ_STR(cJSON_GetObjectItem(q, "fmt")->valuestring, "e4m3");
            CHECK_EQ_STR(cJSON_GetObjectItem(q, "activation_scheme")->valuestring, "dynamic");
            cJSON *bs = cJSON_GetObjectItem(q, "weight_block_size");
            CHECK(cJSON_GetArraySize(bs) == 2 && cJSON_GetArrayItem(bs, 0)->valueint == 128 &&
                  cJSON_GetArrayItem(bs, 1)->valueint == 128);
            CHECK(cJSON_GetObjectItem(q, "scale_fmt") == NULL);
        }
    }
    cJSON_Delete(c);
    free(cfg);
    nvf_synth_plan_free(p);
}

static void test_fused_plan(void) {
    nvf_synth_options o;
    nvf_synth_plan *p = NULL;
    nvf_synth_options_init(&o);
    o.fused_experts = 1;
    o.dtype = NVF_SYNTH_DTYPE_FP8_BLOCK;
    o.scale_fmt = NVF_SYNTH_SCALE_UE8M0;
    CHECK(nvf_synth_plan_build(&p, &o) == 0);
    if (!p)
        return;
    const nvf_dtype F8 = NVF_DTYPE_F8_E4M3, F32 = NVF_DTYPE_F32;
    check_tensor(p, "model.layers.1.mlp.experts.gate_up_proj", F8, 8, 384, 320);
    check_tensor(p, "model.layers.1.mlp.experts.gate_up_proj_scale_inv", F32, 8, 3, 3);
    check_tensor(p, "model.layers.1.mlp.experts.down_proj", F8, 8, 320, 192);
    check_tensor(p, "model.layers.1.mlp.experts.down_proj_scale_inv", F32, 8, 3, 2);
    check_tensor(p, "model.layers.1.mlp.gate.weight", NVF_DTYPE_BF16, 8, 320, -1);
    CHECK(plan_find(p, "model.layers.1.mlp.experts.0.up_proj.weight") == NULL);
    char *cfg = nvf_synth_config_json(p);
    cJSON *c = cfg ? cJSON_Parse(cfg) : NULL;
    cJSON *q = cJSON_GetObjectItem(c, "quantization_config");
    CHECK(q != NULL);
    if (q) {
        CHECK_EQ_STR(cJSON_GetObjectItem(q, "scale_fmt")->valuestring, "ue8m0");
        /* Qwen3-FP8 lists what stays BF16: router, norms, embeddings, head; no linear. */
        cJSON *keep = cJSON_GetObjectItem(q, "modules_to_not_convert");
        int head = 0, router = 0, qnorm = 0, linear = 0;
        cJSON *it;
        cJSON_ArrayForEach(it, keep) {
            head += strcmp(it->valuestring, "lm_head") == 0;
            router += strcmp(it->valuestring, "model.layers.1.mlp.gate") == 0;
            qnorm += strcmp(it->valuestring, "model.layers.0.self_attn.q_norm") == 0;
            linear += strstr(it->valuestring, "proj") != NULL;
        }
        CHECK(head == 1 && router == 1 && qnorm == 1 && linear == 0);
    }
    cJSON_Delete(c);
    free(cfg);
    nvf_synth_plan_free(p);
}

/* A written checkpoint opened back ----------------------------------------------------------- */

typedef struct ckpt {
    nvf_st_index *idx;
    nvf_st_file **shards;
    size_t n;
} ckpt;

static int ckpt_open(ckpt *c, const char *dir) {
    memset(c, 0, sizeof *c);
    char *ip = nvf_path_join(dir, "model.safetensors.index.json");
    int rc = nvf_st_index_read(&c->idx, ip);
    free(ip);
    if (rc != 0)
        return rc;
    c->n = c->idx->n_files;
    c->shards = calloc(c->n, sizeof *c->shards);
    for (size_t i = 0; i < c->n; i++) {
        char *sp = nvf_path_join(dir, c->idx->file_list[i]);
        rc = nvf_st_open(&c->shards[i], sp);
        free(sp);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void ckpt_close(ckpt *c) {
    for (size_t i = 0; i < c->n; i++)
        nvf_st_close(c->shards[i]);
    free(c->shards);
    nvf_st_index_free(c->idx);
}

static const nvf_st_tensor *ckpt_find(const ckpt *c, const char *name) {
    const char *file = nvf_st_index_file(c->idx, name);
    for (size_t i = 0; file && i < c->n; i++)
        if (strcmp(c->idx->file_list[i], file) == 0)
            return nvf_st_find(c->shards[i], name);
    return NULL;
}

static int write_ckpt(const char *name, nvf_synth_preset preset, nvf_synth_dtype dtype,
                      uint64_t seed, int fused, uint64_t max_shard, int threads) {
    nvf_synth_options o;
    nvf_synth_options_init(&o);
    o.preset = preset;
    o.dtype = dtype;
    o.seed = seed;
    o.fused_experts = fused;
    o.max_shard_size = max_shard;
    o.threads = threads;
    char *dir = dir_of(name);
    nvf_synth_summary s;
    int rc = nvf_synth_write(&s, dir, &o);
    CHECK_MSG(rc == 0, "synth %s: %s", name, nvf_error_last());
    if (rc == 0) {
        CHECK_EQ_STR(s.files[s.n_files - 1].name, "config.json");
        nvf_synth_summary_free(&s);
    }
    free(dir);
    return rc;
}

/* The index, the shards and the plan agree; shards respect the size limit. */
static void test_layout(void) {
    const uint64_t max = 1000000;
    if (write_ckpt("layout", NVF_SYNTH_PRESET_DEEPSEEK_V3, NVF_SYNTH_DTYPE_FP8_BLOCK, 3, 0, max,
                   2) != 0)
        return;
    nvf_synth_options o;
    nvf_synth_plan *p = NULL;
    nvf_synth_options_init(&o);
    o.preset = NVF_SYNTH_PRESET_DEEPSEEK_V3;
    o.dtype = NVF_SYNTH_DTYPE_FP8_BLOCK;
    o.seed = 3;
    o.max_shard_size = max;
    CHECK(nvf_synth_plan_build(&p, &o) == 0);
    char *dir = dir_of("layout");
    ckpt c;
    int rc = ckpt_open(&c, dir);
    CHECK_MSG(rc == 0, "%s", nvf_error_last());
    if (rc == 0 && p) {
        CHECK_EQ_U64(c.idx->n, p->n_tensors);
        CHECK_EQ_U64(c.n, p->n_shards);
        uint64_t sum = 0, by_shard = 0;
        size_t tensors_in_shards = 0;
        for (size_t i = 0; i < p->n_tensors; i++) {
            const nvf_st_tensor *t = ckpt_find(&c, p->tensors[i].name);
            CHECK_MSG(t != NULL, "%s not found through the index", p->tensors[i].name);
            if (t) {
                CHECK(t->dtype == p->tensors[i].dtype);
                CHECK_EQ_U64(t->end - t->begin, p->tensors[i].nbytes);
                sum += t->end - t->begin;
            }
        }
        for (size_t k = 0; k < c.n; k++) {
            char want[64];
            snprintf(want, sizeof want, "model-%05zu-of-%05zu.safetensors", k + 1, c.n);
            CHECK_EQ_STR(c.idx->file_list[k], want);
            const nvf_st_file *f = c.shards[k];
            uint64_t data = f->file_size - f->data_start;
            by_shard += data;
            tensors_in_shards += f->n_tensors;
            CHECK_EQ_U64(f->data_start % 8, 0);
            CHECK_EQ_STR(nvf_st_meta(f, "format"), "pt");
            /* Over the limit only when one weight (with its scale) alone exceeds it. */
            int fp8_unit = f->n_tensors == 2 && f->tensors[0].dtype == NVF_DTYPE_F8_E4M3;
            CHECK_MSG(data <= max || f->n_tensors == 1 || fp8_unit, "shard %zu holds %llu bytes", k,
                      (unsigned long long)data);
        }
        CHECK_EQ_U64(c.idx->total_size, p->total_size);
        CHECK_EQ_U64(sum, p->total_size);
        CHECK_EQ_U64(by_shard, p->total_size);
        CHECK_EQ_U64(tensors_in_shards, p->n_tensors);
        CHECK(c.n >= 6);
        /* Every side file is there and parses. */
        const char *side[] = {"config.json", "generation_config.json", "tokenizer.json",
                              "tokenizer_config.json", "special_tokens_map.json"};
        for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
            char *path = nvf_path_join(dir, side[i]), *text = NULL;
            size_t len = 0;
            CHECK(nvf_file_read_all(&text, &len, path, 1 << 20) == 0);
            cJSON *j = text ? cJSON_Parse(text) : NULL;
            CHECK_MSG(cJSON_IsObject(j), "%s is not a JSON object", side[i]);
            cJSON_Delete(j);
            free(text);
            free(path);
        }
        char *readme = nvf_path_join(dir, "README.md");
        CHECK(nvf_path_is_file(readme));
        free(readme);
    }
    ckpt_close(&c);
    free(dir);
    nvf_synth_plan_free(p);
}

static int files_equal(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = nvf_file_read_all(&x, &nx, a, 1 << 28) == 0 &&
               nvf_file_read_all(&y, &ny, b, 1 << 28) == 0 && nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

/* Same seed: every file byte for byte, whatever the thread count; another seed differs. */
static void test_determinism(void) {
    if (write_ckpt("det1", NVF_SYNTH_PRESET_QWEN3_MOE, NVF_SYNTH_DTYPE_FP8_BLOCK, 11, 0, 0, 1) ||
        write_ckpt("det2", NVF_SYNTH_PRESET_QWEN3_MOE, NVF_SYNTH_DTYPE_FP8_BLOCK, 11, 0, 0, 3) ||
        write_ckpt("det3", NVF_SYNTH_PRESET_QWEN3_MOE, NVF_SYNTH_DTYPE_FP8_BLOCK, 12, 0, 0, 2))
        return;
    char *d1 = dir_of("det1"), *d2 = dir_of("det2"), *d3 = dir_of("det3");
    const char *files[] = {"config.json",
                           "generation_config.json",
                           "tokenizer.json",
                           "tokenizer_config.json",
                           "special_tokens_map.json",
                           "README.md",
                           "model.safetensors.index.json",
                           "model-00001-of-00003.safetensors",
                           "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *a = nvf_path_join(d1, files[i]), *b = nvf_path_join(d2, files[i]);
        CHECK_MSG(files_equal(a, b), "%s differs between two runs", files[i]);
        free(a);
        free(b);
    }
    char *a = nvf_path_join(d1, "model-00002-of-00003.safetensors");
    char *b = nvf_path_join(d3, "model-00002-of-00003.safetensors");
    CHECK_MSG(!files_equal(a, b), "seeds 11 and 12 give the same shard");
    free(a);
    free(b);
    free(d1);
    free(d2);
    free(d3);
}

static uint16_t bf16_at(const nvf_st_tensor *t, uint64_t i) {
    uint16_t h;
    memcpy(&h, t->data + 2 * i, 2);
    return h;
}

/* Fused gate_up_proj[e] = [gate_e; up_e] and down_proj[e] = down_e, bit for bit. */
static void test_fused_values(void) {
    if (write_ckpt("unfused", NVF_SYNTH_PRESET_QWEN3_MOE, NVF_SYNTH_DTYPE_BF16, 5, 0, 0, 2) ||
        write_ckpt("fused", NVF_SYNTH_PRESET_QWEN3_MOE, NVF_SYNTH_DTYPE_BF16, 5, 1, 0, 2))
        return;
    char *du = dir_of("unfused"), *df = dir_of("fused");
    ckpt u, f;
    if (ckpt_open(&u, du) == 0 && ckpt_open(&f, df) == 0) {
        const nvf_st_tensor *gu = ckpt_find(&f, "model.layers.1.mlp.experts.gate_up_proj");
        const nvf_st_tensor *dn = ckpt_find(&f, "model.layers.1.mlp.experts.down_proj");
        CHECK(gu && dn);
        const uint64_t IH = 192 * 320;
        for (int e = 0; gu && dn && e < 8; e++) {
            char name[128];
            snprintf(name, sizeof name, "model.layers.1.mlp.experts.%d.gate_proj.weight", e);
            const nvf_st_tensor *g = ckpt_find(&u, name);
            snprintf(name, sizeof name, "model.layers.1.mlp.experts.%d.up_proj.weight", e);
            const nvf_st_tensor *up = ckpt_find(&u, name);
            snprintf(name, sizeof name, "model.layers.1.mlp.experts.%d.down_proj.weight", e);
            const nvf_st_tensor *d = ckpt_find(&u, name);
            CHECK(g && up && d);
            if (!g || !up || !d)
                break;
            CHECK(memcmp(gu->data + 2 * (2 * e) * IH, g->data, 2 * IH) == 0);
            CHECK(memcmp(gu->data + 2 * (2 * e + 1) * IH, up->data, 2 * IH) == 0);
            CHECK(memcmp(dn->data + 2 * e * IH, d->data, 2 * IH) == 0);
        }
    }
    ckpt_close(&u);
    ckpt_close(&f);
    free(du);
    free(df);
}

/* Sample statistics of a BF16 tensor. */
static void stats(const nvf_st_tensor *t, double *mean, double *std) {
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < t->numel; i++) {
        double v = nvf_bf16_to_f32(bf16_at(t, i));
        s += v;
        s2 += v * v;
    }
    *mean = s / (double)t->numel;
    *std = sqrt(s2 / (double)t->numel - *mean * *mean);
}

static void test_statistics(void) {
    char *dir = dir_of("unfused");
    ckpt c;
    if (ckpt_open(&c, dir) == 0) {
        double m, s;
        const nvf_st_tensor *t = ckpt_find(&c, "model.embed_tokens.weight");
        stats(t, &m, &s);
        /* 327,680 values: outliers (1/4096, x8..32, mean square x ~360) add ~4% to the std. */
        CHECK_MSG(fabs(m) < 0.001 && s > 0.0195 && s < 0.0225, "embed mean %g std %g", m, s);
        t = ckpt_find(&c, "model.layers.0.mlp.experts.3.down_proj.weight");
        stats(t, &m, &s);
        CHECK_MSG(fabs(m) < 0.001 && s > 0.019 && s < 0.023, "expert mean %g std %g", m, s);
        t = ckpt_find(&c, "model.layers.0.mlp.gate.weight");
        stats(t, &m, &s);
        CHECK_MSG(fabs(m) < 0.002 && s > 0.018 && s < 0.022, "router mean %g std %g", m, s);
        t = ckpt_find(&c, "model.layers.1.post_attention_layernorm.weight");
        stats(t, &m, &s);
        CHECK_MSG(fabs(m - 1.0) < 0.01 && s > 0.04 && s < 0.06, "norm mean %g std %g", m, s);
    }
    ckpt_close(&c);
    free(dir);
}

/* Every FP8 block of `name` recomputed from the BF16 checkpoint of the same seed. */
static void check_fp8_tensor(const ckpt *b, const ckpt *q, const char *name, int ue8m0) {
    char sname[160];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const nvf_st_tensor *w = ckpt_find(b, name), *x = ckpt_find(q, name), *s = ckpt_find(q, sname);
    CHECK_MSG(w && x && s, "%s: missing", name);
    if (!w || !x || !s)
        return;
    int64_t R = w->shape[0], C = w->shape[1], rb = (R + 127) / 128, cb = (C + 127) / 128;
    CHECK(s->ndim == 2 && s->shape[0] == rb && s->shape[1] == cb);
    CHECK(x->dtype == NVF_DTYPE_F8_E4M3 && s->dtype == NVF_DTYPE_F32);
    int bad = 0;
    for (int64_t i = 0; i < rb; i++) {
        for (int64_t j = 0; j < cb; j++) {
            float amax = 0.0f;
            for (int64_t r = i * 128; r < R && r < i * 128 + 128; r++)
                for (int64_t c = j * 128; c < C && c < j * 128 + 128; c++) {
                    float v = fabsf(nvf_bf16_to_f32(bf16_at(w, (uint64_t)(r * C + c))));
                    amax = v > amax ? v : amax;
                }
            float want = amax / 448.0f, got;
            memcpy(&got, s->data + 4 * (i * cb + j), 4);
            if (ue8m0) {
                /* A power of two in [amax/448, 2*amax/448). */
                uint32_t bits = nvf_f32_bits(got);
                CHECK_MSG((bits & 0x007FFFFF) == 0 && got >= want && got < 2.0f * want,
                          "%s block (%lld,%lld): scale %a for amax %a", name, (long long)i,
                          (long long)j, got, amax);
            } else {
                CHECK_MSG(nvf_f32_bits(got) == nvf_f32_bits(want),
                          "%s block (%lld,%lld): scale %a, expected %a", name, (long long)i,
                          (long long)j, got, want);
            }
            for (int64_t r = i * 128; r < R && r < i * 128 + 128; r++)
                for (int64_t c = j * 128; c < C && c < j * 128 + 128; c++) {
                    uint64_t k = (uint64_t)(r * C + c);
                    float v = nvf_bf16_to_f32(bf16_at(w, k));
                    uint8_t byte = x->data[k];
                    /* Dequantized within half an E4M3 step: 2^-4 relative, or half the
                     * subnormal step 2^-9 of the block scale. */
                    float d = nvf_e4m3_to_f32(byte) * got, err = fabsf(d - v);
                    if (byte != nvf_f32_to_e4m3_sat(v / got) ||
                        (err > fabsf(v) * 0.0625f && err > got * 0.001953125f))
                        bad++;
                }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d FP8 values off", name, bad);
}

static void test_fp8_blocks(void) {
    if (write_ckpt("ds_bf16", NVF_SYNTH_PRESET_DEEPSEEK_V3, NVF_SYNTH_DTYPE_BF16, 9, 0, 0, 2) ||
        write_ckpt("ds_fp8", NVF_SYNTH_PRESET_DEEPSEEK_V3, NVF_SYNTH_DTYPE_FP8_BLOCK, 9, 0, 0, 3))
        return;
    nvf_synth_options o;
    nvf_synth_options_init(&o);
    o.preset = NVF_SYNTH_PRESET_DEEPSEEK_V3;
    o.dtype = NVF_SYNTH_DTYPE_FP8_BLOCK;
    o.scale_fmt = NVF_SYNTH_SCALE_UE8M0;
    o.seed = 9;
    char *d8 = dir_of("ds_ue8m0");
    CHECK(nvf_synth_write(NULL, d8, &o) == 0);
    free(d8);
    char *db = dir_of("ds_bf16"), *dq = dir_of("ds_fp8"), *du = dir_of("ds_ue8m0");
    ckpt b, q, u;
    if (ckpt_open(&b, db) == 0 && ckpt_open(&q, dq) == 0 && ckpt_open(&u, du) == 0) {
        /* Partial edge blocks in rows (144, 320) and columns (320, 192, 960). */
        const char *names[] = {"model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
                               "model.layers.0.mlp.down_proj.weight",
                               "model.layers.2.mlp.experts.5.down_proj.weight",
                               "model.layers.2.mlp.shared_experts.gate_proj.weight"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            check_fp8_tensor(&b, &q, names[i], 0);
            check_fp8_tensor(&b, &u, names[i], 1);
        }
        /* What stays in source precision is bit-identical to the BF16 checkpoint. */
        const char *same[] = {"model.layers.2.mlp.gate.weight",
                              "model.layers.2.mlp.gate.e_score_correction_bias",
                              "model.layers.1.self_attn.kv_a_layernorm.weight", "lm_head.weight"};
        for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
            const nvf_st_tensor *x = ckpt_find(&b, same[i]), *y = ckpt_find(&q, same[i]);
            CHECK_MSG(x && y && x->end - x->begin == y->end - y->begin &&
                          memcmp(x->data, y->data, x->end - x->begin) == 0,
                      "%s differs between bf16 and fp8-block", same[i]);
        }
    }
    ckpt_close(&b);
    ckpt_close(&q);
    ckpt_close(&u);
    free(db);
    free(dq);
    free(du);
}

static void test_force(void) {
    char *dir = dir_of("force");
    char *note = nvf_path_join(dir, "notes.txt");
    char *stale = nvf_path_join(dir, "model-00009-of-00009.safetensors");
    nvf_synth_options o;
    nvf_synth_options_init(&o);
    CHECK(nvf_mkdir_p(dir) == 0);
    CHECK(nvf_file_write_atomic(note, "keep", 4) == 0);
    CHECK(nvf_file_write_atomic(stale, "old", 3) == 0);
    CHECK(nvf_synth_write(NULL, dir, &o) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "not empty");
    o.force = 1;
    CHECK(nvf_synth_write(NULL, dir, &o) == 0);
    CHECK(nvf_path_is_file(note));
    CHECK(!nvf_path_is_file(stale));
    /* A file where the directory should be. */
    CHECK(nvf_synth_write(NULL, note, &o) == NVF_E_INVALID);
    free(dir);
    free(note);
    free(stale);
}

int main(void) {
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_options();
    test_qwen3_plan();
    test_deepseek_plan();
    test_fused_plan();
    test_layout();
    test_determinism();
    test_fused_values();
    test_statistics();
    test_fp8_blocks();
    test_force();
    nftw(g_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary("test_synth");
}
