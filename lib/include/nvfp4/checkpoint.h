/*
 * The checkpoint model (SPEC section 3): a Hugging Face checkpoint directory (config.json,
 * model.safetensors.index.json, shards) or a single .safetensors file, opened and
 * cross-checked as a whole; its quantization format; its MoE structure; and which tensors a
 * conversion would touch.
 *
 * What a checkpoint directory holds:
 *   1. config.json (optional): a JSON object; `quantization_config` names the source format.
 *   2. hf_quant_config.json (optional, ModelOpt): `quantization.quant_algo`.
 *   3. model.safetensors.index.json (optional): `weight_map` tensor -> shard file. Without it,
 *      every `*.safetensors` file of the directory is a shard, in name order.
 *   4. The shards: safetensors files; each tensor name occurs in exactly one of them.
 */
#ifndef NVFP4_CHECKPOINT_H
#define NVFP4_CHECKPOINT_H

#include "nvfp4/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* No companion tensor / value not known. */
#define NVF_CKPT_NONE ((size_t)-1)

typedef enum nvf_ckpt_format {
    NVF_CKPT_FORMAT_UNKNOWN = 0,
    NVF_CKPT_FORMAT_BF16,
    NVF_CKPT_FORMAT_F16,
    NVF_CKPT_FORMAT_F32,
    NVF_CKPT_FORMAT_FP8_BLOCK,      /* W F8_E4M3 + W_scale_inv, one multiplier per block */
    NVF_CKPT_FORMAT_FP8_TENSOR,     /* weight F8_E4M3 + scalar weight_scale */
    NVF_CKPT_FORMAT_NVFP4_MODELOPT, /* weight U8 + weight_scale + weight_scale_2 + input_scale */
    NVF_CKPT_FORMAT_NVFP4_CT,       /* compressed-tensors weight_packed + weight_global_scale */
    NVF_CKPT_FORMAT_PREPARED,       /* nvfp4tool's prepared-w4a16/w4a4 (quant_method
                                       "nvfp4tool-prepared"): kernel-ready NVFP4 MoE shards */
} nvf_ckpt_format;

/** Stable lower-case name: "bf16", "fp8-block", "nvfp4-modelopt", ... Never NULL. */
const char *nvf_ckpt_format_name(nvf_ckpt_format format);

/* What a tensor is, from its name (and the format's companion naming). */
typedef enum nvf_ckpt_role {
    NVF_ROLE_OTHER = 0,
    NVF_ROLE_EXPERT_WEIGHT,      /* routed expert linear: per-expert 2-D or fused 3-D */
    NVF_ROLE_ROUTER,             /* mlp.gate.weight [E, H] */
    NVF_ROLE_ROUTER_BIAS,        /* mlp.gate.e_score_correction_bias [E] */
    NVF_ROLE_SHARED_EXPERT,      /* mlp.shared_experts.* / mlp.shared_expert.* linears */
    NVF_ROLE_SHARED_EXPERT_GATE, /* mlp.shared_expert_gate.weight */
    NVF_ROLE_DENSE_MLP,          /* mlp.{gate,up,down}_proj of a dense layer */
    NVF_ROLE_ATTENTION,          /* self_attn.* linears */
    NVF_ROLE_NORM,               /* layer norms */
    NVF_ROLE_EMBEDDING,          /* embed_tokens */
    NVF_ROLE_LM_HEAD,            /* lm_head */
    NVF_ROLE_SCALE,              /* a quantization scale of another tensor */
    NVF_ROLE_BIAS,               /* a linear's bias */
    NVF_ROLE_COUNT
} nvf_ckpt_role;

/** Stable name: "expert_weight", "router", "router_bias", "scale", ... Never NULL. */
const char *nvf_ckpt_role_name(nvf_ckpt_role role);

/* Naming (lib/ckpt/ckpt_naming.c) ------------------------------------------------------------
 * Every rule that reads meaning into a tensor name lives in one module: expert weights (which
 * expert, which projection), fused expert slices, scale companions, the FP8-block scale name,
 * the global-scale groups and the default scope. Other modules ask it, never a suffix of their
 * own. */

