/*
 * The grouped NVFP4 GEMM on Hopper's warpgroup MMA (kernels/moe_gemm.h steps 3 and 5; kernel v7,
 * for 32-, 64- and 128-row tiles; sm_90a only: moe_gemm.cu takes the mma.sync kernels on other
 * GPUs and for 16-row tiles). A CTA of two warpgroups computes one tile of NTOK permuted rows of
 * one expert against 128 weight rows, as the transposed product: wgmma's A operand (M = 64
 * weight rows per warpgroup) is the weights, dequantized straight into A's register fragments,
 * and its B operand (N = NTOK rows of the tile) is the A rows, which the tensor cores read from
 * shared memory. So each weight byte is turned into BF16 once per tile and feeds one k16 slice
 * of one wgmma m64nNTOKk16, where the mma.sync kernels spend an MMA per 8 weight rows and 16
 * tile rows and rebuild A fragments in registers.
 *
 * Per 64-value K chunk, STAGES - 1 chunks ahead, cp.async copies into shared memory the 128
 * weight rows' 32 bytes, their 512-byte 128x4 scale tile and the tile's A rows (16-byte pieces,
 * in wgmma's 128-byte swizzle layout: row n's piece j at n * 128 + 16 (j ^ n % 8)). The K order
 * is the natural one: in step k (one k16 wgmma, block k of the chunk), lane (g, t) of a warp
 * holds weight rows g and g + 8 of its 16, values 16k + 2t, + 1 (byte t of the row's word 2k)
 * and 16k + 8 + 2t, + 1 (byte t of word 2k + 1), each byte turned into a BF16 pair through the
 * E2M1 pair table replicated per lane (moe_mma.h: no bank conflicts; a 32 KB fill per CTA) and
 * multiplied by the block's E4M3 scale, converted by cvt (E4M3 -> F16 -> F32 -> BF16, exact).
 * The products are exact in BF16 (as in moe_gemm.cu), so every weight value meets the same A
 * value as in the dot product; only the f32 summation order inside the MMA differs from the
 * CPU's, as for the mma.sync kernels, and it is fixed, so runs are byte-identical. Each chunk's
 * four wgmmas are waited for before the next chunk (overlap comes from the other warpgroups).
 * K % 64 == 0 only.
 *
 * Kernel v16: a tile's wgmmas are as wide as its rows need, rounded up to 32 (32,
 * 64, 96 or 128), not the tile height. With 128 rows per expert on average (DeepSeek-V3 at 4096
 * tokens) about half the experts have a second 128-row tile holding a few rows, and with 64
 * (2048 tokens) most 128-row tiles are half empty; v7 computed them at full width. Each width is
 * its own wg_tile, not inlined: four inlined widths made the 128-row kernel spill 152 bytes.
 * The same products in the same k16 steps, so the same bytes as v7 in every stored column.
 *
 * Kernel v25 (the default): v16 with a chunk's four wgmmas in one asm statement (wgmma_bf16x4).
 *
 * FC1 with its gated activation fused (moe_gemm_wg_fc1_kernel, NVFP4_MOE_FUSE=1, stop 34): the
 * same tiles, the store replaced by wg_fc1_store; the same bytes as the f32 sums and the FC1
 * epilogue, 2-7% slower on the H200, so not the default (bench/results/moe-fused-h200-0d54723/).
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"
#include "moe_act.h"
#include "moe_gemm_select.h"
#include "moe_mma.h"
#include "wgmma.h"

#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#define WG_N 128 /* weight rows per CTA: 64 per warpgroup */
/* FC1's activation fused into the wgmma kernel by default (NVFP4_MOE_FUSE=0 or 1 chooses) */
#define WG_FUSE_DEFAULT 0
#define WG_THREADS      256

/* One K chunk's bytes in shared memory for tiles of NTOK rows, the stages in flight and the
 * E2M1 pair table replicated per lane after them. */
template <int NTOK> struct wg_cfg {
    static constexpr int B = NTOK * 128; /* A rows, wgmma's B operand (a multiple of 1024) */
    static constexpr int W = WG_N * 32;  /* weight rows */
    static constexpr int S = 512;        /* their 128x4 scale tile */
    static constexpr int STAGES = NTOK == 128 ? 3 : 4;
    static constexpr int LUT = STAGES * (B + W + S);
    static constexpr int SMEM = LUT + E2M1_LUT_REP_WORDS * 4 + 1024; /* + the alignment */
};

