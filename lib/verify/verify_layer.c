/*
 * The numeric checks of one MoE layer (nvfp4/verify.h): the candidate provider C (the checkpoint
 * at the asked precision), the layout's linear twin L (prepared checkpoints: the reference
 * quantized on the fly, or the inverse-layout reader), the reference R in source precision.
 *   1. y_C = forward(C) on x, routed by C's router: finite;
 *   2. layout: forward(C) and forward(L) at W4A16: rel-L2 <= 1e-2;
 *   3. quality: y_C against forward(R) (R's own router and bias): rel-L2, cosine, max-abs,
 *      share within tolerance >= 97%;
 *   4. per expert e, on the tokens C routes to it (or the first few tokens when none): the same
 *      comparisons of the expert's own output, naming the expert that is wrong.
 */
#include "verify_internal.h"

#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows for an expert no token chose. */
#define VF_FALLBACK_ROWS 4

typedef struct vf_layer {
    vf_ctx *c;
    const nvf_moe_layer *l;
    nvf_verify_layer *out;
    nvf_moe_weights *cand, *lin, *ref;
    const nvf_moe_spec *lin_spec;
    int64_t t, h;
    float *x;
    double worst_layout, worst_quality;
    int64_t worst_layout_e, worst_quality_e;
} vf_layer;

/* A checkpoint defect, as opposed to a failure of the tool. */
static int is_defect(int rc) {
    return rc == NVF_E_FORMAT || rc == NVF_E_NONFINITE || rc == NVF_E_SHAPE ||
           rc == NVF_E_UNSUPPORTED || rc == NVF_E_INVALID;
}

/* A provider error: a defect becomes a failed "read" check and a finding; 0. Else rc. */
static int defect(vf_layer *v, int rc, int64_t expert, const char *what) {
    if (!is_defect(rc))
        return rc;
    const char *msg = nvf_error_last();
    vf_check(v->out, "read", 0, "%s: %s", what, msg);
    int frc = vf_finding(v->c->r, "read", "error", v->l->index, expert, NULL, "%s: %s", what, msg);
    if (frc == NVF_OK && expert >= 0)
        frc = vf_flag(v->out, expert);
    return frc;
}

/* The layer on v->x; on the verify backend's kernels when `backend` is set. */
static int forward_on(float *y, vf_layer *v, nvf_moe_weights *w, const nvf_moe_spec *spec,
                      nvf_moe_precision p, struct nvf_backend *backend) {
    nvf_moe_opts o;
    memset(&o, 0, sizeof o);
    o.precision = p;
    o.quant = v->c->o->quant;
    o.per_token = p == NVF_MOE_PRECISION_W4A4 && v->c->o->per_token;
    o.backend = backend;
    return nvf_moe_forward(y, v->x, v->t, v->h, spec, w, &o);
}

/* The checkpoint's layer runs where verify runs (the kernels with a backend); the linear and
 * source references always on the CPU. */
static int forward(float *y, vf_layer *v, nvf_moe_weights *w, const nvf_moe_spec *spec,
                   nvf_moe_precision p) {
    return forward_on(y, v, w, spec, p, w == v->cand ? v->c->o->backend : NULL);
}

/* SPEC section 7 (a) on a backend: the kernels' output y (at `p`) against the CPU reference on
 * the same NVFP4 values and routing. */
static int kernel_check(vf_layer *v, const float *y, nvf_moe_precision p) {
    uint64_t n = (uint64_t)(v->t * v->h);
    float *yr = malloc((size_t)n * sizeof *yr + 1);
    if (!yr)
        return nvf_error_set(NVF_E_NOMEM, "no memory for %" PRId64 " tokens", v->t);
    int rc = forward_on(yr, v, v->cand, &v->c->spec, p, NULL);
    if (rc != NVF_OK) {
        free(yr);
        return defect(v, rc, -1, "checkpoint forward on the CPU");
    }
    vf_stats s;
    vf_compare(&s, y, yr, n);
    free(yr);
    double rel = s.finite ? s.rel_l2 : INFINITY;
    nvf_verify_check *ch =
        vf_check(v->out, "kernel_rel_l2", rel <= NVF_VERIFY_LAYOUT_REL_L2,
                 "the MoE kernels (%s) against the CPU reference on the same NVFP4 values: "
                 "rel-L2 %.3g",
                 nvf_moe_precision_name(p), rel);
    vf_check_value(ch, rel, 1, NVF_VERIFY_LAYOUT_REL_L2);
    if (rel <= NVF_VERIFY_LAYOUT_REL_L2)
        return NVF_OK;
    return vf_finding(v->c->r, "kernel_rel_l2", "error", v->l->index, -1, NULL,
                      "layer %" PRId64 ": the MoE kernels' output differs from the CPU "
                      "reference's on the same NVFP4 values: rel-L2 %.4g > %g",
                      v->l->index, rel, NVF_VERIFY_LAYOUT_REL_L2);
}

