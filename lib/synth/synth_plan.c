/*
 * Synthetic checkpoints: presets, option checks, the tensor list with its shard split
 * (config.json is synth_config.c).
 */
#include "synth_internal.h"

#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_preset_names[NVF_SYNTH_PRESET_COUNT] = {"qwen3-moe", "deepseek-v3"};
static const char *const k_dtype_names[NVF_SYNTH_DTYPE_COUNT] = {"bf16", "fp8-block", "nvfp4",
                                                                 "nvfp4-ct"};

/* Hugging Face's default shard limit, the cap of the automatic --max-shard-size. */
#define SYNTH_SHARD_CAP 5000000000ull
#define SYNTH_DIM_MAX   65536

void nvf_synth_options_init(nvf_synth_options *o) {
    memset(o, 0, sizeof *o);
    o->preset = NVF_SYNTH_PRESET_QWEN3_MOE;
    o->dtype = NVF_SYNTH_DTYPE_BF16;
    o->scale_fmt = NVF_SYNTH_SCALE_F32;
}

const char *nvf_synth_preset_name(nvf_synth_preset preset) {
    return (unsigned)preset < NVF_SYNTH_PRESET_COUNT ? k_preset_names[preset] : "?";
}

const char *nvf_synth_dtype_name(nvf_synth_dtype dtype) {
    return (unsigned)dtype < NVF_SYNTH_DTYPE_COUNT ? k_dtype_names[dtype] : "?";
}

const char *nvf_synth_preset_list(void) {
    return "qwen3-moe, deepseek-v3";
}

int nvf_synth_preset_from_name(nvf_synth_preset *out, const char *name) {
    for (int i = 0; i < NVF_SYNTH_PRESET_COUNT; i++) {
        if (strcmp(name, k_preset_names[i]) == 0) {
            *out = (nvf_synth_preset)i;
            return NVF_OK;
        }
    }
    return nvf_error_set(NVF_E_INVALID, "unknown preset '%s'; presets: %s", name,
                         nvf_synth_preset_list());
}

int nvf_synth_dtype_from_name(nvf_synth_dtype *out, const char *name) {
    for (int i = 0; i < NVF_SYNTH_DTYPE_COUNT; i++) {
        if (strcmp(name, k_dtype_names[i]) == 0) {
            *out = (nvf_synth_dtype)i;
            return NVF_OK;
        }
    }
    return nvf_error_set(NVF_E_INVALID,
                         "unknown dtype '%s'; choices: bf16, fp8-block, nvfp4, nvfp4-ct", name);
}

/* Options ------------------------------------------------------------------------------------ */

static int check_dim(const char *option, int64_t v, int64_t lo, int64_t hi, int64_t multiple) {
    if (v < lo || v > hi || v % multiple != 0)
        return nvf_error_set(NVF_E_INVALID, "--%s %lld: must be a multiple of %lld in [%lld, %lld]",
                             option, (long long)v, (long long)multiple, (long long)lo,
                             (long long)hi);
    return NVF_OK;
}

/* Fill the defaults in and check every dimension. Dimensions no option reaches (vocabulary,
 * attention heads, MLA ranks) stay small: they do not matter to MoE conversion. */
