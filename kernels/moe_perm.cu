/*
 * The permutation of a MoE run (kernels/moe_gemm.h step 1): an ordered compaction of the slots
 * per local expert, without atomics on anything that decides an order, in three launches:
 *   1. count: one warp per unit of PERM_CHUNK consecutive slots counts the slots of each
 *      expert in its unit into scratch[e][unit];
 *   2. plan: one block scans scratch per expert over the units (where the unit's slots of e
 *      start within e), the expert totals into offsets and the tiles per expert into the tile
 *      map;
 *   3. place: the warp of each unit walks its slots again in slot order, 32 at a time: a slot's
 *      row is offsets[e] + the unit's start within e + the slots of e before it in the unit
 *      (the lanes of the same expert found by __match_any_sync, ranked by lane).
 * So the slots of an expert keep their slot order, whatever order the warps run in, and every
 * slot not routed to a local expert gets row_of -1. Up to PERM_FUSED_UNITS units (and
 * PERM_FUSED_CELLS counters) the three are one launch of one block, the counters in shared
 * memory and a barrier between the steps (the same steps: the same rows). On the H200,
 * DeepSeek-V3 EP8 at 1 token: the step timed alone 10 -> 6 us, the MoE block's CUDA graph
 * 31.6 -> 29.8 us; within 1 us either way up to 1024 tokens (bench/results/final-h200-1b8b494/).
 */
#include "moe_perm.h"

#include "cuda_ctx.h"

#include "nvfp4/status.h"

#define PERM_CHUNK       256 /* slots per unit (one warp) */
#define PERM_STEPS       (PERM_CHUNK / 32)
#define PLAN_THREADS     1024
#define PLAN_MAX_E       2048 /* nvf_cuda_moe_create takes fewer experts */
#define FULL_MASK        0xFFFFFFFFu
#define PERM_FUSED_UNITS (PLAN_THREADS / 32) /* a warp per unit */
#define PERM_FUSED_CELLS 4096                /* n_experts x units counters: 16 KB */

/* ---- kernels ----------------------------------------------------------------------------- */

/* The local expert of each of the lane's PERM_STEPS slots of unit `u` (-1: not local or past
 * the end); loaded before any use so that the loads are in flight together. */
__device__ __forceinline__ void unit_keys(int32_t *key, const int32_t *ids, int64_t n_slots,
                                          int64_t expert0, int64_t n_experts, int64_t u, int lane) {
#pragma unroll
    for (int i = 0; i < PERM_STEPS; i++) {
        int64_t s = u * PERM_CHUNK + i * 32 + lane;
        int64_t d = s < n_slots ? (int64_t)ids[s] - expert0 : -1;
        key[i] = d >= 0 && d < n_experts ? (int32_t)d : -1;
    }
}

/* Step 1 for unit u, by one warp: run[e * stride] = the slots of expert e in unit u (run in
 * shared memory). */
__device__ __forceinline__ void unit_count(int32_t *run, int64_t stride, const int32_t *ids,
                                           int64_t n_slots, int64_t expert0, int64_t n_experts,
                                           int64_t u, int lane) {
    int32_t key[PERM_STEPS];
    unit_keys(key, ids, n_slots, expert0, n_experts, u, lane);
    for (int64_t e = lane; e < n_experts; e += 32)
        run[e * stride] = 0;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < PERM_STEPS; i++) {
        unsigned peers = __match_any_sync(FULL_MASK, key[i]);
        /* one lane per expert present adds its lanes: no two lanes write one counter */
        if (key[i] >= 0 && lane == __ffs(peers) - 1)
            run[key[i] * stride] += __popc(peers);
        __syncwarp();
    }
}

/* Block (one warp) u: counts[e * n_units + u] = the slots of expert e in unit u. */
__global__ void perm_count_kernel(int32_t *counts, const int32_t *ids, int64_t n_slots,
                                  int64_t expert0, int64_t n_experts, int64_t n_units) {
    extern __shared__ int32_t run[]; /* [n_experts] */
    int lane = threadIdx.x;
    int64_t u = blockIdx.x;
    unit_count(run, 1, ids, n_slots, expert0, n_experts, u, lane);
    for (int64_t e = lane; e < n_experts; e += 32)
        counts[e * n_units + u] = run[e];
}

