/*
 * Serialized NVFP4 weights (ModelOpt or compressed-tensors) as f32 values for the MoE reference,
 * through lib/ckpt's validated view (nvfp4/ckpt_nvfp4.h): a value is e2m1(code) * f32(scale),
 * exact in f32 (and in BF16); the decode scale (weight_scale_2, or 1 / weight_global_scale) is
 * not folded in but returned as the matrix's alpha, applied after the f32 accumulation as the
 * kernels do. The row decode is lib/quant's (nvf_quant_dequant_row_ref with a unit multiplier).
 */
#include "moe_weights.h"

#include "nvfp4/ckpt_nvfp4.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

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

int moe_nvfp4_load(nvf_moe_matrix *out, const nvf_ckpt *ck, size_t ti, int64_t expert, int64_t row0,
                   int64_t rows) {
    nvf_nvfp4_view whole, v;
    int rc = nvf_ckpt_nvfp4_view(&whole, ck, ti, expert);
    if (rc == NVF_OK)
        rc = nvf_nvfp4_view_rows(&v, &whole, row0, rows);
    if (rc != NVF_OK)
        return rc;
    out->w = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)v.cols * sizeof *out->w);
    if (!out->w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for NVFP4 weight '%s'", v.name);
    out->rows = rows;
    out->cols = v.cols;
    out->alpha = v.decode_scale;
    /* the view reads an absent input scale as 1.0; W4A4 then takes a dynamic one instead */
    out->input_scale = ck->tensors[ti].input_scale != NVF_CKPT_NONE ? v.input_scale : 0.0f;
    out->nvfp4 = 1;
    for (int64_t r = 0; r < rows; r++)
        nvf_quant_dequant_row_ref(
            out->w + r * v.cols, v.packed + (uint64_t)r * (uint64_t)(v.cols / 2),
            v.scales + (uint64_t)r * (uint64_t)(v.cols / NVF_BLOCK), v.cols, 1.0f);
    return NVF_OK;
}
