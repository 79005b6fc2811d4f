/*
 * nvfp4-manifest.json: what a conversion produced and from what, with hashes (SPEC section 5).
 * Written last by convert (and by `hash`); its presence marks a complete checkpoint.
 *
 * The document (schemas/manifest.schema.json):
 *   1. "manifest_version": 1
 *   2. "tool": {"name": "nvfp4tool", "version": "X.Y.Z"}
 *   3. "recipe": the effective recipe (nvf_recipe_to_json), or null when written by `hash`
 *   4. "target": {"format": "modelopt" | ..., "layout": null | "flashinfer-cutedsl-nvfp4-v1"}
 *   5. "source": {"files": [{"name", "bytes", "sha256"}...]} (names relative to the source
 *      directory), or null when written by `hash`
 *   6. "files": [{"name", "bytes", "sha256"}...] every output file but the manifest, sorted
 *   7. "tensors": [{"name", "file", "dtype", "shape", "crc32"}...] sorted by name; crc32 is
 *      zlib's CRC-32 of the tensor's data bytes, as 8 lowercase hex digits
 *   8. "summary": free-form object (counts, bytes); nothing time-dependent, so that two runs
 *      of the same conversion write byte-identical manifests
 */
#ifndef NVFP4_MANIFEST_H
#define NVFP4_MANIFEST_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVF_MANIFEST_NAME "nvfp4-manifest.json"

/** Incremental SHA-256 (OpenSSL EVP). */
typedef struct nvf_sha256 nvf_sha256;

/** @return a new context, or NULL on no memory (error set). Free with nvf_sha256_free(). */
nvf_sha256 *nvf_sha256_new(void);
/** Hash `len` more bytes. @return 0, or NVF_E_INVALID when OpenSSL fails. */
int nvf_sha256_update(nvf_sha256 *h, const void *data, size_t len);
/** Finish: 64 lowercase hex digits + NUL into out. The context can be reused after. */
int nvf_sha256_final(nvf_sha256 *h, char out[65]);
/** Free a context; NULL is fine. */
void nvf_sha256_free(nvf_sha256 *h);

/** SHA-256 and size of a whole file, read in large chunks (never mapped whole). */
int nvf_sha256_file(char out[65], uint64_t *out_bytes, const char *path);

/** zlib's CRC-32 of `len` bytes continuing `crc` (0 to start); any length (zlib takes uInt). */
uint32_t nvf_crc32(uint32_t crc, const void *data, size_t len);

typedef struct nvf_manifest_file {
    char *name; /* relative to the checkpoint directory */
    uint64_t bytes;
    char sha256[65];
} nvf_manifest_file;

typedef struct nvf_manifest_tensor {
    char *name;
    char *file;
    char *dtype;
    int32_t ndim;
    int64_t shape[8];
    uint32_t crc32;
} nvf_manifest_tensor;

/**
 * A manifest's files and tensors. Only the library makes one (nvf_manifest_new, _read, _parse,
 * nvf_manifest_hash_dir): it carries private state beyond these fields (the recipe, target and
 * summary documents, the arrays' capacities), so never declare or copy one yourself.
 */
typedef struct nvf_manifest {
    char *tool_version;
    size_t n_source, n_files, n_tensors;
    nvf_manifest_file *source; /* NULL when n_source == 0 and written by `hash` */
    nvf_manifest_file *files;
    nvf_manifest_tensor *tensors;
    int has_source; /* whether "source" is an array (1) or null (0) */
} nvf_manifest;

/** An empty manifest (tool version set). NULL on no memory. */
nvf_manifest *nvf_manifest_new(void);

/** Free; NULL is fine. */
void nvf_manifest_free(nvf_manifest *m);

/**
 * The recipe a conversion recorded (the object of nvf_recipe_to_json), as JSON text.
 * @return a string the caller frees with free(); NULL when the manifest has none (written by
 * `hash`) or on no memory.
 */
char *nvf_manifest_recipe_json(const nvf_manifest *m);