__device__ __forceinline__ int32_t warp_inclusive_scan(int32_t v, int lane) {
    for (int d = 1; d < 32; d <<= 1) {
        int32_t n = __shfl_up_sync(FULL_MASK, v, d);
        v += lane >= d ? n : 0;
    }
    return v;
}

/* Step 2, by the whole block: counts[e][u] becomes the slots of e in units before u (a warp per
 * expert); offsets = the exclusive scan of the expert totals, the tile map the tiles of each
 * expert in expert order (ceil(total / tile_rows) each), the rest of the map -1. total and
 * tile0: [n_experts] in shared memory. */
__device__ __forceinline__ void plan_body(int32_t *offsets, int32_t *tile_info, int32_t *counts,
                                          int64_t n_experts, int64_t n_units, int32_t tile_rows,
                                          int32_t max_tiles, int32_t *total, int32_t *tile0,
                                          int32_t *used_at) {
    int32_t &used = *used_at;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int64_t e = warp; e < n_experts; e += warps) {
        int32_t carry = 0;
        for (int64_t u0 = 0; u0 < n_units; u0 += 32) {
            int64_t u = u0 + lane;
            int32_t v = u < n_units ? counts[e * n_units + u] : 0;
            int32_t incl = warp_inclusive_scan(v, lane);
            if (u < n_units)
                counts[e * n_units + u] = carry + incl - v;
            carry += __shfl_sync(FULL_MASK, incl, 31);
        }
        if (lane == 0)
            total[e] = carry;
    }
    __syncthreads();
    if (warp == 0) {
        int32_t off = 0, tiles = 0;
        for (int64_t e0 = 0; e0 < n_experts; e0 += 32) {
            int64_t e = e0 + lane;
            int32_t c = e < n_experts ? total[e] : 0, nt = (c + tile_rows - 1) / tile_rows;
            int32_t ic = warp_inclusive_scan(c, lane), it = warp_inclusive_scan(nt, lane);
            if (e < n_experts) {
                offsets[e] = off + ic - c;
                tile0[e] = tiles + it - nt;
            }
            off += __shfl_sync(FULL_MASK, ic, 31);
            tiles += __shfl_sync(FULL_MASK, it, 31);
        }
        if (lane == 0) {
            offsets[n_experts] = off;
            used = tiles < max_tiles ? tiles : max_tiles;
        }
    }
    __syncthreads();
    for (int64_t e = warp; e < n_experts; e += warps) {
        int32_t nt = (total[e] + tile_rows - 1) / tile_rows;
        for (int32_t i = lane; i < nt && tile0[e] + i < max_tiles; i += 32)
            tile_info[tile0[e] + i] = (int32_t)(e << 20) | (i * tile_rows);
    }
    for (int32_t i = used + (int32_t)threadIdx.x; i < max_tiles; i += blockDim.x)
        tile_info[i] = -1;
}

__global__ void perm_plan_kernel(int32_t *offsets, int32_t *tile_info, int32_t *counts,
                                 int64_t n_experts, int64_t n_units, int32_t tile_rows,
                                 int32_t max_tiles) {
    __shared__ int32_t total[PLAN_MAX_E], tile0[PLAN_MAX_E];
    __shared__ int32_t used;
    plan_body(offsets, tile_info, counts, n_experts, n_units, tile_rows, max_tiles, total, tile0,
              &used);
}

/* Step 3 for unit u, by one warp: perm and row_of of its slots, in slot order per expert;
 * run[e * stride] (shared memory) holds the next row of each expert. */
__device__ __forceinline__ void unit_place(int32_t *perm, int32_t *row_of, int32_t *run,
                                           int64_t stride, const int32_t *ids, int64_t n_slots,
                                           int64_t expert0, int64_t n_experts, int64_t u,
                                           int lane) {
    int32_t key[PERM_STEPS];
    unit_keys(key, ids, n_slots, expert0, n_experts, u, lane);
    unsigned lower = (1u << lane) - 1u;
#pragma unroll
    for (int i = 0; i < PERM_STEPS; i++) {
        int64_t s = u * PERM_CHUNK + i * 32 + lane;
        unsigned peers = __match_any_sync(FULL_MASK, key[i]);
        if (key[i] >= 0) {
            int32_t r = run[key[i] * stride] + __popc(peers & lower);
            perm[r] = (int32_t)s;
            row_of[s] = r;
        } else if (s < n_slots) {
            row_of[s] = -1;
        }
        __syncwarp(); /* every lane has read run before it moves on */
        if (key[i] >= 0 && lane == __ffs(peers) - 1)
            run[key[i] * stride] += __popc(peers);
        __syncwarp();
    }
}

