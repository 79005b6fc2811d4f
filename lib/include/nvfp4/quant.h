/*
 * NVFP4 quantization on the CPU: the bit-exact reference of SPEC section 4 that every GPU
 * kernel is compared with (`nvf_quant_*_ref` here, `nvf_quant_*_cuda` in kernels/). The block
 * arithmetic of both is nvfp4/quant_block.h; the row passes run on the global thread pool
 * (nvfp4/pool.h).
 *
 * Output layout of a quantized [rows, cols] tensor (cols a multiple of 16):
 *   1. packed: U8 [rows, cols/2]; element 2j of a row in the low nibble of byte j, 2j+1 in the
 *      high nibble (E2M1 codes, see format.h).
 *   2. scales: F8_E4M3 [rows, cols/16], row-major ("linear"): the scale of block b of row r at
 *      r * cols/16 + b.
 *   3. scale_2: one F32 per quantization group, RN(1 / gs) (nvf_quant_decode_scale); with
 *      ModelOpt's arithmetic its sf2 (nvf_quant_group_decode).
 * Dequantization: w = RN(RN(e2m1(code) * f32(scale)) * scale_2).
 */
#ifndef NVFP4_QUANT_H
#define NVFP4_QUANT_H

#include "nvfp4/dtype.h"
#include "nvfp4/format.h"
#include "nvfp4/quant_types.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The default recipe's parameters: 4over6, MSE, scaled domain, E = 256 (SPEC section 4). */
nvf_quant_params nvf_quant_params_default(void);

/**
 * The global (encode) scale of a group with maximum magnitude `amax` (SPEC section 4):
 * min(RN(E * 6 / amax), FLT_MAX), 1 where that is 0 (amax infinite), FLT_MAX where amax is 0.
 * @return gs.
 */
float nvf_quant_global_scale(float amax, int32_t e4m3_max);

/** The decode scale written as `weight_scale_2`: RN(1 / gs). */
float nvf_quant_decode_scale(float gs);

/**
 * The scale of a quantization group with maximum magnitude `amax` in the arithmetic of `p`,
 * which every `gs` argument below takes: nvf_quant_global_scale(amax, p->e4m3_max), or for
 * NVF_QUANT_METHOD_RTN_MODELOPT ModelOpt's sf2 = RN(amax / 2688) (SPEC section 4).
 * @return the group scale.
 */
float nvf_quant_group_scale(float amax, const nvf_quant_params *p);

/** The `weight_scale_2` of group scale `g` (nvf_quant_group_scale): RN(1 / gs), or ModelOpt's
 * sf2 as it is. */
float nvf_quant_group_decode(float g, const nvf_quant_params *p);

/** The group scale of a stored decode scale (an activation's `input_scale`): 1 / dec, or in
 * ModelOpt's arithmetic dec itself (nvf_qb_group_of_decode). */
float nvf_quant_group_of_decode(float dec, const nvf_quant_params *p);

/**
 * 1 when group scale `g` is ModelOpt's sf2 = 0 (an all-zero group, where ModelOpt would write
 * NaN scales): the group is then written as the default arithmetic writes it, and the caller
 * warns. @return 1 or 0.
 */
int nvf_quant_group_fallback(float g, const nvf_quant_params *p);

/**
 * Quantize one block of NVF_BLOCK (16) values with group scale `gs` (nvf_quant_group_scale):
 * nvf_qb_quantize of the shared block header (nvfp4/quant_block.h), which device code includes
 * directly. Writes 8 packed bytes to `packed` and the E4M3 scale byte to `*scale`.
 */
void nvf_quant_block_ref(uint8_t *packed, uint8_t *scale, const float *x, float gs,
                         const nvf_quant_params *p);

/**
 * A 2-D source tensor as stored in a checkpoint, read row by row (never converted whole).
 * Plain sources: F32, F16, BF16 (exact), F8_E4M3, F8_E5M2 (exact, no scale).
 * FP8-block sources (SPEC section 3): dtype F8_E4M3 with `scale` set: one multiplier per
 * block_rows x block_cols block (edge blocks partial), ceil(rows/block_rows) x
 * ceil(cols/block_cols) of them row-major whatever the stored shape; scale_dtype F32, BF16 or
 * F8_E8M0. Such a value is bf16(RN(f32(fp8) * scale)), as SGLang and ModelOpt feed it.
 */
typedef struct nvf_quant_source {
    nvf_dtype dtype;
    const void *data; /* rows * cols elements, row-major; not owned */
    int64_t rows, cols;
    const void *scale; /* NULL for plain sources; not owned */
    nvf_dtype scale_dtype;
    uint64_t scale_numel; /* element count of the stored scale tensor */
    int64_t block_rows, block_cols;
} nvf_quant_source;

/**
 * Check that a source can be quantized: a supported dtype, rows >= 0, cols > 0 and a multiple
 * of 16, and for FP8-block sources a scale dtype and element count that fit. `name` is used in
 * the message. @return 0, NVF_E_SHAPE or NVF_E_UNSUPPORTED.
 */
int nvf_quant_source_check(const nvf_quant_source *s, const char *name);

/** Row `row` of a (checked) source as f32 values: cols of them into `out`. */
void nvf_quant_source_load_row(float *out, const nvf_quant_source *s, int64_t row);

