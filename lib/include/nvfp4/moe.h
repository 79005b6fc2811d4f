/*
 * One MoE block on the CPU (SPEC section 7): the deterministic f32 reference that `nvfp4tool
 * moe` runs and that GPU MoE kernels are compared with. Layered on lib/ckpt (config, expert
 * map), lib/quant (NVFP4 of source weights and of W4A4 activations) and nothing else.
 *
 * The block, for activations x [T, H]:
 *   1. router logits = x . Wr^T in f32 (x as f32); routing (nvf_moe_route_ref) gives per token
 *      top_k expert ids and weights; ties go to the lower expert id;
 *   2. per expert, in id order, over the tokens routed to it: g = alpha_g (x . Wg^T),
 *      u = alpha_u (x . Wu^T) in f32; h = bf16(act(g, u)) (the kernels cast FC1's output to
 *      BF16); y = alpha_d (h . Wd^T);
 *   3. out[t] = sum over k in the token's selection order of w[t,k] * y[t,k], in f32; then
 *      + the shared experts' output (times sigmoid(x . Wsg^T) where the model has a
 *      shared_expert_gate, Qwen2-MoE). Output F32 [T, H].
 * Weights come through a provider (nvf_moe_weights), one expert at a time: memory is bounded by
 * one expert's f32 matrices plus one layer's routing, never a whole layer in f32.
 */
#ifndef NVFP4_MOE_H
#define NVFP4_MOE_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/quant_types.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Spec: what the block computes ------------------------------------------------------------- */

typedef enum nvf_moe_route {
    NVF_MOE_ROUTE_SOFTMAX_TOPK = 0, /* softmax over all E, top-k, renormalize if asked */
    NVF_MOE_ROUTE_SIGMOID_TOPK = 1, /* sigmoid scores (+ bias for the choice), top-k */
    NVF_MOE_ROUTE_DEEPSEEK_V3 = 2,  /* sigmoid + correction bias, grouped top-k, scaling */
    NVF_MOE_ROUTE_TOPK_SOFTMAX = 3, /* top-k of the logits, softmax over those k (GPT-OSS) */
} nvf_moe_route;

typedef enum nvf_moe_act {
    NVF_MOE_ACT_SILU = 0, /* g * sigmoid(g) * u */
    NVF_MOE_ACT_SWIGLU =
        1, /* g = min(g, L), u = clamp(u, -L, L); g * sigmoid(alpha g) * (u + beta) */
    NVF_MOE_ACT_SITU = 2,  /* beta tanh(g / beta) sigmoid(g) * (beta_l tanh(u / beta_l), or u) */
    NVF_MOE_ACT_RELU2 = 3, /* relu(u)^2, not gated: the expert has no gate projection */
} nvf_moe_act;

typedef struct nvf_moe_spec {
    nvf_moe_route route;
    int64_t n_experts, top_k;
    int renormalize;             /* divide the selected weights by their sum */
    int64_t n_group, topk_group; /* deepseek_v3 groups; n_group <= 1: no group limit */
    float routed_scaling_factor; /* multiplies every routing weight; 1 when not given */
    nvf_moe_act act;
    float swiglu_alpha, swiglu_beta, swiglu_limit; /* limit INFINITY: no clamp */
    float situ_beta, situ_beta_l;                  /* beta_l 0: the up value is used as it is */
    int shared_gate; /* a sigmoid shared_expert_gate scales the shared experts (Qwen2-MoE) */
    char model_type[32];
} nvf_moe_spec;

/** "softmax_topk", "sigmoid_topk", "deepseek_v3", "topk_softmax". Never NULL. */
const char *nvf_moe_route_name(nvf_moe_route route);

/** "silu", "swiglu", "situ", "relu2". Never NULL. */
const char *nvf_moe_act_name(nvf_moe_act act);