/* Two E4M3 scale bytes (byte 0 and byte 1 of `two`) as BF16 pairs, exact: E4M3 -> F16 in
 * hardware (every E4M3 value is an F16), F16 -> F32 -> BF16 (4 significant bits). */
__device__ __forceinline__ void e4m3x2_bf16x2(uint32_t two, uint32_t *s0, uint32_t *s1) {
    asm("{\n\t.reg .b32 p;\n\t.reg .b16 l, h;\n\t.reg .f32 a, b;\n\t"
        "cvt.rn.f16x2.e4m3x2 p, %2;\n\tmov.b32 {l, h}, p;\n\t"
        "cvt.f32.f16 a, l;\n\tcvt.f32.f16 b, h;\n\t"
        "cvt.rn.bf16x2.f32 %0, a, a;\n\tcvt.rn.bf16x2.f32 %1, b, b;\n\t}"
        : "=r"(*s0), "=r"(*s1)
        : "h"((unsigned short)(two & 0xFFFFu)));
}

/* What one thread copies of every chunk: weight row tid / 2's half tid % 2 (the halves of rows
 * with bit 2 set swapped, so that the eight rows a warp reads at once fall in different banks),
 * for tid < 32 one 16-byte piece of the scale tile, and the 16-byte A pieces q = tid + 256 i
 * (row q / 8, piece q % 8) of the tile's rows. */
template <int NTOK> struct wg_src {
    static constexpr int NA = (NTOK * 8 + WG_THREADS - 1) / WG_THREADS;
    const uint8_t *w, *s;
    uint32_t wdst;
    const uint16_t *a[NA];
    uint32_t adst[NA];
    bool aok[NA];
};

/* Shared memory: every stage's A tile first (1024-byte aligned), then the weights, then the
 * scales. */
template <class C, int NV>
__device__ __forceinline__ void wg_issue(uint32_t smem, int st, const wg_src<NV> &src, int64_t c,
                                         int tid) {
#pragma unroll
    for (int i = 0; i < wg_src<NV>::NA; i++)
        if (src.aok[i])
            cp16s(smem + st * C::B + src.adst[i], src.a[i] + c * 64);
    cp16s(smem + C::STAGES * C::B + st * C::W + src.wdst, src.w + c * 32);
    if (tid < 32)
        cp16s(smem + C::STAGES * (C::B + C::W) + st * C::S + tid * 16, src.s + c * 512);
}

/* What a thread of a tile (`info`: expert and first row) needs beside the stages: its copies
 * (wg_src) and where its two weight rows' bytes and scales are in a stage. */
template <int NV> struct wg_lane {
    wg_src<NV> src;
    int row_base, cnt, r0, m0;
    int w0, w1, x0, x1, sc0, sc1;
};

