/*
 * The checkpoint model: small checkpoints built here tensor by tensor, so every expected
 * number (formats, layer structure, plan counts and bytes) follows from the construction.
 * Also the transformers-written fixtures of tests/data/hf (their numbers from the README and
 * PROVENANCE.json there).
 */
#include "check.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tdef {
    const char *name;
    nvf_dtype dtype;
    int32_t ndim;
    int64_t shape[3];
} tdef;

#define MAX_DEFS 128

static char g_root[256];

static void path_in(char *buf, size_t len, const char *dir, const char *file) {
    snprintf(buf, len, "%s/%s%s%s", g_root, dir, file ? "/" : "", file ? file : "");
}

static void make_dir(const char *dir) {
    char p[512];
    path_in(p, sizeof p, dir, NULL);
    mkdir(p, 0755);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char p[512];
    path_in(p, sizeof p, dir, file);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

/* Write a shard of zero-filled tensors. */
static void write_shard(const char *dir, const char *file, const tdef *defs, size_t n) {
    nvf_st_entry entries[MAX_DEFS];
    const void *data[MAX_DEFS];
    void *bufs[MAX_DEFS];
    char p[512];
    for (size_t i = 0; i < n; i++) {
        entries[i].name = defs[i].name;
        entries[i].dtype = defs[i].dtype;
        entries[i].ndim = defs[i].ndim;
        uint64_t numel = 1;
        for (int d = 0; d < defs[i].ndim; d++) {
            entries[i].shape[d] = defs[i].shape[d];
            numel *= (uint64_t)defs[i].shape[d];
        }
        uint64_t bytes = numel * nvf_dtype_bits(defs[i].dtype) / 8;
        bufs[i] = calloc(bytes ? bytes : 1, 1);
        data[i] = bufs[i];
    }
    path_in(p, sizeof p, dir, file);
    int rc = nvf_st_write_file(p, entries, data, n);
    CHECK_MSG(rc == 0, "write %s: %s", p, nvf_error_last());
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
}

/* Write an index mapping every tensor of each (defs, file) group. */
static void write_index(const char *dir, uint64_t total, const char *const *names,
                        const char *const *files, size_t n) {
    char p[512];
    path_in(p, sizeof p, dir, "model.safetensors.index.json");
    int rc = nvf_st_index_write(p, total, names, files, n);
    CHECK_MSG(rc == 0, "index %s: %s", p, nvf_error_last());
}

static nvf_ckpt *open_ok(const char *dir) {
    char p[512];
    path_in(p, sizeof p, dir, NULL);
    nvf_ckpt *ck = NULL;
    int rc = nvf_ckpt_open(&ck, p);
    CHECK_MSG(rc == 0 && ck, "open %s: %s", p, nvf_error_last());
    return ck;
}

static int open_fail(const char *dir) {
    char p[512];
    path_in(p, sizeof p, dir, NULL);
    nvf_ckpt *ck = NULL;
    nvf_error_clear();
    int rc = nvf_ckpt_open(&ck, p);
    CHECK(ck == NULL);
    nvf_ckpt_close(ck);
    return rc;
}

static int has_warning(const nvf_ckpt *ck, const char *needle) {
    for (size_t i = 0; i < ck->n_warnings; i++) {
        if (strstr(ck->warnings[i], needle))
            return 1;
    }
    return 0;
}

static const nvf_plan_entry *plan_of(const nvf_ckpt *ck, const nvf_plan *p, const char *name) {
    size_t i = nvf_ckpt_find_index(ck, name);
    CHECK_MSG(i != NVF_CKPT_NONE, "no tensor %s", name);
    return i == NVF_CKPT_NONE ? NULL : &p->entries[i];
}

/* Qwen3-MoE-like, BF16, per-expert: 2 layers x 4 experts, H=64, I=32, two shards + index. */
static void test_qwen3_like(void) {
    static char names[64][96];
    tdef a[MAX_DEFS], b[MAX_DEFS];
    size_t na = 0, nb = 0, nn = 0;
    const char *idx_names[MAX_DEFS], *idx_files[MAX_DEFS];
    make_dir("qwen");
    a[na++] = (tdef){"model.embed_tokens.weight", NVF_DTYPE_BF16, 2, {128, 64}};
    a[na++] = (tdef){"lm_head.weight", NVF_DTYPE_BF16, 2, {128, 64}};
    a[na++] = (tdef){"model.norm.weight", NVF_DTYPE_BF16, 1, {64}};
    for (int l = 0; l < 2; l++) {
        tdef *dst = l == 0 ? a : b;
        size_t *nd = l == 0 ? &na : &nb;
        static const char *const fixed[] = {"input_layernorm.weight", "self_attn.q_proj.weight",
                                            "mlp.gate.weight"};
        static const int64_t fixed_shape[3][2] = {{64, 0}, {64, 64}, {4, 64}};
        for (int k = 0; k < 3; k++) {
            snprintf(names[nn], sizeof names[nn], "model.layers.%d.%s", l, fixed[k]);
            dst[(*nd)++] = (tdef){names[nn++],
                                  NVF_DTYPE_BF16,
                                  k == 0 ? 1 : 2,
                                  {fixed_shape[k][0], fixed_shape[k][1]}};
        }
        for (int e = 0; e < 4; e++) {
            static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
            for (int p = 0; p < 3; p++) {
                snprintf(names[nn], sizeof names[nn], "model.layers.%d.mlp.experts.%d.%s.weight", l,
                         e, proj[p]);
                int64_t out = p == 2 ? 64 : 32, in = p == 2 ? 32 : 64;
                dst[(*nd)++] = (tdef){names[nn++], NVF_DTYPE_BF16, 2, {out, in}};
            }
        }
    }
    write_shard("qwen", "model-00001-of-00002.safetensors", a, na);
    write_shard("qwen", "model-00002-of-00002.safetensors", b, nb);
    size_t ni = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const tdef *t = i < na ? &a[i] : &b[i - na];
        idx_names[ni] = t->name;
        idx_files[ni++] =
            i < na ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= (uint64_t)t->shape[d];
        total += numel * 2;
    }
    write_index("qwen", total, idx_names, idx_files, ni);
    write_text("qwen", "config.json",
               "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"moe_intermediate_size\": "
               "32, \"num_experts\": 4, \"num_experts_per_tok\": 2, \"norm_topk_prob\": true, "
               "\"hidden_act\": \"silu\", \"torch_dtype\": \"bfloat16\"}");

    nvf_ckpt *ck = open_ok("qwen");
    if (!ck)
        return;
    CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), "bf16");
    CHECK_EQ_STR(ck->quant.source, "tensor dtypes");
    CHECK_EQ_U64(ck->n_files, 2);
    CHECK_EQ_STR(ck->index_name, "model.safetensors.index.json");
    CHECK_EQ_U64(ck->n_tensors, 33); /* 3 + 2 x (3 + 12) */
    /* 2 x 128x64 + 64 + 2 x (64 + 64x64 + 4x64 + 12 x 2048), 2 bytes each */
    CHECK_EQ_U64(ck->data_bytes, 2 * (2 * 8192 + 64 + 2 * (64 + 4096 + 256 + 12 * 2048)));
    CHECK_EQ_U64(ck->index_total_size, ck->data_bytes);
    CHECK_EQ_U64(ck->n_warnings, 0);
    const nvf_ckpt_tensor *t = nvf_ckpt_find(ck, "model.layers.1.mlp.experts.3.down_proj.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_STR(ck->files[t->file].name, "model-00002-of-00002.safetensors");
        CHECK_EQ_STR(nvf_ckpt_role_name(t->role), "expert_weight");
        CHECK_EQ_U64(t->st->shape[0], 64);
    }
    CHECK(nvf_ckpt_find(ck, "model.layers.2.mlp.gate.weight") == NULL);
    CHECK_EQ_STR(nvf_ckpt_role_name(nvf_ckpt_find(ck, "model.layers.0.mlp.gate.weight")->role),
                 "router");
    CHECK_EQ_STR(nvf_ckpt_role_name(nvf_ckpt_find(ck, "model.norm.weight")->role), "norm");
    CHECK_EQ_STR(nvf_ckpt_role_name(nvf_ckpt_find(ck, "model.embed_tokens.weight")->role),
                 "embedding");
    CHECK_EQ_STR(nvf_ckpt_role_name(nvf_ckpt_find(ck, "lm_head.weight")->role), "lm_head");
    CHECK_EQ_STR(
        nvf_ckpt_role_name(nvf_ckpt_find(ck, "model.layers.1.self_attn.q_proj.weight")->role),
        "attention");

    const nvf_moe *m = &ck->moe;
    CHECK_EQ_U64(m->n_layers, 2);
    CHECK_EQ_U64(m->n_moe, 2);
    CHECK_EQ_U64(m->n_dense, 0);
    CHECK_EQ_U64(m->experts_present, 8);
    CHECK_EQ_U64(m->experts_missing, 0);
    CHECK_EQ_STR(nvf_router_kind_name(m->config.router), "softmax_topk");
    CHECK_EQ_U64(m->config.top_k, 2);
    CHECK_EQ_U64(m->config.n_experts, 4);
    CHECK_EQ_STR(m->config.n_experts_key, "num_experts");
    CHECK(m->config.norm_topk_prob == 1);
    CHECK_EQ_STR(m->config.hidden_act, "silu");
    for (size_t i = 0; i < m->n_layers; i++) {
        const nvf_moe_layer *l = &m->layers[i];
        CHECK_EQ_U64(l->index, i);
        CHECK(l->kind == NVF_LAYER_MOE);
        CHECK_EQ_U64(l->n_experts, 4);
        CHECK_EQ_U64(l->n_present, 4);
        CHECK_EQ_U64(l->hidden, 64);
        CHECK_EQ_U64(l->intermediate, 32);
        CHECK(!l->fused && l->has_router && !l->has_router_bias && !l->has_shared);
    }

    nvf_plan *p = NULL;
    CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
    if (p) {
        CHECK_EQ_U64(p->n_quantize, 24);
        CHECK_EQ_U64(p->n_skip, 0);
        CHECK_EQ_U64(p->n_drop, 0);
        CHECK_EQ_U64(p->n_keep, 9);
        CHECK_EQ_U64(p->bytes_quantize, 24 * 2048 * 2);
        /* per 32x64 linear: 1024 packed bytes + 128 scales + 2 x 4 scalar bytes */
        CHECK_EQ_U64(p->bytes_nvfp4, 24 * (1024 + 128 + 8));
        CHECK_EQ_STR(plan_of(ck, p, "model.layers.0.mlp.gate.weight")->reason, "not in scope");
    }
    nvf_plan_free(p);
    /* Everything in scope but the routers: norms (1-D) and the embedding are skipped. */
    const char *all[] = {"*"}, *no_router[] = {"*.mlp.gate.*"};
    p = NULL;
    CHECK(nvf_ckpt_plan(&p, ck, all, 1, no_router, 1) == 0);
    if (p) {
        CHECK_EQ_U64(p->n_quantize, 24 + 2 + 1); /* experts, q_proj x2, lm_head */
        CHECK_EQ_U64(p->n_skip, 4);              /* 3 norms, the embedding */
        CHECK_EQ_U64(p->n_keep, 2);              /* the routers */
        CHECK_EQ_STR(plan_of(ck, p, "model.layers.1.mlp.gate.weight")->reason,
                     "excluded by '*.mlp.gate.*'");
        CHECK_EQ_STR(plan_of(ck, p, "model.norm.weight")->reason,
                     "1-D tensor, not a 2-D linear weight");
        CHECK_EQ_STR(plan_of(ck, p, "model.embed_tokens.weight")->reason,
                     "embedding table, not a linear layer");
    }
    nvf_plan_free(p);
    nvf_ckpt_close(ck);
}

