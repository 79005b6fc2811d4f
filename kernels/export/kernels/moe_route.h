/*
 * MoE routing on the GPU (kernels/moe_route.cu; C linkage): lib/moe's nvf_moe_route_ref
 * (nvfp4/moe.h) for the four routers, one warp per token, with the reference's semantics: the
 * same ids in the same selection order (repeated arg-max, equal scores to the lower id, NaN never
 * chosen, -1 and weight 0 where fewer than top_k experts are left) and the same f32 formulas
 * operation by operation (sums in id or selection order, no contraction, expf bit for bit
 * glibc's: kernels/route_expf.h). The scores the choices are made on are therefore the
 * reference's own bits, and ids and weights equal the CPU's bit for bit where the CPU's libm is
 * glibc >= 2.28 or musl; with another libm, expf may differ by an ulp and a selection can differ
 * where that ulp makes or breaks a tie (softmax_topk selects on the probabilities, as
 * transformers does, not on the logits).
 */
#ifndef NVFP4_KERNELS_MOE_ROUTE_H
#define NVFP4_KERNELS_MOE_ROUTE_H

#include "nvfp4/moe_router.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* cudaStream_t is `struct CUstream_st *` */

/* A router's settings: nvf_moe_router (nvfp4/moe_router.h), the routing fields of nvf_moe_spec. */

/**
 * Queue the routing of logits [t, n_experts] f32 with `bias` [n_experts] (the correction bias
 * added to the choice scores of sigmoid_topk, deepseek_v3 and topk_softmax; NULL: none) into
 * ids and weights [t, top_k] on `stream`; device pointers. t of 0 queues nothing.
 * @return 0; NVF_E_INVALID (a kind, top_k or group shape nvf_moe_route_ref refuses, or more
 * experts than one warp's shared memory holds: about 6000); NVF_E_CUDA.
 */
int nvf_cuda_moe_route_spec(int32_t *ids, float *weights, const float *logits, const float *bias,
                            int64_t t, const nvf_moe_router *r, struct CUstream_st *stream);

/**
 * The same on host memory: logits and bias uploaded to CUDA device `device`, routed, ids and
 * weights downloaded, the device memory freed. For `moe --device cuda` and tests.
 * @return as nvf_cuda_moe_route_spec, or NVF_E_CUDA.
 */
int nvf_cuda_moe_route_host(int32_t *ids, float *weights, const float *logits, const float *bias,
                            int64_t t, const nvf_moe_router *r, int device);

#ifdef __cplusplus
}
#endif
#endif
