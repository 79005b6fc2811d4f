/*
 * The MoE block on the GPU around the grouped GEMM (kernels/moe_gemm.h steps 1, 2, 4 and 6, and
 * the orchestration of a run): permutation, W4A4 input quantization, the FC1 epilogue (alpha,
 * gated activation, BF16, W4A4 quantization of the FC2 input) and the finalize. Routing is
 * kernels/moe_route.cu.
 * Everything is deterministic: the permutation is an ordered compaction (no atomics), split-K
 * partials are summed in split order and the finalize sums a token's slots in selection order.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"

#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <inttypes.h>
#include <stdlib.h>

#define PERM_THREADS 1024
#define PLAN_THREADS 256

/* ---- kernels ----------------------------------------------------------------------------- */

/* Block e: the slots of local expert e in slot order. With `perm` NULL only the count (into
 * counts[e]); else perm[offsets[e] + j] = the j-th slot, and row_of[slot] = its permuted row. */
__global__ void perm_kernel(int32_t *counts, int32_t *perm, int32_t *row_of, const int32_t *offsets,
                            const int32_t *ids, int64_t n_slots, int64_t expert0) {
    __shared__ int32_t warp_sums[PERM_THREADS / 32];
    int e = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int32_t base = perm ? offsets[e] : 0;
    for (int64_t s0 = 0; s0 < n_slots; s0 += PERM_THREADS) {
        int64_t s = s0 + threadIdx.x;
        bool hit = s < n_slots && (int64_t)ids[s] - expert0 == e;
        unsigned ballot = __ballot_sync(0xFFFFFFFFu, hit);
        if (lane == 0)
            warp_sums[warp] = __popc(ballot);
        __syncthreads();
        int32_t before = 0, total = 0;
        for (int i = 0; i < PERM_THREADS / 32; i++) {
            before += i < warp ? warp_sums[i] : 0;
            total += warp_sums[i];
        }
        if (hit && perm) {
            int32_t r = base + before + __popc(ballot & ((1u << lane) - 1u));
            perm[r] = (int32_t)s;
            row_of[s] = r;
        }
        base += total;
        __syncthreads();
    }
    if (!perm && threadIdx.x == 0)
        counts[e] = base;
}

/* Thread 0: offsets (exclusive scan of counts) and the tile map; then every thread marks the
 * unused tail of the map. */
__global__ void plan_kernel(int32_t *offsets, int32_t *tile_info, const int32_t *counts,
                            int64_t n_experts, int32_t tile_rows, int32_t max_tiles) {
    __shared__ int32_t used;
    if (threadIdx.x == 0) {
        int32_t off = 0, tile = 0;
        for (int64_t e = 0; e < n_experts; e++) {
            offsets[e] = off;
            for (int32_t r = 0; r < counts[e] && tile < max_tiles; r += tile_rows)
                tile_info[tile++] = (int32_t)(e << 20) | r;
            off += counts[e];
        }
        offsets[n_experts] = off;
        used = tile;
    }
    __syncthreads();
    for (int32_t i = used + (int32_t)threadIdx.x; i < max_tiles; i += blockDim.x)
        tile_info[i] = -1;
}

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

/* Quantize 16 values with global scale gs and write their E2M1 x E4M3 values as BF16. */
__device__ void qdq_block(uint16_t *out, const float *v, float gs, const nvf_quant_params q) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, q.method, q.error, q.domain);
    uint8_t packed[NVF_BLOCK_BYTES], scale;
    nvf_qb_quantize(packed, &scale, v, &k);
    float s = nvf_e4m3_to_f32(scale);
    for (int j = 0; j < NVF_BLOCK; j++)
        out[j] = nvf_f32_to_bf16_rn(nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, j)) * s);
}

/* W4A4 FC1 input: one thread per 16-value block of a permuted row: x of its token quantized
 * with the expert's global scale 1 / w13_input_scale[e]. */
