/* Shared between the files of lib/convert: the conversion plan and the shard writer. */
#ifndef NVFP4_CONVERT_INTERNAL_H
#define NVFP4_CONVERT_INTERNAL_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/convert.h"
#include "nvfp4/manifest.h"
#include "nvfp4/quant.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* What a job does with its source tensors. */
typedef enum cv_job_kind {
    CV_JOB_COPY = 0, /* one tensor, bytes unchanged (streamed from the mapping) */
    CV_JOB_DEQUANT,  /* one FP8 tensor (block or per-tensor scale) written as BF16 */
    CV_JOB_QUANT,    /* a global-scale group of linears written as NVFP4 */
} cv_job_kind;

#define CV_MAX_MEMBERS 3 /* q, k, v */

/* One linear of a quantization group: a 2-D tensor, or expert `expert` of a fused 3-D one. */
typedef struct cv_member {
    size_t tensor;        /* index into ck->tensors */
    int64_t expert;       /* -1, or the expert of a fused 3-D tensor */
    int split;            /* fused gate_up: rows [0, I) are gate, [I, 2I) up */
    nvf_quant_source src; /* the 2-D view */
    char *module[2];      /* output module names (module[1] only when split) */
} cv_member;

typedef struct cv_job {
    cv_job_kind kind;
    size_t n_members;
    cv_member members[CV_MAX_MEMBERS];
    size_t first_out, n_out; /* outputs [first_out, first_out + n_out) */
    uint64_t bytes_in;       /* source bytes read */
    uint64_t bytes_out;      /* output tensor bytes */
    size_t shard;
    float input_scale; /* CV_JOB_QUANT */
} cv_job;

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
    char name[64];
    size_t first_job, n_jobs;
    size_t first_out, n_out;
    uint64_t tensor_bytes;
    int reused;
    uint64_t file_bytes;
    char sha256[65];
} cv_shard;

typedef struct cv_plan {
    nvf_plan *scope; /* nvf_ckpt_plan of the recipe's globs */
    size_t n_jobs, n_outs, n_shards;
    cv_job *jobs;
    cv_out *outs;
    cv_shard *shards;
    uint64_t total_size;    /* sum of output tensor bytes */
    uint64_t largest_job;   /* bytes of the largest buffered job */
    cJSON *exclude_modules; /* linear modules left unquantized (names), array */
    cJSON *fp8_modules;     /* modules kept as FP8 (--keep-source-precision): {name: algo} */
    cJSON *nvfp4_modules;   /* modules written as NVFP4, array */
    nvf_convert_summary counts;
} cv_plan;

/** The 2-D source view of tensor `ti`: expert `e` of a 3-D tensor, or (e < 0) the tensor,
 * with its FP8 scale when it has one. */
void cv_source_view(nvf_quant_source *s, const nvf_ckpt *ck, size_t ti, int64_t e);

/** Build the jobs, outputs and shards of a conversion (deterministic). */
int cv_plan_build(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt);

/** Free a plan; NULL is fine. */
void cv_plan_free(cv_plan *p);

/** Set every quantization job's input_scale from the --input-amax file (or 1.0). */
int cv_plan_input_scales(cv_plan *p, const char *path);

/* Shard writer: safetensors header + data to NAME.tmp, SHA-256 and per-tensor CRC-32 computed
 * on the bytes as they are written; fsync + rename + directory fsync at the end. */
typedef struct cv_writer cv_writer;

int cv_writer_open(cv_writer **out, const char *dir, const cv_plan *p, size_t shard);
/** Append bytes of output tensor `o` (in declaration order). */
int cv_writer_write(cv_writer *w, cv_out *o, const void *data, size_t len);
/** Finish: fsync, rename, directory fsync; records size and SHA-256 in the shard. */
int cv_writer_finish(cv_writer *w, cv_shard *s);
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

/** Write a JSON document atomically (2-space indent), hashing the bytes written. */
int cv_write_json(const char *path, const cJSON *doc, char sha256[65], uint64_t *bytes);

#endif
