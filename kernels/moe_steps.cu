/*
 * Steps 2, 4 and 6 of the MoE block on the GPU (kernels/moe_gemm.h; kernels/moe.cu runs them):
 * W4A4 input quantization (the gathered FC1 input rows), the FC1 epilogue (split partials summed
 * in split order, alpha, gated activation, BF16, W4A4 quantization of the FC2 input) and the
 * finalize (a token's local slots summed in selection order). Elementwise, deterministic.
 */
#include "moe_steps.h"

#include "cuda_ctx.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdint.h>

#define FULL_MASK 0xFFFFFFFFu

/* ---- kernels ----------------------------------------------------------------------------- */

/* The expert of permuted row p (binary search of the offsets). */
__device__ int expert_of(const int32_t *offsets, int64_t n_experts, int32_t p) {
    int lo = 0, hi = (int)n_experts - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* offsets[0 .. n_experts] copied into shared memory s by the whole block (then a barrier), so
 * that expert_of's binary search reads shared memory: in global memory its loads are a chain (7
 * for 128 experts), and with few rows that chain was most of the epilogues' and the W4A4
 * gather's time (stop 28). s holds n_experts + 1 ints (the launch's dynamic shared memory). */
__device__ __forceinline__ void offsets_to_shared(int32_t *s, const int32_t *offsets,
                                                  int64_t n_experts) {
    for (int64_t i = threadIdx.x; i <= n_experts; i += blockDim.x)
        s[i] = offsets[i];
    __syncthreads();
}

/* CTAs of 128 threads for `items` work items (one a thread), at most `cap`. */
static unsigned grid_for(int64_t items, int cap) {
    int64_t g = (items + 127) / 128;
    return (unsigned)(g < 1 ? 1 : g < cap ? g : cap);
}

/* Store 16 BF16 values at dst (32-byte aligned: a 16-value block of a row of a multiple of 16
 * values in memory from cudaMalloc) as two 16-byte stores. */
__device__ __forceinline__ void store_bf16x16(uint16_t *dst, const uint16_t *v) {
    uint32_t w[NVF_BLOCK / 2];
    for (int i = 0; i < NVF_BLOCK / 2; i++)
        w[i] = (uint32_t)v[2 * i] | ((uint32_t)v[2 * i + 1] << 16);
    uint4 *d = (uint4 *)dst;
    d[0] = make_uint4(w[0], w[1], w[2], w[3]);
    d[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

/* The E2M1 x E4M3 values, as BF16, of 16 values quantized with global scale gs, written at dst
 * (as store_bf16x16). */
__device__ void qdq_block(uint16_t *dst, const float *v, float gs, const nvf_quant_params q) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, q.method, q.error, q.domain);
    uint8_t packed[NVF_BLOCK_BYTES], scale;
    nvf_qb_quantize(packed, &scale, v, &k);
    float s = nvf_e4m3_to_f32(scale);
    uint16_t out[NVF_BLOCK];
    for (int j = 0; j < NVF_BLOCK; j++)
        out[j] = nvf_f32_to_bf16_rn(nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, j)) * s);
    store_bf16x16(dst, out);
}

/* W4A4 FC1 input: one thread per 16-value block of a permuted row: x of its token quantized
 * with the expert's global scale 1 / w13_input_scale[e]. */
__global__ void gather_quant_kernel(uint16_t *xq, const uint16_t *x, const int32_t *perm,
                                    const int32_t *offsets, int64_t n_experts, int64_t top_k,
                                    int64_t hidden, const float *input_scale, nvf_quant_params q) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int32_t rows = off[n_experts];
    int64_t bpr = hidden / NVF_BLOCK;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < rows * bpr;
         b += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(b / bpr);
        int64_t c = (b % bpr) * NVF_BLOCK;
        const uint16_t *src = x + (int64_t)(perm[p] / top_k) * hidden + c;
        float v[NVF_BLOCK];
        for (int j = 0; j < NVF_BLOCK; j++)
            v[j] = nvf_bf16_to_f32(src[j]);
        float gs = 1.0f / input_scale[expert_of(off, n_experts, p)];
        qdq_block(xq + (int64_t)p * hidden + c, v, gs, q);
    }
}

__device__ float sigmoidf_(float v) {
    return 1.0f / (1.0f + expf(-v));
}

