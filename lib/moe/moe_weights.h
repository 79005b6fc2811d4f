/*
 * The provider seam of lib/moe (nvfp4/moe.h nvf_moe_weights): a table of operations that each
 * weight source fills. The checkpoint provider (moe_weights.c) reads any supported checkpoint
 * format; a provider of prepared shards (swizzled scales, interleaved w13, nvfp4/layout.h) fills
 * the same table, and the forward never asks which one it has.
 */
#ifndef NVFP4_MOE_WEIGHTS_H
#define NVFP4_MOE_WEIGHTS_H

#include "nvfp4/moe.h"

typedef struct moe_weights_ops {
    /* nvf_moe_weights_get() */
    int (*get)(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part, int64_t expert);
    /* nvf_moe_weights_bias(); called only when has_bias */
    int (*bias)(nvf_moe_weights *w, float *out);
    /* free the provider (the struct that embeds nvf_moe_weights first) */
    void (*close)(nvf_moe_weights *w);
} moe_weights_ops;

/* The part every provider begins with. */
struct nvf_moe_weights {
    const moe_weights_ops *ops;
    int64_t hidden, intermediate, n_experts;
    int has_bias, has_shared, has_shared_gate;
};

/**
 * Rows [row0, row0 + rows) of matrix `expert` (-1: a 2-D tensor) of the NVFP4 weight `ti`
 * (ModelOpt or compressed-tensors, validated by nvf_ckpt_nvfp4_view) into `out`: values
 * e2m1(code) * f32(scale), alpha the decode scale, input_scale the checkpoint's (0 when it has
 * none) (moe_nvfp4.c). @return 0, NVF_E_FORMAT or NVF_E_SHAPE (named), NVF_E_NOMEM.
 */
int moe_nvfp4_load(nvf_moe_matrix *out, const nvf_ckpt *ck, size_t ti, int64_t expert, int64_t row0,
                   int64_t rows);

/** Element `i` of an F32, BF16 or F16 tensor as f32 (moe_nvfp4.c). */
float moe_scalar_at(const nvf_st_tensor *t, uint64_t i);

#endif