static int expert_out(float *y, vf_layer *v, const float *xe, int64_t rows, nvf_moe_weights *w,
                      const nvf_moe_spec *spec, int64_t e, nvf_moe_precision p) {
    nvf_moe_opts o;
    memset(&o, 0, sizeof o);
    o.precision = p;
    o.quant = v->c->o->quant;
    o.per_token = p == NVF_MOE_PRECISION_W4A4 && v->c->o->per_token;
    return nvf_moe_expert_ref(y, xe, rows, v->h, spec, w, e, &o);
}

/* The tensor that holds expert e of this layer, for findings. */
static void expert_tensor(char *buf, size_t len, const vf_layer *v, int64_t e) {
    if (v->c->prepared)
        snprintf(buf, len, "%s.mlp.experts.w13_weight[%" PRId64 "], w2_weight[%" PRId64 "]",
                 v->l->prefix, e, e);
    else
        snprintf(buf, len, "%s.mlp.experts.%" PRId64, v->l->prefix, e);
}

/* The per-expert comparisons of expert e on rows xe. */
static int one_expert(vf_layer *v, int64_t e, const float *xe, int64_t rows, float *ya, float *yb) {
    const vf_ctx *c = v->c;
    nvf_moe_precision p = c->o->precision;
    char tensor[256];
    vf_stats s;
    uint64_t n = (uint64_t)rows * (uint64_t)v->h;
    int rc = expert_out(ya, v, xe, rows, v->cand, &c->spec, e, NVF_MOE_PRECISION_W4A16);
    if (rc != NVF_OK)
        return defect(v, rc, e, "expert");
    if (v->lin) {
        rc = expert_out(yb, v, xe, rows, v->lin, v->lin_spec, e, NVF_MOE_PRECISION_W4A16);
        if (rc != NVF_OK)
            return defect(v, rc, e, "linear reference expert");
        vf_compare(&s, ya, yb, n);
        double rel = s.finite ? s.rel_l2 : INFINITY;
        if (rel > v->worst_layout || v->worst_layout_e < 0) {
            v->worst_layout = rel;
            v->worst_layout_e = e;
        }
        if (!(rel <= NVF_VERIFY_LAYOUT_REL_L2)) {
            expert_tensor(tensor, sizeof tensor, v, e);
            rc = vf_finding(c->r, "layout_expert", "error", v->l->index, e, tensor,
                            "layer %" PRId64 " expert %" PRId64 ": the prepared-layout reader's "
                            "output differs from the linear NVFP4 reference's on %" PRId64
                            " tokens: rel-L2 %.4g > %g",
                            v->l->index, e, rows, rel, NVF_VERIFY_LAYOUT_REL_L2);
            if (rc == NVF_OK)
                rc = vf_flag(v->out, e);
            if (rc != NVF_OK)
                return rc;
        }
    }
    if (!v->ref)
        return NVF_OK;
    if (p != NVF_MOE_PRECISION_W4A16) {
        rc = expert_out(ya, v, xe, rows, v->cand, &c->spec, e, p);
        if (rc != NVF_OK)
            return defect(v, rc, e, "expert");
    }
    rc = expert_out(yb, v, xe, rows, v->ref, &c->ref_spec, e, NVF_MOE_PRECISION_BF16);
    if (rc != NVF_OK)
        return defect(v, rc, e, "reference expert");
    vf_compare(&s, ya, yb, n);
    double rel = s.finite ? s.rel_l2 : INFINITY;
    if (rel > v->worst_quality || v->worst_quality_e < 0) {
        v->worst_quality = rel;
        v->worst_quality_e = e;
    }
    if (rel <= NVF_VERIFY_EXPERT_REL_L2)
        return NVF_OK;
    expert_tensor(tensor, sizeof tensor, v, e);
    rc = vf_finding(c->r, "expert_rel_l2", "error", v->l->index, e, tensor,
                    "layer %" PRId64 " expert %" PRId64 ": its %s output against the reference's "
                    "same expert on %" PRId64 " tokens: rel-L2 %.4g > %g (swapped, transposed or "
                    "mis-scaled weights)",
                    v->l->index, e, nvf_moe_precision_name(p), rows, rel, NVF_VERIFY_EXPERT_REL_L2);
    return rc == NVF_OK ? vf_flag(v->out, e) : rc;
}