/* nvf_moe_act_ref */
__device__ float act_of(const nvf_cuda_moe_act &a, float g, float u) {
    switch (a.act) {
    case 0:
        return g * sigmoidf_(g) * u;
    case 1: {
        float lim = a.swiglu_limit;
        g = g < lim ? g : lim;
        u = u < lim ? (u > -lim ? u : -lim) : lim;
        return g * sigmoidf_(a.swiglu_alpha * g) * (u + a.swiglu_beta);
    }
    case 2: {
        float left = a.situ_beta * tanhf(g / a.situ_beta) * sigmoidf_(g);
        return left * (a.situ_beta_l != 0.0f ? a.situ_beta_l * tanhf(u / a.situ_beta_l) : u);
    }
    default: {
        float r = u > 0.0f ? u : 0.0f;
        return r * r;
    }
    }
}

/* The 4 f32 at src + z * stride summed in split order z = 0 .. splits - 1 (from 0): one 16-byte
 * load per split, src 16-byte aligned. */
__device__ __forceinline__ float4 sum_splits4(const float *src, int64_t stride, int splits) {
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (int z = 0; z < splits; z++) {
        float4 t = *(const float4 *)(src + z * stride);
        s.x = s.x + t.x;
        s.y = s.y + t.y;
        s.z = s.z + t.z;
        s.w = s.w + t.w;
    }
    return s;
}

/* The activation of FC1 outputs c .. c + 3 of permuted row p (ws holds `splits` partials [rows,
 * n1]; the up and gate values of a block are contiguous: the w13 interleave moves groups of 64
 * rows, NVF_W13_GROUP, and c is a multiple of 4; rows are n1 floats, a multiple of 16, so the 4
 * values are 16-byte aligned), rounded to BF16 and back. */
__device__ __forceinline__ void fc1_act4(float *v, const float *ws, int64_t split_stride,
                                         int splits, int32_t p, int64_t c, int64_t n1, int gated,
                                         float al, const nvf_cuda_moe_act &act) {
    const float *row = ws + (int64_t)p * n1;
    float4 u4 = sum_splits4(row + (gated ? nvf_w13_prepared_row(1, c) : c), split_stride, splits);
    float4 g4 = gated ? sum_splits4(row + nvf_w13_prepared_row(0, c), split_stride, splits)
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float u[4] = {u4.x, u4.y, u4.z, u4.w}, g[4] = {g4.x, g4.y, g4.z, g4.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
        v[j] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(act_of(act, g[j] * al, u[j] * al)));
}

/* FC1 epilogue, W4A16: a thread per 4 FC1 outputs of a permuted row, so that a warp reads 8
 * blocks' contiguous 64-byte pieces of ws; h [rows, inter] BF16. */
__global__ void fc1_epilogue_kernel(uint16_t *h, const float *ws, int64_t split_stride, int splits,
                                    const int32_t *offsets, int64_t n_experts, int64_t inter,
                                    int gated, const float *alpha, nvf_cuda_moe_act act) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int64_t rows = off[n_experts], n1 = gated ? 2 * inter : inter, quads = rows * inter / 4;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < quads;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(i / (inter / 4));
        int64_t c = i % (inter / 4) * 4;
        float v[4];
        fc1_act4(v, ws, split_stride, splits, p, c, n1, gated, alpha[expert_of(off, n_experts, p)],
                 act);
        *(uint2 *)(h + (int64_t)p * inter + c) = make_uint2(
            (uint32_t)nvf_f32_to_bf16_rn(v[0]) | ((uint32_t)nvf_f32_to_bf16_rn(v[1]) << 16),
            (uint32_t)nvf_f32_to_bf16_rn(v[2]) | ((uint32_t)nvf_f32_to_bf16_rn(v[3]) << 16));
    }
}

/* FC1 epilogue, W4A4: a thread per 16-value block of a permuted row (its quantization with
 * 1 / fc2_input_scale needs the whole block). Before, a quad of lanes per block each quantized
 * the whole block gathered by shuffles: 4x the work per block. On the H200, Qwen3-30B-A3B at
 * 4096 tokens, W4A4 went from 1.37x to 1.22x W4A16's time (its epilogue took 0.36 ms against
 * W4A16's 0.13); with few blocks there are 4x fewer threads, and DeepSeek-V3 W4A4 at 8-128
 * tokens took 7-12 us more (bench/results/final-h200-dbf750d/ against final-h200-5e84245/, two
 * calls). */
