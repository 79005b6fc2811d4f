/*
 * The grouped NVFP4 GEMM of the MoE block (kernels/moe_gemm.h, steps 3 and 5): for each tile
 * of the plan (an expert and up to 16 or 64 of its permuted rows) and each 128 weight rows,
 * ws[z][row][n] = the z-th K range of A[row] . W_e[n], read straight from the prepared layout.
 *
 * How one warp computes (no shared memory staging: A rows come through L1, each weight byte is
 * loaded once per tile):
 *   1. the K axis runs in chunks of 64 values, i.e. four NVFP4 blocks; lane (g, t) (g = lane/4,
 *      t = lane%4) loads weight row n0 + g's block t of the chunk (8 bytes, one 8-byte load) and
 *      that block's E4M3 scale byte at nvf_layout_offset(128x4, n, block);
 *   2. each byte (two E2M1 codes) becomes a BF16 pair through a 256-entry table and is
 *      multiplied by the scale as a BF16 pair: e2m1 x e4m3 has at most 5 significant bits, so
 *      the product is exact in BF16 (and so equal to the CPU reference's f32 product);
 *   3. the chunk feeds four mma.sync m16n8k16 BF16 steps. The MMA's k index is a permutation of
 *      the chunk's 64 values, the same for A and B: in step s, lane (g, t)'s fragment k indices
 *      2t, 2t+1 hold values 16t + 4s + {0, 1} and 2t+8, 2t+9 hold 16t + 4s + {2, 3}. So a lane
 *      loads 16 consecutive A values (two 16-byte loads) per row and 16 consecutive weight values
 *      per row, and every value is used by exactly one step. A dot product is a sum, and any
 *      order of its terms is the same product: the permutation changes nothing but the f32
 *      summation order inside the MMA (fixed by the hardware, so runs are byte-identical);
 *   4. f32 accumulators are stored to the split's workspace; alpha and the activation are the
 *      epilogue's (kernels/moe.cu).
 * K values beyond K (K % 64 != 0) load as zeros on both sides; rows beyond the expert's count
 * and weight rows beyond N are neither read nor written.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"

#include <cuda_runtime.h>

/* ---- kernels ----------------------------------------------------------------------------- */

/* BF16 bits of E2M1 code c: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. */
__device__ __forceinline__ uint32_t e2m1_bf16(uint32_t c) {
    const uint32_t mag[8] = {0x0000u, 0x3F00u, 0x3F80u, 0x3FC0u,
                             0x4000u, 0x4040u, 0x4080u, 0x40C0u};
    return mag[c & 7u] | ((c & 8u) << 12);
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

__device__ __forceinline__ uint32_t word_of(const uint4 *q, int j) {
    const uint4 &v = q[j >> 2];
    int i = j & 3;
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Warps WM x WN; a warp computes MT 16-row tiles x NT 8-column tiles. */
template <int MT, int NT, int WM, int WN>
__global__ void __launch_bounds__(WM *WN * 32)
    moe_gemm_kernel(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                    const uint8_t *w, const uint8_t *sf, int64_t N, int64_t K, int chunks_per_split,
                    nvf_cuda_moe_plan plan) {
    constexpr int BN = 8 * NT * WN;
    __shared__ uint32_t lut[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        lut[i] = e2m1_bf16((uint32_t)i & 15u) | (e2m1_bf16((uint32_t)i >> 4) << 16);
    __syncthreads();
    int32_t info = plan.tile_info[blockIdx.y];
    if (info < 0)
        return;
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

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[mt][nt][j] = 0.0f;

    int64_t nchunks = (K + 63) / 64;
    int64_t c0 = (int64_t)blockIdx.z * chunks_per_split;
    int64_t c1 = c0 + chunks_per_split < nchunks ? c0 + chunks_per_split : nchunks;
#pragma unroll 2
    for (int64_t c = c0; c < c1; c++) {
        int64_t kb = c * 4 + t; /* this lane's block of the chunk */
        bool kok = kb < kcols;
        uint2 bq[NT];
        uint32_t bsf[NT];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            if (bok[nt] && kok) {
                bq[nt] = __ldg((const uint2 *)(brow[nt] + kb * 8));
                bsf[nt] = __ldg(se + sbase[nt] + (kb / 4) * 512 + (kb % 4));
            } else {
                bq[nt] = make_uint2(0u, 0u);
                bsf[nt] = 0u;
            }
        }
        uint4 aq[MT][2][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (aok[mt][h] && kok) {
                    const uint4 *p = (const uint4 *)(arow[mt][h] + kb * 16);
                    aq[mt][h][0] = __ldg(p);
                    aq[mt][h][1] = __ldg(p + 1);
                } else {
                    aq[mt][h][0] = aq[mt][h][1] = make_uint4(0u, 0u, 0u, 0u);
                }
            }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            uint32_t s = nvf_f32_to_bf16_rn(nvf_e4m3_to_f32((uint8_t)bsf[nt]));
            uint32_t s2 = s | (s << 16);
            uint32_t bw[8];
#pragma unroll
            for (int i = 0; i < 8; i++) {
                uint32_t byte = ((i < 4 ? bq[nt].x : bq[nt].y) >> (8 * (i & 3))) & 0xFFu;
                bw[i] = bf16x2_mul(lut[byte], s2);
            }
#pragma unroll
            for (int st = 0; st < 4; st++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
                    mma_bf16(acc[mt][nt], word_of(aq[mt][0], 2 * st), word_of(aq[mt][1], 2 * st),
                             word_of(aq[mt][0], 2 * st + 1), word_of(aq[mt][1], 2 * st + 1),
                             bw[2 * st], bw[2 * st + 1]);
        }
    }

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
                if (col < N) /* N is even: col + 1 < N too */
                    *(float2 *)(wz + p * N + col) =
                        make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
            }
        }
}

/* ---- launchers --------------------------------------------------------------------------- */

template <int MT, int NT, int WM, int WN>
static int launch(float *ws, int64_t stride, const uint16_t *a, int gather, const uint8_t *w,
                  const uint8_t *sf, int64_t n, int64_t k, int cps, const nvf_cuda_moe_plan *plan,
                  cudaStream_t st) {
    int rc = 0;
    int64_t nchunks = (k + 63) / 64;
    dim3 grid((unsigned)((n + 8 * NT * WN - 1) / (8 * NT * WN)), (unsigned)plan->max_tiles,
              (unsigned)((nchunks + cps - 1) / cps));
    moe_gemm_kernel<MT, NT, WM, WN>
        <<<grid, WM * WN * 32, 0, st>>>(ws, stride, a, gather, w, sf, n, k, cps, *plan);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

extern "C" int nvf_cuda_moe_gemm(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                                 const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k,
                                 int chunks_per_split, const nvf_cuda_moe_plan *plan,
                                 struct CUstream_st *stream) {
    if (plan->max_tiles <= 0)
        return 0;
    /* 16-row tiles: 4 warps side by side over 128 weight rows, for few rows per expert (the
     * weight stream is what matters); 64-row tiles: 2 x 2 warps of 32 x 64, more MMAs per
     * weight and A byte loaded */
    if (plan->tile_rows == 16)
        return launch<1, 4, 1, 4>(ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split,
                                  plan, stream);
    return launch<2, 8, 2, 2>(ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split, plan,
                              stream);
}
