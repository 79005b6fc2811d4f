/*
 * Synthetic checkpoints: small, deterministic directories that look like real Hugging Face MoE
 * checkpoints (config.json with the model family's field names, generation_config.json,
 * model.safetensors.index.json, shards, a tokenizer stub, README.md), for demos, tests and
 * benchmarks. Values are random but bit-identical on every machine for a given seed.
 *
 * Values. Every logical matrix (one expert's gate_proj, a norm, ...) has a 64-bit key
 *   key = splitmix64_mix(fnv1a64(logical name) ^ splitmix64_mix(seed))
 * and its element i (row-major) draws r = splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15).
 * Four 13-bit fields of r (bits 0-12, 13-25, 26-38, 39-51) summed give an Irwin-Hall variate
 * s = sum - 16382 (mean 0, std sqrt((8192^2 - 1) / 3)); the value is the binary32 product
 * (float)s * K with K = (float)(std / 4729.65336996275), plus the mean where it is not 0.
 * Weights (std 0.02) become outliers where bits 52-63 of r are all 0 (1 in 4096): the value is
 * multiplied by 8 + (field0 % 25). The value stored is BF16 (RN-even) or, for F32 tensors, the
 * binary32 itself. Only exactly rounded integer-to-float conversion, + and * are used.
 * Fused expert tensors are the concatenation of the per-expert matrices with the same keys, so
 * a fused and a per-expert checkpoint of one seed hold the same values.
 *
 * FP8 blocks (DeepSeek-V3 style). A linear weight W [out, in] (per expert for a 3-D fused
 * tensor) is cut into 128 x 128 blocks (partial at the edges); with w the BF16 value as f32,
 * scale_inv = amax(|w| over the block) / 448 (binary32 division; 1.0 for an all-zero block;
 * with scale_fmt ue8m0 the next power of two >= that quotient) and the byte is
 * e4m3_sat(w / scale_inv). So an FP8 checkpoint is the block quantization of the BF16
 * checkpoint of the same seed.
 *
 * NVFP4 ("nvfp4"). The bf16 checkpoint of the same options is written into the sibling
 * directory DST.synth-bf16.tmp and converted into DST by nvf_convert_run() with the default
 * recipe on the CPU, so DST is exactly what `convert --target modelopt` writes (shards, index,
 * config.json with its quantization_config, hf_quant_config.json, nvfp4-manifest.json, the side
 * files copied); the temporary directory is removed. "nvfp4-ct" then rewrites DST as
 * compressed-tensors "nvfp4-pack-quantized" (SPEC section 3): M.weight -> M.weight_packed (the
 * same bytes), M.weight_scale unchanged, M.weight_scale_2 -> M.weight_global_scale F32 [1]
 * holding the gs with RN(1 / gs) == weight_scale_2 bit for bit (nvf_quant_global_scale_for_decode),
 * M.input_scale -> M.input_global_scale likewise; config.json's quantization_config becomes
 * compressed-tensors'; hf_quant_config.json and the manifest (which no longer match) are removed.
 *
 * Output order: shards first, then generation_config.json, the tokenizer files and README.md,
 * then model.safetensors.index.json, and config.json last. Every file is written as NAME.tmp
 * and renamed, so a directory without config.json (or holding *.tmp files) is an interrupted
 * run, never a complete-looking checkpoint.
 */
#ifndef NVFP4_SYNTH_H
#define NVFP4_SYNTH_H

#include "nvfp4/dtype.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_synth_preset {
    NVF_SYNTH_PRESET_QWEN3_MOE = 0,   /* "qwen3-moe": Qwen3-30B-A3B-like */
    NVF_SYNTH_PRESET_DEEPSEEK_V3 = 1, /* "deepseek-v3": DeepSeek-V3-like, MLA attention */
    NVF_SYNTH_PRESET_COUNT
} nvf_synth_preset;

typedef enum nvf_synth_dtype {
    NVF_SYNTH_DTYPE_BF16 = 0,      /* "bf16" */
    NVF_SYNTH_DTYPE_FP8_BLOCK = 1, /* "fp8-block": F8_E4M3 + F32 weight_scale_inv per 128x128 */
    NVF_SYNTH_DTYPE_NVFP4 = 2,     /* "nvfp4": ModelOpt NVFP4, the bf16 checkpoint converted */
    NVF_SYNTH_DTYPE_NVFP4_CT = 3,  /* "nvfp4-ct": the same values as compressed-tensors */
    NVF_SYNTH_DTYPE_COUNT
} nvf_synth_dtype;

typedef enum nvf_synth_scale_fmt {
    NVF_SYNTH_SCALE_F32 = 0,   /* scale_inv = amax / 448 */
    NVF_SYNTH_SCALE_UE8M0 = 1, /* power-of-two F32 scales, config scale_fmt "ue8m0" */
} nvf_synth_scale_fmt;

