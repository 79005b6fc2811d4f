/*
 * `nvfp4tool validate` (SPEC section 8): the CI gate of a checkpoint directory (or one
 * .safetensors file), ours or a third party's (ModelOpt NVFP4, compressed-tensors NVFP4,
 * FP8-block, BF16, prepared with or without expert-parallel rank directories). Every check is
 * reported as a finding with a stable id (README "Finding ids"):
 *   1. every file is read once, in parallel (one file per task of the core pool): each
 *      .safetensors file is validated (SPEC section 3: safetensors.malformed), its bytes feed
 *      the file's SHA-256, each tensor's CRC-32 and the value checks (tensor.nonfinite, scale.*)
 *      in the same pass;
 *   2. the manifest (nvfp4-manifest.json) against those hashes (manifest.*; its absence a
 *      warning, an error with require_manifest);
 *   3. per checkpoint (the directory, or each rank directory): config.json, hf_quant_config.json,
 *      the index against the shards (config.*, index.*);
 *   4. when those hold, the checkpoint opened with lib/ckpt: the ModelOpt config rules
 *      (modelopt.*, nvfp4/modelopt_rules.h), every NVFP4 linear's four tensors (linear.*),
 *      gate/up and q/k/v scales, every expert of every MoE layer (moe.*), the prepared layout
 *      and the expert-parallel split (prepared.*);
 *   5. with `deep`, lib/verify on every MoE layer, its findings as "verify.<id>".
 * Findings are sorted (nvf_findings_sort), so the report is the same for any thread count.
 */
#ifndef NVFP4_VALIDATE_H
#define NVFP4_VALIDATE_H

#include "nvfp4/finding.h"
#include "nvfp4/verify.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_validate_opts {
    int threads;                      /* files read at once; <= 0: one per core */
    int require_manifest;             /* a missing nvfp4-manifest.json is an error finding */
    int deep;                         /* also run lib/verify on every MoE layer */
    const nvf_verify_opts *deep_opts; /* with `deep`: verify's options (NULL: its defaults) */
    volatile sig_atomic_t *stop; /* set non-zero (a signal handler) to stop: NVF_E_INTERRUPTED */
} nvf_validate_opts;

typedef struct nvf_validate_report {
    char *checkpoint;       /* as given */
    char format[32];        /* nvf_ckpt_format_name of the checkpoint ("unknown" when unopened) */
    int manifest;           /* nvfp4-manifest.json present */
    int deep;               /* lib/verify ran */
    size_t n_ranks;         /* expert-parallel rank directories (0: none) */
    size_t files;           /* files read */
    size_t tensors;         /* tensors in the safetensors files that parsed */
    size_t layers_verified; /* MoE layers lib/verify ran on (deep) */
    uint64_t bytes_read;    /* bytes of every file read */
    double seconds;         /* wall time of the whole run */
    nvf_findings findings;  /* sorted */
    size_t errors, warnings;
    int pass; /* no error finding */
} nvf_validate_report;

/**
 * Validate `path` (a checkpoint directory or a .safetensors file) into `out` (zeroed first; free
 * with nvf_validate_report_free, also after an error).
 * @return 0 whether or not the checkpoint passed (out->pass says); NVF_E_IO (the path cannot be
 * read); NVF_E_FORMAT (not a checkpoint at all: no config.json and no .safetensors file);
 * NVF_E_INTERRUPTED (*o->stop was set); NVF_E_NOMEM.
 */
int nvf_validate_run(nvf_validate_report *out, const char *path, const nvf_validate_opts *o);

/** The report as JSON (schemas/validate.schema.json) into *out (malloc'd, caller frees).
 * @return 0 or NVF_E_NOMEM. */
int nvf_validate_report_json(char **out, const nvf_validate_report *r);

/** Free what the report owns; NULL is fine. */
void nvf_validate_report_free(nvf_validate_report *r);

#ifdef __cplusplus
}
#endif
#endif
