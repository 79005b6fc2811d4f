/*
 * The NVFP4 MoE block on the GPU (kernels/moe.cu, kernels/moe_gemm.cu, kernels/moe_bench.cu; C
 * linkage, device pointers). One layer's experts stay resident in the prepared layout (SPEC
 * section 5) and a run computes, for activations x [T, H] BF16 and a routing (ids, weights)
 * [T, top_k]:
 *   1. permutation: per local expert, in expert order, the (token, slot) pairs routed to it in
 *      slot order (an ordered compaction per expert, no atomics); a tile map of 16-, 32-, 64- or
 *      128-row tiles per expert;
 *   2. W4A4 only: the gathered FC1 input rows quantized to NVFP4 with the expert's global scale
 *      1 / w13_input_scale (w13_input_scale in ModelOpt's arithmetic; nvf_qb_quantize, RTN,
 *      ModelOpt's RTN or 4over6) and replaced by their exact
 *      E2M1 x E4M3 values in BF16; with computed scales (act_scales) each row's global scale
 *      from the amax of all of x or of its token's row first;
 *   3. FC1 grouped GEMM: E2M1 x E4M3 weights dequantized to BF16 in registers (exact), BF16
 *      mma.sync m16n8k16 (or, on compute capability 9.0, wgmma for tiles of 32 rows and more)
 *      with f32 accumulation, K optionally split in fixed ranges into an f32 workspace;
 *   4. FC1 epilogue: the split partials summed in split order, times w13_alpha, the gated
 *      activation of the (gate, up) pair that the w13 interleave places 64 rows apart, rounded
 *      to BF16 (W4A4: quantized with 1 / fc2_input_scale, as in 2 (the scale itself in
 *      ModelOpt's arithmetic, whose group scale is the decode scale); with computed scales the
 *      alpha times the row's FC1 decode scale, and the rows quantized after the amax of each
 *      expert's output or of each row);
 *   5. FC2 grouped GEMM (as 3) on the FC1 output;
 *   6. finalize: per token, sum over its slots in selection order of weight * alpha2 * FC2, in
 *      f32 (fixed order: the output bytes do not depend on the launch; with computed scales
 *      alpha2 times the row's FC2 decode scale).
 * Slots routed to an expert outside [expert0, expert0 + n_experts) (expert parallelism)
 * contribute nothing.
 */
#ifndef NVFP4_KERNELS_MOE_GEMM_H
#define NVFP4_KERNELS_MOE_GEMM_H

#include "kernels/moe_route.h"
#include "nvfp4/quant_types.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* cudaStream_t is `struct CUstream_st *` */

/** One layer's routed experts in the prepared layout, device pointers. */
typedef struct nvf_cuda_moe_layer {
    int64_t n_experts;       /* local experts E */
    int64_t n_experts_total; /* experts routed over, all ranks (0: n_experts): sizes tiles and
                                K splits, which assume slots spread evenly over them */
    int64_t hidden, inter;   /* H, I (I % 64 == 0 when gated; H, I % 16 == 0) */
    int32_t gated;           /* w13 holds 2I interleaved up/gate rows; 0: I up rows (relu2) */
    const uint8_t *w13;      /* [E, N1, H/2], N1 = 2I (gated) or I */
    const uint8_t *w13_sf;   /* [E] x nvf_layout_bytes(128x4, N1, H/16) */
    const uint8_t *w2;       /* [E, H, I/2] */
    const uint8_t *w2_sf;    /* [E] x nvf_layout_bytes(128x4, H, I/16) */
    const float *w13_alpha;  /* [E] */
    const float *w2_alpha;   /* [E] */
    /* W4A4: [E] and [1], the activation decode scales (the global scales are their
     * reciprocals); both NULL for W4A16 and where act_scales computes them */
    const float *w13_input_scale, *fc2_input_scale;
    /* 0: the input scales above (W4A16 without them); 1 (W4A4, dynamic per tensor): FC1's
     * global scale from the amax of all of x, FC2's from the amax of each expert's FC1 output;
     * 2 (W4A4, per token): each row's from its own amax. The alphas then hold weight_scale_2
     * only, and each row's decode scale multiplies them (nvf_moe_prepared.act_scales). */
    int32_t act_scales;
} nvf_cuda_moe_layer;