/** The default conversion scope: routed expert weights only (SPEC section 5). */
#define NVF_CKPT_DEFAULT_SCOPE "*.mlp.experts.*"

/* A projection of a gated MLP (SPEC section 3 "MoE expert naming"). */
typedef enum nvf_proj {
    NVF_PROJ_NONE = -1,
    NVF_PROJ_GATE = 0,    /* gate_proj, w1 */
    NVF_PROJ_UP = 1,      /* up_proj, w3 */
    NVF_PROJ_DOWN = 2,    /* down_proj, w2 */
    NVF_PROJ_GATE_UP = 3, /* fused experts.gate_up_proj [E, 2I, H], gate rows first */
} nvf_proj;

typedef enum nvf_name_kind {
    NVF_NAME_OTHER = 0,
    /* P.experts.{e}.{gate_proj,up_proj,down_proj,w1,w3,w2}.weight (or .weight_packed), 2-D */
    NVF_NAME_EXPERT,
    /* P.experts.gate_up_proj or P.experts.down_proj, with or without ".weight", 3-D */
    NVF_NAME_FUSED,
    /* Any other 3-D tensor under ".experts." (not a scale): no rule says what it holds, so it
     * is kept as it is and reported */
    NVF_NAME_EXPERT_UNKNOWN,
} nvf_name_kind;

typedef struct nvf_ckpt_name {
    nvf_name_kind kind;
    nvf_proj proj;      /* NVF_NAME_EXPERT and NVF_NAME_FUSED; else NVF_PROJ_NONE */
    int64_t expert;     /* NVF_NAME_EXPERT: the expert id; else -1 */
    int w13;            /* named w1/w3/w2 (Mixtral) */
    size_t experts_len; /* length of "P.experts." (NVF_NAME_EXPERT, NVF_NAME_FUSED), else 0 */
} nvf_ckpt_name;

/**
 * What the tensor `name` with `ndim` dimensions is, by its exact name: an expert weight, a fused
 * expert tensor, an unknown 3-D expert tensor or anything else. Scale companions are
 * NVF_NAME_OTHER (see nvf_ckpt_companion()). Needs no checkpoint.
 */
void nvf_ckpt_name_parse(nvf_ckpt_name *out, const char *name, int32_t ndim);

/**
 * The role of tensor `name` (SPEC section 3), and in *is_weight whether it is a linear's
 * weight: a name ending in ".weight" (".weight_packed" in compressed-tensors) or a fused
 * expert tensor, that is not a norm's.
 */
nvf_ckpt_role nvf_ckpt_role_of(const char *name, int *is_weight);

/**
 * The module name of one expert's projection inside a fused tensor `fused_name` (parsed as
 * NVF_NAME_FUSED): "P.experts.{expert}.gate_proj", ".up_proj" or ".down_proj" for `proj`
 * NVF_PROJ_GATE, NVF_PROJ_UP or NVF_PROJ_DOWN.
 * @return a string the caller frees, or NULL (no memory, or `fused_name` is not fused).
 */
char *nvf_ckpt_fused_module(const char *fused_name, int64_t expert, nvf_proj proj);

/**
 * The module of a linear weight: its name without ".weight" (compressed-tensors:
 * ".weight_packed"; the name itself otherwise), as
 * the loaders' module lists name it.
 * @return a string the caller frees, or NULL when out of memory.
 */
char *nvf_ckpt_module_of(const char *name);

/* Which companion slot a quantization scale fills (nvf_ckpt_tensor scale, scale_2, input_scale). */
typedef enum nvf_companion {
    NVF_COMPANION_NONE = 0, /* not a scale */
    NVF_COMPANION_SCALE,    /* W_scale_inv (FP8 block), .weight_scale (FP8 per tensor, NVFP4) */
    NVF_COMPANION_SCALE_2,  /* .weight_scale_2, .weight_global_scale (compressed-tensors) */
    NVF_COMPANION_INPUT,    /* .input_scale, .input_global_scale */
    NVF_COMPANION_OTHER,    /* k_scale, v_scale, output_scale, weight_zero_point */
} nvf_companion;