static int resolve(nvf_synth_plan *p, const nvf_synth_options *opt) {
    nvf_synth_options *o = &p->opt;
    *o = *opt;
    if ((unsigned)o->preset >= NVF_SYNTH_PRESET_COUNT)
        return nvf_error_set(NVF_E_INVALID, "unknown preset %d; presets: %s", (int)o->preset,
                             nvf_synth_preset_list());
    if ((unsigned)o->dtype >= NVF_SYNTH_DTYPE_COUNT)
        return nvf_error_set(NVF_E_INVALID, "unknown dtype %d", (int)o->dtype);
    if (o->scale_fmt == NVF_SYNTH_SCALE_UE8M0 && o->dtype != NVF_SYNTH_DTYPE_FP8_BLOCK)
        return nvf_error_set(NVF_E_INVALID, "--scale-fmt ue8m0 needs --dtype fp8-block");
    int ds = o->preset == NVF_SYNTH_PRESET_DEEPSEEK_V3;
    if (o->layers == 0)
        o->layers = ds ? 3 : 2;
    if (o->experts == 0)
        o->experts = 8;
    if (o->hidden == 0)
        o->hidden = 320; /* 2.5 FP8 blocks: partial edge blocks */
    if (o->intermediate == 0)
        o->intermediate = 3 * o->hidden;
    if (o->moe_intermediate == 0)
        o->moe_intermediate = 192; /* 1.5 FP8 blocks, a multiple of 64 */
    int rc;
    if ((rc = check_dim("layers", o->layers, 1, 1024, 1)) != NVF_OK ||
        (rc = check_dim("experts", o->experts, 1, 4096, 1)) != NVF_OK ||
        (rc = check_dim("hidden", o->hidden, 16, SYNTH_DIM_MAX, 16)) != NVF_OK ||
        (rc = check_dim("intermediate", o->intermediate, 16, 4 * SYNTH_DIM_MAX, 16)) != NVF_OK ||
        (rc = check_dim("moe-intermediate", o->moe_intermediate, 16, SYNTH_DIM_MAX, 16)) != NVF_OK)
        return rc;
    p->vocab = 1024;
    p->heads = 4;
    p->kv_heads = ds ? 4 : 2;
    p->head_dim = 64;
    p->top_k = o->experts >= 64 ? 8 : (o->experts < 2 ? o->experts : 2);
    p->first_dense = ds ? 1 : 0;
    if (o->experts >= 64 && o->experts % 8 == 0) {
        p->n_group = 8;
        p->topk_group = 4;
    } else if (o->experts % 4 == 0) {
        p->n_group = 4;
        p->topk_group = 2;
    } else {
        p->n_group = 1;
        p->topk_group = 1;
    }
    p->q_lora_rank = 192;
    p->kv_lora_rank = 128;
    p->qk_nope = 32;
    p->qk_rope = 16;
    p->v_head = 32;
    return NVF_OK;
}

/* Format a tensor name; every name is far below SYNTH_NAME_MAX (layer and expert numbers are
 * capped by resolve()), so truncation cannot happen. */
static void name_fmt(char out[SYNTH_NAME_MAX], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void name_fmt(char out[SYNTH_NAME_MAX], const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, SYNTH_NAME_MAX, fmt, ap);
    va_end(ap);
}

/* The tensor list ---------------------------------------------------------------------------- */

typedef struct builder {
    nvf_synth_plan *p;
    synth_plan_priv *priv;
    size_t cap;
} builder;

static int push(builder *b, const char *name, nvf_dtype dtype, int kind, int role, int ndim,
                const int64_t *shape, size_t n_parts, uint64_t *keys) {
    nvf_synth_plan *p = b->p;
    if (p->n_tensors == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        nvf_synth_tensor *t = realloc(p->tensors, cap * sizeof *t);
        if (t)
            p->tensors = t;
        synth_make *mk = t ? realloc(b->priv->make, cap * sizeof *mk) : NULL;
        if (!mk) {
            free(keys);
            return nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
        }
        b->priv->make = mk;
        b->cap = cap;
    }
    nvf_synth_tensor *t = &p->tensors[p->n_tensors];
    synth_make *mk = &b->priv->make[p->n_tensors];
    memset(t, 0, sizeof *t);
    memset(mk, 0, sizeof *mk);
    t->name = strdup(name);
    if (!t->name) {
        free(keys);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
    }
    p->n_tensors++;
    t->dtype = dtype;
    mk->kind = kind;
    mk->role = role;
    t->ndim = ndim;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        numel *= (uint64_t)shape[i];
    }
    /* Every dimension is capped by resolve(), so numel stays far below 2^64. */
    t->nbytes = numel * (nvf_dtype_bits(dtype) / 8);
    mk->n_parts = n_parts;
    mk->part_keys = keys;
    mk->part_numel = n_parts ? numel / n_parts : 0;
    return NVF_OK;
}

/* A tensor whose values are one logical matrix keyed by its own name. */
static int add_plain(builder *b, const char *name, nvf_dtype dtype, int kind, int ndim, int64_t d0,
                     int64_t d1) {
    uint64_t *key = malloc(sizeof *key);
    if (!key)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
    *key = synth_key(b->p->opt.seed, name);
    const int64_t shape[2] = {d0, d1};
    return push(b, name, dtype, kind, SYNTH_ROLE_PLAIN, ndim, shape, 1, key);
}

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

