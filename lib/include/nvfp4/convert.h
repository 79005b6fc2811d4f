/*
 * `convert`: a whole checkpoint directory to a ModelOpt NVFP4 checkpoint directory (SPEC
 * sections 5 and 6), streaming with bounded host memory, hashed while written, resumable.
 *
 * What DST holds when a conversion finishes, in the order the files are completed:
 *   1. model-0000i-of-0000N.safetensors: every output tensor once, in a fixed order; a converted
 *      linear X.weight becomes X.weight (U8 [out, in/2]), X.weight_scale (F8_E4M3 [out, in/16]),
 *      X.weight_scale_2 (F32 []) and X.input_scale (F32 []); fused 3-D experts are split into
 *      PREFIX.experts.{e}.{gate,up,down}_proj.weight*. Each shard is PATH.tmp, fsync, rename.
 *   2. .nvfp4-progress.json (while running): the finished shards with their hashes, keyed by
 *      the source files (names, sizes, mtimes), recipe and options; --resume reuses them after
 *      hashing them again. .nvfp4-convert.lock (while running): flock'd, holds the pid.
 *   3. Every other file of SRC (tokenizer, generation config, README, ...) copied.
 *   4. model.safetensors.index.json, hf_quant_config.json, config.json.
 *   5. nvfp4-manifest.json, last: its presence marks a complete checkpoint.
 * With --shard I/N (shard_count > 0) a run writes only its part of 1 and, last, the part record
 * .nvfp4-parts/I-of-N.json; nvf_merge_run() then writes 3 to 5 for the union of the N parts.
 */
#ifndef NVFP4_CONVERT_H
#define NVFP4_CONVERT_H

#include "nvfp4/device.h"
#include "nvfp4/recipe.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The progress journal in DST (removed when the conversion completes). */
#define NVF_CONVERT_JOURNAL ".nvfp4-progress.json"

/** The directory of DST holding the part records of `convert --shard i/N` (removed by merge). */
#define NVF_CONVERT_PARTS_DIR ".nvfp4-parts"

/** The most parts a conversion is split into (--shard i/N: N <= this). */
#define NVF_CONVERT_MAX_PARTS 100000

/** Where a conversion stands; passed to the progress callback. */
typedef struct nvf_convert_progress {
    uint64_t bytes_done, bytes_total;     /* source tensor bytes consumed (or reused) */
    uint64_t tensors_done, tensors_total; /* output tensors */
    uint64_t shards_done, shards_total;
} nvf_convert_progress;

/**
 * Called from the writer thread after each tensor (and within large ones); `final` is 1 on the
 * last call. Must be quick and must not call back into the conversion.
 */
typedef void (*nvf_convert_progress_fn)(const nvf_convert_progress *p, int final, void *user);

typedef struct nvf_convert_options {
    const char *src, *dst;
    const nvf_recipe *recipe;    /* quantization, scope, target, max shard size */
    int keep_source_precision;   /* keep FP8 tensors outside the scope as FP8 + scale */
    const char *input_amax_path; /* JSON {"MODULE": amax, ...} or NULL: input_scale 1.0 */
    int resume;                  /* reuse finished shards recorded in the journal */
    int force;                   /* DST may hold other files */
    nvf_device device;           /* resolved --device: CPU or a CUDA ordinal */
    /* --devices: when n_devices > 1, one compute worker per entry (CUDA ordinals, or the CPU),
     * tensors dealt out in turn; the output bytes are the same. NULL/0: `device` alone. */
    const nvf_device *devices;
    size_t n_devices;
    int threads;              /* CPU quantizer threads; <= 0: one per online core */
    uint64_t max_host_memory; /* bytes of tensor buffers in flight (plus one job) */
    int allow_nonfinite;      /* pass NaN/Inf through instead of failing */
    int allow_empty;          /* a scope that quantizes nothing is not an error */
    int strict; /* NVFP4 source to a prepared target: gate/up with different weight_scale_2 are
                   an error (exit 3) instead of re-quantized onto the shared scale */
    volatile sig_atomic_t *stop; /* set non-zero (from a signal handler) to stop; or NULL */
    nvf_convert_progress_fn progress;
    void *progress_user;
    /* a file of SRC that links outside SRC (and outside the Hugging Face cache repository
     * holding it) is refused (NVF_E_FORMAT) instead of followed with a warning */
    int no_follow_outside;
    /* --shard i/N (shard_count > 0): convert only part `shard_index` (0-based) of the plan's
     * output shards, split into shard_count parts (nvf_convert_part_range), and write the part
     * record DST/.nvfp4-parts/i-of-N.json instead of the index, configs, side files and
     * manifest; the journal and lock are the part's own (.nvfp4-parts/i-of-N.progress.json,
     * .nvfp4-parts/i-of-N.lock), so parts run side by side into one DST. 0: the whole plan. */
    int shard_index, shard_count;
} nvf_convert_options;