__global__ void gather_quant_kernel(uint16_t *xq, const uint16_t *x, const int32_t *perm,
                                    const int32_t *offsets, int64_t n_experts, int64_t top_k,
                                    int64_t hidden, const float *input_scale, nvf_quant_params q) {
    int32_t rows = offsets[n_experts];
    int64_t bpr = hidden / NVF_BLOCK;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < rows * bpr;
         b += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(b / bpr);
        int64_t c = (b % bpr) * NVF_BLOCK;
        const uint16_t *src = x + (int64_t)(perm[p] / top_k) * hidden + c;
        float v[NVF_BLOCK];
        for (int j = 0; j < NVF_BLOCK; j++)
            v[j] = nvf_bf16_to_f32(src[j]);
        float gs = 1.0f / input_scale[expert_of(offsets, n_experts, p)];
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

/* FC1 epilogue: one thread per 16 FC1 outputs of a permuted row. ws holds `splits` partials
 * [rows, n1]; h [rows, inter] BF16. */
__global__ void fc1_epilogue_kernel(uint16_t *h, const float *ws, int64_t split_stride, int splits,
                                    const int32_t *offsets, int64_t n_experts, int64_t inter,
                                    int gated, const float *alpha, nvf_cuda_moe_act act,
                                    const float *fc2_input_scale, nvf_quant_params q) {
    int32_t rows = offsets[n_experts];
    int64_t bpr = inter / NVF_BLOCK, n1 = gated ? 2 * inter : inter;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < rows * bpr;
         b += (int64_t)gridDim.x * blockDim.x) {
        int32_t p = (int32_t)(b / bpr);
        int64_t c = (b % bpr) * NVF_BLOCK;
        float al = alpha[expert_of(offsets, n_experts, p)];
        const float *row = ws + (int64_t)p * n1;
        float v[NVF_BLOCK];
        for (int j = 0; j < NVF_BLOCK; j++) {
            int64_t ju = gated ? nvf_w13_prepared_row(1, c + j) : c + j;
            float u = 0.0f, g = 0.0f;
            for (int z = 0; z < splits; z++)
                u = u + row[z * split_stride + ju];
            if (gated) {
                int64_t jg = nvf_w13_prepared_row(0, c + j);
                for (int z = 0; z < splits; z++)
                    g = g + row[z * split_stride + jg];
            }
            v[j] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(act_of(act, g * al, u * al)));
        }
        uint16_t *out = h + (int64_t)p * inter + c;
        if (fc2_input_scale)
            qdq_block(out, v, 1.0f / fc2_input_scale[0], q);
        else
            for (int j = 0; j < NVF_BLOCK; j++)
                out[j] = nvf_f32_to_bf16_rn(v[j]);
    }
}

/* y[t, c] = sum over the token's slots in order of weight * (alpha2_e * FC2[row, c]). Block
 * (token, column range): the token's slots (row, weight, alpha2) are read once into shared
 * memory, then each thread sums FIN_COLS / FIN_THREADS columns; the arithmetic per element is
 * the same sequence as ever (splits in order, slots in order). */