/* A linear weight of `ndim` dims (the last two are [out, in]) made of `n_parts` logical
 * matrices; FP8 checkpoints get F8_E4M3 plus `scale_name` F32 per 128x128 block. */
static int add_linear_parts(builder *b, const char *name, const char *scale_name, int ndim,
                            const int64_t *shape, size_t n_parts, uint64_t *keys) {
    int fp8 = b->p->opt.dtype == NVF_SYNTH_DTYPE_FP8_BLOCK;
    int rc = push(b, name, fp8 ? NVF_DTYPE_F8_E4M3 : NVF_DTYPE_BF16, SYNTH_KIND_WEIGHT,
                  fp8 ? SYNTH_ROLE_FP8 : SYNTH_ROLE_PLAIN, ndim, shape, n_parts, keys);
    if (rc != NVF_OK || !fp8)
        return rc;
    int64_t s[3];
    for (int i = 0; i < ndim; i++)
        s[i] = shape[i];
    s[ndim - 2] = ceil_div(shape[ndim - 2], SYNTH_FP8_BLOCK);
    s[ndim - 1] = ceil_div(shape[ndim - 1], SYNTH_FP8_BLOCK);
    return push(b, scale_name, NVF_DTYPE_F32, SYNTH_KIND_WEIGHT, SYNTH_ROLE_SCALE, ndim, s, 0,
                NULL);
}

/* `prefix`.weight [out, in]. */
static int add_linear(builder *b, const char *prefix, int64_t out, int64_t in) {
    char name[SYNTH_NAME_MAX], scale[SYNTH_NAME_MAX];
    name_fmt(name, "%s.weight", prefix);
    name_fmt(scale, "%s.weight_scale_inv", prefix);
    uint64_t *key = malloc(sizeof *key);
    if (!key)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
    *key = synth_key(b->p->opt.seed, name);
    const int64_t shape[2] = {out, in};
    return add_linear_parts(b, name, scale, 2, shape, 1, key);
}

static int add_gated_mlp(builder *b, const char *prefix, int64_t inter, int64_t hidden) {
    char name[SYNTH_NAME_MAX];
    int rc;
    name_fmt(name, "%s.gate_proj", prefix);
    if ((rc = add_linear(b, name, inter, hidden)) != NVF_OK)
        return rc;
    name_fmt(name, "%s.up_proj", prefix);
    if ((rc = add_linear(b, name, inter, hidden)) != NVF_OK)
        return rc;
    name_fmt(name, "%s.down_proj", prefix);
    return add_linear(b, name, hidden, inter);
}

/* Routed experts under `prefix` (…mlp.experts): per expert, or fused gate_up_proj [E, 2I, H]
 * (gate rows first) and down_proj [E, H, I] whose values are those of the per-expert names. */
static int add_experts(builder *b, const char *prefix) {
    const nvf_synth_options *o = &b->p->opt;
    int64_t E = o->experts, I = o->moe_intermediate, H = o->hidden;
    char name[SYNTH_NAME_MAX], scale[SYNTH_NAME_MAX];
    int rc;
    if (!o->fused_experts) {
        for (int64_t e = 0; e < E; e++) {
            name_fmt(name, "%s.%lld", prefix, (long long)e);
            if ((rc = add_gated_mlp(b, name, I, H)) != NVF_OK)
                return rc;
        }
        return NVF_OK;
    }
    uint64_t *gu = malloc(2 * (size_t)E * sizeof *gu);
    uint64_t *dn = malloc((size_t)E * sizeof *dn);
    if (!gu || !dn) {
        free(gu);
        free(dn);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
    }
    for (int64_t e = 0; e < E; e++) {
        name_fmt(name, "%s.%lld.gate_proj.weight", prefix, (long long)e);
        gu[2 * e] = synth_key(o->seed, name);
        name_fmt(name, "%s.%lld.up_proj.weight", prefix, (long long)e);
        gu[2 * e + 1] = synth_key(o->seed, name);
        name_fmt(name, "%s.%lld.down_proj.weight", prefix, (long long)e);
        dn[e] = synth_key(o->seed, name);
    }
    const int64_t gu_shape[3] = {E, 2 * I, H}, dn_shape[3] = {E, H, I};
    name_fmt(name, "%s.gate_up_proj", prefix);
    name_fmt(scale, "%s.gate_up_proj_scale_inv", prefix);
    rc = add_linear_parts(b, name, scale, 3, gu_shape, 2 * (size_t)E, gu);
    if (rc != NVF_OK) {
        free(dn);
        return rc;
    }
    name_fmt(name, "%s.down_proj", prefix);
    name_fmt(scale, "%s.down_proj_scale_inv", prefix);
    return add_linear_parts(b, name, scale, 3, dn_shape, (size_t)E, dn);
}