/**
 * Whether `name` is a quantization scale, and of which weight: the `alt`-th candidate weight
 * name (0 first; compressed-tensors' "weight_packed" is the second candidate of a
 * ".weight_scale") is written into `weight` (capacity `cap`), "" when there is no such
 * candidate or it does not fit.
 * @return the slot, NVF_COMPANION_NONE when `name` is not a scale.
 */
nvf_companion nvf_ckpt_companion(char *weight, size_t cap, const char *name, int alt);

/**
 * The name an NVFP4 linear's companion in `slot` (SCALE, SCALE_2 or INPUT) must have, for weight
 * `weight` ("M.weight", or "M.weight_packed" in compressed-tensors): ModelOpt "M.weight_scale",
 * "M.weight_scale_2", "M.input_scale"; compressed-tensors (`ct` non-zero) "M.weight_scale",
 * "M.weight_global_scale", "M.input_global_scale". Into `out` (capacity `cap`).
 * @return 0, or NVF_E_INVALID (another slot, or it does not fit).
 */
int nvf_ckpt_companion_name(char *out, size_t cap, const char *weight, nvf_companion slot, int ct);

/* The tensors of one MoE layer of a prepared checkpoint (SPEC section 5), P =
 * "{layer prefix}.mlp.experts". */
typedef enum nvf_prep_part {
    NVF_PREP_W13_WEIGHT = 0, /* P.w13_weight U8 [E, 2I, H/2] */
    NVF_PREP_W13_SCALE,      /* P.w13_weight_scale F8_E4M3 [E, pad(2I), padc(H/16)] */
    NVF_PREP_W13_ALPHA,      /* P.w13_alpha F32 [E] */
    NVF_PREP_W2_WEIGHT,      /* P.w2_weight U8 [E, H, I/2] */
    NVF_PREP_W2_SCALE,       /* P.w2_weight_scale F8_E4M3 [E, pad(H), padc(I/16)] */
    NVF_PREP_W2_ALPHA,       /* P.w2_alpha F32 [E] */
    NVF_PREP_W13_INPUT,      /* W4A4: P.w13_input_scale F32 [E] */
    NVF_PREP_FC2_INPUT,      /* W4A4: P.fc2_input_scale F32 [1] */
    NVF_PREP_COUNT
} nvf_prep_part;

/**
 * The name of `part` of the prepared MoE layer whose prefix is `layer_prefix`
 * ("model.layers.3"), into `out` (capacity `cap`).
 * @return 0, or NVF_E_INVALID when it does not fit.
 */
int nvf_ckpt_prepared_name(char *out, size_t cap, const char *layer_prefix, nvf_prep_part part);

/**
 * The FP8-block scale name of weight `weight`: weight + "_scale_inv", into `out` (capacity cap).
 * @return 0, or NVF_E_INVALID when it does not fit.
 */
int nvf_ckpt_fp8_scale_name(char *out, size_t cap, const char *weight);

/** Whether `name` is an FP8-block scale ("W_scale_inv"). */
int nvf_ckpt_is_scale_inv(const char *name);

/**
 * The compressed-tensors name of a ModelOpt NVFP4 linear's tensor (SPEC section 3): M.weight ->
 * M.weight_packed, M.weight_scale_2 -> M.weight_global_scale, M.input_scale ->
 * M.input_global_scale; any other name (M.weight_scale included) is copied. Into `out`
 * (capacity `cap`).
 * @return 1 when renamed, 0 when copied, NVF_E_INVALID when it does not fit.
 */
int nvf_ckpt_ct_name(char *out, size_t cap, const char *modelopt_name);

/**
 * Global-scale group of a tensor name: an expert's (or MLP's) gate and up projections, and an
 * attention's q, k and v projections, share one amax and global scale (SPEC section 5; loaders
 * keep only one weight_scale_2 of the fused weight). Recognized: PREFIX.gate_proj.SUFFIX with
 * PREFIX.up_proj.SUFFIX, PREFIX.w1.SUFFIX with PREFIX.w3.SUFFIX, and PREFIX.{q,k,v}_proj.SUFFIX.
 * Writes the group key (the name with the projection replaced by "{gate,up}", "{w1,w3}" or
 * "{q,k,v}") into `out` (capacity `cap`).
 * @return 1 when the name belongs to a group, 0 when it stands alone (out = name), or
 * NVF_E_INVALID when the key does not fit.
 */
