/*
 * Private to lib/manifest: the name and digest checks the writer and the reader share, and one
 * pass over a file that computes its SHA-256 and, for a safetensors file, the CRC-32 of every
 * tensor's bytes from the same chunks.
 */
#ifndef NVFP4_MANIFEST_INTERNAL_H
#define NVFP4_MANIFEST_INTERNAL_H

#include "nvfp4/manifest.h"
#include "nvfp4/safetensors.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/**
 * What a manifest holds beyond its public fields: the free-form documents and the arrays'
 * capacities. Every nvf_manifest the library hands out is the `pub` member of one of these
 * (lib/convert sets the documents of the manifest it writes).
 */
typedef struct nvf_manifest_priv {
    nvf_manifest pub; /* first: a nvf_manifest * is a nvf_manifest_priv * */
    cJSON *recipe;    /* owned; NULL writes null */
    cJSON *target;    /* owned; NULL writes null */
    cJSON *summary;   /* owned; NULL writes null */
    size_t cap_source, cap_files, cap_tensors;
} nvf_manifest_priv;

static inline nvf_manifest_priv *nvf_manifest_priv_of(nvf_manifest *m) {
    return (nvf_manifest_priv *)m;
}

static inline const nvf_manifest_priv *nvf_manifest_priv_of_const(const nvf_manifest *m) {
    return (const nvf_manifest_priv *)m;
}

/** A zeroed manifest without a tool version (the reader sets it). NULL on no memory. */
nvf_manifest *nvf_manifest_alloc(void);

/**
 * What is wrong with a relative path name of a manifest entry ("is empty", "starts with '/'",
 * ...), or NULL when it is acceptable: '/'-separated, no empty, "." or ".." component, no
 * control character, valid UTF-8.
 */
const char *nvf_manifest_name_problem(const char *s);

/** Whether s is exactly n lowercase hex digits. */
int nvf_manifest_is_hex(const char *s, size_t n);

/* Read size of the hashing loop: large enough for sequential throughput, small enough to keep
 * one buffer per worker thread cheap. */
#define NVF_HASH_CHUNK ((size_t)8 << 20)

/** Running CRC-32s of a safetensors file's tensors (arrays of n, in data-offset order). */
typedef struct nvf_hash_tensors {
    uint64_t data_start; /* file offset of the data area */
    size_t n;
    const uint64_t *begin, *end; /* offsets relative to the data area */
    uint32_t *crc;               /* zero-initialized by the caller */
    size_t cursor;
} nvf_hash_tensors;

/** Feed `len` bytes found at data-area offset `at` into the tensors' CRCs. */
void nvf_hash_tensors_feed(nvf_hash_tensors *t, const uint8_t *p, uint64_t at, size_t len);

/** Called after each chunk with its byte count; a non-zero return stops the hashing. */
typedef int (*nvf_hash_chunk_fn)(void *user, uint64_t bytes);

/**
 * SHA-256 and size of the file at `path`, read with read() in NVF_HASH_CHUNK pieces; with `t`,
 * the tensors' CRC-32s from the same bytes. NVF_E_INTERRUPTED when `on_chunk` says stop.
 */
int nvf_hash_file_ex(char out[65], uint64_t *out_bytes, const char *path, nvf_hash_tensors *t,
                     nvf_hash_chunk_fn on_chunk, void *user);

/* Directories and jobs (manifest_walk.c, manifest_hash.c) -------------------------------- */

/** "a/b" from "a" and "b" ("b" when a is empty); NULL when out of memory. */
char *nvf_manifest_join(const char *a, const char *b);

/** qsort comparison of two char * names. */
int nvf_manifest_cmp_name(const void *a, const void *b);

static inline int nvf_manifest_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* One file to hash, and what hashing it found. */
typedef struct nvf_hash_job {
    const char *name; /* relative, owned by the caller's list */
    char *path;
    uint64_t size;    /* from stat, for scheduling and progress */
    int want_tensors; /* open as safetensors and CRC its tensors */
    /* results */
    int rc;
    char *err;
    char sha256[65];
    uint64_t bytes;
    nvf_st_file *st; /* with want_tensors, when it opened */
    int st_rc;
    char *st_err;
    uint32_t *crc; /* st->n_tensors entries, in data-offset order */
} nvf_hash_job;

/**
 * A job per name, with the path under `dir` and the size from stat(); `want` (may be NULL)
 * says which open as safetensors. Free with nvf_hash_jobs_free().
 */
int nvf_hash_jobs_make(nvf_hash_job **out, const char *dir, char *const *names, size_t n,
                       const int *want);

/**
 * Run every job on opts->threads workers. @return the first failure in job order, or
 * NVF_E_INTERRUPTED when *opts->stop was set.
 */
int nvf_hash_jobs_run(nvf_hash_job *jobs, size_t n, const nvf_hash_opts *opts);

/** Free jobs and what they hold; NULL is fine. */
void nvf_hash_jobs_free(nvf_hash_job *jobs, size_t n);

#endif
