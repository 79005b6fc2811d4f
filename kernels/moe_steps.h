/*
 * Steps 2, 4 and 6 of the MoE block (kernels/moe_steps.cu), queued on a stream by
 * kernels/moe.cu's run. Rows are the permuted rows of offsets[n_experts] (at most `slots`), the
 * grids sized by `slots` and the SM count `sms`; W4A4's quantizing steps choose how to spread a
 * block over lanes by `rows_expect`, the rows expected. Each returns 0 or NVF_E_CUDA.
 */
#ifndef NVFP4_KERNELS_MOE_STEPS_H
#define NVFP4_KERNELS_MOE_STEPS_H

#include "kernels/moe_gemm.h"

#include "nvfp4/quant_types.h"

#include <cuda_runtime.h>

#include <stdint.h>

/** W4A4 FC1 input: xq[p] = x[perm[p] / top_k] quantized with the shared exact block and global
 * scale 1 / input_scale[expert of p] (in ModelOpt's arithmetic input_scale itself; row_gs NULL)
 * or row_gs[p], as its E2M1 x E4M3 values in BF16. */
int moe_gather_quant(uint16_t *xq, const uint16_t *x, const int32_t *perm, const int32_t *offsets,
                     int64_t n_experts, int64_t top_k, int64_t hidden, const float *input_scale,
                     const float *row_gs, nvf_quant_params q, int64_t slots, int64_t rows_expect,
                     int sms, cudaStream_t st);

/** Computed W4A4 activation scales: gs[p], dec[p] (nvf_qb_group_scale and _decode) of every
 * permuted row p from an amax. FC1 (perm given): src is x [src_rows tokens, cols], the amax its
 * token's row's (per_row) or all of x's; FC2 (perm NULL): src is h [rows, cols], the amax the
 * row's own (per_row) or its expert's rows'. amax: scratch of src_rows (FC1), `slots` (FC2) or
 * n_experts words. */
int moe_act_scales(float *gs, float *dec, uint32_t *amax, const uint16_t *src, int64_t src_rows,
                   int64_t cols, int per_row, const int32_t *perm, int64_t top_k,
                   const int32_t *offsets, int64_t n_experts, nvf_quant_params q, int64_t slots,
                   int sms, cudaStream_t st);

/** h [rows, cols] BF16 quantized in place, row p with global scale row_gs[p], as its
 * E2M1 x E4M3 values in BF16. */
int moe_quant_rows(uint16_t *h, const int32_t *offsets, int64_t n_experts, int64_t cols,
                   const float *row_gs, nvf_quant_params q, int64_t slots, int64_t rows_expect,
                   int sms, cudaStream_t st);

/** FC1 epilogue: h [rows, inter] BF16 = act(alpha[e] (x row_dec[p] where given) x the `splits`
 * partials of ws summed in split order); with fc2_input_scale (W4A4) quantized with
 * 1 / fc2_input_scale[0] (ModelOpt's arithmetic: fc2_input_scale[0]) and q. */
int moe_fc1_epilogue(uint16_t *h, const float *ws, int64_t split_stride, int splits,
                     const int32_t *offsets, int64_t n_experts, int64_t inter, int gated,
                     const float *alpha, const float *row_dec, const nvf_cuda_moe_act *act,
                     const float *fc2_input_scale, nvf_quant_params q, int64_t slots,
                     int64_t rows_expect, int sms, cudaStream_t st);

/** Finalize: y [t, hidden] = per token the sum over its local slots in selection order of
 * weight x (alpha2[id - expert0] (x row_dec[row] where given) x FC2 row), FC2 the partials
 * summed in split order. */
int moe_finalize(float *y, const float *ws, int64_t split_stride, int splits, const int32_t *row_of,
                 const int32_t *ids, const float *weights, int64_t t, int64_t top_k, int64_t hidden,
                 int64_t expert0, const float *alpha2, const float *row_dec, int sms,
                 cudaStream_t st);

#endif
