/*
 * ModelOpt NVFP4 weights as f32 values for the MoE reference (SPEC section 3). Per linear, or per
 * expert along dimension 0 of a fused 3-D tensor:
 *   1. weight U8 [out, in/2]: element 2j in the low nibble of byte j, 2j+1 in the high nibble;
 *   2. weight_scale F8_E4M3 [out, in/16], linear row-major;
 *   3. weight_scale_2 F32 (one element, or one per expert): the decode multiplier;
 *   4. input_scale F32 (one element, or one per expert), optional here.
 * A value is e2m1(code) * f32(scale), exact in f32 (and in BF16); weight_scale_2 is not folded
 * in but returned as the matrix's alpha, applied after the f32 accumulation as the kernels do.
 * The row decode is lib/quant's (nvf_quant_dequant_row_ref with a unit multiplier).
 */
#include "moe_weights.h"

#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

float moe_scalar_at(const nvf_st_tensor *t, uint64_t i) {
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    case NVF_DTYPE_F16:
        return nvf_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    default:
        return nvf_f32_from_bits((uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                                 ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24));
    }
}

/* A per-linear scalar companion (weight_scale_2, input_scale): one element, or one per expert
 * of a fused tensor with `mats` matrices. */
static int scalar_companion(float *out, const nvf_ckpt *ck, size_t ci, const char *weight,
                            const char *what, int64_t expert, int64_t mats) {
    if (ci == NVF_CKPT_NONE)
        return nvf_error_set(NVF_E_FORMAT, "NVFP4 weight '%s' has no %s", weight, what);
    const nvf_st_tensor *c = ck->tensors[ci].st;
    int dt_ok =
        c->dtype == NVF_DTYPE_F32 || c->dtype == NVF_DTYPE_BF16 || c->dtype == NVF_DTYPE_F16;
    if (!dt_ok || (c->numel != 1 && c->numel != (uint64_t)mats))
        return nvf_error_set(NVF_E_FORMAT,
                             "%s '%s' of NVFP4 weight '%s' is %s with %" PRIu64
                             " elements; expected F32 with 1 or %" PRId64,
                             what, c->name, weight, nvf_dtype_name(c->dtype), c->numel, mats);
    *out = moe_scalar_at(c, c->numel == 1 ? 0 : (uint64_t)(expert > 0 ? expert : 0));
    if (!isfinite(*out))
        return nvf_error_set(NVF_E_NONFINITE, "%s '%s' of NVFP4 weight '%s' is not finite", what,
                             c->name, weight);
    return NVF_OK;
}

int moe_nvfp4_load(nvf_moe_matrix *out, const nvf_ckpt *ck, size_t ti, int64_t expert, int64_t row0,
                   int64_t rows) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    const nvf_st_tensor *st = t->st;
    int64_t mats = st->ndim == 3 ? st->shape[0] : 1;
    int64_t out_dim = st->shape[st->ndim - 2], cols = 2 * st->shape[st->ndim - 1];
    if (t->scale == NVF_CKPT_NONE)
        return nvf_error_set(NVF_E_FORMAT, "NVFP4 weight '%s' has no weight_scale", st->name);
    const nvf_st_tensor *sc = ck->tensors[t->scale].st;
    uint64_t want = (uint64_t)mats * (uint64_t)out_dim * (uint64_t)(cols / NVF_BLOCK);
    if (sc->dtype != NVF_DTYPE_F8_E4M3 || sc->numel != want || cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_FORMAT,
                             "weight_scale '%s' of NVFP4 weight '%s' is %s with %" PRIu64
                             " elements; expected F8_E4M3 with %" PRIu64 " (linear [out, in/16])",
                             sc->name, st->name, nvf_dtype_name(sc->dtype), sc->numel, want);
    int rc =
        scalar_companion(&out->alpha, ck, t->scale_2, st->name, "weight_scale_2", expert, mats);
    if (rc != NVF_OK)
        return rc;
    out->input_scale = 0.0f;
    if (t->input_scale != NVF_CKPT_NONE) {
        rc = scalar_companion(&out->input_scale, ck, t->input_scale, st->name, "input_scale",
                              expert, mats);
        if (rc != NVF_OK)
            return rc;
    }
    out->w = malloc((size_t)rows * (size_t)cols * sizeof *out->w);
    if (!out->w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for NVFP4 weight '%s'", st->name);
    out->rows = rows;
    out->cols = cols;
    out->nvfp4 = 1;
    uint64_t first = (uint64_t)(expert > 0 ? expert : 0) * (uint64_t)out_dim + (uint64_t)row0;
    for (int64_t r = 0; r < rows; r++) {
        uint64_t row = first + (uint64_t)r;
        nvf_quant_dequant_row_ref(out->w + r * cols, st->data + row * (uint64_t)(cols / 2),
                                  sc->data + row * (uint64_t)(cols / NVF_BLOCK), cols, 1.0f);
    }
    return NVF_OK;
}