__global__ void fc1_epilogue_q_kernel(uint16_t *h, const float *ws, int64_t split_stride,
                                      int splits, const int32_t *offsets, int64_t n_experts,
                                      int64_t inter, int gated, const float *alpha,
                                      nvf_cuda_moe_act act, const float *fc2_input_scale,
                                      nvf_quant_params q) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int64_t rows = off[n_experts], n1 = gated ? 2 * inter : inter, bpr = inter / NVF_BLOCK;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < rows * bpr;
         b += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(b / bpr);
        int64_t c = b % bpr * NVF_BLOCK;
        float al = alpha[expert_of(off, n_experts, p)], v[NVF_BLOCK];
#pragma unroll
        for (int j = 0; j < NVF_BLOCK; j += 4)
            fc1_act4(v + j, ws, split_stride, splits, p, c + j, n1, gated, al, act);
        qdq_block(h + (int64_t)p * inter + c, v, 1.0f / fc2_input_scale[0], q);
    }
}

/* V floats at p into d (V 4: one 16-byte load, p 16-byte aligned). */
template <int V> __device__ __forceinline__ void load_f32v(float *d, const float *p) {
    if constexpr (V == 4) {
        float4 t = *(const float4 *)p;
        d[0] = t.x;
        d[1] = t.y;
        d[2] = t.z;
        d[3] = t.w;
    } else {
        d[0] = *p;
    }
}

template <int V> __device__ __forceinline__ void store_f32v(float *p, const float *d) {
    if constexpr (V == 4)
        *(float4 *)p = make_float4(d[0], d[1], d[2], d[3]);
    else
        *p = d[0];
}

/* y[t, c] = sum over the token's local slots in selection order of weight * (alpha2_e *
 * FC2[row, c]), FC2 the split partials summed in split order. Block (token, column part): warp
 * 0 compacts the token's local slots (row, weight, alpha2) into shared memory in selection
 * order (non-local slots added nothing before either), then each thread sums groups of V
 * columns (V 4: 16-byte loads and stores), up to FIN_UNROLL groups at once so that their loads
 * are in flight together; the groups of a warp are consecutive. Per element the arithmetic is
 * the same sequence as ever (acc = 0, then acc + w * (v * alpha) per local slot in order, v = 0
 * then v + partial per split in order). */