template <int NV>
__device__ __forceinline__ void wg_lane_init(wg_lane<NV> &l, int32_t info, const uint16_t *a,
                                             int gather, const uint8_t *w, const uint8_t *sf,
                                             int64_t N, int64_t K, const nvf_cuda_moe_plan &plan) {
    int e = info >> 20;
    l.r0 = info & 0xFFFFF;
    l.row_base = plan.offsets[e];
    l.cnt = plan.offsets[e + 1] - l.row_base;
    int tid = threadIdx.x, warp = tid >> 5, g = (tid & 31) >> 2;
    int64_t nb = (int64_t)blockIdx.x * WG_N;
    int64_t kcols = K / 16, kt = kcols / 4;
    const uint8_t *we = w + (int64_t)e * N * (K / 2);
    const uint8_t *se = sf + (int64_t)e * nvf_layout_bytes(NVF_LAYOUT_128X4, N, kcols);
    {
        int m = tid >> 1, h = tid & 1;
        int64_t n = nb + m;
        /* rows beyond N read row 0: their products land in rows that are not stored */
        l.src.w = we + (n < N ? n : 0) * (K / 2) + h * 16;
        l.src.wdst = (uint32_t)(m * 32 + ((h ^ (m >> 2)) & 1) * 16);
        l.src.s = se + (nb / 128) * kt * 512 + (tid & 31) * 16;
#pragma unroll
        for (int i = 0; i < wg_src<NV>::NA; i++) {
            int q = tid + WG_THREADS * i, r = q >> 3, j = q & 7;
            /* rows beyond the expert's are not copied: their columns of the product are not
             * stored, whatever the stage held */
            l.src.aok[i] = q < NV * 8 && l.r0 + r < l.cnt;
            int64_t p = l.row_base + (l.src.aok[i] ? l.r0 + r : 0);
            int64_t from = gather ? plan.perm[p] / plan.top_k : p;
            l.src.a[i] = a + from * K + j * 8;
            l.src.adst[i] = (uint32_t)(r * 128 + ((j ^ (r & 7)) * 16));
        }
    }
    /* this lane's weight rows within the CTA's 128, where their bytes and scales are */
    l.m0 = (warp >> 2) * 64 + (warp & 3) * 16 + g;
    int m1 = l.m0 + 8;
    l.w0 = l.m0 * 32, l.w1 = m1 * 32, l.x0 = ((l.m0 >> 2) & 1) * 16, l.x1 = ((m1 >> 2) & 1) * 16;
    l.sc0 = (l.m0 & 31) * 16 + (l.m0 >> 5) * 4, l.sc1 = (m1 & 31) * 16 + (m1 >> 5) * 4;
}

/* A chunk's A fragments of the lane's rows m0 and m1 from a stage's weight bytes `wst` (32 a row:
 * block b = bytes 8b .. 8b + 7) and scales `sst`. Step k (values 16k .. 16k + 15 of the chunk,
 * block k): lane t's fragment holds values 2t, 2t + 1 (byte t of word 2k) and 2t + 8, 2t + 9
 * (byte t of word 2k + 1). */
template <int NV>
__device__ __forceinline__ void wg_frags(uint32_t (*af)[4], const wg_lane<NV> &l,
                                         const uint8_t *wst, const uint8_t *sst,
                                         const uint32_t *lq) {
    uint32_t sel = 0x4440u + (uint32_t)(threadIdx.x & 3); /* byte t of a word */
    uint4 q0[2], q1[2];
    q0[0] = *(const uint4 *)(wst + l.w0 + l.x0);
    q0[1] = *(const uint4 *)(wst + l.w0 + (l.x0 ^ 16));
    q1[0] = *(const uint4 *)(wst + l.w1 + l.x1);
    q1[1] = *(const uint4 *)(wst + l.w1 + (l.x1 ^ 16));
    uint32_t sw0 = *(const uint32_t *)(sst + l.sc0), sw1 = *(const uint32_t *)(sst + l.sc1);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t s0, s1; /* block k's scales of both rows */
        e4m3x2_bf16x2(__byte_perm(sw0, sw1, 0x4400u + (uint32_t)k + ((4u + k) << 4)), &s0, &s1);
        const uint4 &p0 = q0[k >> 1], &p1 = q1[k >> 1];
        uint32_t lo0 = k & 1 ? p0.z : p0.x, hi0 = k & 1 ? p0.w : p0.y;
        uint32_t lo1 = k & 1 ? p1.z : p1.x, hi1 = k & 1 ? p1.w : p1.y;
        af[k][0] = bf16x2_mul(lq[__byte_perm(lo0, 0u, sel) << 5], s0);
        af[k][1] = bf16x2_mul(lq[__byte_perm(lo1, 0u, sel) << 5], s1);
        af[k][2] = bf16x2_mul(lq[__byte_perm(hi0, 0u, sel) << 5], s0);
        af[k][3] = bf16x2_mul(lq[__byte_perm(hi1, 0u, sel) << 5], s1);
    }
}