/* Fused 3-D experts, with and without the ".weight" suffix, one model.safetensors. */
static void test_fused(void) {
    make_dir("fused");
    tdef d[] = {
        {"model.layers.0.mlp.experts.gate_up_proj", NVF_DTYPE_BF16, 3, {4, 64, 64}},
        {"model.layers.0.mlp.experts.down_proj", NVF_DTYPE_BF16, 3, {4, 64, 32}},
        {"model.layers.0.mlp.gate.weight", NVF_DTYPE_BF16, 2, {4, 64}},
        {"model.layers.1.mlp.experts.gate_up_proj.weight", NVF_DTYPE_BF16, 3, {4, 64, 64}},
        {"model.layers.1.mlp.experts.down_proj.weight", NVF_DTYPE_BF16, 3, {4, 64, 32}},
        {"model.layers.1.mlp.gate.weight", NVF_DTYPE_BF16, 2, {4, 64}},
    };
    write_shard("fused", "model.safetensors", d, sizeof d / sizeof d[0]);
    write_text("fused", "config.json",
               "{\"num_local_experts\": 4, \"hidden_size\": 64, \"moe_intermediate_size\": 32}");
    nvf_ckpt *ck = open_ok("fused");
    if (!ck)
        return;
    CHECK(ck->index_name == NULL);
    CHECK_EQ_U64(ck->n_files, 1);
    CHECK_EQ_U64(ck->moe.n_moe, 2);
    CHECK_EQ_U64(ck->n_warnings, 0);
    for (size_t i = 0; i < ck->moe.n_layers; i++) {
        const nvf_moe_layer *l = &ck->moe.layers[i];
        CHECK(l->fused);
        CHECK_EQ_U64(l->n_experts, 4);
        CHECK_EQ_U64(l->n_present, 4);
        CHECK_EQ_U64(l->hidden, 64);
        CHECK_EQ_U64(l->intermediate, 32);
    }
    CHECK_EQ_STR(ck->moe.config.n_experts_key, "num_local_experts");
    nvf_plan *p = NULL;
    CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
    if (p) {
        CHECK_EQ_U64(p->n_quantize, 4);
        /* gate_up: 16384 values -> 8192 + 1024 + 4 x 8; down: 8192 -> 4096 + 512 + 4 x 8 */
        CHECK_EQ_U64(p->bytes_nvfp4, 2 * (8192 + 1024 + 32 + 4096 + 512 + 32));
    }
    nvf_plan_free(p);
    nvf_ckpt_close(ck);
}

