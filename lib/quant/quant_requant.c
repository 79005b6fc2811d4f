/*
 * Re-quantization of stored NVFP4 values onto another decode scale (SPEC section 5 "Serialized
 * NVFP4 in"): an expert's gate and up must share one weight_scale_2, and where a checkpoint
 * gives them different ones, the member with the other scale is brought onto the shared one.
 *
 *   1. The values: w = RN(RN(e2m1(code) * f32(scale)) * decode), the first product exact (an
 *      E2M1 value times an E4M3 value fits binary32), so each value is rounded once.
 *   2. The global scale: gs with RN(1 / gs) == decode_shared, so that quantizing with gs writes
 *      exactly the shared decode scale; found by nvf_quant_global_scale_for_decode. Where no
 *      binary32 has that rounded reciprocal (a decode scale not written as RN(1 / gs), as
 *      ModelOpt's arithmetic writes RN(amax / 2688)), gs = RN(1 / decode_shared) and the
 *      block arithmetic's RN(1 / gs) is replaced by decode_shared itself, so that the block
 *      scales are chosen for the decode scale the result is read with.
 *   3. The block arithmetic of the recipe (nvfp4/quant_block.h) with those constants; ModelOpt's
 *      arithmetic (NVF_QUANT_METHOD_RTN_MODELOPT) takes decode_shared as its sf2 directly.
 */
#include "quant_internal.h"

#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>

/* How far (in units in the last place) from RN(1 / decode) a global scale is looked for: one ulp
 * of gs moves 1/gs by at most about two ulps, so a gs that rounds back lies within a few. */
#define GS_SEARCH_ULPS 4

int nvf_quant_global_scale_for_decode(float *out, float decode) {
    if (!(decode > 0.0f) || !isfinite(decode))
        return nvf_error_set(NVF_E_INVALID, "decode scale %.9g (0x%08x) is not finite and positive",
                             (double)decode, (unsigned)nvf_f32_bits(decode));
    float g0 = nvf_qb_rcp(decode);
    uint32_t b0 = nvf_f32_bits(g0);
    /* Candidates in a fixed order: g0, one ulp below, one above, two below, ... */
    for (int k = 0; k <= 2 * GS_SEARCH_ULPS; k++) {
        int64_t step = (k + 1) / 2 * (k % 2 ? -1 : 1);
        int64_t b = (int64_t)b0 + step;
        if (b <= 0 || b >= 0x7F800000)
            continue;
        float g = nvf_f32_from_bits((uint32_t)b);
        if (nvf_f32_bits(nvf_qb_decode_scale(g)) == nvf_f32_bits(decode)) {
            *out = g;
            return NVF_OK;
        }
    }
    return nvf_error_set(NVF_E_UNSUPPORTED,
                         "no binary32 global scale has RN(1/gs) == %.9g (0x%08x): the reciprocal "
                         "skips it",
                         (double)decode, (unsigned)nvf_f32_bits(decode));
}

int nvf_quant_requant_ref(uint8_t *packed_out, uint8_t *scales_out, const uint8_t *packed,
                          const uint8_t *scales, int64_t rows, int64_t cols, float decode,
                          float decode_shared, const nvf_quant_params *p) {
    if (rows < 0 || cols < 0 || cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_SHAPE, "re-quantize: shape [%lld, %lld] is not NVFP4 rows",
                             (long long)rows, (long long)cols);
    if (!(decode > 0.0f) || !isfinite(decode))
        return nvf_error_set(NVF_E_INVALID,
                             "re-quantize: decode scale %.9g is not finite and "
                             "positive",
                             (double)decode);
    if (!(decode_shared > 0.0f) || !isfinite(decode_shared))
        return nvf_error_set(NVF_E_INVALID,
                             "re-quantize: shared decode scale %.9g is not finite and positive",
                             (double)decode_shared);
    /* ModelOpt's arithmetic: its group scale is the decode scale sf2 itself. */
    float gs = decode_shared;
    if (p->method != NVF_QUANT_METHOD_RTN_MODELOPT &&
        nvf_quant_global_scale_for_decode(&gs, decode_shared) != NVF_OK) {
        nvf_error_clear();
        gs = nvf_qb_rcp(decode_shared);
    }
    nvf_qb_consts k = nvf_qb_consts_make(gs, p->method, p->error, p->domain);
    k.rcp_gs = decode_shared; /* already so when gs was found */
    float *row = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *row);
    if (!row)
        return nvf_error_set(NVF_E_NOMEM, "re-quantize: no memory for a row of %lld values",
                             (long long)cols);
    int64_t nb = cols / NVF_BLOCK;
    for (int64_t r = 0; r < rows; r++) {
        uint64_t pr = (uint64_t)r * (uint64_t)(cols / 2), sr = (uint64_t)r * (uint64_t)nb;
        nvf_quant_dequant_row_ref(row, packed + pr, scales + sr, cols, decode);
        nvf_quant_row_encode(packed_out + pr, scales_out + sr, row, nb, &k);
    }
    free(row);
    return NVF_OK;
}