/** The FC1 activation: `act` an nvf_moe_act value (0 silu, 1 swiglu, 2 situ, 3 relu2). */
typedef struct nvf_cuda_moe_act {
    int32_t act;
    float swiglu_alpha, swiglu_beta, swiglu_limit;
    float situ_beta, situ_beta_l;
} nvf_cuda_moe_act;

typedef struct nvf_cuda_moe nvf_cuda_moe;

/**
 * The workspace of runs of up to `max_tokens` tokens with `top_k` slots each on `layer`
 * (copied; its device pointers must outlive the state), on the current device.
 * @return 0, NVF_E_INVALID (a shape the kernels do not take, named), NVF_E_CUDA, NVF_E_NOMEM.
 */
int nvf_cuda_moe_create(nvf_cuda_moe **out, const nvf_cuda_moe_layer *layer, int64_t max_tokens,
                        int64_t top_k);

/** Free the workspace; NULL is fine. */
void nvf_cuda_moe_free(nvf_cuda_moe *m);

/**
 * Queue one block on `stream`: y [t, H] f32 from x [t, H] BF16 (bits), ids and weights
 * [t, top_k] (global expert ids; local expert e is id expert0 + e). W4A4 when the layer has
 * input scales or computes them (act_scales), quantizing with `q` (NULL: RTN). Nothing is
 * waited for.
 * @return 0, NVF_E_INVALID (t beyond max_tokens), NVF_E_CUDA.
 */
int nvf_cuda_moe_run(nvf_cuda_moe *m, float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                     const float *weights, int64_t expert0, const nvf_cuda_moe_act *act,
                     const nvf_quant_params *q, struct CUstream_st *stream);

/** Steps of a run timed with NVFP4_MOE_STAGE_EVENTS set when the state is made: permutation,
 * W4A4 input quantization, FC1, FC1 epilogue, FC2, finalize. */
#define NVF_CUDA_MOE_STAGES 6

/** The milliseconds of each step of the last run (waits for it); NVF_E_INVALID when the state
 * was made without NVFP4_MOE_STAGE_EVENTS. For `bench moe`'s per-step medians. */
int nvf_cuda_moe_stage_ms(nvf_cuda_moe *m, float *ms);

/**
 * The whole block on host memory (kernels/moe_host.cu): `layer` holds host pointers; everything
 * is uploaded to CUDA device `device`, run on `stream` with nvf_cuda_moe_run, y [t, H] downloaded
 * and the device memory freed. For tests and `moe --device cuda`.
 * @return as nvf_cuda_moe_create and nvf_cuda_moe_run, or NVF_E_CUDA.
 */
int nvf_cuda_moe_host(float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                      const float *weights, int64_t top_k, int64_t expert0,
                      const nvf_cuda_moe_layer *layer, const nvf_cuda_moe_act *act,
                      const nvf_quant_params *q, int device);

/* The grouped GEMM of steps 3 and 5 (kernels/moe_gemm.cu), for moe.cu. ------------------- */

/** What the GEMM of one run reads: the permutation's outputs, device pointers. */
typedef struct nvf_cuda_moe_plan {
    const int32_t *offsets;   /* [E + 1] first permuted row of each expert */
    const int32_t *tile_info; /* [max_tiles] expert << 20 | row0 of each tile; -1 unused */
    const int32_t *perm;      /* [rows] slot of each permuted row */
    int32_t max_tiles, tile_rows, top_k;
    /* tiles the GEMM grid spans (0: max_tiles): a CTA takes tiles y, y + grid_tiles, ... up to
     * the first unused one, so fewer than max_tiles leaves no CTA that only finds -1 (the tile
     * map's worst case is far above the usual count) and stays correct for any routing */
    int32_t grid_tiles;
} nvf_cuda_moe_plan;