static int add_norm(builder *b, const char *prefix, int64_t n) {
    char name[SYNTH_NAME_MAX];
    name_fmt(name, "%s.weight", prefix);
    return add_plain(b, name, NVF_DTYPE_BF16, SYNTH_KIND_NORM, 1, n, 0);
}

/* Return the status of `call` when it fails. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((rc = (call)) != NVF_OK)                                                               \
            return rc;                                                                             \
    } while (0)

static int add_qwen3_layer(builder *b, const char *L) {
    const nvf_synth_plan *p = b->p;
    int64_t H = p->opt.hidden, q = p->heads * p->head_dim, kv = p->kv_heads * p->head_dim;
    char name[SYNTH_NAME_MAX];
    int rc = NVF_OK;
    name_fmt(name, "%s.input_layernorm", L);
    TRY(add_norm(b, name, H));
    name_fmt(name, "%s.self_attn.q_proj", L);
    TRY(add_linear(b, name, q, H));
    name_fmt(name, "%s.self_attn.k_proj", L);
    TRY(add_linear(b, name, kv, H));
    name_fmt(name, "%s.self_attn.v_proj", L);
    TRY(add_linear(b, name, kv, H));
    name_fmt(name, "%s.self_attn.o_proj", L);
    TRY(add_linear(b, name, H, q));
    name_fmt(name, "%s.self_attn.q_norm", L);
    TRY(add_norm(b, name, p->head_dim));
    name_fmt(name, "%s.self_attn.k_norm", L);
    TRY(add_norm(b, name, p->head_dim));
    name_fmt(name, "%s.post_attention_layernorm", L);
    TRY(add_norm(b, name, H));
    name_fmt(name, "%s.mlp.gate.weight", L);
    TRY(add_plain(b, name, NVF_DTYPE_BF16, SYNTH_KIND_ROUTER, 2, p->opt.experts, H));
    name_fmt(name, "%s.mlp.experts", L);
    TRY(add_experts(b, name));
    return rc;
}

static int add_deepseek_layer(builder *b, const char *L, int dense) {
    const nvf_synth_plan *p = b->p;
    int64_t H = p->opt.hidden;
    char name[SYNTH_NAME_MAX];
    int rc = NVF_OK;
    name_fmt(name, "%s.input_layernorm", L);
    TRY(add_norm(b, name, H));
    name_fmt(name, "%s.self_attn.q_a_proj", L);
    TRY(add_linear(b, name, p->q_lora_rank, H));
    name_fmt(name, "%s.self_attn.q_a_layernorm", L);
    TRY(add_norm(b, name, p->q_lora_rank));
    name_fmt(name, "%s.self_attn.q_b_proj", L);
    TRY(add_linear(b, name, p->heads * (p->qk_nope + p->qk_rope), p->q_lora_rank));
    name_fmt(name, "%s.self_attn.kv_a_proj_with_mqa", L);
    TRY(add_linear(b, name, p->kv_lora_rank + p->qk_rope, H));
    name_fmt(name, "%s.self_attn.kv_a_layernorm", L);
    TRY(add_norm(b, name, p->kv_lora_rank));
    name_fmt(name, "%s.self_attn.kv_b_proj", L);
    TRY(add_linear(b, name, p->heads * (p->qk_nope + p->v_head), p->kv_lora_rank));
    name_fmt(name, "%s.self_attn.o_proj", L);
    TRY(add_linear(b, name, H, p->heads * p->v_head));
    name_fmt(name, "%s.post_attention_layernorm", L);
    TRY(add_norm(b, name, H));
    name_fmt(name, "%s.mlp", L);
    if (dense)
        return add_gated_mlp(b, name, p->opt.intermediate, H);
    name_fmt(name, "%s.mlp.gate.weight", L);
    TRY(add_plain(b, name, NVF_DTYPE_BF16, SYNTH_KIND_ROUTER, 2, p->opt.experts, H));
    name_fmt(name, "%s.mlp.gate.e_score_correction_bias", L);
    TRY(add_plain(b, name, NVF_DTYPE_F32, SYNTH_KIND_BIAS, 1, p->opt.experts, 0));
    name_fmt(name, "%s.mlp.experts", L);
    TRY(add_experts(b, name));
    name_fmt(name, "%s.mlp.shared_experts", L);
    TRY(add_gated_mlp(b, name, p->opt.moe_intermediate, H)); /* n_shared_experts = 1 */
    return rc;
}