/* A chunk's four wgmmas (k16 steps) on the stage's A tile at `bs`, committed as one group; X4:
 * in one asm statement (kernel v25).
 * v25's one statement is as kernel v18 had it (stop 32). With four statements in wg_tile_call (v16)
 * ptxas waited for each wgmma before issuing the next: WARPGROUP.DEPBAR after every HGMMA, 24% of
 * the warps' stall samples at 4096 tokens (bench/results/ncu-source-h200-17195c2/). In v25's SASS
 * it still does (C7510): the four HGMMAs take the same four A registers, with a wait after each
 * (22% of the samples, bench/results/moe-h200-e127350/); v25 is faster at 1024-2048 tokens for the
 * code around them. Inlining one tile for every width with the width chosen at run time (kernel
 * v26, stop 34, bench/results/gemm-h200-v26-20dfd91/) kept the waits and took 33% more
 * instructions. */
template <int NV, bool X4>
__device__ __forceinline__ void wg_mma_chunk(float *acc, const uint32_t (*af)[4], uint32_t bs) {
#pragma unroll
    for (int i = 0; i < NV / 2; i++)
        wg_fence_reg(acc[i]);
    uint64_t d[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        d[k] = wg_desc_sw128(bs + 32 * k);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    if constexpr (X4) {
        wgmma_bf16x4<NV>::run(acc, af, d[0], d[1], d[2], d[3]);
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
            wgmma_bf16<NV>::run(acc, af[k], d[k]);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* acc[4j + i]: weight row m0 + 8 (i / 2), tile row 8j + 2t + i % 2 */
template <int NV>
__device__ __forceinline__ void wg_store(float *ws, int64_t ws_split_stride, const float *acc,
                                         const wg_lane<NV> &l, int64_t N) {
    int t = threadIdx.x & 3;
    int64_t nb = (int64_t)blockIdx.x * WG_N;
    float *wz = ws + (int64_t)blockIdx.z * ws_split_stride;
#pragma unroll
    for (int j = 0; j < NV / 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = l.r0 + 8 * j + 2 * t + (i & 1);
            int64_t n = nb + l.m0 + 8 * (i >> 1);
            if (r < l.cnt && n < N)
                wz[(l.row_base + r) * N + n] = acc[4 * j + i];
        }
}

/* FC1 with its activation fused (nvf_cuda_moe_gemm_wg_fc1): h NULL for the plain GEMM. */
struct wg_fuse {
    uint16_t *h;
    const float *alpha;
    nvf_cuda_moe_act act;
    int64_t inter;
};

/* The fused FC1 store of a tile (h instead of ws). Warpgroup 0 holds the up sums of the CTA's 64
 * intermediate columns, warpgroup 1 their gate sums (the w13 interleave); each takes half of
 * the tile's rows: warpgroup 0 rows 0 .. NV/2 - 1, warpgroup 1 the rest, the other half's sums
 * passed through shared memory. Each (gate, up) pair goes through moe_act.h's act_of as the FC1
 * epilogue takes it from one split (0 + the sum, times alpha[e], BF16) into a [rows][64] BF16
 * tile, which the CTA writes out in 16-byte pieces. The stages are free (no copy or wgmma in
 * flight); the caller syncs before they are reused. */
template <int NTOK, int NV>
__device__ __forceinline__ void wg_fc1_store(const float *acc, const wg_lane<NV> &l, int e,
                                             uint8_t *smem_p, const wg_fuse &fz) {
    constexpr int H2 = NV / 2, XS = H2 + 4; /* rows a warpgroup takes; the exchange stride */
    static_assert(2 * 64 * XS * 4 + NTOK * 64 * 2 <= wg_cfg<NTOK>::LUT, "the stages hold it");
    float *xu = (float *)smem_p; /* [64][XS]: up sums of rows H2 .. NV - 1 (warpgroup 0) */
    float *xg = xu + 64 * XS;    /* [64][XS]: gate sums of rows 0 .. H2 - 1 (warpgroup 1) */
    uint16_t *res = (uint16_t *)(xg + 64 * XS); /* [NTOK][64] */
    int tid = threadIdx.x, t = tid & 3, ml = l.m0 & 63, up = tid < 128;
    __syncthreads(); /* every warp is done with the stages */
#pragma unroll
    for (int j = 0; j < NV / 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int col = 8 * j + 2 * t + (i & 1), c = ml + 8 * (i >> 1);
            if (up && j >= H2 / 8)
                xu[c * XS + col - H2] = acc[4 * j + i];
            else if (!up && j < H2 / 8)
                xg[c * XS + col] = acc[4 * j + i];
        }
    __syncthreads();
    float al = fz.alpha[e];
#pragma unroll
    for (int j = 0; j < NV / 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int col = 8 * j + 2 * t + (i & 1), c = ml + 8 * (i >> 1);
            if (up == (j < H2 / 8)) {
                float u = 0.0f + (up ? acc[4 * j + i] : xu[c * XS + col - H2]);
                float g = 0.0f + (up ? xg[c * XS + col] : acc[4 * j + i]);
                res[col * 64 + c] = nvf_f32_to_bf16_rn(
                    nvf_bf16_to_f32(nvf_f32_to_bf16_rn(act_of(fz.act, g * al, u * al))));
            }
        }
    __syncthreads();
    int rows = l.cnt - l.r0 < NV ? l.cnt - l.r0 : NV;
    int64_t c0 = (int64_t)blockIdx.x * (WG_N / 2); /* the CTA's first intermediate column */
    for (int q = tid; q < rows * 8; q += WG_THREADS) {
        int r = q >> 3, p = q & 7;
        *(uint4 *)(fz.h + (int64_t)(l.row_base + l.r0 + r) * fz.inter + c0 + p * 8) =
            *(const uint4 *)(res + r * 64 + p * 8);
    }
}

/* One tile of the plan (`info`): the K range of split blockIdx.z of weight rows nb .. nb + 127,
 * its first NV rows (NV <= NTOK: the rest are beyond the expert's). Ends with no copy and no
 * wgmma in flight; the caller syncs before the stages are reused. */
template <int NTOK, int NV, bool X4 = false>
__device__ __forceinline__ void
wg_tile(uint32_t smem, const uint8_t *smem_p, int32_t info, float *ws, int64_t ws_split_stride,
        const uint16_t *a, int gather, const uint8_t *w, const uint8_t *sf, int64_t N, int64_t K,
        int cps, const nvf_cuda_moe_plan &plan, const wg_fuse *fz = nullptr) {
    using C = wg_cfg<NTOK>;
    int tid = threadIdx.x;
    wg_lane<NV> l;
    wg_lane_init<NV>(l, info, a, gather, w, sf, N, K, plan);
    float acc[NV / 2];
#pragma unroll
    for (int i = 0; i < NV / 2; i++)
        acc[i] = 0.0f;
    /* this lane's column of the E2M1 pair table (moe_mma.h): conflict-free lookups */
    const uint32_t *lq = (const uint32_t *)(smem_p + C::LUT) + (tid & 31);

    int64_t nchunks = K / 64;
    int64_t c0 = (int64_t)blockIdx.z * cps;
    int64_t c1 = c0 + cps < nchunks ? c0 + cps : nchunks;
#pragma unroll
    for (int i = 0; i < C::STAGES - 1; i++) {
        if (c0 + i < c1)
            wg_issue<C, NV>(smem, i, l.src, c0 + i, tid);
        cp_commit();
    }
    /* each chunk's wgmmas are waited for before the next. With them in flight while the next
     * chunk's fragments were computed into a second register set, ptxas serialized them anyway
     * (C7513; bench/results/wg-h200-v7/) unless the first chunk is peeled off and no step of the
     * loop is conditional; kernel v19 did that (221 registers, one CTA per SM) and was 10-20%
     * slower from 2048 tokens (bench/results/gemm-h200-v19-7de2e5e/). Kernel v21, the warpgroups
     * synchronized by mbarriers on the shared A tile only, each copying its own weight rows, was
     * 2-18% slower (gemm-h200-v21-d08412d/); the pair table in 16 copies (4 stages, v22, or 3,
     * v23) within 1% on DeepSeek-V3 (gemm-h200-v22-e455119/). */
    for (int64_t c = c0; c < c1; c++) {
        int it = (int)(c - c0), s = it % C::STAGES;
        cp_wait<C::STAGES - 2>();
        /* the copies (generic proxy) before the tensor cores' reads (async proxy) */
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads(); /* chunk c landed for all; stage (it - 1) % STAGES is free again */
        if (c + C::STAGES - 1 < c1)
            wg_issue<C, NV>(smem, (it + C::STAGES - 1) % C::STAGES, l.src, c + C::STAGES - 1, tid);
        cp_commit();
        uint32_t af[4][4];
        wg_frags<NV>(af, l, smem_p + C::STAGES * C::B + s * C::W,
                     smem_p + C::STAGES * (C::B + C::W) + s * C::S, lq);
        wg_mma_chunk<NV, X4>(acc, af, smem + s * C::B);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < NV / 2; i++)
            wg_fence_reg(acc[i]);
    }
    cp_wait<0>();
    if (fz) /* the fused FC1 kernel's tiles only (a constant in every other) */
        wg_fc1_store<NTOK, NV>(acc, l, info >> 20, (uint8_t *)smem_p, *fz);
    else
        wg_store<NV>(ws, ws_split_stride, acc, l, N);
}

/* wg_tile as a function of its own (kernels v16 and v25): with the four widths inlined the 128-row
 * kernel spilled 152 bytes. ptxas reports C7510 ("wgmma pipeline crossing function boundary") for
 * it: in v16 a WARPGROUP.DEPBAR after every HGMMA. Inlining it (kernel v18 at 3aac854, the four
 * wgmmas in one asm statement, 8 bytes spilled) was slower at 4096 tokens and on GPT-OSS-120B
 * (bench/results/gemm-h200-v18-3aac854/); the one asm statement in this function (v25) was 5-8%
 * faster than v16 at 1024-2048 tokens and the same elsewhere (bench/results/gemm-h200-x4-7154382/).
 */
template <int NTOK, int NV, bool X4>
__device__ __noinline__ void
wg_tile_call(uint32_t smem, const uint8_t *smem_p, int32_t info, float *ws, int64_t ws_split_stride,
             const uint16_t *a, int gather, const uint8_t *w, const uint8_t *sf, int64_t N,
             int64_t K, int cps, const nvf_cuda_moe_plan &plan) {
    wg_tile<NTOK, NV, X4>(smem, smem_p, info, ws, ws_split_stride, a, gather, w, sf, N, K, cps,
                          plan);
}

/* The same with FC1's activation fused into the store (moe_gemm_wg_fc1_kernel). */
template <int NTOK, int NV, bool X4>
__device__ __noinline__ void wg_tile_call_fc1(uint32_t smem, const uint8_t *smem_p, int32_t info,
                                              const uint16_t *a, int gather, const uint8_t *w,
                                              const uint8_t *sf, int64_t N, int64_t K, int cps,
                                              const nvf_cuda_moe_plan &plan, const wg_fuse &fz) {
    wg_tile<NTOK, NV, X4>(smem, smem_p, info, NULL, 0, a, gather, w, sf, N, K, cps, plan, &fz);
}

/* CTA (x, y, z): weight rows 128 x of tiles y, y + gridDim.y, ... up to the first unused one, K
 * range z. KV 7 (kernels v7 to v13): each tile NTOK wide; 16: as wide as its rows need; 25: as 16,
 * a chunk's four wgmmas in one asm statement. FUSE (KV 16 and 25): FC1 with its activation fused
 * into the store (fz), one K range. */
template <int NTOK, int KV, bool FUSE>
__device__ __forceinline__ void
wg_kernel_body(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather, const uint8_t *w,
               const uint8_t *sf, int64_t N, int64_t K, int chunks_per_split,
               const nvf_cuda_moe_plan &plan, const wg_fuse *fz) {
    if (plan.tile_info[blockIdx.y] < 0) /* before anything else: CTAs beyond the used tiles */
        return;
    extern __shared__ __align__(128) uint8_t wg_smem[];
    /* the A tiles 1024-byte aligned (the swizzle pattern repeats every 1024 bytes) */
    uint32_t smem0 = (uint32_t)__cvta_generic_to_shared(wg_smem);
    uint32_t smem = (smem0 + 1023u) & ~1023u;
    uint8_t *smem_p = wg_smem + (smem - smem0);
    e2m1_pair_lut_rep((uint32_t *)(smem_p + wg_cfg<NTOK>::LUT));
    __syncthreads();
    for (int64_t ty = blockIdx.y; ty < plan.max_tiles; ty += gridDim.y) {
        int32_t info = plan.tile_info[ty];
        if (info < 0)
            break;
        if constexpr (KV == 7) {
            wg_tile<NTOK, NTOK>(smem, smem_p, info, ws, ws_split_stride, a, gather, w, sf, N, K,
                                chunks_per_split, plan);
        } else {
            /* the wgmmas as wide as the tile's rows need, rounded up to 32 */
            int e = info >> 20, rows = plan.offsets[e + 1] - plan.offsets[e] - (info & 0xFFFFF);
            int nv = (rows + 31) / 32 * 32;
#define WG_TILE(NV)                                                                                \
    do {                                                                                           \
        if constexpr (FUSE)                                                                        \
            wg_tile_call_fc1<NTOK, NV, KV == 25>(smem, smem_p, info, a, gather, w, sf, N, K,       \
                                                 chunks_per_split, plan, *fz);                     \
        else                                                                                       \
            wg_tile_call<NTOK, NV, KV == 25>(smem, smem_p, info, ws, ws_split_stride, a, gather,   \
                                             w, sf, N, K, chunks_per_split, plan);                 \
    } while (0)
            if (NTOK <= 32 || nv <= 32)
                WG_TILE(32);
            else if (NTOK == 64 || nv <= 64)
                WG_TILE(64);
            else if (nv <= 96)
                WG_TILE(NTOK >= 96 ? 96 : 64);
            else
                WG_TILE(NTOK);
#undef WG_TILE
        }
        __syncthreads(); /* every warp is done with the stages before the next tile's copies */
    }
}

template <int NTOK, int KV>
__global__ void __launch_bounds__(WG_THREADS, NTOK >= 64 ? 2 : 3)
    moe_gemm_wg_kernel(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                       const uint8_t *w, const uint8_t *sf, int64_t N, int64_t K,
                       int chunks_per_split, nvf_cuda_moe_plan plan) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wg_kernel_body<NTOK, KV, false>(ws, ws_split_stride, a, gather, w, sf, N, K, chunks_per_split,
                                    plan, nullptr);
#else
    (void)ws, (void)ws_split_stride, (void)a, (void)gather, (void)w, (void)sf, (void)N, (void)K;
    (void)chunks_per_split, (void)plan;
#endif
}

/* FC1 with its activation fused (nvf_cuda_moe_gemm_wg_fc1): one K range, N = 2 inter, A gathered.
 */
template <int NTOK, int KV>
__global__ void __launch_bounds__(WG_THREADS, NTOK >= 64 ? 2 : 3)
    moe_gemm_wg_fc1_kernel(const uint16_t *a, const uint8_t *w, const uint8_t *sf, int64_t N,
                           int64_t K, nvf_cuda_moe_plan plan, wg_fuse fz) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wg_kernel_body<NTOK, KV, true>(NULL, 0, a, 1, w, sf, N, K, (int)(K / 64), plan, &fz);
#else
    (void)a, (void)w, (void)sf, (void)N, (void)K, (void)plan, (void)fz;
#endif
}