/* DeepSeek-V3-like: dense layer 0, MoE layer 1 with bias, shared expert, expert 2 incomplete. */
static void test_deepseek_like(void) {
    static char names[32][96];
    tdef d[MAX_DEFS];
    size_t n = 0, nn = 0;
    make_dir("dsv3");
    d[n++] = (tdef){"model.layers.0.mlp.gate_proj.weight", NVF_DTYPE_BF16, 2, {128, 64}};
    d[n++] = (tdef){"model.layers.0.mlp.up_proj.weight", NVF_DTYPE_BF16, 2, {128, 64}};
    d[n++] = (tdef){"model.layers.0.mlp.down_proj.weight", NVF_DTYPE_BF16, 2, {64, 128}};
    d[n++] = (tdef){"model.layers.1.mlp.gate.weight", NVF_DTYPE_BF16, 2, {4, 64}};
    d[n++] = (tdef){"model.layers.1.mlp.gate.e_score_correction_bias", NVF_DTYPE_F32, 1, {4}};
    d[n++] =
        (tdef){"model.layers.1.mlp.shared_experts.gate_proj.weight", NVF_DTYPE_BF16, 2, {32, 64}};
    d[n++] =
        (tdef){"model.layers.1.mlp.shared_experts.up_proj.weight", NVF_DTYPE_BF16, 2, {32, 64}};
    d[n++] =
        (tdef){"model.layers.1.mlp.shared_experts.down_proj.weight", NVF_DTYPE_BF16, 2, {64, 32}};
    for (int e = 0; e < 4; e++) {
        static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
        for (int p = 0; p < 3; p++) {
            if (e == 2 && p == 1)
                continue;
            snprintf(names[nn], sizeof names[nn], "model.layers.1.mlp.experts.%d.%s.weight", e,
                     proj[p]);
            d[n++] = (tdef){names[nn++], NVF_DTYPE_BF16, 2, {p == 2 ? 64 : 32, p == 2 ? 32 : 64}};
        }
    }
    write_shard("dsv3", "model.safetensors", d, n);
    write_text("dsv3", "config.json",
               "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"intermediate_size\": "
               "128, \"moe_intermediate_size\": 32, \"n_routed_experts\": 4, "
               "\"num_experts_per_tok\": 2, \"n_group\": 2, \"topk_group\": 1, "
               "\"first_k_dense_replace\": 1, \"routed_scaling_factor\": 2.5, \"scoring_func\": "
               "\"sigmoid\", \"n_shared_experts\": 1, \"norm_topk_prob\": true}");
    nvf_ckpt *ck = open_ok("dsv3");
    if (!ck)
        return;
    const nvf_moe *m = &ck->moe;
    CHECK_EQ_U64(m->n_layers, 2);
    CHECK_EQ_U64(m->n_dense, 1);
    CHECK_EQ_U64(m->n_moe, 1);
    CHECK_EQ_STR(nvf_router_kind_name(m->config.router), "deepseek_v3");
    CHECK(m->config.routed_scaling_factor == 2.5);
    CHECK_EQ_U64(m->config.n_group, 2);
    CHECK_EQ_U64(m->config.topk_group, 1);
    CHECK_EQ_U64(m->config.first_k_dense_replace, 1);
    CHECK_EQ_U64(m->config.n_shared_experts, 1);
    CHECK_EQ_STR(m->config.n_experts_key, "n_routed_experts");
    if (m->n_layers == 2) {
        const nvf_moe_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
        CHECK(l0->kind == NVF_LAYER_DENSE);
        CHECK_EQ_U64(l0->intermediate, 128);
        CHECK_EQ_U64(l0->hidden, 64);
        CHECK(l1->kind == NVF_LAYER_MOE);
        CHECK_EQ_U64(l1->n_experts, 4);
        CHECK_EQ_U64(l1->n_present, 3);
        CHECK_EQ_U64(l1->n_missing, 1);
        CHECK_EQ_U64(l1->missing[0], 2);
        CHECK(l1->has_router_bias && l1->has_shared && !l1->has_shared_gate);
        CHECK_EQ_U64(l1->shared_intermediate, 32);
        CHECK_EQ_STR(l1->prefix, "model.layers.1");
    }
    CHECK(has_warning(ck, "1 of 4 experts missing (first: 2)"));
    CHECK_EQ_STR(nvf_ckpt_role_name(
                     nvf_ckpt_find(ck, "model.layers.1.mlp.gate.e_score_correction_bias")->role),
                 "router_bias");
    CHECK_EQ_STR(nvf_ckpt_role_name(
                     nvf_ckpt_find(ck, "model.layers.1.mlp.shared_experts.up_proj.weight")->role),
                 "shared_expert");
    CHECK_EQ_STR(nvf_ckpt_role_name(nvf_ckpt_find(ck, "model.layers.0.mlp.up_proj.weight")->role),
                 "dense_mlp");
    nvf_plan *p = NULL;
    CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
    if (p) {
        CHECK_EQ_U64(p->n_quantize, 11);
        CHECK_EQ_U64(p->n_keep, 8);
    }
    nvf_plan_free(p);
    nvf_ckpt_close(ck);
}