#define FIN_THREADS 256
#define FIN_COLS    1024
__global__ void finalize_kernel(float *y, const float *ws, int64_t split_stride, int splits,
                                const int32_t *row_of, const int32_t *ids, const float *weights,
                                int64_t top_k, int64_t hidden, int64_t expert0,
                                const float *alpha2) {
    extern __shared__ float fin[]; /* [top_k] weights, [top_k] alphas, [top_k] rows */
    float *wt = fin, *al = fin + top_k;
    int32_t *rows = (int32_t *)(fin + 2 * top_k);
    int64_t tok = blockIdx.x;
    for (int64_t j = threadIdx.x; j < top_k; j += blockDim.x) {
        int32_t r = row_of[tok * top_k + j];
        rows[j] = r;
        wt[j] = weights[tok * top_k + j];
        al[j] = r >= 0 ? alpha2[ids[tok * top_k + j] - expert0] : 0.0f;
    }
    __syncthreads();
    int64_t c1 = ((int64_t)blockIdx.y + 1) * FIN_COLS < hidden
                     ? ((int64_t)blockIdx.y + 1) * FIN_COLS
                     : hidden;
    for (int64_t c = (int64_t)blockIdx.y * FIN_COLS + threadIdx.x; c < c1; c += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < top_k; j++) {
            int32_t r = rows[j];
            if (r < 0)
                continue;
            float v = 0.0f;
            for (int z = 0; z < splits; z++)
                v = v + ws[z * split_stride + (int64_t)r * hidden + c];
            acc = acc + wt[j] * (v * al[j]);
        }
        y[tok * hidden + c] = acc;
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

struct nvf_cuda_moe {
    nvf_cuda_moe_layer L;
    int64_t max_tokens, top_k, max_tiles16;
    int sms;
    int32_t *counts, *offsets, *tile_info, *perm, *row_of;
    uint16_t *xq, *h;
    float *ws;
    int64_t ws_floats;
};

#define MAX_SPLITS  16
#define SPLIT_SLOTS 1024

extern "C" void nvf_cuda_moe_free(nvf_cuda_moe *m) {
    if (!m)
        return;
    nvf_cuda_free(m->counts);
    nvf_cuda_free(m->offsets);
    nvf_cuda_free(m->tile_info);
    nvf_cuda_free(m->perm);
    nvf_cuda_free(m->row_of);
    nvf_cuda_free(m->xq);
    nvf_cuda_free(m->h);
    nvf_cuda_free(m->ws);
    free(m);
}

extern "C" int nvf_cuda_moe_create(nvf_cuda_moe **out, const nvf_cuda_moe_layer *layer,
                                   int64_t max_tokens, int64_t top_k) {
    *out = NULL;
    int64_t H = layer->hidden, I = layer->inter, E = layer->n_experts;
    if (H <= 0 || I <= 0 || E <= 0 || E >= 2048 || H % 16 || I % 16 ||
        (layer->gated && I % NVF_W13_GROUP) || top_k <= 0 || max_tokens <= 0 ||
        max_tokens * top_k >= (1 << 20))
        return nvf_error_set(NVF_E_INVALID,
                             "MoE kernels: hidden %" PRId64 ", intermediate %" PRId64 ", %" PRId64
                             " experts, top-%" PRId64 ", %" PRId64
                             " tokens is not a shape they take (H and I multiples of 16, I of "
                             "64 when gated, fewer than 2048 experts and 2^20 slots)",
                             H, I, E, top_k, max_tokens);
    nvf_cuda_moe *m = (nvf_cuda_moe *)calloc(1, sizeof *m);
    if (!m)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the MoE state");
    m->L = *layer;
    m->max_tokens = max_tokens;
    m->top_k = top_k;
    int64_t slots = max_tokens * top_k, n1 = layer->gated ? 2 * I : I;
    m->max_tiles16 = (slots + 15) / 16 + E;
    int64_t wide = n1 > H ? n1 : H;
    /* split-K runs only below SPLIT_SLOTS slots (splits_for), so the workspace holds
     * max(slots, MAX_SPLITS * min(slots, SPLIT_SLOTS)) rows */
    int64_t split_rows = MAX_SPLITS * (slots < SPLIT_SLOTS ? slots : SPLIT_SLOTS);
    m->ws_floats = (slots > split_rows ? slots : split_rows) * wide;
    int rc = 0, dev = 0;
    NVF_CUDA_TRY(cudaGetDevice(&dev));
    NVF_CUDA_TRY(cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, dev));
    if ((rc = nvf_cuda_alloc((void **)&m->counts, (size_t)E * 4, "MoE counts")) ||
        (rc = nvf_cuda_alloc((void **)&m->offsets, (size_t)(E + 1) * 4, "MoE offsets")) ||
        (rc = nvf_cuda_alloc((void **)&m->tile_info, (size_t)m->max_tiles16 * 4, "MoE tiles")) ||
        (rc = nvf_cuda_alloc((void **)&m->perm, (size_t)slots * 4, "MoE permutation")) ||
        (rc = nvf_cuda_alloc((void **)&m->row_of, (size_t)slots * 4, "MoE rows")) ||
        (rc = nvf_cuda_alloc((void **)&m->h, (size_t)(slots * I) * 2, "MoE FC1 output")) ||
        (rc = nvf_cuda_alloc((void **)&m->ws, (size_t)m->ws_floats * 4, "MoE workspace")))
        goto done;
    if (layer->w13_input_scale &&
        (rc = nvf_cuda_alloc((void **)&m->xq, (size_t)(slots * H) * 2, "MoE FC1 input")))
        goto done;
done:
    if (rc != 0)
        nvf_cuda_moe_free(m);
    else
        *out = m;
    return rc;
}

