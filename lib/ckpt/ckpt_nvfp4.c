/*
 * Serialized NVFP4 weights (nvfp4/ckpt_nvfp4.h): the validated view of one linear, or of one
 * expert of a fused tensor, in ModelOpt or compressed-tensors form. The companions come from
 * the links ckpt_format.c made (which name is whose scale is ckpt_naming.c's rule); this file
 * only checks dtypes, shapes and values and presents one convention.
 *
 * Per format, the tensors of a linear M (SPEC section 3):
 *   1. ModelOpt: M.weight U8 [out, in/2], M.weight_scale F8_E4M3 [out, in/16],
 *      M.weight_scale_2 F32 (decode multiplier), M.input_scale F32. Fused experts:
 *      P.experts.gate_up_proj U8 [E, 2I, H/2] with P.experts.gate_up_proj_weight_scale
 *      [E, 2I, H/16] and scalars of 1 or E elements.
 *   2. compressed-tensors: M.weight_packed U8 [out, in/2] (pairs packed low nibble first, as
 *      ModelOpt), M.weight_scale F8_E4M3 [out, in/16], M.weight_global_scale F32 (an encode
 *      scale: decode multiplier = RN(1 / value)), M.input_global_scale F32 (likewise).
 */
#include "ckpt_internal.h"