/**
 * The spec of checkpoint `ck` from its config.json (nvf_moe_config, SPEC section 3): routing by
 * the router kind lib/ckpt decided (Qwen3/Qwen2-MoE and Mixtral softmax_topk with
 * norm_topk_prob, Mixtral always renormalized; DeepSeek-V3/V3.1, Kimi K2, GLM-4.5 deepseek_v3
 * with n_group, topk_group, routed_scaling_factor, norm_topk_prob; GPT-OSS topk_softmax with
 * swiglu alpha 1.702, beta 1, limit swiglu_limit); top_k from num_experts_per_tok; hidden_act
 * silu/swish, relu2. A model_type it does not know, with MoE fields, is routed softmax_topk
 * with norm_topk_prob, and logged.
 * @return 0; NVF_E_FORMAT when the checkpoint has no MoE layer or no top-k; NVF_E_UNSUPPORTED
 * for a hidden_act it cannot compute (named).
 */
int nvf_moe_spec_from_ckpt(nvf_moe_spec *out, const nvf_ckpt *ck);

/* Routing and activation (the reference arithmetic, public for tests and kernels' twins) ----- */

/**
 * Route `t` tokens: `logits` [t, spec->n_experts] f32, `bias` [n_experts] (correction bias;
 * NULL for none) into `ids` and `weights` [t, spec->top_k], per token in selection order
 * (descending score; equal scores: the lower expert id first). softmax_topk: p = softmax(l),
 * top-k of p, w = p (or p / sum of the selected p). sigmoid_topk: s = sigmoid(l), top-k of
 * s + bias, w = s (renormalized if asked). deepseek_v3: s = sigmoid(l), sb = s + bias; a
 * group's score is the sum of its top-2 sb; the topk_group best groups are kept (ties: lower
 * group id); top-k of sb over the kept experts; w = s / (sum of the selected s + 1e-20) when
 * renormalizing, else s. topk_softmax: top-k of l (+ bias), w = softmax over those k. Then
 * every weight times routed_scaling_factor. Sums run in id (or selection) order in f32. NaN
 * scores are never chosen; where fewer than top_k experts are left, the rest get id -1 and
 * weight 0.
 * @return 0, or NVF_E_INVALID for a top_k outside [1, n_experts] or groups that do not divide
 * the experts.
 */
int nvf_moe_route_ref(int32_t *ids, float *weights, const float *logits, const float *bias,
                      int64_t t, const nvf_moe_spec *spec);

/** The activation of one FC1 output pair (gate g, up u) in f32 (for relu2, g is ignored). */
float nvf_moe_act_ref(const nvf_moe_spec *spec, float g, float u);

/* Weights ----------------------------------------------------------------------------------- */

typedef enum nvf_moe_precision {
    NVF_MOE_PRECISION_BF16 = 0,  /* weights as stored (an NVFP4 checkpoint: as stored) */
    NVF_MOE_PRECISION_W4A16 = 1, /* routed experts in NVFP4 (quantized on the fly if needed) */
    NVF_MOE_PRECISION_W4A4 = 2,  /* W4A16 + the FC1 and FC2 inputs quantized to NVFP4 */
} nvf_moe_precision;

/** "bf16", "w4a16", "w4a4". Never NULL. */
const char *nvf_moe_precision_name(nvf_moe_precision p);

/* One projection of one expert as f32 values. The f32 accumulation of a product with it is
 * multiplied by `alpha` (the NVFP4 decode scale weight_scale_2, as the kernels apply it; 1 for
 * other formats). */
typedef struct nvf_moe_matrix {
    float *w; /* rows * cols, row-major [out, in]; owned, nvf_moe_matrix_free() */
    int64_t rows, cols;
    float alpha;
    float input_scale; /* the checkpoint's input_scale of this linear; 0 when none */
    int nvfp4;         /* the values are E2M1 x E4M3 products (exact in BF16) */
} nvf_moe_matrix;

/** Free m->w and zero the matrix; NULL is fine. */
void nvf_moe_matrix_free(nvf_moe_matrix *m);

/** Which matrices of a layer a provider gives. */
typedef enum nvf_moe_part {
    NVF_MOE_PART_EXPERT = 0,      /* a routed expert's gate, up, down */
    NVF_MOE_PART_SHARED = 1,      /* the shared experts' gate, up, down (one MLP) */
    NVF_MOE_PART_ROUTER = 2,      /* the router [E, H] (in proj[0]) */
    NVF_MOE_PART_SHARED_GATE = 3, /* Qwen2-MoE shared_expert_gate [1, H] (in proj[0]) */
} nvf_moe_part;

