/*
 * The provider seam of lib/moe (nvfp4/moe.h nvf_moe_weights): a table of operations that each
 * weight source fills. The checkpoint provider (moe_weights.c) reads any supported checkpoint
 * format; a provider of prepared shards (swizzled scales, interleaved w13, nvfp4/layout.h) fills
 * the same table, and the forward never asks which one it has.
 */
#ifndef NVFP4_MOE_WEIGHTS_H
#define NVFP4_MOE_WEIGHTS_H

#include "nvfp4/backend.h"
#include "nvfp4/moe.h"

struct nvf_moe_prepared; /* nvfp4/backend.h */

typedef struct moe_weights_ops {
    /* nvf_moe_weights_get() */
    int (*get)(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part, int64_t expert);
    /* nvf_moe_weights_bias(); called only when has_bias */
    int (*bias)(nvf_moe_weights *w, float *out);
    /* free the provider (the struct that embeds nvf_moe_weights first) */
    void (*close)(nvf_moe_weights *w);
    /* optional (NULL: none): the layer's routed experts as the MoE kernels take them, pointing
     * into the checkpoint's own bytes (a prepared checkpoint in the 128x4 layout at precision
     * w4a4 or not); NVF_E_UNSUPPORTED where the stored layout or precision is another */
    int (*prepared)(nvf_moe_weights *w, struct nvf_moe_prepared *out, int w4a4);
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

/**
 * The checkpoint provider of layer `l` for the parts other than routed experts (router, bias,
 * shared experts), read as stored; `hidden` is the layer's H where lib/ckpt does not know it
 * (moe_weights.c). @return 0, NVF_E_FORMAT (no router), NVF_E_NOMEM.
 */
int moe_ckpt_open_layer(nvf_moe_weights **out, const nvf_ckpt *ck, const nvf_moe_layer *l,
                        int64_t hidden);

/**
 * The prepared-layout provider of layer `l` of a prepared checkpoint (moe_prepared.c): routed
 * experts through nvfp4/layout.h's index functions (`inverse`: through their inverses), the
 * rest through moe_ckpt_open_layer. @return 0, NVF_E_FORMAT (a tensor missing or of the wrong
 * dtype or shape, a scale layout it does not know: named), NVF_E_NOMEM.
 */
int moe_prepared_open(nvf_moe_weights **out, const nvf_ckpt *ck, const nvf_moe_layer *l,
                      int inverse);

/** Element `i` of an F32, BF16 or F16 tensor as f32 (moe_nvfp4.c). */
float moe_scalar_at(const nvf_st_tensor *t, uint64_t i);

/** Router logits [t, E] = x . Wr^T * alpha in f32 (moe_forward.c). @return 0 or as
 * nvf_moe_weights_get. */
int moe_router_logits(float *logits, const float *x, int64_t t, int64_t n_h, int64_t n_e,
                      nvf_moe_weights *w);

/** The router of `spec` as the backend takes it (moe_forward.c). */
nvf_moe_router moe_router_of(const nvf_moe_spec *spec);

/**
 * nvf_moe_route_layer with the routing (not the router logits, which stay the CPU's f32 loop)
 * on backend `b` (nvf_backend_moe_route); b NULL: nvf_moe_route_ref (moe_forward.c).
 * @return as nvf_moe_route_layer; as nvf_backend_moe_route.
 */
int moe_route_layer(int32_t *ids, float *weights, const float *x, int64_t t, int64_t hidden,
                    const nvf_moe_spec *spec, nvf_moe_weights *w, struct nvf_backend *b);

/** y += the shared experts' output on every token (times the shared gate when `gated`), their
 * inputs unquantized (moe_forward.c). */
int moe_run_shared(float *y, const float *x, int64_t t, int64_t n_h, const nvf_moe_spec *spec,
                   nvf_moe_weights *w, const nvf_moe_opts *o, float x_amax, int gated);

/**
 * The block with the routed experts on `b`'s MoE kernels (moe_device.c): router logits on the
 * CPU, routing on the device (moe_route_layer), every routed expert re-encoded from its exact NVFP4
 * values into the prepared layout (SPEC section 5) and run by nvf_backend_moe, shared experts on
 * the CPU.
 * @return as nvf_moe_forward_ref; NVF_E_UNSUPPORTED (a layer that is not NVFP4, gate and up of
 * different alpha, W4A4 without input scales or with per-token scales).
 */
int moe_forward_device(float *y, const float *x, int64_t t, int64_t hidden,
                       const nvf_moe_spec *spec, nvf_moe_weights *w, const nvf_moe_opts *o);

#endif
