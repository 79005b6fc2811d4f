/*
 * The grouped NVFP4 GEMM of the MoE block (kernels/moe_gemm.h, steps 3 and 5): for each tile
 * of the plan (an expert and up to 16 or 64 of its permuted rows) and each 128 weight rows,
 * ws[z][row][n] = the z-th K range of A[row] . W_e[n], read straight from the prepared layout.
 *
 * How one warp computes (A rows through L1, or from v10 through shared memory (AM_SMEM); each
 * weight byte is loaded once per tile):
 *   1. the K axis runs in chunks of 64 values, i.e. four NVFP4 blocks; lane (g, t) (g = lane/4,
 *      t = lane%4) loads weight row n0 + g's block t of the chunk (8 bytes, one 8-byte load) and
 *      that block's E4M3 scale byte at nvf_layout_offset(128x4, n, block);
 *   2. each byte (two E2M1 codes) becomes a BF16 pair through a 256-entry table and is
 *      multiplied by the scale as a BF16 pair: e2m1 x e4m3 has at most 5 significant bits, so
 *      the product is exact in BF16 (and so equal to the CPU reference's f32 product); from
 *      v8 (DQ_BITS) each word's codes j and j + 4 become a BF16 pair by masks and a multiply
 *      instead, scaled by 2^-7 that the stores undo;
 *   3. the chunk feeds four mma.sync m16n8k16 BF16 steps. The MMA's k index is a permutation of
 *      the chunk's 64 values, the same for A and B: in step s, lane (g, t)'s fragment k indices
 *      2t, 2t+1 hold values 16t + 4s + {0, 1} and 2t+8, 2t+9 hold 16t + 4s + {2, 3}. So a lane
 *      loads 16 consecutive A values (two 16-byte loads) per row and 16 consecutive weight values
 *      per row, and every value is used by exactly one step. A dot product is a sum, and any
 *      order of its terms is the same product: the permutation changes nothing but the f32
 *      summation order inside the MMA (fixed by the hardware, so runs are byte-identical).
 *      DQ_BITS pairs values 16t + 8w + {i, i + 4} instead (see DQ_BITS);
 *   4. f32 accumulators are stored to the split's workspace; alpha and the activation are the
 *      epilogue's (kernels/moe.cu).
 * K values beyond K (K % 64 != 0) load as zeros on both sides; rows beyond the expert's count
 * and weight rows beyond N are not written, and read as other rows (K % 128 == 0) or zeros.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"
#include "moe_gemm_select.h"
#include "moe_mma.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"

#include "nvfp4/status.h"

#include <cuda_runtime.h>

/* ---- kernels ----------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t word_of(const uint4 *q, int j) {
    const uint4 &v = q[j >> 2];
    int i = j & 3;
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* The K range [c0, c1) of 64-value chunks, walked KB chunks at a time. */
__device__ __forceinline__ void k_range(int64_t *c0, int64_t *c1, int64_t nchunks, int cps) {
    *c0 = (int64_t)blockIdx.z * cps;
    *c1 = *c0 + cps < nchunks ? *c0 + cps : nchunks;
}

/* How the weights become BF16: DQ_DECODE, a byte's two codes through the pair table and the
 * scale decoded per use (v1-v3); DQ_TABLE, the scale through a table of BF16 pairs too (v4-v7);
 * DQ_BITS (v8), the codes by masks and a multiply (e2m1x8_bf16x2: no shared-memory lookups) with
 * the scale table times E2M1_BITS_SCALE, and each MMA step's k slots pairing values i and i + 4
 * of a word instead of 2i and 2i + 1 (for A and B alike; A's words are paired with a PRMT, which
 * also puts them in the MMA's register order). */
enum { DQ_DECODE, DQ_TABLE, DQ_BITS };

