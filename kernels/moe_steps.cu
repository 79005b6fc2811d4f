/*
 * Steps 2, 4 and 6 of the MoE block on the GPU (kernels/moe_gemm.h; kernels/moe.cu runs them):
 * W4A4 input quantization (the gathered FC1 input rows), the FC1 epilogue (split partials summed
 * in split order, alpha, gated activation, BF16, W4A4 quantization of the FC2 input) and the
 * finalize (a token's local slots summed in selection order). Elementwise, deterministic.
 */
#include "moe_steps.h"

#include "moe_act.h"
#include "moe_qdq.h"

#include "cuda_ctx.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* W4A4 FC1 input: x of each permuted row's token quantized with the expert's global scale
 * nvf_qb_group_of_decode(w13_input_scale[e]) (or the row's own, row_gs[p], where the scales are
 * computed), W values a thread (qdq_store). */
template <int W>
__global__ void gather_quant_kernel(uint16_t *xq, const uint16_t *x, const int32_t *perm,
                                    const int32_t *offsets, int64_t n_experts, int64_t top_k,
                                    int64_t hidden, const float *input_scale, const float *row_gs,
                                    nvf_quant_params q) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int32_t rows = off[n_experts];
    int64_t per_row = hidden / W;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * per_row;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(i / per_row);
        int64_t c = i % per_row * W;
        const uint16_t *src = x + (int64_t)(perm[p] / top_k) * hidden + c;
        float v[W];
        if constexpr (W == 4) { /* 8 bytes: hidden % 16 == 0 and x from cudaMalloc */
            uint2 r = *(const uint2 *)src;
            v[0] = nvf_bf16_to_f32((uint16_t)r.x);
            v[1] = nvf_bf16_to_f32((uint16_t)(r.x >> 16));
            v[2] = nvf_bf16_to_f32((uint16_t)r.y);
            v[3] = nvf_bf16_to_f32((uint16_t)(r.y >> 16));
        } else {
            for (int j = 0; j < W; j++)
                v[j] = nvf_bf16_to_f32(src[j]);
        }
        float gs = row_gs ? row_gs[p]
                          : nvf_qb_group_of_decode(input_scale[expert_of(off, n_experts, p)], &q);
        qdq_store<W>(xq + (int64_t)p * hidden + c, v, gs, q);
    }
}

/* ---- computed W4A4 activation scales (nvf_cuda_moe_layer.act_scales) -------------------- */

/* |v|'s f32 bits, 0 for a NaN: amaxes are the integer max of these (exact, in any order), and
 * NaN never wins, as lib/moe's `fabsf(x) > a` does not pick it. */
__device__ __forceinline__ uint32_t amax_bits(float v) {
    uint32_t b = __float_as_uint(v) & 0x7FFFFFFFu;
    return b > 0x7F800000u ? 0u : b;
}

/* The amax of each row of src [rows, cols] BF16 (a warp a row): into row_amax[r] (if given) and,
 * by an integer atomicMax of the bits (the same result in any order), into group_amax[the row's
 * expert] where offsets is given (the rows permuted rows), else group_amax[0]. rows is
 * *rows_dev where given (the permuted rows' count on the device), else rows. */
__global__ void row_amax_kernel(uint32_t *row_amax, uint32_t *group_amax, const uint16_t *src,
                                int64_t rows, const int32_t *rows_dev, int64_t cols,
                                const int32_t *offsets, int64_t n_experts) {
    int64_t n = rows_dev ? (int64_t)*rows_dev : rows;
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < n; r += warps) {
        const uint16_t *row = src + r * cols;
        uint32_t m = 0;
        for (int64_t c = 2 * lane; c < cols; c += 64) { /* cols even: rows of 16-value blocks */
            uint32_t two = *(const uint32_t *)(row + c);
            uint32_t a = amax_bits(nvf_bf16_to_f32((uint16_t)two));
            uint32_t b = amax_bits(nvf_bf16_to_f32((uint16_t)(two >> 16)));
            m = a > m ? a : m;
            m = b > m ? b : m;
        }
        for (int d = 16; d > 0; d /= 2) {
            uint32_t o = __shfl_xor_sync(FULL_MASK, m, d);
            m = o > m ? o : m;
        }
        if (lane == 0) {
            if (row_amax)
                row_amax[r] = m;
            if (group_amax)
                atomicMax(group_amax + (offsets ? expert_of(offsets, n_experts, (int32_t)r) : 0),
                          m);
        }
    }
}

/* Each permuted row's global and decode scales (nvf_qb_group_scale, nvf_qb_group_decode, as
 * lib/moe's prepare_input takes them) from an amax: per_row, amax[perm[p] / top_k] (FC1: the
 * token's x row) or amax[p] (perm NULL: FC2, the row's own); else amax[0] (FC1: all of x) or
 * amax[expert of p] (perm NULL: FC2, the expert's FC1 output). */