/* FP8 blocks: partial edge blocks, squeezed scales, then a scale of the wrong size. */
static void test_fp8_block(void) {
    make_dir("fp8");
    /* gate/up [192, 320]: ceil(192/128) x ceil(320/128) = 2 x 3 = 6 blocks; down [320, 192]:
     * 3 x 2 = 6; o_proj [256, 128]: 2 x 1 = 2, squeezed to [2] as transformers writes it. */
    tdef d[] = {
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {2, 3}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.0.up_proj.weight_scale_inv", NVF_DTYPE_F32, 1, {6}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", NVF_DTYPE_F8_E4M3, 2, {320, 192}},
        {"model.layers.0.mlp.experts.0.down_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {3, 2}},
        {"model.layers.0.mlp.experts.1.gate_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.1.gate_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {1, 6}},
        {"model.layers.0.mlp.experts.1.up_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.1.up_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {6, 1}},
        {"model.layers.0.mlp.experts.1.down_proj.weight", NVF_DTYPE_F8_E4M3, 2, {320, 192}},
        {"model.layers.0.mlp.experts.1.down_proj.weight_scale_inv", NVF_DTYPE_F32, 1, {6}},
        {"model.layers.0.mlp.gate.weight", NVF_DTYPE_BF16, 2, {2, 320}},
        {"model.layers.0.self_attn.o_proj.weight", NVF_DTYPE_F8_E4M3, 2, {256, 128}},
        {"model.layers.0.self_attn.o_proj.weight_scale_inv", NVF_DTYPE_F32, 1, {2}},
        {"lm_head.weight", NVF_DTYPE_BF16, 2, {64, 320}},
    };
    write_shard("fp8", "model.safetensors", d, sizeof d / sizeof d[0]);
    write_text("fp8", "config.json",
               "{\"num_experts\": 2, \"hidden_size\": 320, \"moe_intermediate_size\": 192, "
               "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
               "\"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, 128], "
               "\"scale_fmt\": \"ue8m0\", \"modules_to_not_convert\": [\"lm_head\"]}}");
    nvf_ckpt *ck = open_ok("fp8");
    if (ck) {
        CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), "fp8-block");
        CHECK_EQ_STR(ck->quant.source, "config.json");
        CHECK_EQ_STR(ck->quant.quant_method, "fp8");
        CHECK_EQ_U64(ck->quant.block[0], 128);
        CHECK_EQ_U64(ck->quant.block[1], 128);
        CHECK(ck->quant.scale_ue8m0 == 1);
        CHECK_EQ_U64(ck->quant.n_ignore, 1);
        CHECK(nvf_ckpt_is_ignored(ck, "lm_head.weight"));
        CHECK(!nvf_ckpt_is_ignored(ck, "model.layers.0.mlp.experts.0.gate_proj.weight"));
        size_t w = nvf_ckpt_find_index(ck, "model.layers.0.mlp.experts.0.up_proj.weight");
        size_t s = nvf_ckpt_find_index(ck, "model.layers.0.mlp.experts.0.up_proj.weight_scale_inv");
        CHECK(w != NVF_CKPT_NONE && s != NVF_CKPT_NONE);
        if (w != NVF_CKPT_NONE && s != NVF_CKPT_NONE) {
            CHECK_EQ_U64(ck->tensors[w].scale, s);
            CHECK_EQ_U64(ck->tensors[s].owner, w);
            CHECK_EQ_STR(nvf_ckpt_role_name(ck->tensors[s].role), "scale");
        }
        CHECK_EQ_U64(ck->moe.n_moe, 1);
        if (ck->moe.n_layers == 1) {
            CHECK_EQ_U64(ck->moe.layers[0].hidden, 320);
            CHECK_EQ_U64(ck->moe.layers[0].intermediate, 192);
            CHECK_EQ_U64(ck->moe.layers[0].n_present, 2);
        }
        CHECK_EQ_U64(ck->n_warnings, 0);
        nvf_plan *p = NULL;
        CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
        if (p) {
            CHECK_EQ_U64(p->n_quantize, 6);
            CHECK_EQ_U64(p->n_drop, 6);
            CHECK_EQ_U64(p->n_keep, 4); /* router, o_proj and its scale, lm_head */
            CHECK_EQ_U64(p->bytes_quantize, 6 * 192 * 320);
            CHECK_EQ_U64(p->bytes_nvfp4, 6 * (192 * 320 / 2 + 192 * 320 / 16 + 8));
        }
        nvf_plan_free(p);
        nvf_ckpt_close(ck);
    }

    make_dir("fp8bad");
    tdef bad[] = {
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.0.up_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {2, 2}},
    };
    write_shard("fp8bad", "model.safetensors", bad, 2);
    CHECK(open_fail("fp8bad") == NVF_E_SHAPE);
    const char *msg = nvf_error_last();
    CHECK_CONTAINS(msg, "'model.layers.0.mlp.experts.0.up_proj.weight_scale_inv'");
    CHECK_CONTAINS(msg, "shape [2, 2] (4 elements)");
    CHECK_CONTAINS(msg, "shape [192, 320]");
    CHECK_CONTAINS(msg, "needs 6");

    make_dir("fp8noscale");
    tdef noscale[] = {
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_F8_E4M3, 2, {192, 320}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {2, 3}},
    };
    write_shard("fp8noscale", "model.safetensors", noscale, 3);
    CHECK(open_fail("fp8noscale") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "'model.layers.0.mlp.experts.0.up_proj.weight_scale_inv'");
}