/* Rows per expert (on average) from which tiles of `rows` rows are used: 64-row tiles from 32
 * (bench moe at e6cdf1b: at 32 rows 64-row tiles beat 16-row ones by 1.16x on DeepSeek-V3, at 16
 * rows they lose), 32-row tiles from 8; NVFP4_MOE_TILE64_ROWS and NVFP4_MOE_TILE32_ROWS change
 * them (for `bench moe` sweeps). Read once. */
static int64_t tile_rows_from(int32_t rows) {
    static int64_t v64 = -1, v32 = -1;
    if (v64 < 0) {
        const char *e64 = getenv("NVFP4_MOE_TILE64_ROWS"), *e32 = getenv("NVFP4_MOE_TILE32_ROWS");
        long long x64 = e64 ? atoll(e64) : 0, x32 = e32 ? atoll(e32) : 0;
        v32 = x32 > 0 ? (int64_t)x32 : 8;
        v64 = x64 > 0 ? (int64_t)x64 : 32;
    }
    return rows == 64 ? v64 : v32;
}

/* K splits for a GEMM of n weight rows and k values: enough CTAs for about four per SM when
 * few tiles are expected; a function of the token count only, so runs are repeatable. The
 * K chunks (64 values) are dealt in ranges of *cps; the return value is the number of ranges,
 * which is what the GEMM launches and the epilogue sums. */
static int splits_for(int *cps, const nvf_cuda_moe *m, int64_t slots, int64_t tiles_est, int64_t n,
                      int64_t k, int32_t tile_rows) {
    int step = nvf_cuda_moe_gemm_step(k, tile_rows), bn = nvf_cuda_moe_gemm_cta_rows(k, tile_rows);
    int64_t nchunks = (k + 63) / 64, s = 1;
    if (slots <= SPLIT_SLOTS) {
        int64_t ctas = tiles_est * ((n + bn - 1) / bn), want = 4 * (int64_t)m->sms;
        int64_t cap = nchunks / 4 > 0 ? nchunks / 4 : 1;
        s = ctas >= want ? 1 : (want + ctas - 1) / ctas;
        s = s > cap ? cap : s;
        s = s > MAX_SPLITS ? MAX_SPLITS : s;
    }
    *cps = (int)((nchunks + s - 1) / s);
    *cps = (*cps + step - 1) / step * step; /* ranges start on the GEMM's K step */
    return (int)((nchunks + *cps - 1) / *cps);
}

