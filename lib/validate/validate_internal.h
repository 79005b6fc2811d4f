/*
 * Private to lib/validate. One run, top to bottom:
 *   1. validate_run.c: lists the files, finds the checkpoints (the directory or its rank
 *      directories), runs the steps below, sorts the findings;
 *   2. validate_scan.c: every file read once on the core pool: safetensors validation, SHA-256,
 *      tensor CRC-32s and the value checks in one pass;
 *   3. validate_index.c: config files and the index against the shards, per checkpoint;
 *      validate_manifest.c: the manifest against the scan's hashes;
 *   4. validate_rules.c (linears, scales, experts; the ModelOpt config rules of lib/ckpt) and
 *      validate_prepared.c (prepared layout, expert-parallel split) on the opened checkpoint;
 *   5. validate_report.c: the JSON document.
 */
#ifndef NVFP4_VALIDATE_INTERNAL_H
#define NVFP4_VALIDATE_INTERNAL_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/finding.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"
#include "nvfp4/validate.h"

#include <stddef.h>
#include <stdint.h>

/* One file of the checkpoint and what reading it found. */
typedef struct vd_file {
    char *name; /* '/'-separated, relative to the top directory (or the file's base name) */
    char *path;
    uint64_t size; /* from stat, for scheduling */
    int is_st;     /* a ".safetensors" file */
    /* results */
    int rc; /* 0, or an I/O error / interruption (err holds the message) */
    nvf_error_state err;
    nvf_st_file *st; /* is_st and well formed; kept open for the later checks */
    char *st_error;  /* is_st and malformed: the reader's reason */
    char sha256[65];
    uint64_t bytes;
    uint32_t *crc;         /* st->n_tensors CRC-32s, data-offset order */
    nvf_findings findings; /* the value findings of this file's tensors */
} vd_file;

typedef struct vd_ctx {
    const char *top; /* the directory (or the file) as given */
    int is_file;     /* validating one .safetensors file */
    vd_file *files;  /* sorted by name */
    size_t n_files;
    const nvf_validate_opts *o;
    nvf_validate_report *r;
    nvf_findings *out; /* the run's findings */
} vd_ctx;

/** The file called `name` (relative to the top), or NULL. */
vd_file *vd_find_file(const vd_ctx *c, const char *name);

/** Read every file once on the core pool (validate_scan.c): fills each vd_file's results.
 * @return 0 (per-file faults are in the files), NVF_E_INTERRUPTED, NVF_E_NOMEM. */
int vd_scan(vd_ctx *c);

/** The manifest at the top against the scan's hashes (validate_manifest.c). */
int vd_check_manifest(vd_ctx *c);

/**
 * config.json, hf_quant_config.json and the index against the shards of the checkpoint whose
 * files are under `prefix` ("" or "rank-00000-of-00002/") (validate_index.c). *clean is 1 when
 * nothing found stops lib/ckpt from opening it.
 */
int vd_check_structure(vd_ctx *c, const char *prefix, int *clean);

/** Linears, scale groups, MoE experts and the ModelOpt config rules (validate_rules.c). */
int vd_check_rules(vd_ctx *c, const nvf_ckpt *ck, const char *prefix);

/** The prepared layout of every MoE layer (validate_prepared.c). */
int vd_check_prepared(vd_ctx *c, const nvf_ckpt *ck, const char *prefix);

/**
 * The expert-parallel split (validate_prepared.c): `ranks` lists the rank directory names found
 * (sorted), `cks[i]` the opened checkpoint of ranks[i] or NULL.
 */
int vd_check_ranks(vd_ctx *c, char *const *ranks, const nvf_ckpt *const *cks, size_t n);

#endif
