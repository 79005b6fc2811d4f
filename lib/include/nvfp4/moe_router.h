/*
 * A MoE router's settings (SPEC section 7), shared by the backend operation
 * (nvf_backend_moe_route), the CUDA kernels (kernels/export/kernels/moe_route.h) and lib/moe's
 * reference, and the one check of them all three apply.
 */
#ifndef NVFP4_MOE_ROUTER_H
#define NVFP4_MOE_ROUTER_H

#include "nvfp4/status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_moe_router {
    int32_t kind;        /* an nvf_moe_route value (nvfp4/moe.h): 0 softmax_topk, 1 sigmoid_topk,
                            2 deepseek_v3, 3 topk_softmax */
    int32_t renormalize; /* divide the selected weights by their sum */
    int64_t n_experts, top_k;
    int64_t n_group, topk_group; /* deepseek_v3; n_group <= 1: no group limit */
    float routed_scaling_factor; /* multiplies every weight (1: none) */
} nvf_moe_router;

/** Whether `r` routes `t` tokens: a known kind, top_k in [1, n_experts], t >= 0, and deepseek_v3
 * groups that divide the experts and can give top_k. @return 0 or NVF_E_INVALID (named). */
static inline int nvf_moe_router_check(const nvf_moe_router *r, int64_t t) {
    if (r->kind < 0 || r->kind > 3)
        return nvf_error_set(NVF_E_INVALID, "MoE routing: unknown router kind %d", (int)r->kind);
    if (t < 0 || r->n_experts < 1 || r->top_k < 1 || r->top_k > r->n_experts)
        return nvf_error_set(NVF_E_INVALID,
                             "MoE routing: top_k %lld is not in [1, %lld] (%lld tokens)",
                             (long long)r->top_k, (long long)r->n_experts, (long long)t);
    if (r->kind == 2 && r->n_group > 1) {
        int64_t per = r->n_experts / r->n_group;
        if (r->n_experts % r->n_group != 0 || r->topk_group < 1 || r->topk_group > r->n_group ||
            r->top_k > per * r->topk_group)
            return nvf_error_set(NVF_E_INVALID,
                                 "MoE routing: %lld experts in n_group %lld keeping topk_group "
                                 "%lld cannot give top_k %lld",
                                 (long long)r->n_experts, (long long)r->n_group,
                                 (long long)r->topk_group, (long long)r->top_k);
    }
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif
