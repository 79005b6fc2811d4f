/*
 * The MoE block forward on the CPU (nvfp4/moe.h nvf_moe_forward_ref): router, routed experts in
 * id order, combine in each token's selection order, shared experts. Every sum is an f32 sum
 * from 0 in index order, each operation rounded on its own, so the output does not depend on
 * anything but the inputs.
 */
#include "moe_weights.h"

#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float dot(const float *a, const float *b, int64_t n) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++)
        acc = acc + a[i] * b[i];
    return acc;
}

static float row_amax(const float *x, int64_t n) {
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++)
        a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    return a;
}

/* The inputs of one linear as the product sees them: as given (dec[r] = 1), or W4A4: each row
 * quantized to NVFP4 and replaced by its E2M1 x E4M3 values, dec[r] the decode multiplier of its
 * global scale (input_scale where the checkpoint has one, else RN(1 / gs) of the dynamic
 * scale: `tensor_amax` for the whole, or the row's own with per_token). */
static int prepare_input(float *a, float *dec, int64_t rows, int64_t cols, const nvf_moe_opts *o,
                         float input_scale, float tensor_amax) {
    if (o->precision != NVF_MOE_PRECISION_W4A4) {
        for (int64_t r = 0; r < rows; r++)
            dec[r] = 1.0f;
        return NVF_OK;
    }
    if (cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_SHAPE,
                             "W4A4: an activation row of %" PRId64
                             " values is not a whole number of %d-value blocks",
                             cols, NVF_BLOCK);
    size_t n = (size_t)cols;
    uint8_t *packed = malloc(n / 2), *scales = malloc(n / NVF_BLOCK);
    int rc = packed && scales ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    for (int64_t r = 0; r < rows && rc == NVF_OK; r++) {
        float *row = a + r * cols;
        float gs;
        if (input_scale > 0.0f && !o->per_token) {
            gs = nvf_quant_group_of_decode(input_scale, &o->quant);
            dec[r] = input_scale;
        } else {
            float amax = o->per_token ? row_amax(row, cols) : tensor_amax;
            gs = nvf_quant_group_scale(amax, &o->quant);
            dec[r] = nvf_quant_group_decode(gs, &o->quant);
        }
        rc = nvf_quant_rows_ref(packed, scales, row, 1, cols, gs, &o->quant, 1);
        if (rc == NVF_OK)
            nvf_quant_dequant_row_ref(row, packed, scales, cols, 1.0f);
    }
    free(packed);
    free(scales);
    return rc;
}

/* h[r] = bf16(act(alpha_g (a_r . Wg), alpha_u (a_r . Wu))) for `rows` input rows `a` [rows, H]
 * (already prepared, with decode multipliers dec). */
static void fc1(float *h, const float *a, const float *dec, int64_t rows, const nvf_moe_matrix *m,
                const nvf_moe_spec *spec) {
    const nvf_moe_matrix *g = &m[NVF_PROJ_GATE], *u = &m[NVF_PROJ_UP];
    int64_t n_i = u->rows, n_h = u->cols;
    for (int64_t r = 0; r < rows; r++) {
        const float *ar = a + r * n_h;
        for (int64_t j = 0; j < n_i; j++) {
            float gv = 0.0f;
            if (g->w)
                gv = dot(ar, g->w + j * n_h, n_h) * (g->alpha * dec[r]);
            float uv = dot(ar, u->w + j * n_h, n_h) * (u->alpha * dec[r]);
            h[r * n_i + j] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(nvf_moe_act_ref(spec, gv, uv)));
        }
    }
}

/* One MLP (gate/up/down in m) on `rows` rows of `a` [rows, H] into out [rows, H]. */
static int mlp(float *out, float *a, int64_t rows, const nvf_moe_matrix *m,
               const nvf_moe_spec *spec, const nvf_moe_opts *o, float x_amax) {
    int64_t n_h = m[NVF_PROJ_UP].cols, n_i = m[NVF_PROJ_UP].rows;
    float *h = malloc((size_t)rows * (size_t)n_i * sizeof *h + 1);
    float *dec = malloc((size_t)rows * sizeof *dec + 1);
    int rc = h && dec ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the FC1 output");
    float in_scale = m[NVF_PROJ_GATE].w ? m[NVF_PROJ_GATE].input_scale : m[NVF_PROJ_UP].input_scale;
    if (rc == NVF_OK)
        rc = prepare_input(a, dec, rows, n_h, o, in_scale, x_amax);
    if (rc == NVF_OK) {
        fc1(h, a, dec, rows, m, spec);
        rc = prepare_input(h, dec, rows, n_i, o, m[NVF_PROJ_DOWN].input_scale,
                           row_amax(h, rows * n_i));
    }
    const nvf_moe_matrix *d = &m[NVF_PROJ_DOWN];
    for (int64_t r = 0; r < rows && rc == NVF_OK; r++)
        for (int64_t c = 0; c < n_h; c++)
            out[r * n_h + c] = dot(h + r * n_i, d->w + c * n_i, n_i) * (d->alpha * dec[r]);
    free(h);
    free(dec);
    return rc;
}

/* Whether the gate, up and down matrices of an MLP fit H (and each other). */
static int check_mlp(const nvf_moe_matrix *m, int64_t n_h, const nvf_moe_spec *spec,
                     const char *what, int64_t e) {
    const nvf_moe_matrix *g = &m[NVF_PROJ_GATE], *u = &m[NVF_PROJ_UP], *d = &m[NVF_PROJ_DOWN];
    int ok = u->cols == n_h && d->rows == n_h && d->cols == u->rows;
    if (g->w)
        ok = ok && g->rows == u->rows && g->cols == n_h;
    else
        ok = ok && spec->act == NVF_MOE_ACT_RELU2;
    if (ok)
        return NVF_OK;
    return nvf_error_set(NVF_E_FORMAT,
                         "%s %" PRId64 ": gate [%" PRId64 ", %" PRId64 "], up [%" PRId64
                         ", %" PRId64 "], down [%" PRId64 ", %" PRId64 "] do not make a %s MLP "
                         "of hidden size %" PRId64,
                         what, e, g->rows, g->cols, u->rows, u->cols, d->rows, d->cols,
                         nvf_moe_act_name(spec->act), n_h);
}

static void free3(nvf_moe_matrix *m) {
    for (int j = 0; j < 3; j++)
        nvf_moe_matrix_free(&m[j]);
}

/* logits [t, E] = x . Wr^T * alpha */
int moe_router_logits(float *logits, const float *x, int64_t t, int64_t n_h, int64_t n_e,
                      nvf_moe_weights *w) {
    nvf_moe_matrix m[3];
    int rc = nvf_moe_weights_get(w, m, NVF_MOE_PART_ROUTER, 0);
    if (rc != NVF_OK)
        return rc;
    if (m[0].rows != n_e || m[0].cols != n_h)
        rc = nvf_error_set(NVF_E_FORMAT,
                           "the router is [%" PRId64 ", %" PRId64 "], expected [%" PRId64
                           ", %" PRId64 "]",
                           m[0].rows, m[0].cols, n_e, n_h);
    for (int64_t i = 0; i < t && rc == NVF_OK; i++)
        for (int64_t e = 0; e < n_e && rc == NVF_OK; e++) {
            logits[i * n_e + e] = dot(x + i * n_h, m[0].w + e * n_h, n_h) * m[0].alpha;
            if (!isfinite(logits[i * n_e + e]))
                rc = nvf_error_set(NVF_E_NONFINITE,
                                   "router logit [%" PRId64 ", %" PRId64 "] overflows to %g", i, e,
                                   (double)logits[i * n_e + e]);
        }
    free3(m);
    return rc;
}