/** What a conversion did (also the manifest's "summary", which holds no timings). */
typedef struct nvf_convert_summary {
    uint64_t tensors_quantized;   /* source tensors quantized to NVFP4 */
    uint64_t linears_quantized;   /* linears written as NVFP4 (fused experts count per expert) */
    uint64_t tensors_kept;        /* source tensors written with their bytes unchanged */
    uint64_t tensors_dequantized; /* FP8 source tensors written as BF16 */
    uint64_t tensors_dropped;     /* source scales consumed by a conversion */
    uint64_t tensors_written;     /* output tensors */
    uint64_t shards, shards_reused;
    uint64_t bytes_in;            /* source tensor data bytes */
    uint64_t bytes_out;           /* output shard file bytes */
    uint64_t experts_requantized; /* NVFP4 source: members brought onto a shared scale (in the
                                     JSON only when non-zero) */
} nvf_convert_summary;

/**
 * The summary's counters as the text of one JSON object, on one line (tensors_*,
 * linears_quantized, shards, bytes_in, bytes_out, in that order): everything that does not
 * depend on timing or on a resume, as the manifest's "summary" holds it.
 * @return a NUL-terminated string the caller frees with free(), or NULL on no memory (error set).
 */
char *nvf_convert_summary_to_json(const nvf_convert_summary *s);

/**
 * The stage profile of the last nvf_convert_run() in this process (wall seconds per thread role,
 * busy and waiting; timings, unlike the summary) as the text of one JSON object: "seconds"
 * (the run), "pipeline_seconds", and per stage (compute, writer, hasher, crc, source_hash,
 * finish) an object with "threads", "busy", "wait" and the seconds of their parts.
 * @return a NUL-terminated string the caller frees with free(), or NULL on no memory (error set).
 */
char *nvf_convert_profile_to_json(void);

/** The same profile as a table, one line per stage, on `f`. */
void nvf_convert_profile_print(FILE *f);

/** Options with defaults: CPU, all cores, 8 GiB, target taken from `recipe`. */
void nvf_convert_options_init(nvf_convert_options *o, const char *src, const char *dst,
                              const nvf_recipe *recipe);

/**
 * Run a conversion (the whole of SPEC sections 5 and 6 for target modelopt), or one part of it
 * (shard_count > 0: NVF_E_INVALID when not 0 <= shard_index < shard_count <=
 * NVF_CONVERT_MAX_PARTS). With resume, a DST that already holds this conversion complete (manifest,
 * no journal) is verified and kept: *out then counts every shard as reused.
 * @return 0 and *out filled; NVF_E_INVALID when DST is not empty and neither resume nor force is
 * set, when DST holds a file the conversion does not write, when SRC is a single shard without
 * a config.json beside it, or for an --input-amax entry that is not a positive finite number;
 * NVF_E_IO when another conversion holds DST's lock (the message names its pid); NVF_E_NOTIMPL for
 * a prepared target; NVF_E_IO naming the file for a read or write failure (ENOSPC, EIO: no partial
 * output file is left, SRC is never written); NVF_E_INTERRUPTED when *stop was set (the temporary
 * files are removed; finished shards and the journal stay for --resume; the message names the
 * shards kept and says that --resume continues); NVF_E_FORMAT / NVF_E_SHAPE / NVF_E_NONFINITE for a
 * bad source (a NaN or infinity in any computed tensor, quantized or dequantized, unless
 * allow_nonfinite); NVF_E_DEVICE / NVF_E_CUDA.
 */
int nvf_convert_run(nvf_convert_summary *out, const nvf_convert_options *opt);

/* `quantize`: one safetensors file to NVFP4 -------------------------------------------------
 *
 * The input is opened as a single-file checkpoint (nvf_ckpt_open), so its tensors carry the
 * checkpoint's classification: a scale (role "scale") is never quantized, and an F8_E4M3
 * tensor's FP8 scale companion (W_scale_inv, or a per-tensor weight_scale) is the one the
 * checkpoint linked to it, checked by the same rule as in inspect and convert. OUT holds the
 * input's tensors in the input's order; a quantized X [r, c] becomes X (U8 [r, c/2]), X_scale
 * (F8_E4M3 [r, c/16]) and X_scale_2 (F32 []); a consumed FP8 scale is dropped. OUT is written
 * as OUT.tmp, fsynced and renamed. */

/** What quantize did with one input tensor. */
typedef enum nvf_quantize_action {
    NVF_QUANTIZE_KEEP = 0, /* copied unchanged */
    NVF_QUANTIZE_QUANT,    /* written as NVFP4 */
    NVF_QUANTIZE_DROP,     /* the FP8 scale of a quantized tensor: consumed */
} nvf_quantize_action;

typedef struct nvf_quantize_file_options {
    const char *in, *out;
    const nvf_recipe *recipe; /* its quantization keys */
    /* Quantize only these tensors (each must exist and be quantizable); NULL/0: every floating
     * 2-D tensor that is not a scale and whose last dimension is a multiple of 16 */
    const char *const *tensors;
    size_t n_tensors;
    int64_t block[2];            /* FP8 block scales: rows, columns per scale; 0: 128 x 128 */
    nvf_device device;           /* resolved --device */
    int threads;                 /* CPU threads; <= 0: one per online core */
    int allow_nonfinite;         /* pass NaN/Inf through instead of failing */
    int force;                   /* OUT may exist: it is replaced */
    volatile sig_atomic_t *stop; /* set non-zero (from a signal handler) to stop; or NULL */
} nvf_quantize_file_options;