/* ---- launchers --------------------------------------------------------------------------- */

template <int NTOK, int KV>
static int launch_wg(float *ws, int64_t stride, const uint16_t *a, int gather, const uint8_t *w,
                     const uint8_t *sf, int64_t n, int64_t k, int cps,
                     const nvf_cuda_moe_plan *plan, const wg_fuse *fz, cudaStream_t st) {
    constexpr int FKV = KV == 7 ? 16 : KV; /* the fused kernel: v16's or v25's tiles */
    int rc = 0;
    static int smem_set = 0; /* the dynamic shared memory beyond 48 KB, once per kernel */
    if (!smem_set) {
        NVF_CUDA_TRY(cudaFuncSetAttribute(moe_gemm_wg_kernel<NTOK, KV>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          wg_cfg<NTOK>::SMEM));
        NVF_CUDA_TRY(cudaFuncSetAttribute(moe_gemm_wg_fc1_kernel<NTOK, FKV>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          wg_cfg<NTOK>::SMEM));
        smem_set = 1;
    }
    {
        int64_t nchunks = k / 64;
        dim3 grid((unsigned)((n + WG_N - 1) / WG_N), (unsigned)nvf_cuda_moe_grid_tiles(plan),
                  (unsigned)((nchunks + cps - 1) / cps));
        if (fz)
            moe_gemm_wg_fc1_kernel<NTOK, FKV>
                <<<grid, WG_THREADS, wg_cfg<NTOK>::SMEM, st>>>(a, w, sf, n, k, *plan, *fz);
        else
            moe_gemm_wg_kernel<NTOK, KV><<<grid, WG_THREADS, wg_cfg<NTOK>::SMEM, st>>>(
                ws, stride, a, gather, w, sf, n, k, cps, *plan);
        NVF_CUDA_TRY(cudaGetLastError());
    }
done:
    return rc;
}