int nvf_ckpt_group_key(char *out, size_t cap, const char *name);

/* Which global-scale group a name belongs to (nvf_ckpt_group_key). */
typedef enum nvf_ckpt_group {
    NVF_GROUP_NONE = 0,    /* stands alone */
    NVF_GROUP_GATE_UP = 1, /* gate_proj/up_proj, w1/w3 of an expert or MLP */
    NVF_GROUP_QKV = 2,     /* q_proj/k_proj/v_proj of an attention */
} nvf_ckpt_group;

/**
 * nvf_ckpt_group_key() that also says which kind of group the name belongs to.
 * @return the group kind (NVF_GROUP_NONE: out = name), or NVF_E_INVALID when the key does not
 * fit.
 */
int nvf_ckpt_group_of(char *out, size_t cap, const char *name);

/**
 * Whether `name` is an expert-parallel rank directory of a prepared conversion,
 * "rank-0000r-of-0000N" (five digits each, r < N): *rank and *n_ranks set.
 * @return 1 when it is, 0 otherwise.
 */
int nvf_ckpt_rank_dir_parse(const char *name, int64_t *rank, int64_t *n_ranks);

/** The name of rank `rank` of `n_ranks`'s directory, "rank-0000r-of-0000N", into `out`
 * (capacity `cap`, at least 20). @return 0, or NVF_E_INVALID when it does not fit. */
int nvf_ckpt_rank_dir_name(char *out, size_t cap, int64_t rank, int64_t n_ranks);

/**
 * The FP8-block rule for a weight and its scale (SPEC section 3): the weight has at least 2
 * dimensions; `scale` exists, has dtype F32, BF16, F16 or F8_E8M0 and ceil(rows/b0) *
 * ceil(cols/b1) elements per matrix (any shape with that count: writers squeeze it). `file`
 * only names the weight's file in messages. Every command that reads FP8-block weights asks this.
 * @return 0; NVF_E_FORMAT for a missing scale or a wrong scale dtype; NVF_E_SHAPE for a
 * weight of fewer than 2 dimensions or a wrong element count (the message names both
 * tensors, their shapes and the count wanted).
 */
int nvf_ckpt_check_fp8_scale(const char *file, const nvf_st_tensor *weight,
                             const nvf_st_tensor *scale, int64_t b0, int64_t b1);

typedef struct nvf_ckpt_file {
    char *name; /* file name relative to the checkpoint directory */
    char *path; /* full path */
    uint64_t bytes;
    nvf_st_file *st;
} nvf_ckpt_file;

typedef struct nvf_ckpt_tensor {
    const nvf_st_tensor *st; /* name, dtype, shape, data; owned by the shard */
    size_t file;             /* index into nvf_ckpt.files */
    nvf_ckpt_role role;
    /* 1 for a linear's weight: a name ending in ".weight" (".weight_packed" in
     * compressed-tensors), or a fused 3-D expert parameter, that is not a norm's */
    int is_weight;
    /* Companions (indices into nvf_ckpt.tensors, or NVF_CKPT_NONE): the FP8-block
     * `W_scale_inv`, or `weight_scale` (FP8 per-tensor, NVFP4); `weight_scale_2`
     * (`weight_global_scale` in compressed-tensors); `input_scale`. For a scale: its weight. */
    size_t scale, scale_2, input_scale, owner;
} nvf_ckpt_tensor;