/* Every expert on the tokens C routes to it. */
static int per_expert(vf_layer *v) {
    int64_t k = v->c->spec.top_k, n_e = v->c->spec.n_experts, t = v->t, h = v->h;
    int32_t *ids = malloc((size_t)(t * k) * sizeof *ids + 1);
    float *wts = malloc((size_t)(t * k) * sizeof *wts + 1);
    float *xe = malloc((size_t)(t * h) * sizeof *xe + 1);
    float *ya = malloc((size_t)(t * h) * sizeof *ya + 1), *yb = malloc((size_t)(t * h) * 4 + 1);
    int rc = ids && wts && xe && ya && yb ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK) {
        rc = nvf_moe_route_layer(ids, wts, v->x, t, h, &v->c->spec, v->cand);
        if (rc != NVF_OK) {
            rc = defect(v, rc, -1, "router");
            goto done;
        }
    }
    for (int64_t e = 0; e < n_e && rc == NVF_OK; e++) {
        int64_t rows = 0;
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < k; j++)
                if (ids[i * k + j] == e) {
                    memcpy(xe + rows++ * h, v->x + i * h, (size_t)h * sizeof *xe);
                    break;
                }
        if (rows == 0) {
            rows = t < VF_FALLBACK_ROWS ? t : VF_FALLBACK_ROWS;
            memcpy(xe, v->x, (size_t)(rows * h) * sizeof *xe);
        }
        rc = one_expert(v, e, xe, rows, ya, yb);
    }
done:
    free(ids);
    free(wts);
    free(xe);
    free(ya);
    free(yb);
    return rc;
}

/* Layer-level findings for a failed check, naming the worst expert where one stands out. */
static int layer_finding(vf_layer *v, const nvf_verify_check *ch, int64_t expert) {
    return vf_finding(v->c->r, ch->id, "error", v->l->index, expert, NULL, "layer %" PRId64 ": %s",
                      v->l->index, ch->message);
}

static int layout_check(vf_layer *v, const float *yc16) {
    float *yl = malloc((size_t)(v->t * v->h) * sizeof *yl + 1);
    if (!yl)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = forward(yl, v, v->lin, v->lin_spec, NVF_MOE_PRECISION_W4A16);
    if (rc != NVF_OK) {
        free(yl);
        return defect(v, rc, -1, "linear reference");
    }
    vf_stats s;
    vf_compare(&s, yc16, yl, (uint64_t)(v->t * v->h));
    double rel = s.finite ? s.rel_l2 : INFINITY;
    int pass = rel <= NVF_VERIFY_LAYOUT_REL_L2;
    nvf_verify_check *ch =
        vf_check(v->out, "layout_rel_l2", pass,
                 "%s against the linear NVFP4 values (%s): rel-L2 %.3g (<= %g)%s", v->c->r->method,
                 v->c->r->layout_source, rel, NVF_VERIFY_LAYOUT_REL_L2,
                 v->c->ref ? ""
                           : "; without a reference this checks the reader against the "
                             "layout's inverse functions, not the values");
    vf_check_value(ch, rel, 1, NVF_VERIFY_LAYOUT_REL_L2);
    free(yl);
    return pass ? NVF_OK
                : layer_finding(
                      v, ch, v->worst_layout > NVF_VERIFY_LAYOUT_REL_L2 ? v->worst_layout_e : -1);
}

static int quality_checks(vf_layer *v, const float *yc) {
    float *yr = malloc((size_t)(v->t * v->h) * sizeof *yr + 1);
    if (!yr)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = forward(yr, v, v->ref, &v->c->ref_spec, NVF_MOE_PRECISION_BF16);
    if (rc != NVF_OK) {
        free(yr);
        return defect(v, rc, -1, "reference");
    }
    vf_stats s;
    vf_compare(&s, yc, yr, (uint64_t)(v->t * v->h));
    nvf_verify_check *ch;
    ch = vf_check(v->out, "rel_l2", 1, "relative L2 error against the reference (reported)");
    vf_check_value(ch, s.rel_l2, 0, 0);
    ch = vf_check(v->out, "cosine", 1, "cosine similarity with the reference (reported)");
    vf_check_value(ch, s.cosine, 0, 0);
    ch = vf_check(v->out, "max_abs", 1, "largest absolute difference (reported)");
    vf_check_value(ch, s.max_abs, 0, 0);
    int pass = s.finite && s.within >= NVF_VERIFY_WITHIN_MIN;
    ch = vf_check(v->out, "within_tolerance", pass,
                  "%.2f%% of the elements within FlashInfer's tolerance (>= %.0f%%)",
                  100.0 * s.within, 100.0 * NVF_VERIFY_WITHIN_MIN);
    vf_check_value(ch, s.within, 1, NVF_VERIFY_WITHIN_MIN);
    free(yr);
    return pass ? NVF_OK
                : layer_finding(
                      v, ch, v->worst_quality > NVF_VERIFY_EXPERT_REL_L2 ? v->worst_quality_e : -1);
}