extern "C" int nvf_cuda_moe_run(nvf_cuda_moe *m, float *y, const uint16_t *x, int64_t t,
                                const int32_t *ids, const float *weights, int64_t expert0,
                                const nvf_cuda_moe_act *act, const nvf_quant_params *q,
                                struct CUstream_st *stream) {
    int rc = 0;
    const nvf_cuda_moe_layer *L = &m->L;
    int64_t E = L->n_experts, H = L->hidden, I = L->inter, k = m->top_k, slots = t * k;
    int64_t n1 = L->gated ? 2 * I : I;
    nvf_quant_params qp = q ? *q : nvf_quant_params{};
    if (t <= 0 || t > m->max_tokens)
        return nvf_error_set(NVF_E_INVALID,
                             "MoE run of %" PRId64 " tokens: the state takes 1..%" PRId64, t,
                             m->max_tokens);
    {
        /* 16-row tiles while experts get few rows each (the weight stream bounds the time);
         * 32-row tiles from tile_rows_from(32) rows per expert, so that an expert's rows fit
         * one tile and its weights are read once (with 16-row tiles at 16 rows on average,
         * about half the experts need a second tile: ncu at 00142a7, DeepSeek-V3 512 tokens);
         * 64-row tiles beyond. 32 and 64 only where the shared-memory kernel runs. */
        int64_t et = L->n_experts_total > E ? L->n_experts_total : E;
        int64_t local = slots * E / et > 0 ? slots * E / et : 1; /* expected local rows */
        int32_t tile_rows = 16;
        for (int32_t rows = 64; rows >= 32 && tile_rows == 16; rows /= 2)
            if (local / E >= tile_rows_from(rows) && nvf_cuda_moe_gemm_cta_rows(H, rows) == 256 &&
                nvf_cuda_moe_gemm_cta_rows(I, rows) == 256)
                tile_rows = rows;
        int32_t max_tiles = (int32_t)((slots + tile_rows - 1) / tile_rows + E);
        /* tiles: one per row while rows are fewer than experts, else at least one per expert */
        int64_t tiles_est = local < E ? local : (local + tile_rows - 1) / tile_rows;
        if (local >= E && tiles_est < E)
            tiles_est = E;
        int cps1, cps2;
        int s1 = splits_for(&cps1, m, slots, tiles_est, n1, H, tile_rows);
        int s2 = splits_for(&cps2, m, slots, tiles_est, H, I, tile_rows);
        int64_t stride1 = slots * n1, stride2 = slots * H;
        nvf_cuda_moe_plan plan = {m->offsets, m->tile_info, m->perm,
                                  max_tiles,  tile_rows,    (int32_t)k};
        int grid = m->sms * 8;
        const uint16_t *a1 = L->w13_input_scale ? m->xq : x;

        NVF_CUDA_TRY(cudaMemsetAsync(m->row_of, 0xFF, (size_t)slots * 4, stream));
        perm_kernel<<<(unsigned)E, PERM_THREADS, 0, stream>>>(m->counts, NULL, NULL, NULL, ids,
                                                              slots, expert0);
        plan_kernel<<<1, PLAN_THREADS, 0, stream>>>(m->offsets, m->tile_info, m->counts, E,
                                                    tile_rows, max_tiles);
        perm_kernel<<<(unsigned)E, PERM_THREADS, 0, stream>>>(m->counts, m->perm, m->row_of,
                                                              m->offsets, ids, slots, expert0);
        NVF_CUDA_TRY(cudaGetLastError());
        if (L->w13_input_scale) {
            gather_quant_kernel<<<grid, 128, 0, stream>>>(m->xq, x, m->perm, m->offsets, E, k, H,
                                                          L->w13_input_scale, qp);
            NVF_CUDA_TRY(cudaGetLastError());
        }
        rc = nvf_cuda_moe_gemm(m->ws, stride1, a1, L->w13_input_scale ? 0 : 1, L->w13, L->w13_sf,
                               n1, H, cps1, &plan, stream);
        if (rc)
            goto done;
        fc1_epilogue_kernel<<<grid, 128, 0, stream>>>(m->h, m->ws, stride1, s1, m->offsets, E, I,
                                                      L->gated, L->w13_alpha, *act,
                                                      L->fc2_input_scale, qp);
        NVF_CUDA_TRY(cudaGetLastError());
        rc = nvf_cuda_moe_gemm(m->ws, stride2, m->h, 0, L->w2, L->w2_sf, H, I, cps2, &plan, stream);
        if (rc)
            goto done;
        finalize_kernel<<<dim3((unsigned)t, (unsigned)((H + FIN_COLS - 1) / FIN_COLS)), FIN_THREADS,
                          (size_t)(3 * k) * 4, stream>>>(y, m->ws, stride2, s2, m->row_of, ids,
                                                         weights, k, H, expert0, L->w2_alpha);
        NVF_CUDA_TRY(cudaGetLastError());
    }
done:
    return rc;
}