/* The detected quantization of the source. */
typedef struct nvf_ckpt_quant {
    nvf_ckpt_format format;
    const char *source; /* where it was read from: "config.json", "hf_quant_config.json",
                           "tensor names" or "tensor dtypes"; static */
    char *quant_method; /* as written, or NULL */
    char *quant_algo;   /* as written, or NULL */
    int64_t block[2];   /* FP8 block size (rows, columns); 0 for other formats */
    int scale_ue8m0;    /* scale_fmt "ue8m0": power-of-two block scales */
    size_t n_ignore;    /* modules left in source precision (modules_to_not_convert, ...) */
    char **ignore;
    /* NVF_CKPT_FORMAT_PREPARED: its quantization_config ("" / -1 where not given) */
    char prep_layout[48];      /* "flashinfer-cutedsl-nvfp4-v1" */
    char prep_precision[8];    /* "w4a16" | "w4a4" */
    char prep_scale_layout[8]; /* "128x4" | "8x4" */
    int64_t ep_size, ep_rank, expert_first, expert_count;
    /* NVF_CKPT_FORMAT_NVFP4_CT: a config group quantizes the input activations to 4 bits (W4A4:
     * every linear needs its input_global_scale); 0 for W4A16 exports */
    int ct_input_activations;
} nvf_ckpt_quant;

typedef enum nvf_router_kind {
    NVF_ROUTER_NONE = 0,     /* no MoE layer */
    NVF_ROUTER_SOFTMAX_TOPK, /* softmax, top-k, renormalize if norm_topk_prob */
    NVF_ROUTER_SIGMOID_TOPK, /* sigmoid scores, top-k, no groups */
    NVF_ROUTER_DEEPSEEK_V3,  /* sigmoid + correction bias + group-limited top-k */
    NVF_ROUTER_TOPK_SOFTMAX, /* top-k of the logits, softmax over those k (GPT-OSS) */
} nvf_router_kind;

/** "none", "softmax_topk", "sigmoid_topk", "deepseek_v3", "topk_softmax". Never NULL. */
const char *nvf_router_kind_name(nvf_router_kind kind);

typedef enum nvf_layer_kind {
    NVF_LAYER_DENSE = 0,
    NVF_LAYER_MOE = 1,
} nvf_layer_kind;

/* Where one projection of one expert lives (the expert map). */
typedef struct nvf_moe_proj {
    size_t tensor;      /* index into nvf_ckpt.tensors; NVF_CKPT_NONE when missing */
    size_t scale;       /* the tensor's companions (nvf_ckpt_tensor scale, scale_2, */
    size_t scale_2;     /* input_scale); a fused tensor's companions hold every expert, */
    size_t input_scale; /* indexed by `expert` along dimension 0 like the tensor */
    int64_t expert;     /* fused: this expert's index along dimension 0; -1 for a 2-D tensor */
    int64_t row0, rows; /* rows of the [out, in] matrix that are this projection: fused
                           gate_up_proj holds gate in [0, I) and up in [I, 2I); else [0, out) */
} nvf_moe_proj;

typedef struct nvf_moe_expert {
    nvf_moe_proj proj[3]; /* indexed by NVF_PROJ_GATE, NVF_PROJ_UP, NVF_PROJ_DOWN */
} nvf_moe_expert;

/* One decoder layer with an MLP (`PREFIX.layers.{i}.mlp` or `.block_sparse_moe`). */
typedef struct nvf_moe_layer {
    char *prefix;  /* "model.layers.3" */
    int64_t index; /* 3 */
    nvf_layer_kind kind;
    int fused;            /* experts as 3-D gate_up_proj / down_proj */
    int w13_naming;       /* experts named w1/w3/w2 (Mixtral) instead of gate/up/down_proj */
    int64_t n_experts;    /* expected: from config, else router rows, else from the names */
    int64_t n_present;    /* experts with all three projections */
    int64_t hidden;       /* H from the expert (or dense) weights; -1 unknown */
    int64_t intermediate; /* I per expert (dense: the MLP's); -1 unknown */
    size_t n_missing;
    int64_t *missing; /* expert ids in [0, n_experts) lacking a projection, ascending */
    int has_router, has_router_bias;
    int has_shared;              /* shared_experts / shared_expert linears */
    int has_shared_gate;         /* Qwen2-MoE shared_expert_gate */
    int64_t shared_intermediate; /* -1 when none */
    /* The expert map: n_experts entries in id order (NULL for a dense layer); an expert id
     * beyond n_experts is not in it */
    nvf_moe_expert *experts;
    size_t router, router_bias;       /* tensor indices, or NVF_CKPT_NONE */
    size_t fused_gate_up, fused_down; /* fused 3-D tensors, or NVF_CKPT_NONE */
} nvf_moe_layer;