/* The BF16 pairs (lo(x), lo(y)) and (hi(x), hi(y)) of two BF16 pairs x, y. */
__device__ __forceinline__ uint32_t bf16_los(uint32_t x, uint32_t y) {
    return __byte_perm(x, y, 0x5410u);
}
__device__ __forceinline__ uint32_t bf16_his(uint32_t x, uint32_t y) {
    return __byte_perm(x, y, 0x7632u);
}

/* Where the A fragments come from: AM_GLOBAL, each warp loads them from global memory when it
 * needs them (to v8); AM_SMEM (v10, the 16-row kernel where K % 128 == 0), the tile's A rows of
 * a K step (16 rows x 128 values) come through shared memory, copied by the whole CTA with
 * cp.async a step ahead (two stages): one copy of A per CTA instead of one per warp, and its
 * latency off the warps' path (Nsight Compute at 128 tokens, v8: 35% of the warps' stall cycles
 * on global loads; 8% faster at 8-256 tokens on DeepSeek-V3, bench/results/smem-h200-v10/).
 * A stage is 16 rows (MT 1) or 32 (MT 2) of 256 bytes, each row padded by 16 bytes and lane t's
 * chunks i = 0..3 (values 32t + 8i ..) swapped in pairs for t >= 2, so the eight lanes of an
 * LDS.128 phase ((g, t) for two g) hit eight different 4-bank groups. AM_SMEM_WORD (v12, the
 * 32-row register kernel; v13 for 16-row tiles too) walks a step a weight word at a time: A's
 * chunk w for every row, then each weight row's word w decoded and fed to the MMAs of both
 * 16-row halves, so a step holds one chunk of A fragments instead of all four (32 registers a
 * 16-row half) and a 32-row tile decodes its weights once. Each accumulator sees its MMAs in
 * the same order as with AM_SMEM. */
enum { AM_GLOBAL, AM_SMEM, AM_SMEM_WORD };
#define A_ROW_BYTES 272
#define A_STAGES    2 /* the K loop alternates them (slot ^= 1) */
__device__ __forceinline__ uint32_t a_chunk(int r, int t, int i) {
    return (uint32_t)(r * A_ROW_BYTES + (4 * t + (i ^ ((t >> 1) << 1))) * 16);
}

/* AM_SMEM_WORD's K step (128 values, KB 2) from the A stage `stage`: for each weight word w of
 * the lane's four (block w / 2), the A fragments of chunk w of the tile's rows (the second
 * 16-row half zeros, or with MT 2 skipped, where the expert has no rows there: the whole warp
 * agrees), then per weight row its word decoded, scaled and fed to MMA steps 2w and 2w + 1 of
 * every half (k slots as DQ_BITS's, see gemm_tile). */
template <int MT, int NT>
__device__ __forceinline__ void word_steps(float (*acc)[NT][4], const uint8_t *stage,
                                           const uint32_t *slut, const uint32_t *csf,
                                           const uint32_t (*cq)[4], int r0, int cnt, int g, int t) {
    bool upper = MT == 2 && r0 + 16 < cnt; /* rows in the second 16-row half */
#pragma unroll
    for (int j = 0; j < 2; j++) {
        uint32_t s2[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            s2[nt] = slut[(csf[nt] >> (8 * j)) & 0xFFu];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int w = 2 * j + i;
            uint32_t af[MT][2][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint4 v = make_uint4(0u, 0u, 0u, 0u);
                    if ((mt == 0 && h == 0) || r0 + 16 * mt + 8 * h < cnt)
                        v = *(const uint4 *)(stage + a_chunk(16 * mt + g + 8 * h, t, w));
                    /* step 2w + c pairs A words c and c + 2 of the chunk */
                    af[mt][h][0] = bf16_los(v.x, v.z);
                    af[mt][h][1] = bf16_his(v.x, v.z);
                    af[mt][h][2] = bf16_los(v.y, v.w);
                    af[mt][h][3] = bf16_his(v.y, v.w);
                }
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t r[4];
                e2m1x8_bf16x2(cq[nt][w], r);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    r[q] = bf16x2_mul(r[q], s2[nt]);
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    mma_bf16(acc[0][nt], af[0][0][2 * c], af[0][1][2 * c], af[0][0][2 * c + 1],
                             af[0][1][2 * c + 1], r[2 * c], r[2 * c + 1]);
                    if (MT == 2 && upper)
                        mma_bf16(acc[MT - 1][nt], af[MT - 1][0][2 * c], af[MT - 1][1][2 * c],
                                 af[MT - 1][0][2 * c + 1], af[MT - 1][1][2 * c + 1], r[2 * c],
                                 r[2 * c + 1]);
                }
            }
        }
    }
}

