/*
 * The grouped NVFP4 GEMM staged in shared memory (kernels/moe_gemm.h steps 3 and 5): a CTA of 8
 * warps computes one tile of 16 * MT permuted rows of one expert (MT 1, 2, 4: 16-, 32- and
 * 64-row tiles) x 256 weight rows. Each 64-value K chunk of A (16 MT rows x 128 bytes) and of
 * the weights (256 rows x 32 bytes, with the chunk's two 512-byte 128x4 scale tiles) is copied
 * to shared memory with cp.async, TB_STAGES - 1 chunks ahead of the one being multiplied, so
 * the weight stream keeps flowing while the tensor cores work. A rows are read from global
 * memory once per CTA (not once per warp), the weights once per CTA.
 *
 * Warp w takes weight rows 32w .. 32w + 31 against all the tile's rows: every weight byte is
 * turned into BF16 once (the exact E2M1 x E4M3 product, as in moe_gemm.cu) and feeds 4 MT MMAs.
 * The MMA k order is moe_gemm.cu's permutation of the chunk (lane t holds the chunk's block t),
 * so the products and the f32 accumulation are those of a dot product in a fixed order. A rows
 * are stored with their eight 16-byte pieces XOR-swizzled by the row (r & 7), so that the eight
 * rows a warp reads at once fall in different banks. Needs K % 32 == 0 (16-byte weight pieces).
 * In a 64-row tile, the 16-row groups beyond its expert's rows load no A fragments and run no
 * MMAs, the weights are turned into BF16 for all four n-tiles before the MMAs, and (from kernel
 * v5, where K >= 2560: moe_gemm.cu) the E2M1 pair table is replicated per lane
 * (moe_mma.h). bench moe on the H200 at 1024-4096 tokens: 2-4% faster with the table than
 * without (5517e83, bench/results/gemm-h200-5517e83/), 4-12% faster than c739446's kernel
 * (0e8fd9f, final-h200-0e8fd9f/tiles-*.json); for 16- and 32-row tiles each of the three was
 * slower.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"
#include "moe_mma.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#define TB_N       256
#define TB_THREADS 256
#define TB_STAGES  4

/* One K chunk in shared memory, for tiles of 16 * MT rows. */
template <int MT> struct tiled_stage {
    uint4 a[MT * 16 * 8]; /* A: piece j (8 BF16) of row r at r * 8 + (j ^ (r & 7)) */
    uint4 b[TB_N * 2];    /* weights: row m's 32 bytes at 2m, 2m + 1 */
    uint4 sf[2 * 32];     /* the 128x4 scale tile of this chunk for each 128-row group */
};

/* ---- kernels ----------------------------------------------------------------------------- */

/* What one thread copies of every chunk: NA A pieces (row q / 8, piece q % 8 for q = tid +
 * 256 i), two weight pieces (row q / 2, half q % 2) and, for tid < 64, one scale piece. */
template <int MT> struct tiled_src {
    static constexpr int NA = (MT * 128 + TB_THREADS - 1) / TB_THREADS;
    const uint16_t *a[NA];
    int apos[NA], apiece[NA];
    bool aon[NA]; /* the piece is copied: its 16-row group holds rows of the expert */
    bool aok[NA]; /* ... and its row is one of them (else it is zeroed) */
    const uint8_t *b[2];
    int bhalf[2];
    bool bok[2];
    const uint8_t *s;
    bool sok;
};