__global__ void row_scales_kernel(float *gs, float *dec, const uint32_t *amax, int per_row,
                                  const int32_t *perm, int64_t top_k, const int32_t *offsets,
                                  int64_t n_experts, nvf_quant_params q) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int32_t rows = off[n_experts];
    for (int32_t p = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); p < rows;
         p += (int32_t)(gridDim.x * blockDim.x)) {
        int64_t i =
            per_row ? (perm ? perm[p] / top_k : p) : (perm ? 0 : expert_of(off, n_experts, p));
        float g = nvf_qb_group_scale(__uint_as_float(amax[i]), &q);
        gs[p] = g;
        dec[p] = nvf_qb_group_decode(g, &q);
    }
}

/* The FC1 output h [rows, cols] BF16 quantized in place, each row with its global scale
 * row_gs[p], W values a thread (qdq_store). */
template <int W>
__global__ void quant_rows_kernel(uint16_t *h, const int32_t *offsets, int64_t n_experts,
                                  int64_t cols, const float *row_gs, nvf_quant_params q) {
    int64_t rows = offsets[n_experts], per_row = cols / W;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * per_row;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(i / per_row);
        uint16_t *at = h + (int64_t)p * cols + i % per_row * W;
        float v[W];
#pragma unroll
        for (int j = 0; j < W; j++)
            v[j] = nvf_bf16_to_f32(at[j]);
        qdq_store<W>(at, v, row_gs[p], q);
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
                                    int gated, const float *alpha, const float *row_dec,
                                    nvf_cuda_moe_act act) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int64_t rows = off[n_experts], n1 = gated ? 2 * inter : inter, quads = rows * inter / 4;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < quads;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(i / (inter / 4));
        int64_t c = i % (inter / 4) * 4;
        float v[4], al = alpha[expert_of(off, n_experts, p)];
        if (row_dec) /* computed W4A4 scales: lib/moe's alpha * dec[r] */
            al = al * row_dec[p];
        fc1_act4(v, ws, split_stride, splits, p, c, n1, gated, al, act);
        *(uint2 *)(h + (int64_t)p * inter + c) = make_uint2(
            (uint32_t)nvf_f32_to_bf16_rn(v[0]) | ((uint32_t)nvf_f32_to_bf16_rn(v[1]) << 16),
            (uint32_t)nvf_f32_to_bf16_rn(v[2]) | ((uint32_t)nvf_f32_to_bf16_rn(v[3]) << 16));
    }
}

/* FC1 epilogue, W4A4: the W4A16 epilogue's values quantized with
 * nvf_qb_group_of_decode(fc2_input_scale), W values a thread (qdq_store: a block on one thread, or
 * on a quad of lanes, which do 4 values each as the W4A16 epilogue does). One thread per block
 * replaced, earlier, a quad each of whose lanes quantized the whole block gathered by shuffles (4x
 * the work: on the H200, Qwen3-30B-A3B at 4096 tokens, W4A4 went from 1.37x to 1.22x W4A16's time;
 * bench/results/final-h200-dbf750d/ against final-h200-5e84245/); since stop 29 a quad splits the
 * block's work instead, taken where few blocks are expected (quant_quads). */
