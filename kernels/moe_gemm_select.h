/*
 * Which grouped-GEMM kernel takes a GEMM (kernels/moe_gemm_select.cu); kernels/moe_gemm.cu
 * launches it.
 */
#ifndef NVFP4_KERNELS_MOE_GEMM_SELECT_H
#define NVFP4_KERNELS_MOE_GEMM_SELECT_H

#include <stdint.h>

/* K from which v5 uses the replicated pair table (64-row tiles): its 32 KB fill per CTA pays
 * off over long K loops only. bench moe on the H200, v5 with the table for every K (55d2c37)
 * against v4 (0e8fd9f), whole blocks (bench/results/final-h200-55d2c37/, final-h200-0e8fd9f/):
 * DeepSeek-V3 (FC1 K 7168, FC2 K 2048) 1-4% faster at 1024-4096 tokens, GPT-OSS-120B (K 2880)
 * 2-3% faster at 2048-4096, Qwen3-30B-A3B (K 2048 and 768) 9-26% slower at 512-4096. */
#define REP_LUT_MIN_K 2560

/* CTAs per SM the 32-row register kernel's registers allow (168 registers, ptxas -v at sm_90). */
#define REG32_CTAS 3

/** The kernel version: NVFP4_MOE_GEMM (v1 ... v25), 25 by default (read once). */
int moe_gemm_version(void);

/** Whether the warpgroup-MMA kernel (moe_gemm_wg.cu) takes tiles of tile_rows rows and K k. */
int moe_gemm_use_wg(int64_t k, int32_t tile_rows);

/** Whether the 32-row register kernel (v12 and later) takes them. */
int moe_gemm_use_reg32(int64_t k, int32_t tile_rows);

/** Whether the shared-memory kernel (moe_gemm_tiled.cu) takes them. */
int moe_gemm_use_tiled(int64_t k, int32_t tile_rows);

#endif