static void close_all(vf_layer *v) {
    nvf_moe_weights_close(v->cand);
    nvf_moe_weights_close(v->lin);
    nvf_moe_weights_close(v->ref);
    free(v->x);
}

/* Open the providers; a defect leaves the one that failed NULL and is reported. */
static int open_all(vf_layer *v) {
    const vf_ctx *c = v->c;
    nvf_moe_precision p = c->o->precision;
    int rc = nvf_moe_weights_open(&v->cand, c->ck, v->l->index, p, &c->o->quant);
    if (rc != NVF_OK)
        return defect(v, rc, -1, "checkpoint");
    if (c->prepared && c->ref) {
        rc = nvf_moe_weights_open(&v->lin, c->ref, v->l->index, NVF_MOE_PRECISION_W4A16,
                                  &c->o->quant);
        v->lin_spec = &c->ref_spec;
    } else if (c->prepared) {
        rc = nvf_moe_weights_open_inverse(&v->lin, c->ck, v->l->index);
        v->lin_spec = &c->spec;
    }
    if (rc != NVF_OK)
        return defect(v, rc, -1, "linear reference");
    if (c->ref) {
        rc = nvf_moe_weights_open(&v->ref, c->ref, v->l->index, NVF_MOE_PRECISION_BF16,
                                  &c->o->quant);
        if (rc != NVF_OK)
            return defect(v, rc, -1, "reference");
    }
    return NVF_OK;
}

int vf_layer_math(vf_ctx *c, const nvf_moe_layer *l, nvf_verify_layer *out) {
    vf_layer v = {.c = c, .l = l, .out = out, .worst_layout_e = -1, .worst_quality_e = -1};
    size_t checks_before = out->n_checks;
    int rc = open_all(&v);
    if (rc != NVF_OK || out->n_checks != checks_before) {
        close_all(&v);
        return rc;
    }
    int64_t n_i;
    int hb, hs, hsg;
    nvf_moe_weights_shape(v.cand, &v.h, &n_i, &hb, &hs, &hsg);
    v.t = c->o->tokens;
    v.x = malloc((size_t)(v.t * v.h) * sizeof *v.x + 1);
    float *yc = malloc((size_t)(v.t * v.h) * sizeof *yc + 1);
    float *yc16 = malloc((size_t)(v.t * v.h) * sizeof *yc + 1);
    if (!v.x || !yc || !yc16)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for %" PRId64 " tokens", v.t);
    if (rc == NVF_OK) {
        vf_activations(v.x, v.t, v.h, c->o->seed, l->index);
        rc = per_expert(&v);
    }
    int have_yc = 0;
    if (rc == NVF_OK && out->pass) {
        rc = forward(yc, &v, v.cand, &c->spec, c->o->precision);
        if (rc != NVF_OK)
            rc = defect(&v, rc, -1, "checkpoint forward");
        else {
            have_yc = 1;
            vf_stats s;
            vf_compare(&s, yc, yc, (uint64_t)(v.t * v.h));
            nvf_verify_check *ch =
                vf_check(out, "finite", s.finite, "the layer's output on %" PRId64 " tokens is %s",
                         v.t, s.finite ? "finite" : "NOT finite (NaN or Inf)");
            if (!s.finite)
                rc = layer_finding(&v, ch, -1);
            else if (c->o->backend)
                rc = kernel_check(&v, yc, c->o->precision);
        }
    }
    if (rc == NVF_OK && have_yc && v.lin) {
        if (c->o->precision == NVF_MOE_PRECISION_W4A16)
            memcpy(yc16, yc, (size_t)(v.t * v.h) * sizeof *yc);
        else
            rc = forward(yc16, &v, v.cand, &c->spec, NVF_MOE_PRECISION_W4A16);
        if (rc == NVF_OK)
            rc = layout_check(&v, yc16);
        nvf_verify_check *ch = vf_check(
            out, "layout_experts", v.worst_layout <= NVF_VERIFY_LAYOUT_REL_L2,
            "worst expert against the linear NVFP4 values: expert %" PRId64 ", rel-L2 %.3g",
            v.worst_layout_e, v.worst_layout);
        vf_check_value(ch, v.worst_layout, 1, NVF_VERIFY_LAYOUT_REL_L2);
    }
    if (rc == NVF_OK && v.ref) {
        if (have_yc)
            rc = quality_checks(&v, yc);
        nvf_verify_check *ch = vf_check(
            out, "expert_rel_l2", v.worst_quality <= NVF_VERIFY_EXPERT_REL_L2,
            "worst expert against the reference's same expert on its tokens: expert %" PRId64
            ", rel-L2 %.3g",
            v.worst_quality_e, v.worst_quality);
        vf_check_value(ch, v.worst_quality, 1, NVF_VERIFY_EXPERT_REL_L2);
    }
    free(yc);
    free(yc16);
    close_all(&v);
    return rc;
}