/* The model's MoE settings from config.json (top level or `text_config`); -1 = not given. */
typedef struct nvf_moe_config {
    nvf_router_kind router;
    int64_t n_experts;            /* num_experts | num_local_experts | n_routed_experts */
    const char *n_experts_key;    /* which key held it; static, NULL when none */
    int64_t top_k;                /* num_experts_per_tok */
    int norm_topk_prob;           /* 0, 1, or -1 */
    double routed_scaling_factor; /* < 0 when not given */
    int64_t n_group, topk_group, first_k_dense_replace;
    int64_t hidden_size, moe_intermediate_size, intermediate_size;
    int64_t n_shared_experts;
    int64_t shared_expert_intermediate_size; /* Qwen2-MoE */
    double swiglu_limit;                     /* GPT-OSS; < 0 when not given */
    char hidden_act[32];                     /* "" when not given */
    char scoring_func[32];
    char topk_method[32]; /* "noaux_tc" (DeepSeek-V3) */
    char model_type[32];  /* "qwen3_moe", "deepseek_v3", "kimi_k2", "glm4_moe", "gpt_oss", ... */
} nvf_moe_config;

typedef struct nvf_moe {
    nvf_moe_config config;
    size_t n_layers; /* layers with an MLP, sorted by (prefix stem, index) */
    nvf_moe_layer *layers;
    size_t n_moe, n_dense;
    int64_t experts_present, experts_missing; /* sums over MoE layers */
} nvf_moe;

/**
 * An open checkpoint. Only nvf_ckpt_open() makes one: it carries private state beyond these
 * fields (the parsed config.json and hf_quant_config.json), so never declare or copy one.
 */
typedef struct nvf_ckpt {
    char *path;                /* as given */
    char *dir;                 /* the directory ("." for a bare file name) */
    int is_file;               /* opened as a single .safetensors file */
    char *index_name;          /* "model.safetensors.index.json" or NULL */
    uint64_t index_total_size; /* metadata.total_size, 0 without an index */
    uint64_t data_bytes;       /* sum of every tensor's data bytes */
    size_t n_files;
    nvf_ckpt_file *files; /* sorted by name */
    size_t n_tensors;
    nvf_ckpt_tensor *tensors; /* sorted by name */
    nvf_ckpt_quant quant;
    nvf_moe moe;
    size_t n_warnings; /* inconsistencies that do not stop reading (validate reports them) */
    char **warnings;
} nvf_ckpt;

/**
 * Open a checkpoint directory or a single .safetensors file: read config.json and
 * hf_quant_config.json, the index (or list the shards), open and validate every shard, check
 * that the index and the shards agree, detect the format, link scale tensors to their weights
 * (FP8 block: any scale shape whose element count is ceil(out/b0)*ceil(in/b1)), and discover
 * the MoE structure. Inconsistencies that do not stop reading are logged as warnings and kept
 * in `warnings`.
 * @return 0; NVF_E_IO when the path or a file cannot be read; NVF_E_FORMAT for a malformed
 * file, an index that disagrees with the shards, a missing shard, or a tensor in two shards
 * (the message names the file and the tensor); NVF_E_SHAPE for an FP8 block scale of the wrong
 * size; NVF_E_NOMEM. The caller owns *out and frees it with nvf_ckpt_close().
 */
int nvf_ckpt_open(nvf_ckpt **out, const char *path);

/**
 * nvf_ckpt_open() with the FP8 block size (rows, columns) of a source whose config does not
 * give one (a single file, or a directory whose scales are recognized by name only); NULL or
 * non-positive values: 128 x 128. A config.json that gives the size wins.
 */
int nvf_ckpt_open_fp8_block(nvf_ckpt **out, const char *path, const int64_t *block);

/** Close every shard and free the checkpoint; NULL is fine. */
void nvf_ckpt_close(nvf_ckpt *ck);