/* ModelOpt NVFP4 by config, by hf_quant_config.json and by names; compressed-tensors by names. */
static void test_nvfp4(void) {
    static char names[32][96];
    tdef d[MAX_DEFS];
    size_t n = 0, nn = 0;
    d[n++] = (tdef){"model.layers.0.mlp.gate.weight", NVF_DTYPE_BF16, 2, {2, 64}};
    for (int e = 0; e < 2; e++) {
        static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
        for (int p = 0; p < 3; p++) {
            int64_t out = p == 2 ? 64 : 32, in = p == 2 ? 32 : 64;
            static const char *const sfx[] = {"weight", "weight_scale", "weight_scale_2",
                                              "input_scale"};
            for (int k = 0; k < 4; k++) {
                snprintf(names[nn], sizeof names[nn], "model.layers.0.mlp.experts.%d.%s.%s", e,
                         proj[p], sfx[k]);
                tdef t = {names[nn++], NVF_DTYPE_F32, 0, {0}};
                if (k == 0)
                    t = (tdef){t.name, NVF_DTYPE_U8, 2, {out, in / 2}};
                else if (k == 1)
                    t = (tdef){t.name, NVF_DTYPE_F8_E4M3, 2, {out, in / 16}};
                d[n++] = t;
            }
        }
    }
    make_dir("mo_cfg");
    write_shard("mo_cfg", "model.safetensors", d, n);
    write_text("mo_cfg", "config.json",
               "{\"num_experts\": 2, \"quantization_config\": {\"quant_method\": \"modelopt\", "
               "\"quant_algo\": \"NVFP4\", \"group_size\": 16, \"ignore\": [\"lm_head\", "
               "\"model.layers.*.mlp.gate\"]}}");
    make_dir("mo_hf");
    write_shard("mo_hf", "model.safetensors", d, n);
    write_text("mo_hf", "hf_quant_config.json",
               "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": "
               "\"NVFP4\", \"group_size\": 16, \"exclude_modules\": [\"lm_head\"]}}");
    make_dir("mo_names");
    write_shard("mo_names", "model.safetensors", d, n);
    static const struct {
        const char *dir, *source;
        size_t n_ignore;
    } cases[] = {{"mo_cfg", "config.json", 2},
                 {"mo_hf", "hf_quant_config.json", 1},
                 {"mo_names", "tensor names", 0}};
    for (size_t c = 0; c < 3; c++) {
        nvf_ckpt *ck = open_ok(cases[c].dir);
        if (!ck)
            continue;
        CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), "nvfp4-modelopt");
        CHECK_EQ_STR(ck->quant.source, cases[c].source);
        CHECK_EQ_U64(ck->quant.n_ignore, cases[c].n_ignore);
        CHECK_EQ_U64(ck->moe.n_moe, 1);
        if (ck->moe.n_layers == 1) {
            CHECK_EQ_U64(ck->moe.layers[0].hidden, 64); /* U8 [32, 32] holds 64 inputs */
            CHECK_EQ_U64(ck->moe.layers[0].intermediate, 32);
            CHECK_EQ_U64(ck->moe.layers[0].n_present, 2);
        }
        const nvf_ckpt_tensor *w = nvf_ckpt_find(ck, "model.layers.0.mlp.experts.1.up_proj.weight");
        CHECK(w && w->scale != NVF_CKPT_NONE && w->scale_2 != NVF_CKPT_NONE &&
              w->input_scale != NVF_CKPT_NONE);
        if (w && w->scale_2 != NVF_CKPT_NONE)
            CHECK_EQ_STR(ck->tensors[w->scale_2].st->name,
                         "model.layers.0.mlp.experts.1.up_proj.weight_scale_2");
        if (c == 0)
            CHECK(nvf_ckpt_is_ignored(ck, "model.layers.7.mlp.gate.weight"));
        nvf_plan *p = NULL;
        CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
        if (p) {
            CHECK_EQ_U64(p->n_quantize, 0);
            CHECK_EQ_U64(p->n_skip, 6);
            CHECK_CONTAINS(plan_of(ck, p, "model.layers.0.mlp.experts.0.gate_proj.weight")->reason,
                           "already NVFP4");
        }
        nvf_plan_free(p);
        nvf_ckpt_close(ck);
    }

    make_dir("ct");
    tdef ct[] = {
        {"model.layers.0.mlp.experts.0.gate_proj.weight_packed", NVF_DTYPE_U8, 2, {32, 32}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight_scale", NVF_DTYPE_F8_E4M3, 2, {32, 4}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight_global_scale", NVF_DTYPE_F32, 1, {1}},
        {"model.layers.0.mlp.experts.0.gate_proj.input_global_scale", NVF_DTYPE_F32, 1, {1}},
    };
    write_shard("ct", "model.safetensors", ct, 4);
    nvf_ckpt *ck = open_ok("ct");
    if (ck) {
        CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), "nvfp4-compressed-tensors");
        const nvf_ckpt_tensor *w =
            nvf_ckpt_find(ck, "model.layers.0.mlp.experts.0.gate_proj.weight_packed");
        CHECK(w && w->is_weight && w->scale_2 != NVF_CKPT_NONE);
        nvf_ckpt_close(ck);
    }
}

/* One file: inputs that are not multiples of 16, integer dtypes, biases. */
static void test_single_file_plan(void) {
    make_dir("single");
    tdef d[] = {
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_F16, 2, {32, 100}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_I32, 2, {32, 64}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", NVF_DTYPE_F16, 2, {64, 32}},
        {"model.layers.0.mlp.experts.0.down_proj.bias", NVF_DTYPE_F16, 1, {64}},
    };
    write_shard("single", "odd.safetensors", d, 4);
    char p[512];
    path_in(p, sizeof p, "single", "odd.safetensors");
    nvf_ckpt *ck = NULL;
    CHECK_MSG(nvf_ckpt_open(&ck, p) == 0, "%s", nvf_error_last());
    if (!ck)
        return;
    CHECK(ck->is_file);
    CHECK_EQ_STR(ck->files[0].name, "odd.safetensors");
    CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), "f16");
    nvf_plan *plan = NULL;
    CHECK(nvf_ckpt_plan(&plan, ck, NULL, 0, NULL, 0) == 0);
    if (plan) {
        CHECK_EQ_U64(plan->n_quantize, 1);
        CHECK_EQ_U64(plan->n_skip, 2);
        CHECK_EQ_U64(plan->n_keep, 1);
        CHECK_EQ_STR(plan_of(ck, plan, "model.layers.0.mlp.experts.0.gate_proj.weight")->reason,
                     "in=100 is not a multiple of 16");
        CHECK_EQ_STR(plan_of(ck, plan, "model.layers.0.mlp.experts.0.up_proj.weight")->reason,
                     "dtype I32 is not floating point");
        CHECK_EQ_STR(plan_of(ck, plan, "model.layers.0.mlp.experts.0.down_proj.bias")->reason,
                     "bias, not a weight");
        CHECK(plan_of(ck, plan, "model.layers.0.mlp.experts.0.down_proj.weight")->action ==
              NVF_PLAN_QUANTIZE);
    }
    nvf_plan_free(plan);
    nvf_ckpt_close(ck);
}

