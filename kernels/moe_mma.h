/*
 * Device helpers shared by the grouped GEMM kernels (moe_gemm.cu, moe_gemm_tiled.cu,
 * moe_gemm_wg.cu): E2M1 to BF16, the exact BF16 scale product, the m16n8k16 BF16 MMA and
 * cp.async.
 */
#ifndef NVFP4_KERNELS_MOE_MMA_H
#define NVFP4_KERNELS_MOE_MMA_H

#include "nvfp4/format.h"

#include <cuda_runtime.h>
#include <stdint.h>

/* BF16 bits of E2M1 code c: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. */
__device__ __forceinline__ uint32_t e2m1_bf16(uint32_t c) {
    /* 2^(e - 1) (1 + m / 2) for exponent e = 1..3 is BF16 exponent 126 + e; e = 0 is 0 or 0.5
     * (computed, not a table: an indexed local array lives in local memory) */
    uint32_t m = c & 7u, mag = m >= 2u ? ((126u + (m >> 1)) << 7) | ((m & 1u) << 6)
                               : m     ? 0x3F00u
                                       : 0u;
    return mag | ((c & 8u) << 12);
}

/* The 256-entry table of a byte's two E2M1 codes as a BF16 pair, filled by the whole block. */
__device__ __forceinline__ void e2m1_pair_lut(uint32_t *lut) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        lut[i] = e2m1_bf16((uint32_t)i & 15u) | (e2m1_bf16((uint32_t)i >> 4) << 16);
}

/* The pair table replicated once per lane: the entry of byte b for lane l is at b * 32 + l, so
 * the 32 lookups of a warp fall in 32 different banks whatever the bytes (one table of 256
 * words puts random bytes ~3.5 to a bank: Nsight Compute at c5216b8 has the tiled kernel's L1
 * LSU wavefronts at 81%, its busiest unit). 32 KB, filled by the whole block. */
#define E2M1_LUT_REP_WORDS (256 * 32)
__device__ __forceinline__ void e2m1_pair_lut_rep(uint32_t *lut) {
    for (int i = threadIdx.x; i < E2M1_LUT_REP_WORDS; i += blockDim.x)
        lut[i] = e2m1_bf16(((uint32_t)i >> 5) & 15u) | (e2m1_bf16((uint32_t)i >> 9) << 16);
}

/* Byte i (0..3) of w, zero-extended: one PRMT (a shift and a mask are two instructions). */
__device__ __forceinline__ uint32_t byte_of(uint32_t w, int i) {
    return __byte_perm(w, 0u, 0x4440u + (uint32_t)i);
}

/* The BF16 pair of byte i of `word` from the E2M1 pair table: lq is the table or, for the table
 * replicated per lane (REP), this lane's column of it (lut + lane). */
template <bool REP>
__device__ __forceinline__ uint32_t e2m1_pair(const uint32_t *lq, uint32_t word, int i) {
    return REP ? lq[byte_of(word, i) << 5] : lq[byte_of(word, i)];
}

/* E4M3 scale byte -> its value times `factor` (a power of two) as a BF16 pair, all 256 bytes
 * (exact: 4 significant bits, and every E4M3 value times 1 or 2^119 is a normal BF16). */
__device__ __forceinline__ void e4m3_bf16x2_lut(uint32_t *slut, float factor = 1.0f) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        uint32_t s = nvf_f32_to_bf16_rn(nvf_e4m3_to_f32((uint8_t)i) * factor);
        slut[i] = s | (s << 16);
    }
}

/* The eight E2M1 codes of word q (code i in bits 4i .. 4i + 3) as four BF16 pairs without a
 * table: r[j] = (code j, code j + 4) in (low, high) half, each value times 2^-126. A code's sign
 * goes to bit 15 of its half and its bits e1 e0 m to bits 8 .. 6, the lowest exponent bits and
 * the top mantissa bit: for e >= 1 that is 2^(e - 127) (1 + m / 2) = 2^-126 2^(e - 1) (1 + m / 2),
 * for e = 0 the subnormal m 2^-127 = 2^-126 (m / 2). A product with a scale of E2M1_BITS_SCALE
 * (bf16x2_mul: subnormal inputs are exact) is then the exact BF16 value times 2^-7. Masks and
 * multiplies, no lookups: the 16-row kernel's table lookups had 2.9-way bank conflicts, its
 * bound (Nsight Compute at 128 tokens, bench/results/gemm-h200-v6/c1-routing/ncu-128.txt). */
#define E2M1_BITS_SCALE 0x1p119f /* 2^126 / 2^7: the largest E4M3 times it stays below 2^128 */
#define E2M1_BITS_UNDO  128.0f   /* what the f32 sums are multiplied by to undo the 2^-7 */
__device__ __forceinline__ void e2m1x8_bf16x2(uint32_t q, uint32_t *r) {
    /* codes j and j + 4 alone (a mask; codes 2, 6 and 3, 7 are codes 0, 4 and 1, 5 of q >> 8),
     * times 2^(6 - 4i) + 2^(12 - 4i) for code i = 0 or 1 of the word masked: two copies of
     * each, 6 bits apart (no carries), the first with e1 e0 m at 8 .. 6, the second with the sign
     * at 15; the last mask keeps those. A multiply (IMAD) takes the shifts off the integer pipe,
     * the kernel's busiest (Nsight Compute at 128 tokens, bench/results/bits-h200-v8/c2-7551b74/).
     */
    const uint32_t keep = 0x81C081C0u, u = q >> 8;
    r[0] = ((q & 0x000F000Fu) * 0x1040u) & keep;
    r[1] = ((q & 0x00F000F0u) * 0x0104u) & keep;
    r[2] = ((u & 0x000F000Fu) * 0x1040u) & keep;
    r[3] = ((u & 0x00F000F0u) * 0x0104u) & keep;
}

/* a * b per BF16 half; exact here, so the rounding mode never acts (the -0 addend keeps the sign
 * of a zero product). */
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}

__device__ __forceinline__ void mma_bf16(float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* ---- cp.async (moe_gemm_tiled.cu, moe_gemm_wg.cu) ------------------------------------ */

/* Copy 16 bytes global -> shared address saddr, of which the first src_bytes are read and the
 * rest zeroed. */
__device__ __forceinline__ void cp16s(uint32_t saddr, const void *gmem, int src_bytes = 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(gmem),
                 "r"(src_bytes));
}

/* The same to a generic pointer into shared memory. */
__device__ __forceinline__ void cp16(void *smem, const void *gmem, int src_bytes) {
    cp16s((uint32_t)__cvta_generic_to_shared(smem), gmem, src_bytes);
}

__device__ __forceinline__ void cp_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#endif
