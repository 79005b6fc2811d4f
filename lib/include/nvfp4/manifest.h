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

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVF_MANIFEST_NAME "nvfp4-manifest.json"

/** Incremental SHA-256 (OpenSSL EVP). */
typedef struct nvf_sha256 nvf_sha256;

/** @return a new context, or NULL on no memory (error set). Free with nvf_sha256_free(). */
nvf_sha256 *nvf_sha256_new(void);
int nvf_sha256_update(nvf_sha256 *h, const void *data, size_t len);
/** Finish: 64 lowercase hex digits + NUL into out. The context can be reused after. */
int nvf_sha256_final(nvf_sha256 *h, char out[65]);
void nvf_sha256_free(nvf_sha256 *h);

/** SHA-256 and size of a whole file, read in large chunks (never mapped whole). */
int nvf_sha256_file(char out[65], uint64_t *out_bytes, const char *path);

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

typedef struct nvf_manifest {
    char *tool_version;
    cJSON *recipe;  /* owned; may be NULL */
    cJSON *target;  /* owned; may be NULL */
    cJSON *summary; /* owned; may be NULL */
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

/** Append an output / source file entry (name copied). */
int nvf_manifest_add_file(nvf_manifest *m, const char *name, uint64_t bytes,
                          const char sha256[65]);
int nvf_manifest_add_source(nvf_manifest *m, const char *name, uint64_t bytes,
                            const char sha256[65]);

/** Append a tensor entry (strings copied). */
int nvf_manifest_add_tensor(nvf_manifest *m, const char *name, const char *file,
                            const char *dtype, int32_t ndim, const int64_t *shape,
                            uint32_t crc32);

/** Serialize (sorted files and tensors, 1-space indent) and write atomically. */
int nvf_manifest_write(const char *path, const nvf_manifest *m);

/**
 * Read and validate a manifest (structure of the document above; hex digests well formed).
 * NVF_E_FORMAT naming the file and the offending field otherwise.
 */
int nvf_manifest_read(nvf_manifest **out, const char *path);

#ifdef __cplusplus
}
#endif
#endif