/** The GEMM grid's tile extent for `plan`. */
static inline int32_t nvf_cuda_moe_grid_tiles(const nvf_cuda_moe_plan *plan) {
    return plan->grid_tiles > 0 && plan->grid_tiles < plan->max_tiles ? plan->grid_tiles
                                                                      : plan->max_tiles;
}

/**
 * Queue ws[z][row][n] (z < ceil(ceil(K/64) / chunks_per_split), rows in permuted order, n < N)
 * = sum over the z-th range of chunks_per_split 64-value K chunks
 * of A[row] . W_e[n] for every tile of the plan: A is `a` [rows, K] BF16 (gather: row p is
 * a[perm[p] / top_k] when `gather`), W_e expert e's E2M1 rows [N, K/2] at w + e * N * K / 2
 * with its 128x4 scales at sf + e * nvf_layout_bytes(128x4, N, K/16). tile_rows 16, 32, 64 or 128
 * (up to nvf_cuda_moe_gemm_tall(k)).
 * @return 0 or NVF_E_CUDA.
 */
/** The same staged in shared memory (kernels/moe_gemm_tiled.cu), 16-, 32- or 64-row tiles;
 * K % 32 == 0. nvf_cuda_moe_gemm calls it where it applies. `variant`: 1, block scales read
 * from a 256-entry table of BF16 pairs (kernel v4); 2, also the E2M1 pair table replicated per
 * lane in 64-row tiles (v5, v6 and v7); 0, scales decoded per use. A 64-row tile's 16-row
 * groups holding none of its expert's rows are skipped. */
int nvf_cuda_moe_gemm_tiled(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                            const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k,
                            int chunks_per_split, const nvf_cuda_moe_plan *plan, int variant,
                            struct CUstream_st *stream);

/** The same on Hopper's warpgroup MMA (kernels/moe_gemm_wg.cu, kernels v7 to v25), 32-, 64- or
 * 128-row tiles; K % 64 == 0 and nvf_cuda_moe_gemm_wg_ok() only. nvf_cuda_moe_gemm calls it where
 * it applies. */
int nvf_cuda_moe_gemm_wg(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                         const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k,
                         int chunks_per_split, const nvf_cuda_moe_plan *plan,
                         struct CUstream_st *stream);

/** FC1 with its gated activation fused into the warpgroup-MMA kernel (kernels/moe_gemm_wg.cu):
 * instead of the f32 sums, h [rows, inter] BF16 = act(alpha[e] x gate, alpha[e] x up), the same
 * bytes as moe.cu's FC1 epilogue gives them from one split (its f32 operations in its order):
 * each CTA's 128 weight rows are 64 up rows and the 64 gate rows of the same intermediate
 * columns (the w13 interleave, NVF_W13_GROUP), so the tile holds both of every pair. One K range
 * (no split), n = 2 inter, and where nvf_cuda_moe_gemm would take the wgmma kernel only
 * (nvf_cuda_moe_gemm_wg_fc1_ok). gather must be 1 (W4A16: FC1 reads x's rows). */
int nvf_cuda_moe_gemm_wg_fc1(uint16_t *h, int64_t inter, const float *alpha,
                             const nvf_cuda_moe_act *act, const uint16_t *a, int gather,
                             const uint8_t *w, const uint8_t *sf, int64_t k,
                             const nvf_cuda_moe_plan *plan, struct CUstream_st *stream);

/** Whether FC1 of K k on tiles of tile_rows rows runs as nvf_cuda_moe_gemm_wg_fc1: the wgmma
 * kernel takes them, and NVFP4_MOE_FUSE (read per call) is 1, or unset where WG_FUSE_DEFAULT in
 * moe_gemm_wg.cu is 1 (it is 0: the README's MoE performance says why). */
int nvf_cuda_moe_gemm_wg_fc1_ok(int64_t k, int32_t tile_rows);

/** Whether the current device runs nvf_cuda_moe_gemm_wg (compute capability 9.0: its kernels
 * are built for sm_90a only). */
