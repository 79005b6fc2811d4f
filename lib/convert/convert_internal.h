/*
 * Shared between the files of lib/convert. A conversion is:
 *   convert_run.c       the entry (nvf_convert_run): open, plan, DST, pipeline, finish, clean up;
 *   convert_plan.c      the jobs, outputs and shards of a checkpoint (the plan);
 *   convert_modelopt.c  the target format: plans outputs, packs a job, writes its metadata;
 *   convert_prepared*.c the prepared targets (kernel-ready MoE layouts, expert-parallel ranks);
 *   convert_pipeline.c  the processing order, memory budget and compute workers;
 *   convert_writer.c    the writer threads (shards side by side) and the shard hashers;
 *   convert_compute.c   a job's bytes through the compute backend (quantize, dequantize);
 *   convert_shard.c     the shard writer (pieces at offsets; hashes by reading the file back);
 *   convert_dst.c       DST: prepare, lock, clear, stale shards;
 *   convert_journal.c   the progress journal, its key, and --resume;
 *   convert_source.c    the source files: list and hash (on the core pool);
 *   convert_finish.c    the index, target metadata, side files and manifest (merge reuses it);
 *   convert_meta.c      the ModelOpt configuration documents;
 *   convert_parts.c     --shard i/N: the split, the fingerprint, the part records;
 *   convert_merge.c     nvf_merge_run: the parts' union through the finish above.
 *   convert_profile.c   the stage profile: busy and waiting seconds per thread role.
 */
#ifndef NVFP4_CONVERT_INTERNAL_H
#define NVFP4_CONVERT_INTERNAL_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/convert.h"
#include "nvfp4/manifest.h"
#include "nvfp4/quant.h"

#include "nvfp4/backend.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* What a job does with its source tensors. */
typedef enum cv_job_kind {
    CV_JOB_COPY = 0, /* one tensor, bytes unchanged (streamed from the mapping) */
    CV_JOB_DEQUANT,  /* one FP8 tensor (block or per-tensor scale) written as BF16 */
    CV_JOB_QUANT,    /* a global-scale group of linears written as NVFP4 */
    CV_JOB_NVFP4,    /* stored NVFP4 linears laid out by the target (convert_nvfp4src.c) */
} cv_job_kind;

#define CV_MAX_MEMBERS 3 /* q, k, v */

/* One linear of a quantization group: a 2-D tensor, or expert `expert` of a fused 3-D one. */
typedef struct cv_member {
    size_t tensor;        /* index into ck->tensors */
    int64_t expert;       /* -1, or the expert of a fused 3-D tensor */
    int split;            /* fused gate_up: rows [0, I) are gate, [I, 2I) up */
    int proj;             /* nvf_proj of a prepared expert member (NVF_PROJ_GATE_UP when split) */
    nvf_quant_source src; /* the 2-D view (CV_JOB_NVFP4: rows, logical cols, data = packed) */
    float decode;         /* CV_JOB_NVFP4: the member's stored decode scale (weight_scale_2) */
    float input;          /* CV_JOB_NVFP4: the member's stored input scale (1.0 when absent) */
    int scalar_ndim[2];   /* CV_JOB_NVFP4: ndim of its weight_scale_2 and input_scale tensors
                             (-1: absent); 0 (shape []) otherwise */
    char *module[2];      /* output module names (module[1] only when split) */
} cv_member;

/* A part of an output tensor that a job writes: bytes [off, off+len) of outs[out]. */
typedef struct cv_piece {
    size_t out;
    uint64_t off;
    uint64_t len;
} cv_piece;

/* A job writes its pieces (plan->pieces[first_piece, first_piece + n_pieces)); a buffered job's
 * buffer is their concatenation in piece order (bytes_out is the sum of their len). Every piece
 * lies in the job's shard. */