/* The weights of one MoE layer, read on demand. Behind it a table of operations (lib/moe's
 * moe_weights.h), so that a provider of another layout (prepared shards: swizzled scales,
 * interleaved w13) plugs in without touching the forward. */
typedef struct nvf_moe_weights nvf_moe_weights;

/**
 * The provider of layer `layer` of an open checkpoint (which must outlive it), reading any
 * supported format: BF16/F16/F32 as stored; FP8 (block or per-tensor) as bf16(RN(f32(fp8) *
 * scale)) (SPEC section 4); NVFP4 (ModelOpt, compressed-tensors; lib/ckpt's validated view) as
 * e2m1(code) * f32(weight_scale) with alpha = the decode scale (weight_scale_2); a prepared
 * checkpoint (NVF_CKPT_FORMAT_PREPARED) through its scale layout and w13 interleave
 * (nvfp4/layout.h) into the same values, alpha = w13_alpha / w2_alpha (W4A4: divided by
 * w13_input_scale / fc2_input_scale, which become input_scale). With `precision`
 * w4a16 or w4a4 on a source-precision checkpoint, each routed expert is quantized with `quant`
 * (nvf_quant_params) as convert writes it: gate and up as one global-scale group, down alone; its
 * NVFP4 values are then used with alpha = RN(1 / gs). Shared experts, the router and gates are used
 * as stored.
 * @return 0; NVF_E_INVALID (no such layer, or not an MoE layer: the message lists the MoE
 * layers); NVF_E_UNSUPPORTED (a format or expert layout it cannot read, named); NVF_E_NOMEM.
 */
int nvf_moe_weights_open(nvf_moe_weights **out, const nvf_ckpt *ck, int64_t layer,
                         nvf_moe_precision precision, const nvf_quant_params *quant);

/**
 * A prepared checkpoint's provider of layer `layer` built the other way round: each expert's
 * scale bytes placed at nvf_layout_coord(offset) (padding checked 0) and each gate/up row fetched
 * from nvf_w13_prepared_row, the inverses of what nvf_moe_weights_open's prepared reader uses
 * (nvfp4/layout.h). Both read the same bytes: agreement checks the reader and the index
 * functions, not the values (verify's layout check without a reference).
 * @return 0; NVF_E_INVALID (not a prepared checkpoint, or no such MoE layer); NVF_E_FORMAT.
 */
int nvf_moe_weights_open_inverse(nvf_moe_weights **out, const nvf_ckpt *ck, int64_t layer);

/** Close; NULL is fine. */
void nvf_moe_weights_close(nvf_moe_weights *w);

/** The layer's hidden size H, intermediate size I, and whether it has a correction bias,
 * shared experts and a shared-expert gate. */
void nvf_moe_weights_shape(const nvf_moe_weights *w, int64_t *hidden, int64_t *intermediate,
                           int *has_bias, int *has_shared, int *has_shared_gate);

/**
 * Load `part` (expert `expert` for NVF_MOE_PART_EXPERT) into out[0..2] (gate, up, down; the
 * router and the shared gate in out[0] only; a projection a non-gated expert lacks is left
 * empty, w NULL). The caller frees each with nvf_moe_matrix_free().
 * @return 0; NVF_E_FORMAT (a tensor missing, of the wrong shape, or with non-finite values:
 * named); NVF_E_NOMEM.
 */
int nvf_moe_weights_get(nvf_moe_weights *w, nvf_moe_matrix out[3], nvf_moe_part part,
                        int64_t expert);

/** The correction bias [n_experts] as f32 into `out`. @return 0 or NVF_E_FORMAT. */
int nvf_moe_weights_bias(nvf_moe_weights *w, float *out);

/* Forward ------------------------------------------------------------------------------------ */

typedef struct nvf_moe_opts {
    nvf_moe_precision precision;
    nvf_quant_params quant; /* W4A4: how activations are quantized */
    int per_token;          /* W4A4: one global scale per token row instead of per tensor */
    /* nvf_moe_run_file: the routed experts on this backend's MoE kernels (nvf_backend_moe);
     * NULL: everything on the CPU reference */
    struct nvf_backend *backend;
} nvf_moe_opts;