#define FIN_THREADS 128
#define FIN_UNROLL  4
template <int V>
__global__ void finalize_kernel(float *y, const float *ws, int64_t split_stride, int splits,
                                const int32_t *row_of, const int32_t *ids, const float *weights,
                                int64_t top_k, int64_t hidden, int64_t expert0,
                                const float *alpha2) {
    extern __shared__ float fin[]; /* [top_k] weights, [top_k] alphas, [top_k] rows */
    __shared__ int32_t n_local;
    float *wt = fin, *al = fin + top_k;
    int32_t *rows = (int32_t *)(fin + 2 * top_k);
    int64_t tok = blockIdx.x;
    if (threadIdx.x < 32) {
        int lane = threadIdx.x;
        int32_t n = 0;
        for (int64_t j0 = 0; j0 < top_k; j0 += 32) {
            int64_t j = j0 + lane;
            int32_t r = j < top_k ? row_of[tok * top_k + j] : -1;
            unsigned hit = __ballot_sync(FULL_MASK, r >= 0);
            if (r >= 0) {
                int32_t at = n + __popc(hit & ((1u << lane) - 1u));
                rows[at] = r;
                wt[at] = weights[tok * top_k + j];
                al[at] = alpha2[ids[tok * top_k + j] - expert0];
            }
            n += __popc(hit);
        }
        if (lane == 0)
            n_local = n;
    }
    __syncthreads();
    int32_t nl = n_local;
    int64_t groups = hidden / V, step = (int64_t)gridDim.y * blockDim.x;
    for (int64_t g0 = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; g0 < groups;
         g0 += FIN_UNROLL * step) {
        float acc[FIN_UNROLL][V];
#pragma unroll
        for (int u = 0; u < FIN_UNROLL; u++)
            for (int i = 0; i < V; i++)
                acc[u][i] = 0.0f;
        for (int32_t j = 0; j < nl; j++) {
            const float *src = ws + (int64_t)rows[j] * hidden;
            float v[FIN_UNROLL][V];
#pragma unroll
            for (int u = 0; u < FIN_UNROLL; u++)
                for (int i = 0; i < V; i++)
                    v[u][i] = 0.0f;
#pragma unroll 4
            for (int z = 0; z < splits; z++) {
#pragma unroll
                for (int u = 0; u < FIN_UNROLL; u++) {
                    int64_t g = g0 + u * step;
                    if (g < groups) {
                        float t[V];
                        load_f32v<V>(t, src + z * split_stride + g * V);
                        for (int i = 0; i < V; i++)
                            v[u][i] = v[u][i] + t[i];
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < FIN_UNROLL; u++)
                for (int i = 0; i < V; i++)
                    acc[u][i] = acc[u][i] + wt[j] * (v[u][i] * al[j]);
        }
#pragma unroll
        for (int u = 0; u < FIN_UNROLL; u++)
            if (g0 + u * step < groups)
                store_f32v<V>(y + tok * hidden + (g0 + u * step) * V, acc[u]);
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

/* The elementwise kernels' grids: 8 CTAs of 128 threads per SM, or fewer where the rows (at
 * most `slots`) give fewer threads work (their loops stride over the grid; at 1 token the full
 * grid's CTAs without work took longer than the work itself, stop 28). */
#define STEP_CTAS_PER_SM 8

int moe_gather_quant(uint16_t *xq, const uint16_t *x, const int32_t *perm, const int32_t *offsets,
                     int64_t n_experts, int64_t top_k, int64_t hidden, const float *input_scale,
                     nvf_quant_params q, int64_t slots, int sms, cudaStream_t st) {
    int rc = 0;
    gather_quant_kernel<<<grid_for(slots * (hidden / NVF_BLOCK), sms * STEP_CTAS_PER_SM), 128,
                          (size_t)(n_experts + 1) * 4, st>>>(xq, x, perm, offsets, n_experts, top_k,
                                                             hidden, input_scale, q);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_fc1_epilogue(uint16_t *h, const float *ws, int64_t split_stride, int splits,
                     const int32_t *offsets, int64_t n_experts, int64_t inter, int gated,
                     const float *alpha, const nvf_cuda_moe_act *act, const float *fc2_input_scale,
                     nvf_quant_params q, int64_t slots, int sms, cudaStream_t st) {
    int rc = 0;
    size_t osmem = (size_t)(n_experts + 1) * 4; /* offsets_to_shared */
    if (fc2_input_scale)
        fc1_epilogue_q_kernel<<<grid_for(slots * (inter / NVF_BLOCK), sms * STEP_CTAS_PER_SM), 128,
                                osmem, st>>>(h, ws, split_stride, splits, offsets, n_experts, inter,
                                             gated, alpha, *act, fc2_input_scale, q);
    else
        fc1_epilogue_kernel<<<grid_for(slots * (inter / 4), 2 * sms * STEP_CTAS_PER_SM), 128, osmem,
                              st>>>(h, ws, split_stride, splits, offsets, n_experts, inter, gated,
                                    alpha, *act);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_finalize(float *y, const float *ws, int64_t split_stride, int splits, const int32_t *row_of,
                 const int32_t *ids, const float *weights, int64_t t, int64_t top_k, int64_t hidden,
                 int64_t expert0, const float *alpha2, int sms, cudaStream_t st) {
    int rc = 0;
    /* 16-byte columns where y allows (hidden % 16 == 0 by nvf_cuda_moe_create; ws is the
     * run's); FIN_UNROLL column groups per thread unless that leaves fewer than 4 CTAs per SM */
    int vec = hidden % 4 == 0 && (uintptr_t)y % 16 == 0 ? 4 : 1;
    int64_t groups = hidden / vec, part = FIN_THREADS * FIN_UNROLL;
    int64_t parts = (groups + part - 1) / part;
    if (t * parts < 4 * (int64_t)sms)
        parts = (groups + FIN_THREADS - 1) / FIN_THREADS;
    parts = parts < 65535 ? parts : 65535;
    dim3 fgrid((unsigned)t, (unsigned)parts);
    size_t fsmem = (size_t)(3 * top_k) * 4;
    if (vec == 4)
        finalize_kernel<4><<<fgrid, FIN_THREADS, fsmem, st>>>(
            y, ws, split_stride, splits, row_of, ids, weights, top_k, hidden, expert0, alpha2);
    else
        finalize_kernel<1><<<fgrid, FIN_THREADS, fsmem, st>>>(
            y, ws, split_stride, splits, row_of, ids, weights, top_k, hidden, expert0, alpha2);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}