typedef struct cv_job {
    cv_job_kind kind;
    size_t n_members;
    cv_member members[CV_MAX_MEMBERS];
    size_t first_out, n_out; /* outputs [first_out, first_out + n_out) */
    size_t first_piece, n_pieces;
    uint64_t bytes_in;  /* source bytes read */
    uint64_t bytes_out; /* output tensor bytes */
    size_t shard;
    float input_scale; /* CV_JOB_QUANT */
    int same_shard;    /* written into the shard of the job before it (shared output tensors) */
    /* Prepared targets (convert_prepared*.c): what pack_job lays out. */
    int prep;          /* cv_prep_role */
    int layout;        /* nvf_layout of the block scales */
    size_t prep_out;   /* CV_PREP_W13/W2: the first output of its layer in its rank */
    int64_t prep_slot; /* CV_PREP_W13/W2: its expert's place in the rank (0 .. E/ep - 1) */
    size_t fc2_span;   /* a layer-rank's first w2 job: its w2 jobs (it writes fc2_input_scale) */
    float fc2_input_scale; /* the largest input_scale of those jobs */
    /* CV_JOB_NVFP4: the decode scale the job's outputs share (alpha's weight part), and the
     * member re-quantized onto it (1 + its index; 0: none). */
    float decode;
    int requant;
} cv_job;

/* What a prepared target's quantization job writes. */
typedef enum cv_prep_role {
    CV_PREP_NONE = 0, /* modelopt */
    CV_PREP_DENSE,    /* linears: weight, laid-out weight_scale, alpha (W4A4: input_scale) */
    CV_PREP_W13,      /* one expert's slices of w13_weight, w13_weight_scale, w13_alpha (W4A4:
                         w13_input_scale) */
    CV_PREP_W2,       /* one expert's slices of w2_weight, w2_weight_scale, w2_alpha (and
                         fc2_input_scale when fc2_span > 0, W4A4) */
} cv_prep_role;

typedef struct cv_out {
    char *name; /* owned */
    nvf_dtype dtype;
    int32_t ndim;
    int64_t shape[NVF_ST_MAX_DIMS];
    uint64_t bytes;
    size_t job;
    uint32_t crc32; /* filled when written */
} cv_out;

typedef struct cv_shard {
    char name[64]; /* relative to DST: "rank-00001-of-00004/model-..." with ranks */
    int rank;      /* its expert-parallel rank (0 without ranks) */
    size_t first_job, n_jobs;
    size_t first_out, n_out;
    uint64_t tensor_bytes;
    uint64_t source_bytes; /* bytes_in of its jobs */
    int reused;            /* taken from an earlier run (--resume) */
    int written;           /* finished by this run */
    int other;             /* --shard i/N: another part's, not converted by this run */
    uint64_t file_bytes;
    char sha256[65];
} cv_shard;

typedef struct cv_plan {
    nvf_plan *scope; /* nvf_ckpt_plan of the recipe's globs */
    size_t n_jobs, n_outs, n_shards, n_pieces;
    cv_job *jobs;
    cv_out *outs;
    cv_piece *pieces;
    cv_shard *shards;
    uint64_t total_size;    /* sum of output tensor bytes */
    uint64_t largest_job;   /* bytes of the largest buffered job */
    cJSON *exclude_modules; /* linear modules left unquantized (names), array */
    cJSON *fp8_modules;     /* modules kept as FP8 (--keep-source-precision): {name: algo} */
    cJSON *nvfp4_modules;   /* modules written as NVFP4, array */
    cJSON *requantized;     /* NVFP4 source: [{layer, expert, member, from, to}], or NULL */
    int ep;                 /* expert-parallel ranks: 1, or N with one directory per rank */
    int64_t (*ep_range)[2]; /* rank r's experts [first, count] (ep entries; NULL for modelopt) */
    float *job_scale_2;     /* prepared targets: each quantization job's weight_scale_2 as
                               computed (0: not computed in this run), for nvfp4-inverse.json */
    cJSON *modelopt_jobs;   /* prepared targets: the outputs of the direct modelopt plan of the
                               source, [[name, ...] per job, in plan order] (nvfp4-inverse.json:
                               the inverse writes its shards in that order and split) */
    nvf_convert_summary counts;
} cv_plan;