/**
 * Run the block on `x` [t, hidden] (f32; BF16 inputs widened exactly) into `y` [t, hidden].
 * W4A4: the FC1 and FC2 inputs are quantized to NVFP4 (nvf_qb_* exact block) with a global
 * scale per tensor: 1/input_scale where the checkpoint carries one (the expert's gate
 * input_scale for FC1, its down input_scale for FC2), else dynamic: from the amax of all of x
 * for FC1 and of the expert's FC1 output for FC2 (or per token row with `per_token`); the dot
 * products run on E2M1 x E4M3 values and are scaled by RN(alpha * RN(1 / gs)).
 * @return 0; NVF_E_SHAPE (hidden differs from the layer's); NVF_E_FORMAT; NVF_E_NONFINITE;
 * NVF_E_NOMEM.
 */
int nvf_moe_forward_ref(float *y, const float *x, int64_t t, int64_t hidden,
                        const nvf_moe_spec *spec, nvf_moe_weights *w, const nvf_moe_opts *o);

/**
 * nvf_moe_forward_ref, or with o->backend the routed experts on its MoE kernels from the prepared
 * layout and the routing on it (nvf_backend_moe_route, the reference's ids and weights; the
 * router logits and shared experts stay the CPU reference's): then
 * NVF_E_UNSUPPORTED for a layer that is not NVFP4 at o->precision, W4A4 without the
 * checkpoint's input scales, or per-token W4A4.
 */
int nvf_moe_forward(float *y, const float *x, int64_t t, int64_t hidden, const nvf_moe_spec *spec,
                    nvf_moe_weights *w, const nvf_moe_opts *o);

/* What nvf_moe_run_file() ran. */
typedef struct nvf_moe_run_info {
    int64_t tokens, hidden, intermediate, n_experts, top_k;
    nvf_moe_precision precision; /* as run: an NVFP4 checkpoint's bf16 is w4a16 */
    nvf_moe_route route;
    nvf_moe_act act;
    int renormalize, has_shared, has_shared_gate;
    nvf_ckpt_format format;
} nvf_moe_run_info;

/**
 * Route `t` tokens of x [t, hidden] by the layer's own router (logits x . Wr^T * alpha in f32, its
 * correction bias where it has one) into ids and weights [t, top_k] (nvf_moe_route_ref).
 * @return 0; NVF_E_SHAPE; NVF_E_FORMAT; NVF_E_NOMEM.
 */
int nvf_moe_route_layer(int32_t *ids, float *weights, const float *x, int64_t t, int64_t hidden,
                        const nvf_moe_spec *spec, nvf_moe_weights *w);

/**
 * One routed expert's MLP (FC1, activation, BF16 cast, FC2, as in nvf_moe_forward_ref) on `rows`
 * rows of x [rows, hidden] into y [rows, hidden], unweighted; W4A4's dynamic FC1 scale from the
 * amax of these rows. @return 0; NVF_E_SHAPE; NVF_E_FORMAT; NVF_E_NONFINITE; NVF_E_NOMEM.
 */
int nvf_moe_expert_ref(float *y, const float *x, int64_t rows, int64_t hidden,
                       const nvf_moe_spec *spec, nvf_moe_weights *w, int64_t expert,
                       const nvf_moe_opts *o);

/**
 * `nvfp4tool moe`: open `ckpt_path`, read x from `in_path` (its only tensor, or the one named
 * "x"; BF16 or F32 [T, H]), run layer `layer`, write `out_path` with one tensor "y" F32 [T, H]
 * and metadata {layer, precision, checkpoint_format, tokens} atomically (tmp + rename); what
 * ran into *info (NULL: not wanted). With o->backend, the routed experts run on its MoE
 * kernels from the prepared layout, routed on it (router logits and shared experts stay the CPU
 * reference's): NVF_E_UNSUPPORTED for a layer that is not NVFP4 after `precision`, W4A4
 * without the checkpoint's input scales, or per-token W4A4.
 * @return 0; NVF_E_INVALID (no such MoE layer, listing the MoE layers); NVF_E_SHAPE (x's
 * shape, naming the file, tensor and both shapes); NVF_E_FORMAT; NVF_E_IO; NVF_E_NOMEM.
 */
int nvf_moe_run_file(nvf_moe_run_info *info, const char *ckpt_path, int64_t layer,
                     const char *in_path, const char *out_path, const nvf_moe_opts *o);

#ifdef __cplusplus
}
#endif
#endif