template <int MT>
__device__ __forceinline__ void issue_chunk(tiled_stage<MT> &S, const tiled_src<MT> &src, int64_t c,
                                            int64_t kcols, int tid, const void *zero) {
    int64_t kb0 = c * 4;
#pragma unroll
    for (int i = 0; i < tiled_src<MT>::NA; i++) {
        if (!src.aon[i])
            continue;
        bool ok = src.aok[i] && kb0 + (src.apiece[i] >> 1) < kcols;
        cp16(&S.a[src.apos[i]], ok ? (const void *)(src.a[i] + c * 64) : zero, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int64_t kb = kb0 + 2 * src.bhalf[i];
        int bytes = !src.bok[i] || kb >= kcols ? 0 : kb + 1 >= kcols ? 8 : 16;
        cp16(&S.b[tid + TB_THREADS * i], bytes ? (const void *)(src.b[i] + c * 32) : zero, bytes);
    }
    if (tid < 64)
        cp16(&S.sf[tid], src.sok ? (const void *)(src.s + c * 512) : zero, src.sok ? 16 : 0);
}

/* One tile of the plan (`info`): the K range of split blockIdx.z of weight rows nb .. nb + 255.
 * Ends with no copy in flight; the caller syncs before the stages are reused. */
template <int MT, int VAR>
__device__ __forceinline__ void
tiled_tile(tiled_stage<MT> *st, const uint32_t *lut, const uint32_t *slut, int32_t info, float *ws,
           int64_t ws_split_stride, const uint16_t *a, int gather, const uint8_t *w,
           const uint8_t *sf, int64_t N, int64_t K, int cps, const nvf_cuda_moe_plan &plan) {
    int e = info >> 20, r0 = info & 0xFFFFF;
    int row_base = plan.offsets[e], cnt = plan.offsets[e + 1] - row_base;
    int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const uint32_t *lq = VAR == 2 ? lut + lane : lut;
    int64_t nb = (int64_t)blockIdx.x * TB_N;
    int64_t kcols = K / 16, kt = (kcols + 3) / 4;
    const uint8_t *we = w + (int64_t)e * N * (K / 2);
    const uint8_t *se = sf + (int64_t)e * nvf_layout_bytes(NVF_LAYOUT_128X4, N, kcols);

    /* 64-row tiles: the 16-row groups holding rows of the expert (the others load no A and run
     * no MMAs: an expert's last tile is often nearly empty). Not for 32-row tiles: the checks
     * cost them 7-9% at 256-512 tokens (bench moe on the H200 at 5517e83) */
    int mt_used = MT == 4 ? (cnt - r0 + 15) / 16 : MT;
    tiled_src<MT> src;
#pragma unroll
    for (int i = 0; i < tiled_src<MT>::NA; i++) {
        int q = tid + TB_THREADS * i, r = q >> 3;
        src.apiece[i] = q & 7;
        src.apos[i] = r * 8 + (src.apiece[i] ^ (r & 7));
        src.aon[i] = q < MT * 128 && r < mt_used * 16;
        src.aok[i] = src.aon[i] && r0 + r < cnt;
        int64_t p = row_base + (src.aok[i] ? r0 + r : 0);
        int64_t from = gather ? plan.perm[p] / plan.top_k : p;
        src.a[i] = a + from * K + src.apiece[i] * 8;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int q = tid + TB_THREADS * i;
        int64_t n = nb + (q >> 1);
        src.bhalf[i] = q & 1;
        src.bok[i] = n < N;
        src.b[i] = we + (src.bok[i] ? n : 0) * (K / 2) + src.bhalf[i] * 16;
    }
    src.sok = tid < 64 && nb + (tid >> 5) * 128 < N;
    src.s = se + (nb / 128 + (tid >> 5)) * kt * 512 + (tid & 31) * 16;

    float acc[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++)
                acc[mt][nt][j] = 0.0f;

    int64_t nchunks = (K + 63) / 64;
    int64_t c0 = (int64_t)blockIdx.z * cps;
    int64_t c1 = c0 + cps < nchunks ? c0 + cps : nchunks;
    /* TB_STAGES - 1 chunks in flight ahead of the one multiplied; one barrier per chunk */
#pragma unroll
    for (int i = 0; i < TB_STAGES - 1; i++) {
        if (c0 + i < c1)
            issue_chunk<MT>(st[i], src, c0 + i, kcols, tid, w);
        cp_commit();
    }
    for (int64_t c = c0; c < c1; c++) {
        int it = (int)(c - c0);
        cp_wait<TB_STAGES - 2>();
        __syncthreads(); /* chunk c landed for all; stage (it - 1) % S is free again */
        if (c + TB_STAGES - 1 < c1)
            issue_chunk<MT>(st[(it + TB_STAGES - 1) % TB_STAGES], src, c + TB_STAGES - 1, kcols,
                            tid, w);
        cp_commit();
        const tiled_stage<MT> &S = st[it % TB_STAGES];
        uint2 bq[4];
        uint32_t s2[4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            int m = warp * 32 + nt * 8 + g, ml = m & 127;
            bq[nt] = ((const uint2 *)S.b)[m * 4 + t];
            uint32_t byte =
                ((const uint8_t *)S.sf)[(m >> 7) * 512 + (ml & 31) * 16 + (ml >> 5) * 4 + t];
            if (VAR >= 1) {
                s2[nt] = slut[byte];
            } else {
                uint32_t sc = nvf_f32_to_bf16_rn(nvf_e4m3_to_f32((uint8_t)byte));
                s2[nt] = sc | (sc << 16);
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            if constexpr (MT == 4) {
                /* 64-row tiles: the 4 n-tiles' weights in BF16 first, then each 16-row group's A
                 * fragments against them, so that one group's A is live (72 bytes spilled instead
                 * of 220); 16- and 32-row tiles ran 10% slower so (bench moe on the H200 at
                 * c992a79, bench/results/tiles-h200-c992a79/) */
                uint32_t bw[4][4];
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    uint32_t word = j ? bq[nt].y : bq[nt].x;
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        bw[nt][i] = bf16x2_mul(e2m1_pair<VAR == 2>(lq, word, i), s2[nt]);
                }
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if (mt >= mt_used)
                        continue;
                    int r = mt * 16 + g;
                    uint4 a0 = S.a[r * 8 + ((2 * t + j) ^ (r & 7))];
                    uint4 a1 = S.a[(r + 8) * 8 + ((2 * t + j) ^ ((r + 8) & 7))];
#pragma unroll
                    for (int nt = 0; nt < 4; nt++) {
                        mma_bf16(acc[mt][nt], a0.x, a1.x, a0.y, a1.y, bw[nt][0], bw[nt][1]);
                        mma_bf16(acc[mt][nt], a0.z, a1.z, a0.w, a1.w, bw[nt][2], bw[nt][3]);
                    }
                }
            } else {
                /* 16- and 32-row tiles: every group's A fragments, then n-tile by n-tile */
                uint4 aq[MT][2];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        int r = mt * 16 + g + 8 * h;
                        if (mt < mt_used)
                            aq[mt][h] = S.a[r * 8 + ((2 * t + j) ^ (r & 7))];
                    }
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    uint32_t word = j ? bq[nt].y : bq[nt].x;
                    uint32_t bw[4];
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        bw[i] = bf16x2_mul(e2m1_pair<VAR == 2>(lq, word, i), s2[nt]);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        if (mt >= mt_used)
                            continue;
                        mma_bf16(acc[mt][nt], aq[mt][0].x, aq[mt][1].x, aq[mt][0].y, aq[mt][1].y,
                                 bw[0], bw[1]);
                        mma_bf16(acc[mt][nt], aq[mt][0].z, aq[mt][1].z, aq[mt][0].w, aq[mt][1].w,
                                 bw[2], bw[3]);
                    }
                }
            }
        }
    }
    cp_wait<0>();

    float *wz = ws + (int64_t)blockIdx.z * ws_split_stride;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = mt * 16 + g + 8 * h;
            if (r0 + r >= cnt)
                continue;
            int64_t p = row_base + r0 + r;
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                int64_t col = nb + warp * 32 + nt * 8 + 2 * t;
                if (col < N) /* N is even: col + 1 < N too */
                    *(float2 *)(wz + p * N + col) =
                        make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
            }
        }
}