/** Build the jobs, outputs and shards of a conversion (deterministic): the modelopt plan. */
int cv_plan_build(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt);

/* The growing plan, for a target that plans some tensors itself. */
typedef struct cv_builder {
    cv_plan *p;
    size_t cap_jobs, cap_outs;
    int pass; /* the rank whose jobs are planned; source counts and module lists on pass 0 */
} cv_builder;

/** A new job at the end of the plan; NULL when out of memory. */
cv_job *cv_builder_job(cv_builder *b, cv_job_kind kind);

/** Append an output of the last job (its bytes added to the job's bytes_out); `name` is taken
 * over (freed on failure). */
int cv_builder_out(cv_builder *b, char *name, nvf_dtype dtype, int32_t ndim, const int64_t *shape);

/** `module` + `suffix` as a new string (NULL when out of memory). */
char *cv_with_suffix(const char *module, const char *suffix);

/** Source bytes of one of the `mats` matrices of tensor `ti`, with its scale's share. */
uint64_t cv_source_bytes(const nvf_ckpt *ck, size_t ti, int64_t mats);

/** How a target plans differently from modelopt (convert_prepared_plan.c). */
typedef struct cv_plan_hooks {
    int ep; /* ranks: the tensor pass runs once per rank, each with shards of its own */
    void *ctx;
    /** Before any job: refuse what the target cannot write (nothing is written yet); may turn
     * SKIP entries of `scope` into QUANTIZE (stored NVFP4 experts the target lays out). */
    int (*check)(void *ctx, const nvf_ckpt *ck, nvf_plan *scope);
    /** The outputs of a quantized dense linear `module` of rows x cols weights. */
    int (*linear_outs)(void *ctx, cv_builder *b, const char *module, int64_t rows, int64_t cols);
    /** A routed expert weight to quantize, in name order, in the pass of `rank`. */
    int (*expert)(void *ctx, cv_builder *b, const nvf_ckpt *ck, size_t ti, int rank);
    int quiet; /* log nothing (a second plan of the same source, cv_plan_modelopt_jobs) */
} cv_plan_hooks;

/** Fill the shards of rank r's jobs [first[r], first[r + 1]) greedily up to `max_shard` (a
 * same_shard job stays with the job before it; with `span` such a run of jobs is measured
 * whole), freeing any shards the plan had. @return 0 or NVF_E_NOMEM. */
int cv_plan_assign_shards(cv_plan *p, uint64_t max_shard, const size_t *first, int ep, int span);

/** The outputs of the direct modelopt plan of `ck` with `opt`'s recipe (target modelopt, empty
 * scope allowed): [[name, ...] per job, in plan order] (convert_plan_order.c). @return 0 or a
 * status (the plan's). */
int cv_plan_modelopt_jobs(cJSON **out, const nvf_ckpt *ck, const nvf_convert_options *opt);

/** Reorder the jobs of a plan whose outputs are those of `jobs` (cv_plan_modelopt_jobs of
 * another checkpoint with the same output tensors) into that order, each listed job's jobs kept
 * in one shard, and shard again with `max_shard`. *applied is 0 (the plan unchanged, a warning
 * logged naming the first difference) when the outputs do not match. @return 0 or NVF_E_NOMEM. */
int cv_plan_order(cv_plan *p, const cJSON *jobs, uint64_t max_shard, int *applied);

/** cv_plan_build with a target's hooks (NULL: modelopt). */
int cv_plan_build_with(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt,
                       const cv_plan_hooks *h);

/** Free a plan; NULL is fine. */
void cv_plan_free(cv_plan *p);

/** The plan of a prepared target (W4A4 when `w4a4`): convert_prepared_plan.c. */
int cv_prepared_plan(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt, int w4a4);