/* The index and the shards disagree; broken config; nothing to open. */
static void test_disagreements(void) {
    tdef a[] = {{"a.weight", NVF_DTYPE_BF16, 2, {16, 16}}};
    tdef b[] = {{"b.weight", NVF_DTYPE_BF16, 2, {16, 16}}};
    const char *f1 = "model-00001-of-00002.safetensors", *f2 = "model-00002-of-00002.safetensors";

    make_dir("idx_extra"); /* the index names a tensor its shard lacks */
    write_shard("idx_extra", f1, a, 1);
    write_shard("idx_extra", f2, b, 1);
    {
        const char *names[] = {"a.weight", "b.weight", "c.weight"};
        const char *files[] = {f1, f2, f2};
        write_index("idx_extra", 1024, names, files, 3);
    }
    CHECK(open_fail("idx_extra") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "tensor 'c.weight' to 'model-00002-of-00002.safetensors'");

    make_dir("idx_missing"); /* a shard tensor the index does not list */
    write_shard("idx_missing", f1, a, 1);
    write_shard("idx_missing", f2, b, 1);
    {
        const char *names[] = {"a.weight", "x.weight"};
        const char *files[] = {f1, f2};
        write_index("idx_missing", 1024, names, files, 2);
    }
    CHECK(open_fail("idx_missing") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "'x.weight'");
    make_dir("idx_unlisted");
    write_shard("idx_unlisted", f1, a, 1);
    write_shard("idx_unlisted", f2, b, 1);
    {
        const char *names[] = {"a.weight", "b.weight"};
        const char *files[] = {f1, f1};
        write_index("idx_unlisted", 1024, names, files, 2);
    }
    CHECK(open_fail("idx_unlisted") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "'b.weight' to 'model-00001-of-00002.safetensors'");

    make_dir("idx_nofile"); /* the index names a shard that does not exist */
    write_shard("idx_nofile", f1, a, 1);
    {
        const char *names[] = {"a.weight", "b.weight"};
        const char *files[] = {f1, f2};
        write_index("idx_nofile", 1024, names, files, 2);
    }
    CHECK(open_fail("idx_nofile") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "model-00002-of-00002.safetensors");
    CHECK_CONTAINS(nvf_error_last(), "'b.weight'");
    CHECK_CONTAINS(nvf_error_last(), "does not exist");

    make_dir("idx_total"); /* total_size off: a warning, not an error */
    write_shard("idx_total", f1, a, 1);
    write_shard("idx_total", f2, b, 1);
    {
        const char *names[] = {"a.weight", "b.weight"};
        const char *files[] = {f1, f2};
        write_index("idx_total", 1000, names, files, 2);
    }
    nvf_ckpt *ck = open_ok("idx_total");
    if (ck) {
        CHECK(has_warning(ck, "total_size is 1000 but the tensors hold 1024 bytes"));
        nvf_ckpt_close(ck);
    }

    make_dir("dup"); /* no index: a tensor in two shards */
    write_shard("dup", f1, a, 1);
    write_shard("dup", f2, a, 1);
    CHECK(open_fail("dup") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "tensor 'a.weight' is in both");

    make_dir("badcfg");
    write_shard("badcfg", "model.safetensors", a, 1);
    write_text("badcfg", "config.json", "[1, 2]");
    CHECK(open_fail("badcfg") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "config.json");
    CHECK_CONTAINS(nvf_error_last(), "not a JSON object");
    write_text("badcfg", "config.json", "{\"a\": ");
    CHECK(open_fail("badcfg") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "config.json");

    make_dir("empty");
    CHECK(open_fail("empty") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "no .safetensors file");
    CHECK(open_fail("does-not-exist") == NVF_E_IO);
    CHECK_CONTAINS(nvf_error_last(), "does-not-exist");

    make_dir("badshard"); /* a shard that is not safetensors: the reader's message passes */
    write_text("badshard", "model.safetensors", "abc");
    CHECK(open_fail("badshard") == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "invalid safetensors file");
    CHECK_CONTAINS(nvf_error_last(), "badshard/model.safetensors");
}