template <int NTOK>
static int launch_wg(float *ws, int64_t stride, const uint16_t *a, int gather, const uint8_t *w,
                     const uint8_t *sf, int64_t n, int64_t k, int cps,
                     const nvf_cuda_moe_plan *plan, const wg_fuse *fz, cudaStream_t st) {
    int v = moe_gemm_version();
    return v >= 25   ? launch_wg<NTOK, 25>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st)
           : v >= 16 ? launch_wg<NTOK, 16>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st)
                     : launch_wg<NTOK, 7>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st);
}

static int launch_wg_rows(float *ws, int64_t stride, const uint16_t *a, int gather,
                          const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k, int cps,
                          const nvf_cuda_moe_plan *plan, const wg_fuse *fz, cudaStream_t st) {
    switch (plan->tile_rows) {
    case 32:
        return launch_wg<32>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st);
    case 64:
        return launch_wg<64>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st);
    default:
        return launch_wg<128>(ws, stride, a, gather, w, sf, n, k, cps, plan, fz, st);
    }
}

/* Whether the current device runs this file's kernels: they are built for sm_90a only, which
 * runs on compute capability 9.0 and nothing else. Read once. */
extern "C" int nvf_cuda_moe_gemm_wg_ok(void) {
    static int ok = -1;
    if (ok < 0) {
        cudaFuncAttributes attr;
        int dev = 0, major = 0, minor = 0;
        ok =
            cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
            major == 9 && minor == 0 &&
            cudaFuncGetAttributes(&attr, moe_gemm_wg_kernel<32, 7>) == cudaSuccess;
        (void)cudaGetLastError();
    }
    return ok;
}