/** Give every job one piece per output, the whole tensor (off 0): the default of a plan. */
int cv_plan_whole_pieces(cv_plan *p);

/** Set every quantization job's input_scale from the --input-amax file (or 1.0). */
int cv_plan_input_scales(cv_plan *p, const char *path);

/* Shard writer: the safetensors header, then pieces of tensors in any order, into NAME.tmp. Two
 * threads share it: the writer (open, write_at, publish, then close or cancel) and a hasher
 * (finish), which reads the file back from the page cache for its SHA-256 (following the
 * written prefix as the writer publishes it) and, on a thread beside it, every tensor's CRC-32
 * (each once complete), then fsyncs, renames and fsyncs the directory. */
typedef struct cv_writer cv_writer;

/** Start shard `shard` of `p` in `dir` (its NAME.tmp). @return 0 or a status; NULL on failure. */
int cv_writer_open(cv_writer **out, const char *dir, const cv_plan *p, size_t shard);
/** Write bytes [off, off + len) of output `out` (a plan index, in the writer's shard), in any
 * order; each byte exactly once. Writer thread only. @return 0 or a status. */
int cv_writer_write_at(cv_writer *w, size_t out, uint64_t off, const void *data, size_t len);
/** Let the hasher read the tensors complete from the shard's first on (after a job).
 * @return 0 or NVF_E_IO. */
int cv_writer_publish(cv_writer *w, const cv_plan *p);
/**
 * Every job of the shard is written: check every byte of every tensor was (NVF_E_INVALID naming
 * the first that was not) and let the hasher finish. On failure the shard is cancelled. The
 * writer thread must not touch `w` after this call or cv_writer_cancel() (finish frees it).
 */
int cv_writer_close(cv_writer *w, const cv_plan *p);
/** The shard will not be completed: finish removes it. NULL is fine. */
void cv_writer_cancel(cv_writer *w);
/**
 * The hasher: SHA-256 of the file as the writer publishes it, the tensors' CRC-32s
 * beside it, then, once closed, fsync, rename, directory fsync. Records size and SHA-256 in the
 * shard and the CRCs in its outputs of `p` (which only this call touches). Stops with
 * NVF_E_INTERRUPTED when quit(ctx) is non-zero (quit may be NULL) or the shard is cancelled. Frees
 * the writer; on failure the temporary file is removed. May run on the writer thread after
 * cv_writer_close().
 */
int cv_writer_finish(cv_writer *w, cv_plan *p, int (*quit)(void *), void *ctx);
/** Remove the temporary file and free; NULL is fine. */
void cv_writer_abort(cv_writer *w);

/** The quantization_config of config.json and the hf_quant_config.json document.
 * @return a new document, or NULL when out of memory. */
cJSON *cv_meta_quant_config(const cv_plan *p, int mixed);
cJSON *cv_meta_hf_quant_config(const cv_plan *p, int mixed);

/** The output config.json: the source config (NULL: none) with the quantization_config above and,
 * unless `mixed`, without plan entries naming FP8 scale parameters. @return a new document or
 * NULL. */
cJSON *cv_meta_config(const cv_plan *p, const cJSON *source_config, int mixed);

/** The same with `quant_config` (taken; NULL: out of memory) as its quantization_config. */
cJSON *cv_meta_config_with(const cJSON *source_config, int mixed, cJSON *quant_config);

/** The counters of nvf_convert_summary_to_json() as a new object; NULL on no memory (error set). */
cJSON *cv_summary_json(const nvf_convert_summary *s);

/** Write a JSON document atomically (2-space indent), hashing the bytes written. */
int cv_write_json(const char *path, const cJSON *doc, char sha256[65], uint64_t *bytes);

/* Source files ----------------------------------------------------------------------------- */