/**
 * Move what a conversion recorded (recipe, target, source files, summary) from `from` to `m`,
 * replacing m's; `from` is left with none of them, its files and tensors unchanged. `hash`
 * uses it to rehash a converted checkpoint without losing where it came from.
 */
void nvf_manifest_move_provenance(nvf_manifest *m, nvf_manifest *from);

/**
 * Append an output / source file entry (name copied; sha256 is 64 lowercase hex digits + NUL).
 * Names and values are checked when written. @return 0 or NVF_E_NOMEM.
 */
int nvf_manifest_add_file(nvf_manifest *m, const char *name, uint64_t bytes, const char sha256[65]);
int nvf_manifest_add_source(nvf_manifest *m, const char *name, uint64_t bytes,
                            const char sha256[65]);

/** Append a tensor entry (strings copied). @return 0, NVF_E_INVALID (ndim > 8), NVF_E_NOMEM. */
int nvf_manifest_add_tensor(nvf_manifest *m, const char *name, const char *file, const char *dtype,
                            int32_t ndim, const int64_t *shape, uint32_t crc32);

/**
 * Append one tensor entry per tensor of the safetensors file at `path` (opened and validated
 * with nvf_st_open), recorded as being in file `name`, with the CRC-32 of its data bytes.
 * @return 0, NVF_E_IO / NVF_E_FORMAT from the reader, NVF_E_NOMEM.
 */
int nvf_manifest_add_st_tensors(nvf_manifest *m, const char *name, const char *path);

/**
 * Serialize (sorted files and tensors, 1-space indent) and write atomically. Rejects with
 * NVF_E_INVALID what the reader would reject: bad names, sizes over 2^53, duplicate names,
 * malformed digests, a tensor whose file is not among the files.
 */
int nvf_manifest_write(const char *path, const nvf_manifest *m);

/**
 * Serialize to a NUL-terminated string (what nvf_manifest_write writes); the caller frees
 * *out with free(). Same checks as nvf_manifest_write.
 */
int nvf_manifest_to_string(char **out, size_t *out_len, const nvf_manifest *m);

/**
 * Read and validate a manifest (structure of the document above; hex digests well formed).
 * NVF_E_FORMAT naming the file and the offending field otherwise.
 */
int nvf_manifest_read(nvf_manifest **out, const char *path);

/** nvf_manifest_read on text in memory; `path` is used in messages only. */
int nvf_manifest_parse(nvf_manifest **out, const char *path, const char *text, size_t len);

/* Hashing a checkpoint directory (`nvfp4tool hash`, validate) ------------------------------ */

/**
 * Progress of a hashing run, called under a lock (never concurrently): after every chunk with
 * `name` NULL, and once per finished file with its name. Byte counts are over all files.
 */
typedef void (*nvf_hash_progress_fn)(void *user, const char *name, uint64_t done_bytes,
                                     uint64_t total_bytes);

typedef struct nvf_hash_opts {
    int threads; /* worker threads, one file per task, biggest first; <= 0: all cores */
    int tensors; /* nvf_manifest_check_dir: also compare every tensor's CRC-32 */
    nvf_hash_progress_fn progress; /* may be NULL */
    void *user;
    volatile sig_atomic_t *stop; /* set non-zero (from a signal handler) to stop within one
                                    chunk of every file being read; or NULL */
} nvf_hash_opts;

/**
 * The regular files under `dir`, recursively (symbolic links followed; a directory loop is
 * NVF_E_IO), as sorted '/'-separated names relative to `dir`; the top-level manifest is left
 * out, and with `skip_tmp` every name ending in ".tmp" too. Entries that are neither files nor
 * directories are skipped with a warning. A name the manifest cannot hold (control characters,
 * not UTF-8) is NVF_E_UNSUPPORTED. Free with nvf_manifest_names_free().
 */
int nvf_manifest_list_dir(char ***out, size_t *out_n, const char *dir, int skip_tmp);