/**
 * The value of config.json's top-level `key` (e.g. "quantization_config") as JSON text on one
 * line; *out is NULL when the checkpoint has no config.json or the config no such key.
 * @return 0, or NVF_E_NOMEM. The caller frees *out with free().
 */
int nvf_ckpt_config_json(char **out, const nvf_ckpt *ck, const char *key);

/** The tensor called `name`, or NULL. O(log n). */
const nvf_ckpt_tensor *nvf_ckpt_find(const nvf_ckpt *ck, const char *name);

/** Index of the tensor called `name` in ck->tensors, or NVF_CKPT_NONE. */
size_t nvf_ckpt_find_index(const nvf_ckpt *ck, const char *name);

/**
 * Whether the module of tensor `name` (the name without its last component) is in the
 * source's list of modules left in source precision: an exact name, a dot-prefix of it, a
 * glob (fnmatch) or a compressed-tensors "re:" regular expression.
 */
int nvf_ckpt_is_ignored(const nvf_ckpt *ck, const char *name);

/* Which tensors a conversion would touch. */
typedef enum nvf_plan_action {
    NVF_PLAN_KEEP = 0, /* not in scope, or not a weight: left as it is */
    NVF_PLAN_QUANTIZE, /* becomes NVFP4 */
    NVF_PLAN_SKIP,     /* a weight in scope that cannot be quantized (reason says why) */
    NVF_PLAN_DROP,     /* the source scale of a weight that is quantized: replaced */
} nvf_plan_action;

/** "keep", "quantize", "skip", "drop". Never NULL. */
const char *nvf_plan_action_name(nvf_plan_action action);

typedef struct nvf_plan_entry {
    nvf_plan_action action;
    int in_scope;
    char reason[96]; /* "" for quantize */
} nvf_plan_entry;

typedef struct nvf_plan {
    size_t n;                /* == ck->n_tensors */
    nvf_plan_entry *entries; /* parallel to ck->tensors */
    size_t n_quantize, n_keep, n_skip, n_drop;
    uint64_t bytes_quantize; /* source bytes of the tensors to quantize */
    uint64_t bytes_nvfp4;    /* their NVFP4 size: packed values + E4M3 scales + 2 F32 scalars
                                per linear (per expert for fused 3-D weights) */
    uint64_t bytes_keep;     /* source bytes of everything else kept */
} nvf_plan;

/** The default scope, NVF_CKPT_DEFAULT_SCOPE, as a glob list. */
extern const char *const nvf_plan_default_include[];
#define NVF_PLAN_DEFAULT_N_INCLUDE 1

/**
 * Decide, per tensor, what a conversion with the given scope would do. A tensor is in scope
 * when its name matches one of `include` (fnmatch; n_include == 0 means the default
 * NVF_CKPT_DEFAULT_SCOPE) and none of `exclude`. A weight in scope is quantized when it is
 * floating point, 2-D (3-D for fused experts), not an embedding, and its input (last)
 * dimension is a multiple of 16; otherwise it is skipped with the reason
 * ("in=100 is not a multiple of 16"). An empty tensor (a zero dimension) is skipped ("empty
 * tensor, copied as it is"); so is a 3-D tensor under ".experts." that is not a fused expert
 * (NVF_NAME_EXPERT_UNKNOWN).
 * @return 0 or NVF_E_NOMEM. The caller frees *out with nvf_plan_free().
 */
int nvf_ckpt_plan(nvf_plan **out, const nvf_ckpt *ck, const char *const *include, size_t n_include,
                  const char *const *exclude, size_t n_exclude);

struct nvf_recipe;

/**
 * nvf_ckpt_plan() for the scope of recipe `r` (its include and exclude globs): the plan that
 * `convert` follows and `inspect` shows, so the two never differ for one recipe.
 * @return as nvf_ckpt_plan().
 */
int nvf_ckpt_plan_recipe(nvf_plan **out, const nvf_ckpt *ck, const struct nvf_recipe *r);

/** Free a plan; NULL is fine. */
void nvf_plan_free(nvf_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