/* Warps WM x WN; a warp computes MT 16-row tiles x NT 8-column tiles. A lane covers KB
 * consecutive NVFP4 blocks of a row per step of the K loop (KB 1: 8 weight bytes, one chunk of
 * 64 values per step; KB 2: 16 bytes, two chunks: K % 128 == 0 only). With PF, the next step's
 * weight bytes and scales are loaded before this step's MMAs (register double buffering). */
template <int MT, int NT, int WM, int WN, int KB, bool PF, int DQ, int AM>
__device__ __forceinline__ void gemm_tile(const uint32_t *lut, const uint32_t *slut, uint8_t *abuf,
                                          int32_t info, float *ws, int64_t ws_split_stride,
                                          const uint16_t *a, int gather, const uint8_t *w,
                                          const uint8_t *sf, int64_t N, int64_t K,
                                          int chunks_per_split, const nvf_cuda_moe_plan &plan) {
    constexpr int BN = 8 * NT * WN;
    int e = info >> 20, r0 = info & 0xFFFFF;
    int row_base = plan.offsets[e], cnt = plan.offsets[e + 1] - row_base;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int wm = warp / WN, wn = warp % WN;
    int64_t n0 = (int64_t)blockIdx.x * BN + wn * NT * 8;
    int64_t kcols = K / 16, kt = (kcols + 3) / 4;
    const uint8_t *we = w + (int64_t)e * N * (K / 2);
    const uint8_t *se = sf + (int64_t)e * nvf_layout_bytes(NVF_LAYOUT_128X4, N, kcols);

    const uint8_t *brow[NT];
    int64_t sbase[NT];
    bool bok[NT];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        int64_t n = n0 + nt * 8 + g;
        bok[nt] = n < N;
        int64_t nn = bok[nt] ? n : 0;
        brow[nt] = we + nn * (K / 2);
        /* the row part of nvf_layout_offset(128x4, n, k, kcols) */
        sbase[nt] = (nn / 128) * kt * 512 + (nn % 32) * 16 + ((nn % 128) / 32) * 4;
    }
    const uint16_t *arow[MT][2];
    bool aok[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = r0 + (wm * MT + mt) * 16 + g + 8 * h;
            aok[mt][h] = r < cnt;
            int64_t p = row_base + (aok[mt][h] ? r : 0);
            int64_t src = gather ? plan.perm[p] / plan.top_k : p;
            arow[mt][h] = a + src * K;
        }

    /* AM_SMEM: this thread's two 16-byte chunks of each step's A tile (rows beyond the
     * expert's zero-filled) and where they go in a stage (a_chunk) */
    constexpr bool as = AM != AM_GLOBAL;
    constexpr int a_stage = 16 * MT * A_ROW_BYTES, a_copies = as ? 2 * MT : 1;
    const uint16_t *csrc[a_copies];
    uint32_t cdst[a_copies], cbytes[a_copies];
    if constexpr (as) {
        static_assert((MT == 1 || (MT == 2 && AM == AM_SMEM_WORD)) && WM == 1 && KB == 2 &&
                          WN * 32 == 128 && DQ == DQ_BITS,
                      "A through shared memory: the 16- and 32-row kernels");
#pragma unroll
        for (int u = 0; u < a_copies; u++) {
            int j = threadIdx.x + 128 * u, r = j / 16, c16 = j % 16;
            bool ok = r0 + r < cnt;
            int64_t p = row_base + (ok ? r0 + r : 0);
            csrc[u] = a + (gather ? plan.perm[p] / plan.top_k : p) * K + c16 * 8;
            cdst[u] = a_chunk(r, c16 >> 2, c16 & 3);
            cbytes[u] = ok ? 16u : 0u;
        }
    }
    uint32_t abase = as ? (uint32_t)__cvta_generic_to_shared(abuf) : 0u;
    auto issue_a = [&](int64_t c, int slot) {
#pragma unroll
        for (int u = 0; u < a_copies; u++)
            cp16s(abase + slot * a_stage + cdst[u], csrc[u] + c * 64, (int)cbytes[u]);
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[mt][nt][j] = 0.0f;

    /* this lane's weight bytes (KB x 8) and scale bytes (KB) of rows n0 + nt * 8 + g */
    uint32_t bq[NT][2 * KB], bsf[NT];
    auto load_b = [&](int64_t c, uint32_t(*q)[2 * KB], uint32_t *s) {
        int64_t kb = c * 4 + KB * t; /* this lane's first block of the step */
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            if constexpr (KB == 2) {
                /* K % 128 == 0: both blocks exist; kb even: aligned. Rows beyond N read row 0
                 * (brow): their columns of the product are not stored */
                uint4 v = __ldg((const uint4 *)(brow[nt] + kb * 8));
                q[nt][0] = v.x;
                q[nt][1] = v.y;
                q[nt][2] = v.z;
                q[nt][3] = v.w;
                s[nt] = __ldg((const unsigned short *)(se + sbase[nt] + (kb / 4) * 512 + (kb % 4)));
            } else {
                if (bok[nt] && kb < kcols) {
                    uint2 v = __ldg((const uint2 *)(brow[nt] + kb * 8));
                    q[nt][0] = v.x;
                    q[nt][1] = v.y;
                    s[nt] = __ldg(se + sbase[nt] + (kb / 4) * 512 + (kb % 4));
                } else {
                    q[nt][0] = q[nt][1] = 0u;
                    s[nt] = 0u;
                }
            }
        }
    };

    int64_t nchunks = (K + 63) / 64, c0, c1;
    k_range(&c0, &c1, nchunks, chunks_per_split);
    if (PF && c0 < c1)
        load_b(c0, bq, bsf);
    int slot = 0; /* the stage of this step's A */
    if (as && c0 < c1) {
        issue_a(c0, 0);
        cp_commit();
    }
    /* two steps per loop iteration: with prefetch (PF) the copies of the next step's bytes
     * into this step's registers are renamed away (3-8% faster at 8-256 tokens, DeepSeek-V3 and
     * GPT-OSS-120B; bench/results/bits-h200-v8/c10-8df8aed/) */