int nvf_cuda_moe_gemm_wg_ok(void);

/** The tallest tiles the GEMM for K takes: 16, 64 (and 32) or 128 (and 32, 64) rows. */
int nvf_cuda_moe_gemm_tall(int64_t k);

/** The K step of the GEMM for K and the tile height, in 64-value chunks (1 or 2): the K ranges
 * of split-K (chunks_per_split) must be multiples of it. */
int nvf_cuda_moe_gemm_step(int64_t k, int32_t tile_rows);

/** Weight rows one CTA of the GEMM covers for K and the tile height (128 or 256). */
int nvf_cuda_moe_gemm_cta_rows(int64_t k, int32_t tile_rows);

/** CTAs of that GEMM one SM runs at once (its registers and shared memory allow). */
int nvf_cuda_moe_gemm_ctas_per_sm(int64_t k, int32_t tile_rows);

int nvf_cuda_moe_gemm(float *ws, int64_t ws_split_stride, const uint16_t *a, int gather,
                      const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k,
                      int chunks_per_split, const nvf_cuda_moe_plan *plan,
                      struct CUstream_st *stream);

/**
 * For tests: the W4A4 block quantize-dequantize of the MoE steps (kernels/moe_steps.cu) on
 * `n_blocks` blocks of 16 values `in` (host memory) with global scale `gs` and recipe `q`, each
 * block computed by one thread (`lanes` 1) or spread over a quad of lanes (`lanes` 4); `out`
 * (host memory) gets their E2M1 x E4M3 values as BF16. Runs on the current device.
 * @return 0, NVF_E_INVALID (lanes), NVF_E_CUDA, NVF_E_NOMEM.
 */
int nvf_cuda_moe_qdq(uint16_t *out, const float *in, int64_t n_blocks, float gs,
                     const nvf_quant_params *q, int lanes);

/* Benchmark (kernels/moe_bench.cu). -------------------------------------------------------- */

/** A synthetic layer to time. */
typedef struct nvf_cuda_moe_bench_shape {
    int64_t hidden, inter, n_experts_total, n_local, top_k;
    /* the model's router (its n_experts and top_k are n_experts_total and top_k, set by the
     * bench); with router_bias > 0 a correction bias uniform in (-router_bias, router_bias),
     * drawn once per call */
    nvf_moe_router router;
    float router_bias;
    int32_t eager; /* kernels launched one by one (0: a CUDA graph per token count) */
} nvf_cuda_moe_bench_shape;

/** One row of `bench moe`. */
typedef struct nvf_cuda_moe_bench_result {
    double ms;             /* median of the runs */
    double weight_bytes;   /* NVFP4 bytes (codes + scales) of the experts reached, mean */
    double flops;          /* 2 * (rows routed locally) * (N1 * H + H * I), mean */
    double copy_gbps;      /* device-to-device copy bandwidth measured in the same call */
    double active_experts; /* local experts reached per run, mean */
} nvf_cuda_moe_bench_result;

/**
 * Time the block on random weights in the prepared layout generated on the device, with
 * `tokens` tokens, silu, W4A16 or W4A4 (RTN): fresh random logits in (-4, 4) every run routed
 * by the shape's router (nvf_cuda_moe_route_spec, outside the timed region), activation buffers
 * rotated over more than 128 MiB, CUDA events around the block, 3 warm-up runs and the median of
 * `runs`. `stop` may be NULL. The copy bandwidth is timed on a 1 GiB device copy once per call.
 * Runs on CUDA device `device`.
 * @return 0, NVF_E_INTERRUPTED, NVF_E_CUDA, NVF_E_NOMEM, NVF_E_DEVICE.
 */
int nvf_cuda_moe_bench(nvf_cuda_moe_bench_result *out, const nvf_cuda_moe_bench_shape *shape,
                       const int64_t *tokens, size_t n_tokens, int w4a4, int runs,
                       const volatile sig_atomic_t *stop, int device);

#ifdef __cplusplus
}
#endif
#endif