/* CTA (x, y, z): weight rows 256 x of tiles y, y + gridDim.y, ... (the plan's used tiles come
 * first, then -1: a CTA stops at the first unused one), K range z. VAR: 0, scales decoded per
 * use (v2, v3); 1, scales through a 256-entry table of BF16 pairs (v4); 2, also the E2M1 pair
 * table replicated per lane (v5's 64-row tiles where K >= 2560). */
template <int MT, int VAR>
__global__ void __launch_bounds__(TB_THREADS, 2)
    moe_gemm_tiled_kernel(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                          const uint8_t *w, const uint8_t *sf, int64_t N, int64_t K, int cps,
                          nvf_cuda_moe_plan plan) {
    if (plan.tile_info[blockIdx.y] < 0)
        return;
    __shared__ uint32_t lut[VAR == 2 ? E2M1_LUT_REP_WORDS : 256];
    __shared__ uint32_t slut[VAR >= 1 ? 256 : 1];
    extern __shared__ uint4 dyn[];
    tiled_stage<MT> *st = (tiled_stage<MT> *)dyn;
    if (VAR == 2)
        e2m1_pair_lut_rep(lut);
    else
        e2m1_pair_lut(lut);
    if (VAR >= 1)
        e4m3_bf16x2_lut(slut);
    /* the first chunk's barrier orders the tables before any use */
    for (int64_t ty = blockIdx.y; ty < plan.max_tiles; ty += gridDim.y) {
        int32_t info = plan.tile_info[ty];
        if (info < 0)
            break;
        tiled_tile<MT, VAR>(st, lut, slut, info, ws, ws_split_stride, a, gather, w, sf, N, K, cps,
                            plan);
        __syncthreads(); /* every warp is done with the stages before the next tile fills them */
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

/* The dynamic shared memory of the MT kernel, its limit raised once (per process: the value is
 * the same for every device). */
template <int MT, int VAR> static int tiled_smem(size_t *smem) {
    int rc = 0;
    static int attr_set;
    *smem = TB_STAGES * sizeof(tiled_stage<MT>);
    if (!attr_set) {
        NVF_CUDA_TRY(cudaFuncSetAttribute(moe_gemm_tiled_kernel<MT, VAR>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*smem));
        attr_set = 1;
    }
done:
    return rc;
}

template <int MT, int VAR>
static int launch_tiled(float *ws, int64_t stride, const uint16_t *a, int gather, const uint8_t *w,
                        const uint8_t *sf, int64_t n, int64_t k, int cps,
                        const nvf_cuda_moe_plan *plan, cudaStream_t stream) {
    size_t smem = 0;
    int rc = tiled_smem<MT, VAR>(&smem);
    if (rc)
        return rc;
    {
        int64_t nchunks = (k + 63) / 64;
        dim3 grid((unsigned)((n + TB_N - 1) / TB_N), (unsigned)nvf_cuda_moe_grid_tiles(plan),
                  (unsigned)((nchunks + cps - 1) / cps));
        moe_gemm_tiled_kernel<MT, VAR>
            <<<grid, TB_THREADS, smem, stream>>>(ws, stride, a, gather, w, sf, n, k, cps, *plan);
        NVF_CUDA_TRY(cudaGetLastError());
    }
done:
    return rc;
}

extern "C" int nvf_cuda_moe_gemm_tiled(float *ws, int64_t ws_split_stride, const uint16_t *a,
                                       int gather, const uint8_t *w, const uint8_t *sf, int64_t n,
                                       int64_t k, int chunks_per_split,
                                       const nvf_cuda_moe_plan *plan, int variant,
                                       struct CUstream_st *stream) {
#define NVF_TILED_V(MT, V)                                                                         \
    launch_tiled<MT, V>(ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split, plan, stream)
#define NVF_TILED(MT) (variant >= 1 ? NVF_TILED_V(MT, 1) : NVF_TILED_V(MT, 0))
    if (plan->tile_rows == 64)
        return variant == 2   ? NVF_TILED_V(4, 2)
               : variant == 1 ? NVF_TILED_V(4, 1)
                              : NVF_TILED_V(4, 0);
    return plan->tile_rows == 16 ? NVF_TILED(1) : NVF_TILED(2);
#undef NVF_TILED
#undef NVF_TILED_V
}