/** The files a conversion reads: the shards and the side files (config, tokenizer, ...). */
typedef struct cv_sources {
    char *dir;              /* the directory the names are relative to; owned */
    size_t n;               /* files, sorted by name */
    char **names;           /* owned */
    uint64_t *bytes;        /* filled by cv_sources_hash */
    char (*sha)[65];        /* filled by cv_sources_hash */
    const nvf_st_file **st; /* the checkpoint's file of each name (its shards; NULL for the
                               others): hashed only while the path still names that file */
    unsigned char *only;    /* NULL, or n flags: cv_sources_hash hashes only the flagged files
                               (--shard i/N: this part's share); owned */
} cv_sources;

/**
 * The regular, non-hidden files at the top of SRC's directory. For a single-file SRC, the file
 * and the side files of its directory (every file but the other shards and their index).
 * A file that is a link to a target outside SRC (and outside the Hugging Face cache repository
 * holding SRC) is logged as a warning, or refused when `no_follow_outside`.
 * @return 0, NVF_E_IO, NVF_E_NOMEM; NVF_E_FORMAT naming the link and its target for a refused
 * link. Free with cv_sources_free() (also after a failure).
 */
int cv_sources_list(cv_sources *out, const nvf_ckpt *ck, int no_follow_outside);

/** Release the lists; a zeroed struct is fine. */
void cv_sources_free(cv_sources *s);

/** The path of source file `i`. @return a new string, or NULL on no memory. */
char *cv_sources_path(const cv_sources *s, size_t i);

/** Open `f`'s path again (read-only, *fd), checking that it still names the file nvf_st_open
 * opened and checked (the same st_dev, st_ino). `doing` says why, in the messages: NVF_E_IO
 * "'PATH' was replaced during the conversion (DOING): convert it again", or that it cannot be
 * opened. *fd is -1 on failure. */
int cv_source_reopen(const nvf_st_file *f, int *fd, const char *doing);

/** Whether source file `name` is copied into DST as it is (not a shard, index or config). */
int cv_sources_is_copied(const char *name);

/**
 * SHA-256 and size of every source file, one after the other (the same order the pipeline
 * reads them in, so a cold source is read from storage once). Stops early, between files,
 * when quit(ctx) is non-zero (quit may be NULL). @return 0, NVF_E_IO, NVF_E_NOMEM.
 */
int cv_sources_hash(cv_sources *s, int (*quit)(void *), void *ctx);

/** Source bytes of a member's 2-D view. */
uint64_t cv_member_bytes(const cv_member *m);
/** Drop the resident pages of bytes [data, data + len) of tensor `ti`'s mapping (MADV_DONTNEED:
 * file-backed, read again if needed). */
void cv_release_range(const nvf_ckpt *ck, size_t ti, const void *data, uint64_t len);
/** Ask the kernel to read a member's source pages ahead (MADV_WILLNEED). */
void cv_prefetch_member(const nvf_ckpt *ck, const cv_member *m);

/* Target format ---------------------------------------------------------------------------- */

typedef struct cv_finish_args cv_finish_args;

/** What a target format decides: the outputs of a checkpoint, the bytes of a quantized job and
 * the metadata files beside the shards. */
typedef struct cv_target {
    const char *name;
    /** The jobs, outputs and shards of `ck` (with input scales). @return 0 or a status. */
    int (*plan)(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt);
    /** The j->bytes_out bytes of quantization job `j` into `buf`: member k quantized as
     * packed[k] (rows*cols/2 bytes) and scales[k] (rows*cols/16), decoding with `scale_2`
     * (weight_scale_2: nvf_quant_group_decode of the group scale, which the arithmetic decides).
     * Scale layouts run on backend `b` (nvf_backend_layout: the worker's CPU or GPU).
     * @return 0 or a status (NVF_E_NOMEM, the backend's). */
    int (*pack_job)(nvf_backend *b, uint8_t *buf, const cv_job *j, uint8_t *const *packed,
                    uint8_t *const *scales, float scale_2);
    /** The manifest's "target" object. @return a new object, or NULL on no memory. */
    cJSON *(*manifest_target)(const cv_plan *p, const nvf_recipe *r);
    /** Write the target's metadata files into a->dst (after the index), each added to `m`. */
    int (*write_metadata)(const cv_finish_args *a, nvf_manifest *m);
} cv_target;

