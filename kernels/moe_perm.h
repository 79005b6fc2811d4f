/*
 * The permutation of a MoE run (kernels/moe_perm.cu) as nvf_cuda_moe_run sees it: step 1 of
 * kernels/moe_gemm.h, every pointer a device pointer, every launch queued on the stream given.
 */
#ifndef NVFP4_KERNELS_MOE_PERM_H
#define NVFP4_KERNELS_MOE_PERM_H

#include <cuda_runtime.h>

#include <stdint.h>

/** The int32 scratch moe_perm_launch needs for up to `slots` slots over `n_experts` experts. */
int64_t moe_perm_scratch(int64_t slots, int64_t n_experts);

/**
 * Queue the ordered compaction of the `slots` slots of `ids` (global expert ids; local expert e
 * is id expert0 + e, n_experts < 2048, slots < 2^20): offsets [n_experts + 1] (first permuted
 * row of each expert, the total last), perm [rows] (the slots of expert 0 in slot order, then
 * expert 1's, ...), row_of [slots] (the permuted row of each slot, -1 when not local) and
 * tile_info [max_tiles] (expert << 20 | first row of each tile of tile_rows rows, experts in
 * order; -1 unused). `scratch` holds moe_perm_scratch(slots, n_experts) int32.
 * @return 0, NVF_E_INVALID (experts or slots beyond those bounds), NVF_E_CUDA.
 */
int moe_perm_launch(int32_t *offsets, int32_t *perm, int32_t *row_of, int32_t *tile_info,
                    int32_t *scratch, const int32_t *ids, int64_t slots, int64_t expert0,
                    int64_t n_experts, int32_t tile_rows, int32_t max_tiles, cudaStream_t st);

#endif
