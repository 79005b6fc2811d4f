/*
 * Private to lib/quant: the row kernels of quant_rows.c that quant_run.c runs on the pool, and
 * the little-endian loads that quant.c and quant_rows.c share.
 */
#ifndef NVFP4_QUANT_INTERNAL_H
#define NVFP4_QUANT_INTERNAL_H

#include "nvfp4/quant.h"
#include "nvfp4/quant_block.h"

#include <stdint.h>

/* Little-endian loads from possibly unaligned tensor data. */
static inline uint16_t quant_load_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t quant_load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/**
 * Quantize one row of `nb` blocks (nb * 16 values `x`) into nb * 8 bytes `packed` and nb
 * `scales`: the bytes of nvf_qb_quantize for every block, computed several blocks at a time.
 */
void nvf_quant_row_encode(uint8_t *packed, uint8_t *scales, const float *x, int64_t nb,
                          const nvf_qb_consts *k);

/**
 * Largest magnitude bits of a row of `n` BF16 values at `p` (little-endian), NaN skipped;
 * *bad is set to 1 when the row holds a NaN or an infinity, else 0.
 */
uint32_t nvf_quant_row_amax_bf16(const uint8_t *p, int64_t n, uint32_t *bad);

/** The same for a row of `n` f32 values. */
uint32_t nvf_quant_row_amax_f32(const float *x, int64_t n, uint32_t *bad);

#endif