extern const cv_target cv_target_modelopt;
extern const cv_target cv_target_prepared_w4a16;
extern const cv_target cv_target_prepared_w4a4;

/** nvfp4-inverse.json of a prepared plan: what `convert --target modelopt` of the prepared
 * checkpoint needs to restore the source's ModelOpt tensors exactly (convert_prepared_record.c).
 * @return a new document, or NULL (error set). */
cJSON *cv_prepared_record(const cv_finish_args *a);

/** Whether SRC is a prepared checkpoint (convert_unprepare.c): a directory whose config.json or
 * nvfp4-manifest.json says so, or that holds rank directories. */
int cv_unprepare_is_prepared(const char *src);

/** nvf_convert_run with the jobs of `order` (a record's "modelopt_jobs", or NULL) as the output
 * order and split (cv_plan_order), for the inverse's conversion of its restored copy. */
int cv_convert_run_ordered(nvf_convert_summary *out, const nvf_convert_options *opt,
                           const cJSON *order);

/** `convert PREPARED DST --target modelopt`: the exact inverse (convert_unprepare.c). */
int cv_unprepare_run(nvf_convert_summary *out, const nvf_convert_options *opt);

/* The run ---------------------------------------------------------------------------------- */

/** One conversion, shared by the entry, the pipeline and the journal. */
typedef struct cv_run {
    const nvf_convert_options *opt;
    const cv_target *target;
    const nvf_ckpt *ck;
    cv_plan *p;
    cv_sources src;
    char *key;          /* the journal key */
    char *journal_path; /* DST/.nvfp4-progress.json, or the part's .nvfp4-parts/i-of-N.progress.json
                         */
    cJSON *journal;     /* the journal document as written */
    cJSON *part_fp;     /* --shard i/N: the plan's fingerprint (cv_parts_select) */
    char part_fp_sha[65];
    nvf_convert_progress prog;
    /* the compute's environment, read once per run (cv_compute_settings) */
    int stage;          /* NVFP4_CONVERT_STAGE: 0, 1, or -1 (the backend's preference) */
    uint64_t host_keep; /* NVFP4_CONVERT_HOST_KEEP, else 256 MiB */
} cv_run;

/**
 * Compute and write every job of shards not reused: compute workers (one backend each),
 * the writer thread, and the source hashing on the core pool, side by side.
 * @return 0 or the first failure (NVF_E_INTERRUPTED when *opt->stop was set).
 */
int cv_pipeline_run(cv_run *r);

/**
 * The output bytes of buffered job `j` (quantize or dequantize) into `buf` (j->bytes_out
 * bytes) on backend `b`. Errors name the source file and tensor.
 */
int cv_compute_job(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j);

/** Read the compute's settings from the environment into r (before the workers start). */
void cv_compute_settings(cv_run *r);

/** A CV_JOB_NVFP4 job: its members' stored bytes (one re-quantized onto the shared decode
 * scale when j->requant), laid out by the target. convert_nvfp4src.c. */
int cv_compute_nvfp4(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j);

/** Plan-time part of CV_JOB_NVFP4 (convert_nvfp4src.c): member `m` of an NVFP4 source,
 * tensor `ti` (expert `e` of a fused one, or -1), `fused_gate_up` when it holds both halves;
 * validates the stored tensors (exit 3 naming them). */
int cv_nvfp4_member(cv_member *m, const nvf_ckpt *ck, size_t ti, int64_t e, int proj,
                    int fused_gate_up);

/** After a CV_JOB_NVFP4 job's members are set: its shared decode scale, its input scale (the
 * largest of its members'), and which member (if any) needs re-quantizing onto the shared
 * scale; logged and counted, or, with `strict`, NVF_E_VERIFY naming the layer and expert. */