extern "C" int nvf_cuda_moe_gemm_wg(float *ws, int64_t ws_split_stride, const uint16_t *a,
                                    int gather, const uint8_t *w, const uint8_t *sf, int64_t n,
                                    int64_t k, int chunks_per_split, const nvf_cuda_moe_plan *plan,
                                    struct CUstream_st *stream) {
    return launch_wg_rows(ws, ws_split_stride, a, gather, w, sf, n, k, chunks_per_split, plan, NULL,
                          stream);
}

extern "C" int nvf_cuda_moe_gemm_wg_fc1_ok(int64_t k, int32_t tile_rows) {
    const char *env = getenv("NVFP4_MOE_FUSE");
    int on = env ? strcmp(env, "0") != 0 : WG_FUSE_DEFAULT;
    return on && moe_gemm_use_wg(k, tile_rows);
}

extern "C" int nvf_cuda_moe_gemm_wg_fc1(uint16_t *h, int64_t inter, const float *alpha,
                                        const nvf_cuda_moe_act *act, const uint16_t *a, int gather,
                                        const uint8_t *w, const uint8_t *sf, int64_t k,
                                        const nvf_cuda_moe_plan *plan, struct CUstream_st *stream) {
    if (plan->max_tiles <= 0)
        return 0;
    if (inter % NVF_W13_GROUP || k % 64 || !gather || !moe_gemm_use_wg(k, plan->tile_rows))
        return nvf_error_set(NVF_E_INVALID,
                             "MoE FC1 fused: intermediate %lld, K %lld, %d-row tiles, gather %d "
                             "are not the wgmma kernel's",
                             (long long)inter, (long long)k, (int)plan->tile_rows, gather);
    wg_fuse fz = {h, alpha, *act, inter};
    return launch_wg_rows(NULL, 0, a, gather, w, sf, 2 * inter, k, (int)(k / 64), plan, &fz,
                          stream);
}