/* Routed experts into ys [t * k, H]: slot i * k + j holds expert ids[i * k + j]'s output. */
static int run_experts(float *ys, const float *x, int64_t t, int64_t n_h, const int32_t *ids,
                       const nvf_moe_spec *spec, nvf_moe_weights *w, const nvf_moe_opts *o,
                       float x_amax) {
    int64_t k = spec->top_k, n_slots = t * k;
    int64_t *slots = malloc((size_t)n_slots * sizeof *slots + 1);
    float *a = malloc((size_t)n_slots * (size_t)n_h * sizeof *a + 1);
    float *out = malloc((size_t)n_slots * (size_t)n_h * sizeof *out + 1);
    int rc = slots && a && out
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory for %" PRId64 " routed rows", n_slots);
    for (int64_t e = 0; e < spec->n_experts && rc == NVF_OK; e++) {
        int64_t n = 0;
        for (int64_t s = 0; s < n_slots; s++)
            if (ids[s] == e)
                slots[n++] = s;
        if (n == 0)
            continue; /* an expert no token chose is never read */
        for (int64_t r = 0; r < n; r++)
            memcpy(a + r * n_h, x + (slots[r] / k) * n_h, (size_t)n_h * sizeof *a);
        nvf_moe_matrix m[3];
        rc = nvf_moe_weights_get(w, m, NVF_MOE_PART_EXPERT, e);
        if (rc != NVF_OK)
            break;
        rc = check_mlp(m, n_h, spec, "expert", e);
        if (rc == NVF_OK)
            rc = mlp(out, a, n, m, spec, o, x_amax);
        for (int64_t r = 0; r < n && rc == NVF_OK; r++)
            memcpy(ys + slots[r] * n_h, out + r * n_h, (size_t)n_h * sizeof *out);
        free3(m);
    }
    free(slots);
    free(a);
    free(out);
    return rc;
}

/* y += shared experts (x gate) on every token. */
int moe_run_shared(float *y, const float *x, int64_t t, int64_t n_h, const nvf_moe_spec *spec,
                   nvf_moe_weights *w, const nvf_moe_opts *o, float x_amax, int gated) {
    nvf_moe_matrix m[3], sg[3];
    memset(sg, 0, sizeof sg);
    /* the shared experts stay in source precision (the default scope converts routed experts
     * only), so their inputs are not quantized */
    nvf_moe_opts plain = *o;
    plain.precision = NVF_MOE_PRECISION_BF16;
    int rc = nvf_moe_weights_get(w, m, NVF_MOE_PART_SHARED, 0);
    if (rc != NVF_OK)
        return rc;
    rc = check_mlp(m, n_h, spec, "shared experts", 0);
    if (rc == NVF_OK && gated) {
        rc = nvf_moe_weights_get(w, sg, NVF_MOE_PART_SHARED_GATE, 0);
        if (rc == NVF_OK && (sg[0].rows != 1 || sg[0].cols != n_h))
            rc = nvf_error_set(NVF_E_FORMAT,
                               "shared_expert_gate is [%" PRId64 ", %" PRId64
                               "], expected [1, %" PRId64 "]",
                               sg[0].rows, sg[0].cols, n_h);
    }
    float *a = malloc((size_t)t * (size_t)n_h * sizeof *a + 1);
    float *out = malloc((size_t)t * (size_t)n_h * sizeof *out + 1);
    if (rc == NVF_OK && (!a || !out))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shared experts");
    if (rc == NVF_OK) {
        memcpy(a, x, (size_t)t * (size_t)n_h * sizeof *a);
        rc = mlp(out, a, t, m, spec, &plain, x_amax);
    }
    for (int64_t i = 0; i < t && rc == NVF_OK; i++) {
        float gate = 1.0f;
        if (gated)
            gate = 1.0f / (1.0f + expf(-(dot(x + i * n_h, sg[0].w, n_h) * sg[0].alpha)));
        for (int64_t c = 0; c < n_h; c++)
            y[i * n_h + c] = y[i * n_h + c] + gate * out[i * n_h + c];
    }
    free(a);
    free(out);
    free3(m);
    free3(sg);
    return rc;
}