int cv_nvfp4_job_scales(cv_job *j, cv_plan *p, const nvf_ckpt *ck, const char *layer,
                        int64_t expert, int strict, int pass);

/* DST and journal -------------------------------------------------------------------------- */

/** The record a prepared checkpoint keeps for its exact inverse (convert_prepared_record.c). */
#define CV_INVERSE_NAME "nvfp4-inverse.json"

/** The lock file in DST: held (flock) for the whole run, removed at the end. A part of
 * --shard i/N holds its own, .nvfp4-parts/i-of-N.lock, instead. */
#define CV_LOCK_NAME ".nvfp4-convert.lock"

typedef struct cv_dst cv_dst;

/**
 * Create DST (when absent), take its lock, and check what it holds: without resume or force it
 * must be empty; with them it may hold only what this conversion writes (shards, temporaries,
 * the journal, configs, index, manifest, copies of `src`'s side files).
 * @return 0; NVF_E_IO (the lock is held: names the holder's pid); NVF_E_INVALID (a file this
 * conversion does not write, or not empty).
 */
int cv_dst_open(cv_dst **out, const nvf_convert_options *o, const cv_sources *src);

/** Remove what marks an earlier output complete or half-written (manifest, index, configs,
 * temporary files; the journal too when `journal_too`); finished shards stay. A part of
 * --shard i/N removes only its own temporary files, journal and part record (other parts may be
 * writing theirs), and the manifest, index and configs (which the merge writes again). */
int cv_dst_clear(const cv_dst *d, int journal_too, const cv_plan *p);

/** `merge`: create nothing, check nothing, only take DST's lock (released by cv_dst_close). */
int cv_dst_lock(cv_dst **out, const char *dst);

/** Release DST. After a failure, remove what looks complete (manifest, configs, index, temporary
 * files) and DST itself when this run created it and nothing is left. NULL is fine. */
void cv_dst_close(cv_dst *d, int failed);

/** Remove shards of an earlier run that this plan does not produce (and rank directories of
 * another --ep). */
int cv_dst_remove_stale(const char *dst, const cv_plan *p);

/** Create the rank directories of a plan with ranks (p->ep > 1) in `dst`. */
int cv_dst_make_ranks(const char *dst, const cv_plan *p);

/** The journal key and an empty journal. */
int cv_journal_start(cv_run *r);

/** --resume: mark the journal's shards whose files still hold what it says as reused (their
 * hashes and tensor CRCs computed again from the bytes). */
int cv_journal_resume(cv_run *r);

/**
 * --resume of a DST that holds a complete output (a manifest, no journal): *complete is 1 when
 * its manifest records this recipe, target, these source files (SHA-256, computed here) and the
 * planned tensors, and DST verifies against it (every file's SHA-256 and tensor CRC-32); the
 * plan's shards then carry its sizes and hashes. Never with --input-amax (its values are not
 * recorded in the manifest).
 */
int cv_journal_complete(cv_run *r, int *complete);

/** Record finished shard `si` and write the journal atomically. */
int cv_journal_add(cv_run *r, size_t si);

/**
 * Hash shard `sh` of `p` from its file at `path`: SHA-256 and size, and, when its header declares
 * exactly the planned tensors in the planned order, every tensor's CRC-32 (into p's outputs).
 * @return 1 when it holds the planned tensors, 0 when not (or it cannot be read).
 */
/**
 * Prepared targets (p->job_scale_2): the weight_scale_2 each job of shard `sh` computed, as an
 * array of F32 bits in 8 hex digits ("" where this run did not compute it), added to `e` under
 * "job_scale_2" (the journal and the part records keep it for the inverse record). Nothing when
 * the plan keeps no job scales. @return 1, 0 on no memory.
 */
int cv_job_scales_put(cJSON *e, const cv_plan *p, const cv_shard *sh);