/* Block (one warp) u: perm and row_of of the slots of unit u. */
__global__ void perm_place_kernel(int32_t *perm, int32_t *row_of, const int32_t *before,
                                  const int32_t *offsets, const int32_t *ids, int64_t n_slots,
                                  int64_t expert0, int64_t n_experts, int64_t n_units) {
    extern __shared__ int32_t run[]; /* [n_experts] the next row of each expert */
    int lane = threadIdx.x;
    int64_t u = blockIdx.x;
    for (int64_t e = lane; e < n_experts; e += 32)
        run[e] = offsets[e] + before[e * n_units + u];
    __syncwarp();
    unit_place(perm, row_of, run, 1, ids, n_slots, expert0, n_experts, u, lane);
}

/* The three steps in one block of PLAN_THREADS (warp u < n_units takes unit u), the counters
 * [n_experts][n_units] in shared memory. */
__global__ void __launch_bounds__(PLAN_THREADS, 1)
    perm_fused_kernel(int32_t *offsets, int32_t *perm, int32_t *row_of, int32_t *tile_info,
                      const int32_t *ids, int64_t n_slots, int64_t expert0, int64_t n_experts,
                      int64_t n_units, int32_t tile_rows, int32_t max_tiles) {
    extern __shared__ int32_t cnt[]; /* [n_experts][n_units] */
    __shared__ int32_t total[PLAN_MAX_E], tile0[PLAN_MAX_E];
    __shared__ int32_t used;
    int lane = threadIdx.x & 31, u = threadIdx.x >> 5;
    if (u < n_units)
        unit_count(cnt + u, n_units, ids, n_slots, expert0, n_experts, u, lane);
    __syncthreads();
    plan_body(offsets, tile_info, cnt, n_experts, n_units, tile_rows, max_tiles, total, tile0,
              &used);
    __syncthreads(); /* offsets (global, written by this block) and cnt as step 3 reads them */
    if (u < n_units) {
        for (int64_t e = lane; e < n_experts; e += 32)
            cnt[e * n_units + u] += offsets[e];
        __syncwarp();
        unit_place(perm, row_of, cnt + u, n_units, ids, n_slots, expert0, n_experts, u, lane);
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

static int64_t units_of(int64_t slots) {
    return (slots + PERM_CHUNK - 1) / PERM_CHUNK;
}

int64_t moe_perm_scratch(int64_t slots, int64_t n_experts) {
    return units_of(slots) * n_experts;
}

int moe_perm_launch(int32_t *offsets, int32_t *perm, int32_t *row_of, int32_t *tile_info,
                    int32_t *scratch, const int32_t *ids, int64_t slots, int64_t expert0,
                    int64_t n_experts, int32_t tile_rows, int32_t max_tiles, cudaStream_t st) {
    int rc = 0;
    int64_t units = units_of(slots);
    size_t smem = (size_t)n_experts * 4;
    if (n_experts <= 0 || n_experts > PLAN_MAX_E || slots <= 0 || slots >= (1 << 20))
        return nvf_error_set(NVF_E_INVALID,
                             "MoE permutation of %lld slots over %lld experts: not a shape it "
                             "takes",
                             (long long)slots, (long long)n_experts);
    if (units <= PERM_FUSED_UNITS && n_experts * units <= PERM_FUSED_CELLS) {
        perm_fused_kernel<<<1, PLAN_THREADS, (size_t)(n_experts * units) * 4, st>>>(
            offsets, perm, row_of, tile_info, ids, slots, expert0, n_experts, units, tile_rows,
            max_tiles);
    } else {
        perm_count_kernel<<<(unsigned)units, 32, smem, st>>>(scratch, ids, slots, expert0,
                                                             n_experts, units);
        perm_plan_kernel<<<1, PLAN_THREADS, 0, st>>>(offsets, tile_info, scratch, n_experts, units,
                                                     tile_rows, max_tiles);
        perm_place_kernel<<<(unsigned)units, 32, smem, st>>>(perm, row_of, scratch, offsets, ids,
                                                             slots, expert0, n_experts, units);
    }
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}