#pragma unroll 2
    for (int64_t c = c0; c < c1; c += KB) {
        uint32_t cq[NT][2 * KB], csf[NT];
        if (PF) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                csf[nt] = bsf[nt];
#pragma unroll
                for (int i = 0; i < 2 * KB; i++)
                    cq[nt][i] = bq[nt][i];
            }
            if (c + KB < c1)
                load_b(c + KB, bq, bsf);
        } else {
            load_b(c, cq, csf);
        }
        if constexpr (as) {
            /* this step's stage has landed (this thread's chunks, then every thread's), and
             * every warp is done with the other stage */
            cp_wait<0>();
            __syncthreads();
            if (c + KB < c1) {
                issue_a(c + KB, slot ^ 1);
                cp_commit();
            }
        }
        if constexpr (AM == AM_SMEM_WORD) {
            word_steps<MT, NT>(acc, abuf + slot * a_stage, slut, csf, cq, r0, cnt, g, t);
            slot ^= 1;
            continue;
        }
        int64_t kb = c * 4 + KB * t;
        bool kok = KB == 2 || kb < kcols; /* KB 2: K % 128 == 0, every block exists */
        uint4 aq[MT][2][2 * KB];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* rows beyond the expert's read its first row (arow): their rows of the product
                 * are not stored. Half-tiles of such rows only (the whole warp agrees) are not
                 * read; the tile's first half has its first row. */
                int first = r0 + (wm * MT + mt) * 16 + 8 * h;
                if (as && (h == 0 || first < cnt)) {
#pragma unroll
                    for (int i = 0; i < 2 * KB; i++)
                        aq[mt][h][i] =
                            *(const uint4 *)(abuf + slot * a_stage + a_chunk(g + 8 * h, t, i));
                } else if (!as && ((WM == 1 && mt == 0 && h == 0) || first < cnt) && kok) {
                    const uint4 *p = (const uint4 *)(arow[mt][h] + kb * 16);
#pragma unroll
                    for (int i = 0; i < 2 * KB; i++)
                        aq[mt][h][i] = __ldg(p + i);
                } else {
#pragma unroll
                    for (int i = 0; i < 2 * KB; i++)
                        aq[mt][h][i] = make_uint4(0u, 0u, 0u, 0u);
                }
            }
        /* A's fragment words per step: with DQ_BITS, step st = 2w + c (word w of the lane's
         * values, c = 0 or 1) takes k slots (8w + 2c, 8w + 2c + 4) and (8w + 2c + 1, 8w + 2c + 5),
         * the pairs e2m1x8_bf16x2 makes of weight word w; otherwise (4st, 4st + 1) and (4st + 2,
         * 4st + 3), a byte's two codes */
        uint32_t af[MT][2][8 * KB];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int st = 0; st < 4 * KB; st++) {
                    if constexpr (DQ == DQ_BITS) {
                        int x = 4 * (st >> 1) + (st & 1);
                        uint32_t lo = word_of(aq[mt][h], x), hi = word_of(aq[mt][h], x + 2);
                        af[mt][h][2 * st] = bf16_los(lo, hi);
                        af[mt][h][2 * st + 1] = bf16_his(lo, hi);
                    } else {
                        af[mt][h][2 * st] = word_of(aq[mt][h], 2 * st);
                        af[mt][h][2 * st + 1] = word_of(aq[mt][h], 2 * st + 1);
                    }
                }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            uint32_t bw[8 * KB];