/**
 * Take back what cv_job_scales_put recorded in entry `e` for shard `sh`. @return 1 (taken, or the
 * plan keeps no job scales), 0 when `e` holds none or not one per job of the shard.
 */
int cv_job_scales_take(cv_plan *p, const cv_shard *sh, const cJSON *e);

int cv_shard_rehash(cv_plan *p, const cv_shard *sh, const char *path, char sha[65],
                    uint64_t *bytes);

/* Parts (--shard i/N) and merge ------------------------------------------------------------ */

/** DST/.nvfp4-parts/I-of-N followed by `suffix` (".json", ".lock", ...); NULL on no memory. */
char *cv_parts_path(const char *dst, int index, int count, const char *suffix);

/**
 * The plan's fingerprint: {tool_version, recipe, options, sources: [{name, bytes, mtime}]}
 * (a new object) and its SHA-256 (of its unformatted text). `src` is listed, not hashed.
 * @return 0, NVF_E_IO (a source file cannot be stat'ed or the --input-amax file read), NOMEM.
 */
int cv_parts_fingerprint(cJSON **out, char sha[65], const nvf_convert_options *o,
                         const cv_sources *src);

/** --shard i/N: mark the shards of the other parts (`other`) and the source files this part
 * hashes (`only`), by nvf_convert_part_range. @return 0 or NVF_E_NOMEM / NVF_E_IO. */
int cv_parts_select(cv_run *r);

/** Write this part's record (its shards, their hashes and CRC-32s, its source hashes, the
 * fingerprint) atomically; the run's last step. */
int cv_parts_write(const cv_run *r);

/** A part record read back and checked for shape (types and ranges of every field). */
typedef struct cv_part {
    int index, count;
    char *path;           /* owned */
    cJSON *doc;           /* owned */
    const cJSON *fp;      /* doc's "fingerprint" */
    const char *fp_sha;   /* doc's "fingerprint_sha256" */
    const cJSON *shards;  /* [{name, bytes, sha256, tensors: [{name, crc32}]}] */
    const cJSON *sources; /* [{name, bytes, sha256}] */
} cv_part;

/** Read every part record of DST/.nvfp4-parts (sorted by count, then index).
 * @return 0 (none found: *n == 0); NVF_E_FORMAT naming a malformed record; NVF_E_IO;
 * NVF_E_NOMEM. Free with cv_parts_free() (also after a failure). */
int cv_parts_read(cv_part **out, size_t *n, const char *dst);

/** Free what cv_parts_read() returned; NULL is fine. */
void cv_parts_free(cv_part *parts, size_t n);

/* Shared with merge (convert_run.c) --------------------------------------------------------- */

/** The target of the recipe (NULL, error set, when its options do not fit it). */
const cv_target *cv_find_target(const nvf_recipe *r);

/** The source's config.json for a single-shard SRC (NULL for a directory: the checkpoint's). */
int cv_source_config(cJSON **out, const nvf_ckpt *ck);

/* Finish ----------------------------------------------------------------------------------- */

/** Everything the finish needs: the plan with its shards written (sizes, hashes, CRCs). */
struct cv_finish_args {
    const char *dst;
    const cv_target *target;
    const cv_plan *plan;
    const nvf_recipe *recipe;
    const cJSON *source_config; /* NULL: none */
    int mixed;                  /* FP8 modules kept (MIXED_PRECISION) */
    const cv_sources *sources;  /* hashed; the side files are copied from here */
    const char *source_format;
    const cJSON *source_hf_quant_config; /* the source's hf_quant_config.json, or NULL */
};

/**
 * The index, the target's metadata, the copied side files, then the manifest (last; the journal
 * is removed just before it). *out is the plan's counts with shards and bytes_out.
 */
int cv_finish_outputs(nvf_convert_summary *out, const cv_finish_args *a);

/** Write `doc` (taken: deleted here) as DST/name atomically and add it to `m`. */
int cv_finish_write_json(const cv_finish_args *a, nvf_manifest *m, const char *name, cJSON *doc);

#endif