/** One input tensor in the summary (input order). */
typedef struct nvf_quantize_file_tensor {
    char *name; /* owned by the summary */
    nvf_dtype dtype;
    nvf_quantize_action action;
    /* NVF_QUANTIZE_QUANT: "plain", or "fp8-block" / "fp8-tensor" when dequantized with its FP8
     * block or per-tensor scale first; static */
    const char *source;
    char *group; /* NVF_QUANTIZE_QUANT: the global-scale group key; owned; else NULL */
    float amax;  /* NVF_QUANTIZE_QUANT: of this tensor */
    float gs;    /* NVF_QUANTIZE_QUANT: the group's scale (nvf_quant_group_scale: the global
                    encode scale; ModelOpt's arithmetic: sf2) */
} nvf_quantize_file_tensor;

typedef struct nvf_quantize_file_summary {
    size_t n_tensors;
    nvf_quantize_file_tensor *tensors;
    uint64_t tensors_quantized, tensors_kept, tensors_dropped;
    uint64_t bytes_quantized; /* source bytes of the quantized tensors */
    uint64_t bytes_written;   /* size of OUT */
} nvf_quantize_file_summary;

/** Options with defaults: CPU, all cores, 128 x 128 FP8 blocks, OUT must not exist. */
void nvf_quantize_file_options_init(nvf_quantize_file_options *o, const char *in, const char *out,
                                    const nvf_recipe *recipe);

/**
 * Quantize one safetensors file (see above), computing on the backend of opt->device.
 * @return 0 and *out filled (free with nvf_quantize_file_summary_free); NVF_E_INVALID when OUT
 * is IN (also through a link: same device and inode), when OUT exists and force is not set, or
 * for a --tensor that is missing or cannot be quantized; NVF_E_IO / NVF_E_FORMAT / NVF_E_SHAPE
 * from opening IN (an FP8 weight whose scale has the wrong element count or dtype is
 * NVF_E_SHAPE or NVF_E_FORMAT); NVF_E_NONFINITE; NVF_E_INTERRUPTED when *stop was set;
 * NVF_E_DEVICE, NVF_E_CUDA, NVF_E_NOMEM. On failure no OUT.tmp is left and OUT is untouched.
 */
int nvf_quantize_file(nvf_quantize_file_summary *out, const nvf_quantize_file_options *opt);

/** Free the summary's arrays and zero it; NULL is fine. */
void nvf_quantize_file_summary_free(nvf_quantize_file_summary *s);

/* `merge`: the union of the parts of `convert --shard i/N` --------------------------------- */

typedef struct nvf_merge_options {
    const char *dst;
    int rehash;                  /* hash every shard again and compare with its part record */
    int threads;                 /* hashing threads; <= 0: one per online core */
    volatile sig_atomic_t *stop; /* set non-zero (from a signal handler) to stop; or NULL */
} nvf_merge_options;

typedef struct nvf_merge_summary {
    nvf_convert_summary convert; /* what the one-job conversion's summary would say */
    uint64_t parts;              /* N */
    uint64_t shards_rehashed;    /* --rehash: shards hashed again (all of them) */
    char src[4096];              /* the source directory the parts recorded */
} nvf_merge_summary;

/**
 * Check the part records in DST/.nvfp4-parts (all N present, one fingerprint, every planned
 * shard exactly once, every shard file present with its recorded size; with rehash, its SHA-256
 * and tensor CRC-32s too), then write what a one-job conversion of the same source and options
 * writes after its shards (index, configs, side files copied from the recorded SRC, manifest),
 * byte for byte, and remove DST/.nvfp4-parts.
 * @return 0; NVF_E_VERIFY naming the missing part, the part with another fingerprint, the shard
 * planned twice or never, the missing or mis-sized shard, the source file changed since the parts
 * ran; NVF_E_FORMAT for a part record it cannot read; NVF_E_IO (DST locked by a conversion or a
 * merge, a part still running, read/write failures); NVF_E_INTERRUPTED.
 */
int nvf_merge_run(nvf_merge_summary *out, const nvf_merge_options *opt);

/**
 * The output shards of part `index` of `count`: [*first, *first + *n) of `n_shards` shards
 * of cost cost[0..n_shards) (contiguous, in plan order): shard s goes to the part whose
 * 1/count of the total cost holds the middle of s's cost (floor(count * (prefix + cost/2) /
 * total)), so parts are balanced by bytes and a part may be empty when one shard is larger
 * than a part's share. The same rule splits the source files among the parts for hashing.
 */
void nvf_convert_part_range(size_t *first, size_t *n, const uint64_t *cost, size_t n_shards,
                            int index, int count);

#ifdef __cplusplus
}
#endif
#endif