/** Free a list from nvf_manifest_list_dir(); NULL is fine. */
void nvf_manifest_names_free(char **names, size_t n);

/**
 * Hash a checkpoint directory: the size and SHA-256 of every file nvf_manifest_list_dir(dir,
 * skip_tmp=1) lists and the CRC-32 of every tensor of every ".safetensors" file (validated
 * with nvf_st_open; a malformed one is NVF_E_FORMAT), in worker threads. The result holds
 * files and tensors only (recipe, target, source, summary empty) and is the same whatever the
 * thread count. The caller frees *out with nvf_manifest_free().
 * @return 0; NVF_E_IO when `dir` or a file cannot be read; NVF_E_INTERRUPTED when *opts->stop
 * was set (nothing is written either way).
 */
int nvf_manifest_hash_dir(nvf_manifest **out, const char *dir, const nvf_hash_opts *opts);

typedef enum nvf_finding_kind {
    NVF_FINDING_MISSING = 0, /* listed, not present as a regular file */
    NVF_FINDING_SIZE,        /* present with another size */
    NVF_FINDING_SHA256,      /* same size, other SHA-256 */
    NVF_FINDING_EXTRA,       /* present, not listed */
    NVF_FINDING_CRC32,       /* a tensor's CRC-32 differs, or the tensor is absent/unlisted */
    NVF_FINDING_TENSOR,      /* a listed tensor's dtype or shape differs from the file's */
} nvf_finding_kind;

typedef struct nvf_manifest_finding {
    nvf_finding_kind kind;
    char *name;     /* the file, or "file:tensor" for NVF_FINDING_CRC32 and _TENSOR */
    char *got;      /* what the directory holds; NULL when absent */
    char *expected; /* what the manifest says; NULL when unlisted */
    char *line;     /* the whole finding as one line of text, e.g. "MISSING config.json" */
} nvf_manifest_finding;

typedef struct nvf_manifest_report {
    size_t files_listed;    /* files in the manifest */
    size_t files_ok;        /* of which present with the listed size and SHA-256 */
    size_t tensors_checked; /* tensor CRC-32s compared (0 without opts->tensors) */
    size_t n_findings;
    nvf_manifest_finding *findings; /* sorted by name, then kind */
} nvf_manifest_report;

/**
 * Check the directory against the manifest: every listed file must be present with its size
 * and SHA-256 (all bytes are read), no other file may be present (the top-level manifest
 * aside; ".tmp" files count), and with opts->tensors every listed tensor's dtype, shape and
 * CRC-32 must match.
 * @return 0 with the findings in *out (free with nvf_manifest_report_free()), NVF_E_IO when
 * `dir` or a file cannot be read, or NVF_E_INTERRUPTED when *opts->stop was set.
 */
int nvf_manifest_check_dir(nvf_manifest_report **out, const char *dir, const nvf_manifest *m,
                           const nvf_hash_opts *opts);

/**
 * nvf_manifest_check_dir() on hashes a caller computed itself (validate reads every byte once
 * for all its checks and builds `actual` with nvf_manifest_add_file / _add_tensor): every file
 * of `m` must be in `actual` with its size and SHA-256, `actual` may hold no other file, and
 * with `tensors` every tensor `m` lists in a file of `actual` must be there with its dtype, shape
 * and CRC-32, and no other. The same findings, in the same order, as nvf_manifest_check_dir.
 * @return 0 with the findings in *out (free with nvf_manifest_report_free()), or NVF_E_NOMEM.
 */
int nvf_manifest_compare(nvf_manifest_report **out, const nvf_manifest *m,
                         const nvf_manifest *actual, int tensors);

/** Free a report; NULL is fine. */
void nvf_manifest_report_free(nvf_manifest_report *r);

/** "MISSING", "SIZE", "SHA256", "EXTRA", "CRC32" or "TENSOR". */
const char *nvf_finding_kind_name(nvf_finding_kind kind);

#ifdef __cplusplus
}
#endif
#endif