#undef TRY

/* Greedy split in file order; an FP8 weight and its scale stay in one shard. */
static void split_shards(nvf_synth_plan *p) {
    if (p->max_shard_size == 0) {
        uint64_t quarter = (p->total_size + 3) / 4;
        uint64_t mb = (quarter + 999999) / 1000000 * 1000000;
        p->max_shard_size = mb < SYNTH_SHARD_CAP ? mb : SYNTH_SHARD_CAP;
    }
    uint32_t shard = 0;
    uint64_t used = 0;
    for (size_t i = 0; i < p->n_tensors;) {
        size_t n = 1;
        uint64_t bytes = p->tensors[i].nbytes;
        if (i + 1 < p->n_tensors && synth_make_of(p, i + 1)->role == SYNTH_ROLE_SCALE) {
            n = 2;
            bytes += p->tensors[i + 1].nbytes;
        }
        if (used > 0 && used + bytes > p->max_shard_size) {
            shard++;
            used = 0;
        }
        for (size_t k = 0; k < n; k++)
            p->tensors[i + k].shard = shard;
        used += bytes;
        i += n;
    }
    p->n_shards = p->n_tensors ? shard + 1 : 0;
}

int nvf_synth_plan_build(nvf_synth_plan **out, const nvf_synth_options *opt) {
    synth_plan_priv *priv = calloc(1, sizeof *priv);
    if (!priv)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the synth plan");
    nvf_synth_plan *p = &priv->pub;
    builder b = {p, priv, 0};
    char L[SYNTH_NAME_MAX];
    int rc = resolve(p, opt);
    if (rc != NVF_OK)
        goto done;
    int ds = p->opt.preset == NVF_SYNTH_PRESET_DEEPSEEK_V3;
    rc = add_plain(&b, "model.embed_tokens.weight", NVF_DTYPE_BF16, SYNTH_KIND_WEIGHT, 2, p->vocab,
                   p->opt.hidden);
    for (int64_t l = 0; rc == NVF_OK && l < p->opt.layers; l++) {
        name_fmt(L, "model.layers.%lld", (long long)l);
        rc = ds ? add_deepseek_layer(&b, L, l < p->first_dense) : add_qwen3_layer(&b, L);
    }
    if (rc == NVF_OK)
        rc = add_norm(&b, "model.norm", p->opt.hidden);
    if (rc == NVF_OK)
        rc = add_plain(&b, "lm_head.weight", NVF_DTYPE_BF16, SYNTH_KIND_WEIGHT, 2, p->vocab,
                       p->opt.hidden);
    if (rc != NVF_OK)
        goto done;
    for (size_t i = 0; i < p->n_tensors; i++)
        p->total_size += p->tensors[i].nbytes;
    p->max_shard_size = p->opt.max_shard_size;
    split_shards(p);
done:
    if (rc != NVF_OK) {
        nvf_synth_plan_free(p);
        p = NULL;
    }
    *out = p;
    return rc;
}

void nvf_synth_plan_free(nvf_synth_plan *plan) {
    if (!plan)
        return;
    synth_plan_priv *priv = (synth_plan_priv *)plan;
    for (size_t i = 0; i < plan->n_tensors; i++) {
        free(plan->tensors[i].name);
        free(priv->make[i].part_keys);
    }
    free(plan->tensors);
    free(priv->make);
    free(priv);
}