int nvf_moe_forward_ref(float *y, const float *x, int64_t t, int64_t hidden,
                        const nvf_moe_spec *spec, nvf_moe_weights *w, const nvf_moe_opts *o) {
    if (hidden != w->hidden)
        return nvf_error_set(NVF_E_SHAPE,
                             "activations have hidden size %" PRId64 ", the layer %" PRId64, hidden,
                             w->hidden);
    if (spec->n_experts != w->n_experts)
        return nvf_error_set(NVF_E_SHAPE,
                             "the spec routes %" PRId64 " experts, the layer has %" PRId64,
                             spec->n_experts, w->n_experts);
    for (int64_t i = 0; i < t * hidden; i++)
        if (!isfinite(x[i]))
            return nvf_error_set(NVF_E_NONFINITE,
                                 "activation [%" PRId64 ", %" PRId64 "] is not finite", i / hidden,
                                 i % hidden);
    int64_t k = spec->top_k;
    int32_t *ids = malloc((size_t)(t * k) * sizeof *ids + 1);
    float *wts = malloc((size_t)(t * k) * sizeof *wts + 1);
    float *ys = calloc((size_t)(t * k) * (size_t)hidden + 1, sizeof *ys);
    int rc = ids && wts && ys
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory for routing %" PRId64 " tokens", t);
    float x_amax = row_amax(x, t * hidden);
    if (rc == NVF_OK)
        rc = nvf_moe_route_layer(ids, wts, x, t, hidden, spec, w);
    if (rc == NVF_OK)
        rc = run_experts(ys, x, t, hidden, ids, spec, w, o, x_amax);
    for (int64_t i = 0; i < t && rc == NVF_OK; i++)
        for (int64_t c = 0; c < hidden; c++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < k; j++)
                acc = acc + wts[i * k + j] * ys[(i * k + j) * hidden + c];
            y[i * hidden + c] = acc;
        }
    if (rc == NVF_OK && w->has_shared)
        rc = moe_run_shared(y, x, t, hidden, spec, w, o, x_amax,
                            spec->shared_gate && w->has_shared_gate);
    free(ids);
    free(wts);
    free(ys);
    return rc;
}

nvf_moe_router moe_router_of(const nvf_moe_spec *spec) {
    nvf_moe_router r = {(int32_t)spec->route,
                        spec->renormalize ? 1 : 0,
                        spec->n_experts,
                        spec->top_k,
                        spec->n_group,
                        spec->topk_group,
                        spec->routed_scaling_factor};
    return r;
}

int moe_route_layer(int32_t *ids, float *weights, const float *x, int64_t t, int64_t hidden,
                    const nvf_moe_spec *spec, nvf_moe_weights *w, nvf_backend *b) {
    if (hidden != w->hidden || spec->n_experts != w->n_experts)
        return nvf_error_set(NVF_E_SHAPE,
                             "activations of hidden size %" PRId64 " and %" PRId64
                             " experts; the layer has %" PRId64 " and %" PRId64,
                             hidden, spec->n_experts, w->hidden, w->n_experts);
    int64_t n_e = spec->n_experts;
    float *logits = malloc((size_t)(t * n_e) * sizeof *logits + 1);
    float *bias = w->has_bias ? malloc((size_t)n_e * sizeof *bias) : NULL;
    int rc = logits && (bias || !w->has_bias) ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK)
        rc = moe_router_logits(logits, x, t, hidden, n_e, w);
    if (rc == NVF_OK && bias)
        rc = nvf_moe_weights_bias(w, bias);
    nvf_moe_router r = moe_router_of(spec);
    if (rc == NVF_OK)
        rc = b ? nvf_backend_moe_route(b, ids, weights, logits, bias, t, &r)
               : nvf_moe_route_ref(ids, weights, logits, bias, t, spec);
    free(logits);
    free(bias);
    return rc;
}

int nvf_moe_route_layer(int32_t *ids, float *weights, const float *x, int64_t t, int64_t hidden,
                        const nvf_moe_spec *spec, nvf_moe_weights *w) {
    return moe_route_layer(ids, weights, x, t, hidden, spec, w, NULL);
}

int nvf_moe_expert_ref(float *y, const float *x, int64_t rows, int64_t hidden,
                       const nvf_moe_spec *spec, nvf_moe_weights *w, int64_t expert,
                       const nvf_moe_opts *o) {
    if (hidden != w->hidden)
        return nvf_error_set(NVF_E_SHAPE,
                             "activations have hidden size %" PRId64 ", the layer %" PRId64, hidden,
                             w->hidden);
    nvf_moe_matrix m[3];
    int rc = nvf_moe_weights_get(w, m, NVF_MOE_PART_EXPERT, expert);
    if (rc != NVF_OK)
        return rc;
    float *a = malloc((size_t)rows * (size_t)hidden * sizeof *a + 1);
    rc = check_mlp(m, hidden, spec, "expert", expert);
    if (rc == NVF_OK && !a)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK) {
        memcpy(a, x, (size_t)rows * (size_t)hidden * sizeof *a);
        rc = mlp(y, a, rows, m, spec, o, row_amax(x, rows * hidden));
    }
    free(a);
    free3(m);
    return rc;
}
