/*
 * Private to lib/manifest: the name and digest checks the writer and the reader share, and the
 * hashing jobs of the walk and the check. The one-pass file hash (SHA-256 and tensor CRC-32s)
 * is manifest/hash_file.h, which lib/convert uses too.
 */
#ifndef NVFP4_MANIFEST_INTERNAL_H
#define NVFP4_MANIFEST_INTERNAL_H

#include "manifest/hash_file.h"
#include "manifest/manifest_priv.h"

#include "nvfp4/manifest.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/* Directories and jobs (manifest_walk.c, manifest_hash.c) -------------------------------- */

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
    nvf_error_state err; /* the worker's error when rc != 0 */
    char sha256[65];
    uint64_t bytes;
    nvf_st_file *st; /* with want_tensors, when it opened */
    int st_rc;
    nvf_error_state st_err; /* when st_rc != 0 */
    uint32_t *crc;          /* st->n_tensors entries, in data-offset order */
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