#pragma unroll
            for (int j = 0; j < KB; j++) {
                uint32_t s2, sb = (csf[nt] >> (8 * j)) & 0xFFu;
                if (DQ != DQ_DECODE) {
                    s2 = slut[sb];
                } else {
                    uint32_t s = nvf_f32_to_bf16_rn(nvf_e4m3_to_f32((uint8_t)sb));
                    s2 = s | (s << 16);
                }
                if constexpr (DQ == DQ_BITS) {
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        uint32_t r[4];
                        e2m1x8_bf16x2(cq[nt][2 * j + i], r);
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            bw[8 * j + 4 * i + q] = bf16x2_mul(r[q], s2);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        bw[8 * j + i] =
                            bf16x2_mul(e2m1_pair<false>(lut, cq[nt][2 * j + (i >> 2)], i & 3), s2);
                }
            }
#pragma unroll
            for (int st = 0; st < 4 * KB; st++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    mma_bf16(acc[mt][nt], af[mt][0][2 * st], af[mt][1][2 * st],
                             af[mt][0][2 * st + 1], af[mt][1][2 * st + 1], bw[2 * st],
                             bw[2 * st + 1]);
        }
        slot ^= 1;
    }
    if constexpr (as) /* the next tile's copies overwrite the stages */
        __syncthreads();

    float *wz = ws + (int64_t)blockIdx.z * ws_split_stride;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            if (!aok[mt][h])
                continue;
            int64_t p = row_base + r0 + (wm * MT + mt) * 16 + g + 8 * h;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                int64_t col = n0 + nt * 8 + 2 * t;
                float u = DQ == DQ_BITS ? E2M1_BITS_UNDO : 1.0f; /* a power of two: exact */
                if (col < N)                                     /* N is even: col + 1 < N too */
                    *(float2 *)(wz + p * N + col) =
                        make_float2(acc[mt][nt][2 * h] * u, acc[mt][nt][2 * h + 1] * u);
            }
        }
}

