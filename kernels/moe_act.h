/*
 * The FC1 activations of the MoE kernels (nvf_moe_act_ref's f32 operations), shared by the FC1
 * epilogue (kernels/moe_steps.cu) and the wgmma kernel's fused FC1 store (kernels/moe_gemm_wg.cu),
 * so that both give the same bytes.
 */
#ifndef NVFP4_KERNELS_MOE_ACT_H
#define NVFP4_KERNELS_MOE_ACT_H

#include "kernels/moe_gemm.h"

static __device__ float sigmoidf_(float v) {
    return 1.0f / (1.0f + expf(-v));
}

/* nvf_moe_act_ref */
static __device__ float act_of(const nvf_cuda_moe_act &a, float g, float u) {
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

#endif