/** What to generate. Dimension fields left 0 take the preset's default. */
typedef struct nvf_synth_options {
    nvf_synth_preset preset;
    nvf_synth_dtype dtype;
    nvf_synth_scale_fmt scale_fmt;
    uint64_t seed;
    int64_t layers;              /* num_hidden_layers */
    int64_t experts;             /* routed experts per MoE layer */
    int64_t hidden;              /* hidden_size, a multiple of 16 */
    int64_t intermediate;        /* dense intermediate_size, a multiple of 16 */
    int64_t moe_intermediate;    /* moe_intermediate_size, a multiple of 16 */
    uint64_t max_shard_size;     /* tensor bytes per shard; 0: ceil(total / 4) rounded up to a
                                    MB, at most 5 GB */
    int fused_experts;           /* experts as gate_up_proj [E, 2I, H] and down_proj [E, H, I] */
    int force;                   /* write into a non-empty DST */
    int threads;                 /* generator threads; <= 0: one per online core. The bytes
                                    written do not depend on it */
    volatile sig_atomic_t *stop; /* set non-zero (from a signal handler) to stop between
                                    tensors with NVF_E_INTERRUPTED; or NULL */
} nvf_synth_options;

/** Fill `o` with the defaults: qwen3-moe, bf16, seed 0, preset dimensions. */
void nvf_synth_options_init(nvf_synth_options *o);

/** The preset's name ("qwen3-moe", ...); "?" when out of range. Never NULL. */
const char *nvf_synth_preset_name(nvf_synth_preset preset);

/** The dtype's option name ("bf16", "fp8-block", "nvfp4", "nvfp4-ct"); "?" when out of range. */
const char *nvf_synth_dtype_name(nvf_synth_dtype dtype);

/** The presets' names, comma-separated ("qwen3-moe, deepseek-v3"). Static. */
const char *nvf_synth_preset_list(void);

/**
 * Parse a preset name.
 * @return 0, or NVF_E_INVALID with a message listing the presets.
 */
int nvf_synth_preset_from_name(nvf_synth_preset *out, const char *name);

/**
 * Parse a --dtype value ("bf16", "fp8-block", "nvfp4", "nvfp4-ct").
 * @return 0, or NVF_E_INVALID with a message listing the choices.
 */
int nvf_synth_dtype_from_name(nvf_synth_dtype *out, const char *name);

/** One tensor of the plan. */
typedef struct nvf_synth_tensor {
    char *name;
    nvf_dtype dtype;
    int32_t ndim;
    int64_t shape[3];
    uint64_t nbytes;
    uint32_t shard; /* 0-based shard number */
} nvf_synth_tensor;

/**
 * The resolved dimensions and the tensors, in file order, with their shards. Only
 * nvf_synth_plan_build() makes one: it carries private state beyond these fields (how each
 * tensor's values are made), so never declare or copy one.
 */
typedef struct nvf_synth_plan {
    nvf_synth_options opt; /* with the defaults filled in */
    int64_t vocab, heads, kv_heads, head_dim, top_k, first_dense;
    int64_t n_group, topk_group, q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head;
    size_t n_tensors;
    nvf_synth_tensor *tensors;
    uint32_t n_shards;
    uint64_t total_size;     /* sum of every tensor's data bytes */
    uint64_t max_shard_size; /* resolved */
} nvf_synth_plan;

/**
 * Resolve the options and list every tensor with its shard. Checks the dimensions
 * (NVF_E_INVALID naming the option and value). For the NVFP4 dtypes it is the plan of the bf16
 * checkpoint that is converted (see the top of this file).
 * The caller frees *out with nvf_synth_plan_free().
 */
int nvf_synth_plan_build(nvf_synth_plan **out, const nvf_synth_options *opt);

/** Free a plan; NULL is fine. */
void nvf_synth_plan_free(nvf_synth_plan *plan);

/**
 * config.json of the plan (the model family's real field names, keys sorted), as a newly
 * allocated NUL-terminated JSON text the caller frees with free(); NULL when out of memory.
 */
char *nvf_synth_config_json(const nvf_synth_plan *plan);

/** A file written by nvf_synth_write(). */
typedef struct nvf_synth_file {
    char *name; /* relative to DST */
    uint64_t bytes;
} nvf_synth_file;

/** What nvf_synth_write() wrote. */
typedef struct nvf_synth_summary {
    size_t n_files;
    nvf_synth_file *files; /* in the order written */
    size_t n_tensors;
    uint32_t n_shards;
    uint64_t tensor_bytes; /* index metadata.total_size */
    uint64_t file_bytes;   /* sum of the files' sizes */
} nvf_synth_summary;

/**
 * Write the checkpoint into directory `dst` (created if missing), streaming tensor by tensor in
 * bounded memory (per thread, 128 rows of the widest matrix as stored bytes plus 256 KiB of f32). A
 * `dst` that exists and is not an empty directory is NVF_E_INVALID unless opt->force; with force,
 * config.json is removed first, then stale shards (model-*-of-*.safetensors) and the index; other
 * files are kept. The NVFP4 dtypes write through nvf_convert_run() (its own rules for a
 * non-empty DST with force) and list DST's files in name order in the summary.
 * @return 0 or a negative nvf_status with the message set. On success *out (when not NULL)
 * describes the files; free it with nvf_synth_summary_free().
 */
int nvf_synth_write(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt);

/** Free what a summary holds (not the struct itself); NULL is fine. */
void nvf_synth_summary_free(nvf_synth_summary *s);

#ifdef __cplusplus
}
#endif
#endif
