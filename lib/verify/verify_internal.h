/*
 * lib/verify's internals: building the report (verify_report.c) and the per-layer numbers
 * (verify_stats.c) that the run (verify_run.c, verify_layer.c) uses.
 */
#ifndef NVFP4_VERIFY_INTERNAL_H
#define NVFP4_VERIFY_INTERNAL_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/verify.h"

#include <stdint.h>

/* One run: the options, the report, the checkpoint and its reference (NULL) with their specs. */
typedef struct vf_ctx {
    const nvf_verify_opts *o;
    nvf_verify_report *r;
    nvf_ckpt *ck, *ref;
    nvf_moe_spec spec, ref_spec;
    int prepared;
} vf_ctx;

/**
 * The numeric checks of MoE layer `l` into `out` (verify_layer.c): finite, layout, quality and
 * the per-expert checks. A checkpoint defect (NVF_E_FORMAT, NVF_E_NONFINITE, NVF_E_SHAPE,
 * NVF_E_UNSUPPORTED from a provider) becomes a failed check and a finding.
 * @return 0, or a runtime error (NVF_E_NOMEM, NVF_E_IO).
 */
int vf_layer_math(vf_ctx *c, const nvf_moe_layer *l, nvf_verify_layer *out);

/** Add check `id` to layer `l` (a failed check fails the layer); message printf-style. */
nvf_verify_check *vf_check(nvf_verify_layer *l, const char *id, int pass, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** Give check `c` a value and (has_threshold) a threshold. */
void vf_check_value(nvf_verify_check *c, double value, int has_threshold, double threshold);

/** Add a finding (layer/expert -1: none; tensor NULL: none). @return 0 or NVF_E_NOMEM. */
int vf_finding(nvf_verify_report *r, const char *id, const char *severity, int64_t layer,
               int64_t expert, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/** Flag `expert` in layer `l` (kept sorted, once). @return 0 or NVF_E_NOMEM. */
int vf_flag(nvf_verify_layer *l, int64_t expert);

/* Comparison of an output `a` with a reference `b` of n values (f64 sums). */
typedef struct vf_stats {
    double rel_l2;  /* ||a - b|| / ||b|| (||a - b|| when b is all zero) */
    double cosine;  /* a.b / (||a|| ||b||); 1 when both are zero */
    double max_abs; /* max |a - b| */
    double within;  /* share of elements within FlashInfer's tolerance (SPEC section 7) */
    int finite;     /* a has no NaN/Inf */
} vf_stats;

/** The numbers of `a` against `b` (n values). */
void vf_compare(vf_stats *out, const float *a, const float *b, uint64_t n);

/** x [t, h]: N(0, 1) from a splitmix64 stream seeded by (seed, layer), each rounded to BF16. */
void vf_activations(float *x, int64_t t, int64_t h, uint64_t seed, int64_t layer);

#endif