/* Checkpoints written by transformers (tests/data/hf/README.md). */
static void test_hf_fixtures(void) {
    const char *data = getenv("NVFP4_TESTDATA");
    if (!data)
        return;
    static const struct {
        const char *dir, *format, *router;
        size_t n_dense, n_moe;
        int shared;
    } cases[] = {
        {"qwen3moe-bf16", "bf16", "softmax_topk", 0, 2, 0},
        {"qwen3moe-fp8", "fp8-block", "softmax_topk", 0, 2, 0},
        {"deepseekv3-bf16", "bf16", "deepseek_v3", 1, 1, 1},
        {"deepseekv3-fp8", "fp8-block", "deepseek_v3", 1, 1, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char p[512];
        snprintf(p, sizeof p, "%s/hf/%s", data, cases[c].dir);
        nvf_ckpt *ck = NULL;
        int rc = nvf_ckpt_open(&ck, p);
        CHECK_MSG(rc == 0, "%s: %s", p, nvf_error_last());
        if (rc != 0)
            continue;
        CHECK_EQ_STR(nvf_ckpt_format_name(ck->quant.format), cases[c].format);
        CHECK_EQ_STR(nvf_router_kind_name(ck->moe.config.router), cases[c].router);
        CHECK_EQ_U64(ck->moe.n_dense, cases[c].n_dense);
        CHECK_EQ_U64(ck->moe.n_moe, cases[c].n_moe);
        CHECK_EQ_U64(ck->moe.experts_present, 4 * cases[c].n_moe);
        CHECK_EQ_U64(ck->moe.config.top_k, 2);
        for (size_t i = 0; i < ck->moe.n_layers; i++) {
            const nvf_moe_layer *l = &ck->moe.layers[i];
            if (l->kind != NVF_LAYER_MOE)
                continue;
            CHECK_EQ_U64(l->hidden, 128);
            CHECK_EQ_U64(l->intermediate, 128);
            CHECK_EQ_U64(l->n_experts, 4);
            CHECK(l->has_shared == cases[c].shared);
        }
        CHECK_MSG(ck->n_warnings == 0, "%s: %zu warnings, first: %s", cases[c].dir, ck->n_warnings,
                  ck->n_warnings ? ck->warnings[0] : "");
        nvf_ckpt_close(ck);
    }
}

static size_t idx_of(const nvf_ckpt *ck, const char *name) {
    size_t i = nvf_ckpt_find_index(ck, name);
    CHECK_MSG(i != NVF_CKPT_NONE, "no tensor %s", name);
    return i;
}

/* One projection of the expert map against the tensor (and scale) named by hand. */
static void check_proj(const nvf_ckpt *ck, const nvf_moe_proj *p, const char *tensor,
                       const char *scale, int64_t expert, int64_t row0, int64_t rows) {
    CHECK_MSG(p->tensor == idx_of(ck, tensor), "map: tensor %zu, expected %s", p->tensor, tensor);
    if (scale)
        CHECK_MSG(p->scale == idx_of(ck, scale), "map %s: scale %zu, expected %s", tensor, p->scale,
                  scale);
    else
        CHECK_MSG(p->scale == NVF_CKPT_NONE, "map %s: scale %zu, expected none", tensor, p->scale);
    CHECK_MSG(p->expert == expert && p->row0 == row0 && p->rows == rows,
              "map %s: expert %lld rows [%lld, +%lld), expected %lld [%lld, +%lld)", tensor,
              (long long)p->expert, (long long)p->row0, (long long)p->rows, (long long)expert,
              (long long)row0, (long long)rows);
}

/* The expert map of per-expert layers: qwen (built by test_qwen3_like) and dsv3, whose expert 2
 * lacks up_proj. */
static void test_expert_map_per_expert(void) {
    nvf_ckpt *ck = open_ok("qwen");
    if (!ck)
        return;
    static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
    char name[128];
    for (size_t i = 0; i < ck->moe.n_layers; i++) {
        const nvf_moe_layer *l = &ck->moe.layers[i];
        CHECK(l->experts != NULL && l->fused_gate_up == NVF_CKPT_NONE &&
              l->fused_down == NVF_CKPT_NONE);
        snprintf(name, sizeof name, "model.layers.%zu.mlp.gate.weight", i);
        CHECK(l->router == idx_of(ck, name) && l->router_bias == NVF_CKPT_NONE);
        for (int e = 0; l->experts && e < 4; e++) {
            for (int p = 0; p < 3; p++) {
                snprintf(name, sizeof name, "model.layers.%zu.mlp.experts.%d.%s.weight", i, e,
                         proj[p]);
                check_proj(ck, &l->experts[e].proj[p], name, NULL, -1, 0, p == 2 ? 64 : 32);
            }
        }
    }
    nvf_ckpt_close(ck);
    ck = open_ok("dsv3");
    if (!ck)
        return;
    const nvf_moe_layer *l = &ck->moe.layers[1];
    CHECK(ck->moe.layers[0].kind == NVF_LAYER_DENSE && ck->moe.layers[0].experts == NULL);
    CHECK(l->kind == NVF_LAYER_MOE && l->experts != NULL);
    if (l->experts) {
        CHECK(l->experts[2].proj[NVF_PROJ_UP].tensor == NVF_CKPT_NONE);
        check_proj(ck, &l->experts[2].proj[NVF_PROJ_GATE],
                   "model.layers.1.mlp.experts.2.gate_proj.weight", NULL, -1, 0, 32);
        check_proj(ck, &l->experts[3].proj[NVF_PROJ_DOWN],
                   "model.layers.1.mlp.experts.3.down_proj.weight", NULL, -1, 0, 64);
    }
    CHECK(l->router_bias == idx_of(ck, "model.layers.1.mlp.gate.e_score_correction_bias"));
    nvf_ckpt_close(ck);
}

/* The expert map of fused FP8 experts: E=3, I=128, H=256, blocks 128x128: gate_up [3, 256,
 * 256] with scales [3, 2, 2], down [3, 256, 128] with scales [3, 2, 1]. Each expert's slice is
 * (tensor, expert e); gate is rows [0, 128) of gate_up, up rows [128, 256). */
static void test_expert_map_fused(void) {
    make_dir("fusedfp8");
    tdef d[] = {
        {"model.layers.0.mlp.experts.gate_up_proj", NVF_DTYPE_F8_E4M3, 3, {3, 256, 256}},
        {"model.layers.0.mlp.experts.gate_up_proj_scale_inv", NVF_DTYPE_F32, 3, {3, 2, 2}},
        {"model.layers.0.mlp.experts.down_proj", NVF_DTYPE_F8_E4M3, 3, {3, 256, 128}},
        {"model.layers.0.mlp.experts.down_proj_scale_inv", NVF_DTYPE_F32, 3, {3, 2, 1}},
        {"model.layers.0.mlp.gate.weight", NVF_DTYPE_BF16, 2, {3, 256}},
    };
    write_shard("fusedfp8", "model.safetensors", d, sizeof d / sizeof d[0]);
    write_text("fusedfp8", "config.json",
               "{\"num_experts\": 3, \"quantization_config\": {\"quant_method\": \"fp8\", "
               "\"weight_block_size\": [128, 128]}}");
    nvf_ckpt *ck = open_ok("fusedfp8");
    if (!ck)
        return;
    CHECK_EQ_U64(ck->moe.n_layers, 1);
    const nvf_moe_layer *l = &ck->moe.layers[0];
    const char *gu = "model.layers.0.mlp.experts.gate_up_proj",
               *dn = "model.layers.0.mlp.experts.down_proj";
    CHECK(l->fused && l->n_experts == 3 && l->intermediate == 128 && l->hidden == 256);
    CHECK(l->fused_gate_up == idx_of(ck, gu) && l->fused_down == idx_of(ck, dn));
    for (int e = 0; l->experts && e < 3; e++) {
        check_proj(ck, &l->experts[e].proj[NVF_PROJ_GATE], gu,
                   "model.layers.0.mlp.experts.gate_up_proj_scale_inv", e, 0, 128);
        check_proj(ck, &l->experts[e].proj[NVF_PROJ_UP], gu,
                   "model.layers.0.mlp.experts.gate_up_proj_scale_inv", e, 128, 128);
        check_proj(ck, &l->experts[e].proj[NVF_PROJ_DOWN], dn,
                   "model.layers.0.mlp.experts.down_proj_scale_inv", e, 0, 256);
    }
    nvf_ckpt_close(ck);
}

/* Issue #11 item 9: a 3-D tensor under ".experts." with a per-expert name is not a fused
 * down_proj: reported, kept, skipped by the plan. */
static void test_unknown_3d(void) {
    make_dir("unk3d");
    tdef d[] = {
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_BF16, 3, {2, 96, 320}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_BF16, 2, {96, 320}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", NVF_DTYPE_BF16, 2, {320, 96}},
    };
    write_shard("unk3d", "model.safetensors", d, sizeof d / sizeof d[0]);
    nvf_ckpt *ck = open_ok("unk3d");
    if (!ck)
        return;
    CHECK(has_warning(ck, "unknown 3-D tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' "
                          "[2, 96, 320]"));
    /* the 3-D one is no projection of expert 0: the expert is incomplete */
    CHECK_EQ_U64(ck->moe.layers[0].n_present, 0);
    nvf_plan *p = NULL;
    CHECK(nvf_ckpt_plan(&p, ck, NULL, 0, NULL, 0) == 0);
    if (p) {
        const nvf_plan_entry *e = plan_of(ck, p, "model.layers.0.mlp.experts.0.gate_proj.weight");
        CHECK(e && e->action == NVF_PLAN_SKIP);
        CHECK(e && strncmp(e->reason, "unknown 3-D tensor", 18) == 0);
        CHECK_EQ_U64(p->n_quantize, 2);
    }
    nvf_plan_free(p);
    nvf_ckpt_close(ck);
}

/* Issue #11 item 1: an empty fused FP8 gate_up_proj [0, 256, 256] with scales [0, 2, 2] opens
 * (0 blocks needed, 0 present) and the plan skips it as empty, dividing by nothing. */
static void test_empty_fused(void) {
    make_dir("empty");
    tdef d[] = {
        {"model.layers.0.mlp.experts.gate_up_proj", NVF_DTYPE_F8_E4M3, 3, {0, 256, 256}},
        {"model.layers.0.mlp.experts.gate_up_proj_scale_inv", NVF_DTYPE_F32, 3, {0, 2, 2}},
        {"model.layers.0.self_attn.o_proj.weight", NVF_DTYPE_F8_E4M3, 2, {256, 0}},
        {"model.layers.0.self_attn.o_proj.weight_scale_inv", NVF_DTYPE_F32, 2, {2, 0}},
    };
    write_shard("empty", "model.safetensors", d, sizeof d / sizeof d[0]);
    write_text("empty", "config.json", "{\"quantization_config\": {\"quant_method\": \"fp8\"}}");
    nvf_ckpt *ck = open_ok("empty");
    if (!ck)
        return;
    nvf_plan *p = NULL;
    const char *all[] = {"*"};
    CHECK(nvf_ckpt_plan(&p, ck, all, 1, NULL, 0) == 0);
    if (p) {
        CHECK_EQ_U64(p->n_quantize, 0);
        CHECK_EQ_U64(p->n_skip, 2);
        CHECK_EQ_STR(plan_of(ck, p, "model.layers.0.mlp.experts.gate_up_proj")->reason,
                     "empty tensor, copied as it is");
    }
    nvf_plan_free(p);
    nvf_ckpt_close(ck);
}

/* nvf_ckpt_check_fp8_scale, the one FP8-block rule: issue #11 item 10's bad scales. */
static void test_fp8_scale_rule(void) {
    nvf_st_tensor w = {.name = "w",
                       .dtype = NVF_DTYPE_F8_E4M3,
                       .ndim = 2,
                       .shape = {192, 320},
                       .numel = 192 * 320};
    nvf_st_tensor s = {
        .name = "w_scale_inv", .dtype = NVF_DTYPE_F32, .ndim = 2, .shape = {2, 3}, .numel = 6};
    CHECK(nvf_ckpt_check_fp8_scale("f", &w, &s, 128, 128) == 0);
    CHECK(nvf_ckpt_check_fp8_scale("f", &w, NULL, 128, 128) == NVF_E_FORMAT);
    s.dtype = NVF_DTYPE_I8;
    CHECK(nvf_ckpt_check_fp8_scale("f", &w, &s, 128, 128) == NVF_E_FORMAT);
    CHECK(strstr(nvf_error_last(), "'w_scale_inv'") && strstr(nvf_error_last(), "I8"));
    s.dtype = NVF_DTYPE_F32;
    static const int64_t bad[] = {9, 1, 0}; /* [3,3], [1,1], [0] */
    for (size_t i = 0; i < 3; i++) {
        s.numel = (uint64_t)bad[i];
        CHECK(nvf_ckpt_check_fp8_scale("f", &w, &s, 128, 128) == NVF_E_SHAPE);
        CHECK(strstr(nvf_error_last(), "needs 6") != NULL);
    }
    /* [0, 256, 256]: no matrix, no block */
    nvf_st_tensor e = {.name = "e", .dtype = NVF_DTYPE_F8_E4M3, .ndim = 3, .shape = {0, 256, 256}};
    s.numel = 0;
    CHECK(nvf_ckpt_check_fp8_scale("f", &e, &s, 128, 128) == 0);
    s.numel = 4;
    CHECK(nvf_ckpt_check_fp8_scale("f", &e, &s, 128, 128) == NVF_E_SHAPE);
}

int main(void) {
    snprintf(g_root, sizeof g_root, "/tmp/nvf_ckpt_XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_qwen3_like();
    test_fused();
    test_deepseek_like();
    test_fp8_block();
    test_nvfp4();
    test_single_file_plan();
    test_disagreements();
    test_hf_fixtures();
    test_expert_map_per_expert();
    test_expert_map_fused();
    test_unknown_3d();
    test_empty_fused();
    test_fp8_scale_rule();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_root);
    return check_summary("test_checkpoint");
}