#include "nvfp4/ckpt_nvfp4.h"
#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* Record `code` with "NVFP4 weight 'NAME' in 'FILE': " before the message. */
static int view_error(int code, const nvf_nvfp4_view *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int view_error(int code, const nvf_nvfp4_view *v, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nvf_error_set(code, "NVFP4 weight '%s' in '%s': %s", v->name, v->file, msg);
}

static float load_f32(const uint8_t *p, uint64_t i) {
    p += 4 * i;
    return nvf_f32_from_bits((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                             ((uint32_t)p[3] << 24));
}

static int finite_positive(float x) {
    return isfinite(x) && x > 0.0f;
}

/*
 * A scalar companion (`what` names its slot) as the view's multiplier: element `expert` of an
 * F32 tensor of E elements, or its only element. `reciprocal`: the stored value is an encode
 * scale (compressed-tensors) and the multiplier is RN(1 / value).
 */
static int scalar_of(float *out, const nvf_nvfp4_view *v, const nvf_ckpt *ck, size_t idx,
                     int64_t n_experts, int reciprocal, const char *what) {
    const nvf_st_tensor *s = ck->tensors[idx].st;
    if (s->dtype != NVF_DTYPE_F32)
        return view_error(NVF_E_FORMAT, v, "%s '%s' has dtype %s; expected F32", what, s->name,
                          nvf_dtype_name(s->dtype));
    char shape[160];
    ckpt_shape_str(shape, sizeof shape, s->shape, s->ndim);
    uint64_t at = 0;
    if (s->numel != 1) {
        if (v->expert < 0 || s->numel != (uint64_t)n_experts)
            return view_error(NVF_E_SHAPE, v, "%s '%s' has shape %s; expected one element%s", what,
                              s->name, shape, v->expert < 0 ? "" : " or one per expert");
        at = (uint64_t)v->expert;
    }
    if (!s->data)
        return view_error(NVF_E_INVALID, v, "%s '%s' has no data", what, s->name);
    float stored = load_f32(s->data, at);
    float m = reciprocal ? 1.0f / stored : stored;
    if (!finite_positive(stored) || !finite_positive(m))
        return view_error(NVF_E_FORMAT, v, "%s '%s'%s is %.9g (0x%08" PRIx32 "); %s", what, s->name,
                          s->numel == 1 ? "" : " of this expert", (double)stored,
                          nvf_f32_bits(stored),
                          reciprocal ? "its reciprocal must be a finite positive decode scale"
                                     : "it must be finite and positive");
    *out = m;
    return NVF_OK;
}

/* The block scale tensor: F8_E4M3 with the weight's leading dimensions and cols/16 columns. */
static int check_scale_tensor(const nvf_nvfp4_view *v, const nvf_st_tensor *w,
                              const nvf_st_tensor *s) {
    if (s->dtype != NVF_DTYPE_F8_E4M3)
        return view_error(NVF_E_FORMAT, v, "block scale '%s' has dtype %s; expected F8_E4M3",
                          s->name, nvf_dtype_name(s->dtype));
    int ok = s->ndim == w->ndim;
    for (int32_t d = 0; ok && d + 1 < w->ndim; d++)
        ok = s->shape[d] == w->shape[d];
    if (ok && s->shape[s->ndim - 1] * NVF_BLOCK != v->cols)
        ok = 0;
    if (!ok) {
        char sshape[160], wshape[160];
        ckpt_shape_str(sshape, sizeof sshape, s->shape, s->ndim);
        ckpt_shape_str(wshape, sizeof wshape, w->shape, w->ndim);
        return view_error(NVF_E_SHAPE, v,
                          "block scale '%s' has shape %s; the packed weight %s holds %" PRId64
                          " inputs per row, so the scale must be [%s%" PRId64 ", %" PRId64 "]",
                          s->name, sshape, wshape, v->cols, w->ndim == 3 ? "E, " : "", v->rows,
                          v->cols / NVF_BLOCK);
    }
    return NVF_OK;
}

/* Every block-scale byte of the view: E4M3 with the sign bit clear and not NaN (0x7F). */
static int check_scale_bytes(const nvf_nvfp4_view *v, const char *scale_name) {
    uint64_t n = (uint64_t)v->rows * (uint64_t)(v->cols / NVF_BLOCK);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b = v->scales[i];
        if ((b & 0x80u) == 0 && b != 0x7Fu)
            continue;
        uint64_t per_row = (uint64_t)(v->cols / NVF_BLOCK);
        char where[96]; /* three 20-digit numbers and their brackets */
        if (v->expert >= 0)
            snprintf(where, sizeof where, "[%" PRId64 ", %" PRIu64 ", %" PRIu64 "]", v->expert,
                     i / per_row, i % per_row);
        else
            snprintf(where, sizeof where, "[%" PRIu64 ", %" PRIu64 "]", i / per_row, i % per_row);
        return view_error(NVF_E_FORMAT, v, "block scale '%s'%s is 0x%02x (%s)", scale_name, where,
                          b, (b & 0x7Fu) == 0x7Fu ? "NaN" : "negative");
    }
    return NVF_OK;
}

int nvf_ckpt_nvfp4_view(nvf_nvfp4_view *out, const nvf_ckpt *ck, size_t weight, int64_t expert) {
    if (weight >= ck->n_tensors)
        return nvf_error_set(NVF_E_INVALID, "tensor index %zu is out of range (%zu tensors)",
                             weight, ck->n_tensors);
    const nvf_ckpt_tensor *t = &ck->tensors[weight];
    const nvf_st_tensor *w = t->st;
    nvf_nvfp4_view v = {.name = w->name, .file = ck->files[t->file].path, .expert = expert};
    v.format = ck->quant.format;
    if (v.format != NVF_CKPT_FORMAT_NVFP4_MODELOPT && v.format != NVF_CKPT_FORMAT_NVFP4_CT)
        return view_error(NVF_E_FORMAT, &v, "the checkpoint's format is %s, not NVFP4",
                          nvf_ckpt_format_name(v.format));
    if (w->dtype != NVF_DTYPE_U8)
        return view_error(NVF_E_FORMAT, &v, "dtype %s; packed NVFP4 values are U8",
                          nvf_dtype_name(w->dtype));
    int want_ndim = expert >= 0 ? 3 : 2;
    char wshape[160];
    ckpt_shape_str(wshape, sizeof wshape, w->shape, w->ndim);
    if (w->ndim != want_ndim)
        return view_error(NVF_E_SHAPE, &v, "shape %s; expected %s", wshape,
                          expert >= 0 ? "a fused [E, out, in/2] tensor for an expert slice"
                                      : "[out, in/2] (a fused 3-D tensor is read per expert)");
    int64_t n_experts = expert >= 0 ? w->shape[0] : 1;
    if (expert >= n_experts)
        return nvf_error_set(NVF_E_INVALID,
                             "expert %" PRId64 " of '%s' is out of range (E = %" PRId64 ")", expert,
                             w->name, n_experts);
    int64_t width = w->shape[w->ndim - 1];
    v.rows = w->shape[w->ndim - 2];
    v.cols = 2 * width;
    if (width % (NVF_BLOCK / 2) != 0)
        return view_error(NVF_E_SHAPE, &v,
                          "packed width %" PRId64 " (shape %s) is %s: a row of 16-value blocks "
                          "packs into a multiple of 8 bytes",
                          width, wshape, width % 2 ? "odd" : "not a multiple of 8");
    if (t->scale == NVF_CKPT_NONE)
        return view_error(NVF_E_FORMAT, &v, "no block scale (weight_scale)");
    const nvf_st_tensor *s = ck->tensors[t->scale].st;
    int rc = check_scale_tensor(&v, w, s);
    if (rc != NVF_OK)
        return rc;
    int ct = v.format == NVF_CKPT_FORMAT_NVFP4_CT;
    if (t->scale_2 == NVF_CKPT_NONE)
        return view_error(NVF_E_FORMAT, &v, "no %s", ct ? "weight_global_scale" : "weight_scale_2");
    rc = scalar_of(&v.decode_scale, &v, ck, t->scale_2, n_experts, ct,
                   ct ? "global scale" : "weight_scale_2");
    v.input_scale = 1.0f;
    if (rc == NVF_OK && t->input_scale != NVF_CKPT_NONE)
        rc = scalar_of(&v.input_scale, &v, ck, t->input_scale, n_experts, ct,
                       ct ? "input global scale" : "input_scale");
    if (rc != NVF_OK)
        return rc;
    if (!w->data || !s->data)
        return view_error(NVF_E_INVALID, &v, "the tensor data is not mapped");
    uint64_t slice = expert >= 0 ? (uint64_t)expert * (uint64_t)v.rows : 0;
    v.packed = w->data + slice * (uint64_t)width;
    v.scales = s->data + slice * (uint64_t)(v.cols / NVF_BLOCK);
    rc = check_scale_bytes(&v, s->name);
    if (rc == NVF_OK)
        *out = v;
    return rc;
}

int nvf_nvfp4_view_rows(nvf_nvfp4_view *out, const nvf_nvfp4_view *v, int64_t row0, int64_t rows) {
    if (row0 < 0 || rows < 0 || row0 > v->rows || rows > v->rows - row0)
        return nvf_error_set(NVF_E_INVALID,
                             "rows [%" PRId64 ", %" PRId64 ") are not inside the %" PRId64
                             " rows of '%s'",
                             row0, row0 + rows, v->rows, v->name);
    nvf_nvfp4_view r = *v;
    r.packed = v->packed + (uint64_t)row0 * (uint64_t)(v->cols / 2);
    r.scales = v->scales + (uint64_t)row0 * (uint64_t)(v->cols / NVF_BLOCK);
    r.rows = rows;
    *out = r;
    return NVF_OK;
}

void nvf_nvfp4_view_dequant_row(float *out, const nvf_nvfp4_view *v, int64_t r) {
    for (int64_t c = 0; c < v->cols; c++) {
        float code = nvf_e2m1_to_f32(nvf_nvfp4_view_code(v, r, c));
        float block = code * nvf_e4m3_to_f32(nvf_nvfp4_view_scale(v, r, c));
        out[c] = block * v->decode_scale;
    }
}