/* CTA (x, y, z): weight rows BN x of tiles y, y + gridDim.y, ... up to the first unused one,
 * K range z. DQ: how weights become BF16 (DQ_DECODE, DQ_TABLE, DQ_BITS). MINB: CTAs
 * per SM the registers must allow (0: no cap). */
template <int MT, int NT, int WM, int WN, int KB, bool PF, int DQ, int MINB, int AM>
__global__ void __launch_bounds__(WM *WN * 32, MINB)
    moe_gemm_kernel(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                    const uint8_t *w, const uint8_t *sf, int64_t N, int64_t K, int chunks_per_split,
                    nvf_cuda_moe_plan plan) {
    if (plan.tile_info[blockIdx.y] < 0) /* before anything else: CTAs beyond the used tiles */
        return;
    constexpr bool bits = DQ == DQ_BITS;
    __shared__ uint32_t lut[bits ? 1 : 256];
    __shared__ uint32_t slut[DQ == DQ_DECODE ? 1 : 256];
    __shared__ __align__(16) uint8_t abuf[AM != AM_GLOBAL ? A_STAGES * 16 * MT * A_ROW_BYTES : 16];
    if (!bits)
        e2m1_pair_lut(lut);
    if (DQ != DQ_DECODE)
        e4m3_bf16x2_lut(slut, bits ? E2M1_BITS_SCALE : 1.0f);
    __syncthreads();
    for (int64_t ty = blockIdx.y; ty < plan.max_tiles; ty += gridDim.y) {
        int32_t info = plan.tile_info[ty];
        if (info < 0)
            break;
        gemm_tile<MT, NT, WM, WN, KB, PF, DQ, AM>(lut, slut, abuf, info, ws, ws_split_stride, a,
                                                  gather, w, sf, N, K, chunks_per_split, plan);
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

template <int MT, int NT, int WM, int WN, int KB, bool PF, int DQ, int MINB = 0, int AM = AM_GLOBAL>
static int launch(float *ws, int64_t stride, const uint16_t *a, int gather, const uint8_t *w,
                  const uint8_t *sf, int64_t n, int64_t k, int cps, const nvf_cuda_moe_plan *plan,
                  cudaStream_t st) {
    int rc = 0;
    int64_t nchunks = (k + 63) / 64;
    dim3 grid((unsigned)((n + 8 * NT * WN - 1) / (8 * NT * WN)),
              (unsigned)nvf_cuda_moe_grid_tiles(plan), (unsigned)((nchunks + cps - 1) / cps));
    moe_gemm_kernel<MT, NT, WM, WN, KB, PF, DQ, MINB, AM>
        <<<grid, WM * WN * 32, 0, st>>>(ws, stride, a, gather, w, sf, n, k, cps, *plan);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

/* The register kernel of version v (2 or more) for tiles of MT rows: scales through the table
 * from v4; from v6, 16-row tiles' registers capped for 4 CTAs per SM (152 -> 128 registers,
 * 12 -> 16 warps per SM, 32 bytes spilled): 8-11% faster at 16-256 tokens on DeepSeek-V3 with
 * balanced routing (bench moe on the H200, bench/results/gemm-h200-v6/); a cap for 5 CTAs (96
 * registers, 384 bytes spilled) was 50% slower. From v8, 16-row tiles decode without the table
 * (DQ_BITS): 3-15% faster at 8-256 tokens (bench/results/bits-h200-v8/); from v10, with
 * K % 128 == 0, their A rows come through shared memory (AM_SMEM): 5-8% faster at 8-256 tokens
 * (bench/results/smem-h200-v10/); v13, the same with AM_SMEM_WORD's order. */
template <int MT, int NT, int WM, int WN, int KB>
static int launch_reg(int v, float *ws, int64_t stride, const uint16_t *a, int gather,
                      const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k, int cps,
                      const nvf_cuda_moe_plan *plan, cudaStream_t st) {
    if constexpr (MT == 1 && KB == 2) {
        if (v >= 13)
            return launch<MT, NT, WM, WN, KB, true, DQ_BITS, 4, AM_SMEM_WORD>(
                ws, stride, a, gather, w, sf, n, k, cps, plan, st);
        if (v >= 10)
            return launch<MT, NT, WM, WN, KB, true, DQ_BITS, 4, AM_SMEM>(ws, stride, a, gather, w,
                                                                         sf, n, k, cps, plan, st);
    }
    if constexpr (MT == 1) {
        if (v >= 8)
            return launch<MT, NT, WM, WN, KB, true, DQ_BITS, 4>(ws, stride, a, gather, w, sf, n, k,
                                                                cps, plan, st);
        if (v >= 6)
            return launch<MT, NT, WM, WN, KB, true, DQ_TABLE, 4>(ws, stride, a, gather, w, sf, n, k,
                                                                 cps, plan, st);
    }
    if (v >= 4)
        return launch<MT, NT, WM, WN, KB, true, DQ_TABLE>(ws, stride, a, gather, w, sf, n, k, cps,
                                                          plan, st);
    return launch<MT, NT, WM, WN, KB, true, DQ_DECODE>(ws, stride, a, gather, w, sf, n, k, cps,
                                                       plan, st);
}

extern "C" int nvf_cuda_moe_gemm(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                                 const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k,
                                 int chunks_per_split, const nvf_cuda_moe_plan *plan,
                                 struct CUstream_st *stream) {
    if (plan->max_tiles <= 0)
        return 0;
    int kb = nvf_cuda_moe_gemm_step(k, plan->tile_rows), v = moe_gemm_version();
    if (kb == 2 && chunks_per_split % 2)
        return nvf_error_set(NVF_E_INVALID, "MoE GEMM: %d chunks per split with 128-value steps",
                             chunks_per_split);
    if (moe_gemm_use_wg(k, plan->tile_rows))
        return nvf_cuda_moe_gemm_wg(ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split,
                                    plan, stream);
    /* register kernels: 16-row tiles: 4 warps side by side over 128 weight rows; 64-row tiles:
     * 2 x 2 warps of 32 x 64 */
    if (v == 1)
        return plan->tile_rows == 16
                   ? launch<1, 4, 1, 4, 1, false, DQ_DECODE>(ws, ws_split_stride, a, gather, w, sf,
                                                             n, k, chunks_per_split, plan, stream)
                   : launch<2, 8, 2, 2, 1, false, DQ_DECODE>(ws, ws_split_stride, a, gather, w, sf,
                                                             n, k, chunks_per_split, plan, stream);
    if (moe_gemm_use_tiled(k, plan->tile_rows))
        return nvf_cuda_moe_gemm_tiled(ws, ws_split_stride, a, gather, w, sf, n, k,
                                       chunks_per_split, plan,
                                       v >= 5 && k >= REP_LUT_MIN_K ? 2 : v >= 4, stream);
    if (moe_gemm_use_reg32(k, plan->tile_rows))
        return launch<2, 4, 1, 4, 2, true, DQ_BITS, REG32_CTAS, AM_SMEM_WORD>(
            ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split, plan, stream);
    if (plan->tile_rows == 16)
        return kb == 2 ? launch_reg<1, 4, 1, 4, 2>(v, ws, ws_split_stride, a, gather, w, sf, n, k,
                                                   chunks_per_split, plan, stream)
                       : launch_reg<1, 4, 1, 4, 1>(v, ws, ws_split_stride, a, gather, w, sf, n, k,
                                                   chunks_per_split, plan, stream);
    return launch_reg<2, 8, 2, 2, 1>(v, ws, ws_split_stride, a, gather, w, sf, n, k,
                                     chunks_per_split, plan, stream);
}
