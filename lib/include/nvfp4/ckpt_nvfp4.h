/*
 * Serialized NVFP4 weights read from a checkpoint (SPEC section 3): one validated view of a
 * linear's packed values, block scales and scalars, the same for both formats read, so that a
 * caller (the prepared target, the MoE reference) never needs to know which one it came from.
 *
 * What a view holds, for a weight of `rows` outputs and `cols` inputs (cols a multiple of 16):
 *   1. packed: U8 [rows, cols/2], element 2j of a row in the low nibble of byte j, 2j+1 in the
 *      high nibble. ModelOpt writes `weight` this way; compressed-tensors' `weight_packed` too
 *      (its pack_fp4_to_uint8 packs each pair as `first | second << 4`), so both are read as
 *      stored. Read codes through nvf_nvfp4_view_code() all the same.
 *   2. scales: F8_E4M3 [rows, cols/16] row-major (linear): ModelOpt `weight_scale`,
 *      compressed-tensors `weight_scale`.
 *   3. decode_scale: the multiplier of every block, ModelOpt `weight_scale_2`;
 *      compressed-tensors stores the encode scale `weight_global_scale` and decodes with its
 *      reciprocal, RN(1 / weight_global_scale).
 *   4. input_scale: ModelOpt `input_scale`; compressed-tensors RN(1 / input_global_scale);
 *      1.0 when the checkpoint has none.
 * A fused 3-D expert tensor [E, rows, cols/2] (scales [E, rows, cols/16]; scalars of 1 or E
 * elements) gives one view per expert.
 * Dequantization: w[r][c] = RN(RN(e2m1(code) * f32(scale)) * decode_scale).
 */
#ifndef NVFP4_CKPT_NVFP4_H
#define NVFP4_CKPT_NVFP4_H

#include "nvfp4/checkpoint.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One NVFP4 linear (or one expert of a fused tensor) as stored; nothing here is owned. */
typedef struct nvf_nvfp4_view {
    const char *name;       /* the weight tensor's name (the checkpoint's string) */
    const char *file;       /* the path of its shard (the checkpoint's string) */
    nvf_ckpt_format format; /* NVF_CKPT_FORMAT_NVFP4_MODELOPT or NVF_CKPT_FORMAT_NVFP4_CT */
    int64_t expert;         /* the slice of a fused 3-D tensor, or -1 */
    const uint8_t *packed;  /* [rows, cols/2]: see the top of this file */
    const uint8_t *scales;  /* [rows, cols/16] E4M3, linear row-major */
    int64_t rows, cols;     /* cols: the unpacked input dimension */
    float decode_scale;     /* finite and > 0 */
    float input_scale;      /* finite and > 0; 1.0 when absent */
} nvf_nvfp4_view;

/**
 * The validated NVFP4 view of weight `weight` (an index into ck->tensors) of a checkpoint whose
 * format is NVFP4 ModelOpt or compressed-tensors; `expert` >= 0 takes slice `expert` of a fused
 * 3-D weight (and its per-expert scales), -1 a 2-D weight. Checks: the weight is U8 with a
 * packed width that is a multiple of 8 (16 values per block); its block scale exists, is
 * F8_E4M3 and has shape [rows, cols/16] ([E, rows, cols/16] when fused); every block-scale
 * byte of the view is non-negative and not NaN (sign bit clear, not 0x7F); the decode scale
 * (`weight_scale_2`, `weight_global_scale`) exists, is F32 with 1 (or, fused, E) elements and
 * gives a finite positive decode scale; an input scale, when present, likewise.
 * @return 0 and *out filled; NVF_E_INVALID for a weight index or expert out of range (a caller
 * error); NVF_E_FORMAT for a checkpoint that is not NVFP4, a wrong dtype, a missing companion
 * or a bad scale value; NVF_E_SHAPE for a shape that does not fit. Every message names the
 * file, the tensor and the offending value or shape.
 */
int nvf_ckpt_nvfp4_view(nvf_nvfp4_view *out, const nvf_ckpt *ck, size_t weight, int64_t expert);

/**
 * The rows [row0, row0 + rows) of view `v` as a view of their own (a fused gate_up slice's gate
 * or up half, nvf_moe_proj row0/rows).
 * @return 0, or NVF_E_INVALID when the range is not inside `v`.
 */
int nvf_nvfp4_view_rows(nvf_nvfp4_view *out, const nvf_nvfp4_view *v, int64_t row0, int64_t rows);

/** The E2M1 code (0..15) of element [r, c] of a view. */
static inline uint8_t nvf_nvfp4_view_code(const nvf_nvfp4_view *v, int64_t r, int64_t c) {
    const uint8_t *row = v->packed + (uint64_t)r * (uint64_t)(v->cols / 2);
    return (uint8_t)((row[c >> 1] >> ((c & 1) * 4)) & 0xFu);
}

/** The E4M3 scale byte of the block holding element [r, c]. */
static inline uint8_t nvf_nvfp4_view_scale(const nvf_nvfp4_view *v, int64_t r, int64_t c) {
    return v->scales[(uint64_t)r * (uint64_t)(v->cols / 16) + (uint64_t)(c / 16)];
}

/** Row `r` of a view dequantized: cols values RN(RN(e2m1 * f32(scale)) * decode_scale). */
void nvf_nvfp4_view_dequant_row(float *out, const nvf_nvfp4_view *v, int64_t r);

#ifdef __cplusplus
}
#endif
#endif