/** Block scale `i` (row-major over the blocks) of an FP8-block source as f32, exactly. */
static inline float nvf_quant_source_scale(const nvf_quant_source *s, uint64_t i) {
    const uint8_t *b = (const uint8_t *)s->scale;
    switch (s->scale_dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32((uint16_t)(b[2 * i] | (b[2 * i + 1] << 8)));
    case NVF_DTYPE_F8_E8M0:
        return nvf_e8m0_to_f32(b[i]);
    default:
        return nvf_f32_from_bits((uint32_t)b[4 * i] | ((uint32_t)b[4 * i + 1] << 8) |
                                 ((uint32_t)b[4 * i + 2] << 16) | ((uint32_t)b[4 * i + 3] << 24));
    }
}

/**
 * Value [row, col] of a (checked) source as f32: element `col` of what
 * nvf_quant_source_load_row() gives for `row`, bit for bit. Header-only so that kernels/ (which
 * links only lib/core) names a non-finite value exactly as the CPU reference does.
 */
static inline float nvf_quant_source_value(const nvf_quant_source *s, int64_t row, int64_t col) {
    uint64_t i = (uint64_t)row * (uint64_t)s->cols + (uint64_t)col;
    const uint8_t *p = (const uint8_t *)s->data;
    switch (s->dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    case NVF_DTYPE_F16:
        return nvf_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    case NVF_DTYPE_F32:
        return nvf_f32_from_bits((uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) |
                                 ((uint32_t)p[4 * i + 2] << 16) | ((uint32_t)p[4 * i + 3] << 24));
    case NVF_DTYPE_F8_E5M2:
        return nvf_e5m2_to_f32(p[i]);
    default:
        break;
    }
    if (!s->scale)
        return nvf_e4m3_to_f32(p[i]);
    /* FP8 block: bf16(RN(f32(fp8) * scale_inv[r / br][c / bc])). */
    uint64_t ncb = (uint64_t)((s->cols + s->block_cols - 1) / s->block_cols);
    float m = nvf_quant_source_scale(s, (uint64_t)(row / s->block_rows) * ncb +
                                            (uint64_t)(col / s->block_cols));
    float v = nvf_e4m3_to_f32(p[i]) * m;
    return nvf_bf16_to_f32(nvf_f32_to_bf16_rn(v));
}

/**
 * Maximum magnitude of a (checked) source, after FP8-block dequantization, using at most
 * `threads` threads of the global pool (nvf_pool_global; <= 0 or more than it has: all of
 * them). A NaN or infinity is NVF_E_NONFINITE naming `name` and
 * the first such [row, col] unless `allow_nonfinite` (then NaN is skipped and an infinity makes
 * amax infinite). The result does not depend on the thread count.
 * @return 0, NVF_E_NONFINITE or NVF_E_NOMEM.
 */
int nvf_quant_amax_ref(float *out, const nvf_quant_source *s, int allow_nonfinite, int threads,
                       const char *name);

/**
 * Quantize a (checked) source with group scale `gs` (nvf_quant_group_scale): `packed` gets rows *
 * cols/2 bytes, `scales` rows * cols/16 bytes (layout at the top of this file). Rows are split over
 * at most `threads` threads of the global pool (<= 0 or more than it has: all of them); the bytes
 * do not depend on the thread count.
 * @return 0 or NVF_E_NOMEM.
 */
int nvf_quant_source_ref(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                         const nvf_quant_params *p, int threads);

/** nvf_quant_source_ref() for a row-major f32 matrix `x` [rows, cols]. */
int nvf_quant_rows_ref(uint8_t *packed, uint8_t *scales, const float *x, int64_t rows, int64_t cols,
                       float gs, const nvf_quant_params *p, int threads);

/** Dequantize one row of `cols` elements: RN(RN(e2m1 * f32(scale)) * scale_2). */
void nvf_quant_dequant_row_ref(float *out, const uint8_t *packed, const uint8_t *scales,
                               int64_t cols, float scale_2);

/**
 * A global (encode) scale gs whose decode scale RN(1 / gs) is `decode` bit for bit: RN(1 /
 * decode) when that rounds back, else the nearest float to it that does (looked for a few ulps
 * either side, nearest first, below before above).
 * @return 0 and *out; NVF_E_INVALID when `decode` is not finite and positive; NVF_E_UNSUPPORTED
 * when no binary32 has that reciprocal (the rounded reciprocal skips some values near powers of
 * two: a decode scale not written as RN(1 / gs), e.g. by ModelOpt's own arithmetic).
 */
int nvf_quant_global_scale_for_decode(float *out, float decode);

/**
 * Bring stored NVFP4 rows onto another decode scale (SPEC section 5 "Serialized NVFP4 in":
 * an expert's gate and up share one weight_scale_2): dequantize `packed` / `scales` ([rows,
 * cols/2] and [rows, cols/16], linear) with decode scale `decode` exactly as
 * nvf_quant_dequant_row_ref does, then quantize those values with recipe `p` and the global
 * scale nvf_quant_global_scale_for_decode(decode_shared) into `packed_out` / `scales_out`
 * (same shapes; they must not overlap the inputs). The result decodes with `decode_shared`,
 * and its bytes are those nvf_quant_rows_ref writes for the dequantized values with that gs.
 * Where no gs has RN(1 / gs) == decode_shared, gs = RN(1 / decode_shared) and the block
 * arithmetic uses decode_shared in place of RN(1 / gs) (lib/quant/quant_requant.c).
 * @return 0; NVF_E_SHAPE when cols is not a multiple of 16; NVF_E_INVALID for a decode scale
 * that is not finite and positive; NVF_E_NOMEM.
 */
int nvf_quant_requant_ref(uint8_t *packed_out, uint8_t *scales_out, const uint8_t *packed,
                          const uint8_t *scales, int64_t rows, int64_t cols, float decode,
                          float decode_shared, const nvf_quant_params *p);

#ifdef __cplusplus
}
#endif
#endif
