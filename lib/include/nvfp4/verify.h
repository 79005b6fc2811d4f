/*
 * `nvfp4tool verify` (SPEC section 7): per MoE layer of a checkpoint, seeded activations routed by
 * the checkpoint's own router, run through lib/moe's CPU reference, and checks:
 *   1. structure (before any math): missing experts, a router correction bias the routing needs
 *      (deepseek_v3 / noaux_tc) and the checkpoint lacks, gate/up weight_scale_2 that differ
 *      (ModelOpt), unreadable or non-finite weights, scales or alphas (per expert);
 *   2. finite: the layer's output has no NaN/Inf;
 *   3. layout (prepared checkpoints): the prepared-layout reader ("cpu-prepared-reader", the
 *      place of a GPU kernel later) against the linear NVFP4 values: the reference quantized on
 *      the fly with the recipe when there is one, else the same bytes read through the layout's
 *      inverse functions; W4A16 (the layout is the weights'); rel-L2 <= 1e-2 for the layer and
 *      for every expert on its tokens;
 *   4. quality (with a reference): the layer at the asked precision against the reference in its
 *      source precision, routed by ITS OWN router and bias: rel-L2, cosine, max-abs, and the
 *      share of elements within FlashInfer's tolerance (|d| < max(0.05, 1.5 max(std(ref), 0.01))
 *      or |d| / |ref| < 0.5) >= 97%; per expert (its routed tokens, or the first few tokens when
 *      none chose it) rel-L2 <= NVF_VERIFY_EXPERT_REL_L2, which names the expert that is wrong.
 * Memory: one layer's activations and outputs and one expert's weights at a time.
 */
#ifndef NVFP4_VERIFY_H
#define NVFP4_VERIFY_H

#include "nvfp4/finding.h"
#include "nvfp4/moe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVF_VERIFY_LAYOUT_REL_L2 1e-2 /* SPEC section 7 (a) */
#define NVF_VERIFY_WITHIN_MIN    0.97 /* SPEC section 7 (b) */
/* An expert's NVFP4 output against its source-precision output on the same tokens: NVFP4
 * weight error alone gives ~0.1; a swapped, transposed or mis-scaled expert gives ~1 or more. */
#define NVF_VERIFY_EXPERT_REL_L2 0.35
#define NVF_VERIFY_MAX_CHECKS    12

typedef struct nvf_verify_opts {
    int64_t tokens; /* seeded activations per layer */
    uint64_t seed;
    nvf_moe_precision precision; /* W4A16 or W4A4: the quality check's precision */
    nvf_quant_params quant;      /* the recipe: the reference quantized on the fly */
    int per_token;               /* W4A4: per-token activation global scales */
    const int64_t *layers;       /* the layers to verify; NULL: every MoE layer */
    size_t n_layers;
    const char *device; /* as asked ("cpu", "auto", "cuda:0"); recorded in the report */
    /* NULL: everything on the CPU. Else the checkpoint's layer runs its routed experts on this
     * backend's MoE kernels (nvf_moe_forward), checked against the CPU reference on the same
     * NVFP4 values ("kernel"); the per-expert checks stay on the CPU. */
    struct nvf_backend *backend;
    /* called before each layer (done of total layers); may be NULL */
    void (*progress)(void *ctx, int64_t layer, size_t done, size_t total);
    void *progress_ctx;
} nvf_verify_opts;

typedef struct nvf_verify_check {
    char id[32]; /* "structure", "finite", "layout_rel_l2", "rel_l2", "within_tolerance", ... */
    int pass;
    int has_value, has_threshold;
    double value, threshold;
    char message[384];
} nvf_verify_check;

/* A finding of verify: the shared type (nvfp4/finding.h). `id` is the check that found it,
 * `file` is "", `layer` -1 for the checkpoint, `expert` -1 when not one expert. */
typedef nvf_finding nvf_verify_finding;

typedef struct nvf_verify_layer {
    int64_t layer;
    int pass;
    size_t n_checks;
    nvf_verify_check checks[NVF_VERIFY_MAX_CHECKS];
    size_t n_flagged;
    int64_t *flagged; /* experts named by a failed per-expert check, ascending */
} nvf_verify_layer;

typedef struct nvf_verify_report {
    char *checkpoint, *reference; /* reference NULL when none */
    char format[32];              /* the checkpoint's format name */
    const char *method;           /* "cpu-prepared-reader", "cpu-reference" (static) */
    const char *layout_source;    /* "reference" | "inverse-layout" | NULL (no layout check) */
    int64_t tokens;
    uint64_t seed;
    nvf_moe_precision precision;
    char device[16];
    size_t n_layers;
    nvf_verify_layer *layers;
    nvf_findings findings; /* in the order the checks found them */
    size_t passed, failed;
    int pass;
} nvf_verify_report;

/**
 * Verify `ckpt_path` (a checkpoint directory or file), against `reference_path` when not NULL,
 * into `out` (zeroed first; free with nvf_verify_report_free, also after an error).
 * @return 0 whether or not the checkpoint passed (out->pass says); NVF_E_INVALID (a layer in
 * o->layers that is not MoE, listing the MoE layers; a reference whose layers do not match);
 * NVF_E_UNSUPPORTED (EP rank directories); NVF_E_IO; NVF_E_FORMAT (a checkpoint it cannot open
 * at all); NVF_E_NOMEM.
 */
int nvf_verify_run(nvf_verify_report *out, const char *ckpt_path, const char *reference_path,
                   const nvf_verify_opts *o);

/** The report as JSON (schemas/report.schema.json) into *out (malloc'd, caller frees).
 * @return 0 or NVF_E_NOMEM. */
int nvf_verify_report_json(char **out, const nvf_verify_report *r);

/** Free what the report owns; NULL is fine. */
void nvf_verify_report_free(nvf_verify_report *r);

/**
 * Parse a layer list "1,3-5" into a sorted, duplicate-free array (*out malloc'd, caller frees).
 * @return 0 or NVF_E_INVALID naming the bad item; NVF_E_NOMEM.
 */
int nvf_verify_parse_layers(int64_t **out, size_t *n, const char *list);

#ifdef __cplusplus
}
#endif
#endif