template <int W>
__global__ void fc1_epilogue_q_kernel(uint16_t *h, const float *ws, int64_t split_stride,
                                      int splits, const int32_t *offsets, int64_t n_experts,
                                      int64_t inter, int gated, const float *alpha,
                                      nvf_cuda_moe_act act, const float *fc2_input_scale,
                                      nvf_quant_params q) {
    extern __shared__ int32_t off[]; /* offsets_to_shared */
    offsets_to_shared(off, offsets, n_experts);
    int64_t rows = off[n_experts], n1 = gated ? 2 * inter : inter, per_row = inter / W;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * per_row;
         i += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(i / per_row);
        int64_t c = i % per_row * W;
        float al = alpha[expert_of(off, n_experts, p)], v[W];
#pragma unroll
        for (int j = 0; j < W; j += 4)
            fc1_act4(v + j, ws, split_stride, splits, p, c + j, n1, gated, al, act);
        qdq_store<W>(h + (int64_t)p * inter + c, v, nvf_qb_group_of_decode(fc2_input_scale[0], &q),
                     q);
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
                                int64_t top_k, int64_t hidden, int64_t expert0, const float *alpha2,
                                const float *row_dec) {
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
                float a2 = alpha2[ids[tok * top_k + j] - expert0];
                al[at] = row_dec ? a2 * row_dec[r] : a2; /* lib/moe's alpha * dec[r] */
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

/* nvf_cuda_moe_qdq's kernel: block b of `in` through qdq_block (lanes 1) or qdq_quad (4). */
__global__ void qdq_test_kernel(uint16_t *out, const float *in, int64_t n_blocks, float gs,
                                nvf_quant_params q, int lanes) {
    int64_t items = n_blocks * (lanes == 4 ? 4 : 1);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < items;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (lanes == 4)
            qdq_store<4>(out + i * 4, in + i * 4, gs, q);
        else
            qdq_store<NVF_BLOCK>(out + i * NVF_BLOCK, in + i * NVF_BLOCK, gs, q);
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

/* The elementwise kernels' grids: 8 CTAs of 128 threads per SM, or fewer where the rows (at
 * most `slots`) give fewer threads work (their loops stride over the grid; at 1 token the full
 * grid's CTAs without work took longer than the work itself, stop 28). */
#define STEP_CTAS_PER_SM 8

/* Whether W4A4's quantizing steps spread each block over a quad of lanes (qdq_quad) rather
 * than one thread (qdq_block), for `blocks` blocks expected: where the quads' threads make at
 * most two waves of the SMs' resident threads (2048 each). A quad does more work per block (the
 * shuffles, the per-block steps in every lane), which shows once the work fills the GPU. On the
 * H200 (stop 29, bench/results/final-h200-9448aa5/ab-w4a4.txt), quads against one thread: Qwen3
 * 1 token 0.0508 -> 0.0424 ms, GPT-OSS 0.0881 -> 0.0760, DeepSeek-V3 8 tokens 0.124 -> 0.112,
 * still 2-5% faster at 64 tokens on every shape and on DeepSeek-V3 at 256 (115k expected gather
 * blocks), 2% slower on Qwen3 at 256 (262k) and 1.5-12% slower from 1024 tokens.
 * NVFP4_MOE_QUANT_LANES=1 or 4 forces one (the same bytes either way; for tests and timing). */
#define QUAD_THREADS_PER_SM 4096
static int quant_quads(int64_t blocks, int sms) {
    const char *env = getenv("NVFP4_MOE_QUANT_LANES");
    if (env && strcmp(env, "1") == 0)
        return 0;
    if (env && strcmp(env, "4") == 0)
        return 1;
    return blocks * 4 <= (int64_t)sms * QUAD_THREADS_PER_SM;
}

int moe_gather_quant(uint16_t *xq, const uint16_t *x, const int32_t *perm, const int32_t *offsets,
                     int64_t n_experts, int64_t top_k, int64_t hidden, const float *input_scale,
                     const float *row_gs, nvf_quant_params q, int64_t slots, int64_t rows_expect,
                     int sms, cudaStream_t st) {
    int rc = 0;
    int64_t blocks = slots * (hidden / NVF_BLOCK);
    size_t osmem = (size_t)(n_experts + 1) * 4; /* offsets_to_shared */
    if (quant_quads(rows_expect * (hidden / NVF_BLOCK), sms))
        gather_quant_kernel<4><<<grid_for(blocks * 4, sms * STEP_CTAS_PER_SM), 128, osmem, st>>>(
            xq, x, perm, offsets, n_experts, top_k, hidden, input_scale, row_gs, q);
    else
        gather_quant_kernel<NVF_BLOCK>
            <<<grid_for(blocks, sms * STEP_CTAS_PER_SM), 128, osmem, st>>>(
                xq, x, perm, offsets, n_experts, top_k, hidden, input_scale, row_gs, q);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_fc1_epilogue(uint16_t *h, const float *ws, int64_t split_stride, int splits,
                     const int32_t *offsets, int64_t n_experts, int64_t inter, int gated,
                     const float *alpha, const float *row_dec, const nvf_cuda_moe_act *act,
                     const float *fc2_input_scale, nvf_quant_params q, int64_t slots,
                     int64_t rows_expect, int sms, cudaStream_t st) {
    int rc = 0;
    size_t osmem = (size_t)(n_experts + 1) * 4; /* offsets_to_shared */
    int64_t blocks = slots * (inter / NVF_BLOCK);
    if (fc2_input_scale && quant_quads(rows_expect * (inter / NVF_BLOCK), sms))
        fc1_epilogue_q_kernel<4><<<grid_for(blocks * 4, sms * STEP_CTAS_PER_SM), 128, osmem, st>>>(
            h, ws, split_stride, splits, offsets, n_experts, inter, gated, alpha, *act,
            fc2_input_scale, q);
    else if (fc2_input_scale)
        fc1_epilogue_q_kernel<NVF_BLOCK>
            <<<grid_for(blocks, sms * STEP_CTAS_PER_SM), 128, osmem, st>>>(
                h, ws, split_stride, splits, offsets, n_experts, inter, gated, alpha, *act,
                fc2_input_scale, q);
    else
        fc1_epilogue_kernel<<<grid_for(slots * (inter / 4), 2 * sms * STEP_CTAS_PER_SM), 128, osmem,
                              st>>>(h, ws, split_stride, splits, offsets, n_experts, inter, gated,
                                    alpha, row_dec, *act);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_finalize(float *y, const float *ws, int64_t split_stride, int splits, const int32_t *row_of,
                 const int32_t *ids, const float *weights, int64_t t, int64_t top_k, int64_t hidden,
                 int64_t expert0, const float *alpha2, const float *row_dec, int sms,
                 cudaStream_t st) {
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
        finalize_kernel<4><<<fgrid, FIN_THREADS, fsmem, st>>>(y, ws, split_stride, splits, row_of,
                                                              ids, weights, top_k, hidden, expert0,
                                                              alpha2, row_dec);
    else
        finalize_kernel<1><<<fgrid, FIN_THREADS, fsmem, st>>>(y, ws, split_stride, splits, row_of,
                                                              ids, weights, top_k, hidden, expert0,
                                                              alpha2, row_dec);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_act_scales(float *gs, float *dec, uint32_t *amax, const uint16_t *src, int64_t src_rows,
                   int64_t cols, int per_row, const int32_t *perm, int64_t top_k,
                   const int32_t *offsets, int64_t n_experts, nvf_quant_params q, int64_t slots,
                   int sms, cudaStream_t st) {
    int rc = 0;
    /* FC1 (perm given): src is x, src_rows tokens; FC2: the permuted rows of h */
    int fc1 = perm != NULL;
    int64_t rows = fc1 ? src_rows : slots, groups = per_row ? 0 : fc1 ? 1 : n_experts;
    if (groups)
        NVF_CUDA_TRY(cudaMemsetAsync(amax, 0, (size_t)groups * 4, st));
    row_amax_kernel<<<grid_for(rows * 32, sms * STEP_CTAS_PER_SM), 128, 0, st>>>(
        per_row ? amax : NULL, groups ? amax : NULL, src, rows, fc1 ? NULL : offsets + n_experts,
        cols, fc1 ? NULL : offsets, n_experts);
    NVF_CUDA_TRY(cudaGetLastError());
    row_scales_kernel<<<grid_for(slots, sms * STEP_CTAS_PER_SM), 128, (size_t)(n_experts + 1) * 4,
                        st>>>(gs, dec, amax, per_row, perm, top_k, offsets, n_experts, q);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int moe_quant_rows(uint16_t *h, const int32_t *offsets, int64_t n_experts, int64_t cols,
                   const float *row_gs, nvf_quant_params q, int64_t slots, int64_t rows_expect,
                   int sms, cudaStream_t st) {
    int rc = 0;
    int64_t blocks = slots * (cols / NVF_BLOCK);
    if (quant_quads(rows_expect * (cols / NVF_BLOCK), sms))
        quant_rows_kernel<4><<<grid_for(blocks * 4, sms * STEP_CTAS_PER_SM), 128, 0, st>>>(
            h, offsets, n_experts, cols, row_gs, q);
    else
        quant_rows_kernel<NVF_BLOCK><<<grid_for(blocks, sms * STEP_CTAS_PER_SM), 128, 0, st>>>(
            h, offsets, n_experts, cols, row_gs, q);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int nvf_cuda_moe_qdq(uint16_t *out, const float *in, int64_t n_blocks, float gs,
                     const nvf_quant_params *q, int lanes) {
    if (lanes != 1 && lanes != 4)
        return nvf_error_set(NVF_E_INVALID, "nvf_cuda_moe_qdq: lanes %d (1 or 4)", lanes);
    int rc = 0;
    size_t n = (size_t)n_blocks * NVF_BLOCK;
    float *din = NULL;
    uint16_t *dout = NULL;
    NVF_CUDA_TRY(cudaMalloc(&din, n * sizeof *din + 1));
    NVF_CUDA_TRY(cudaMalloc(&dout, n * sizeof *dout + 1));
    NVF_CUDA_TRY(cudaMemcpy(din, in, n * sizeof *din, cudaMemcpyHostToDevice));
    qdq_test_kernel<<<grid_for(n_blocks * lanes, 1024), 128>>>(dout, din, n_blocks, gs, *q, lanes);
    NVF_CUDA_TRY(cudaGetLastError());
    NVF_CUDA_TRY(cudaMemcpy(out, dout, n * sizeof *dout, cudaMemcpyDeviceToHost));
done:
    cudaFree(din);
    cudaFree(dout);
    return rc;
}
