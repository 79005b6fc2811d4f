/*
 * The compute backend seam: every operation that can run on the CPU or a GPU is a slot of one
 * ops table that each backend fills (lib/backend/backend_internal.h). A caller opens the backend
 * of its device once and calls the operations; it never asks which device it has. A CPU twin
 * exists for every operation, and the CUDA backend produces the same bytes (tests/gpu compares
 * them). A backend that lacks an operation answers NVF_E_UNSUPPORTED for it.
 *
 * Operations (plus MoE routing and the MoE block, at the end):
 *   1. amax: maximum magnitude of a source (after FP8-block dequantization);
 *   2. quantize: NVFP4 codes and block scales of a source with a given group scale
 *      (nvf_quant_group_scale: FlashInfer's global scale, or ModelOpt's sf2);
 *   3. quantize_group: amax over every member, the group scale from it, then each member
 *      quantized with it (an expert's gate+up, q/k/v): on a GPU each member is uploaded once;
 *   4. dequant_bf16: an FP8 (block- or tensor-scaled) or plain source written as BF16:
 *      bf16(RN(f32(value) * scale));
 *   5. layout: block scales of n matrices re-laid from one layout to another (nvfp4/layout.h:
 *      linear, 128x4, 8x4), padding written 0.
 * Plus what `bench quant` needs: a timed quantization on the backend's own data, and the
 * launch configurations of a GPU backend.
 *
 * Threads: a backend is single-threaded. It holds streams, staging buffers and scratch that its
 * calls reuse, so one backend must never be called from two threads at once; a program that
 * computes on several threads opens one backend per worker thread (backends of one device or
 * of different devices then run side by side). The CPU backend uses its own `threads` threads
 * inside each call.
 *
 * Availability: a build without CUDA has no CUDA backend; nvf_backend_open for a CUDA device
 * then fails with NVF_E_DEVICE and the caller falls back to the CPU.
 */
#ifndef NVFP4_BACKEND_H
#define NVFP4_BACKEND_H

#include "nvfp4/moe_router.h"
#include "nvfp4/device.h"
#include "nvfp4/layout.h"
#include "nvfp4/quant.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_backend nvf_backend;

/**
 * Open the backend of `dev` (from nvf_device_select). `threads` is the CPU backend's thread
 * count (<= 0: one per online core); the CUDA backend ignores it.
 * @return 0; NVF_E_DEVICE when the device cannot be served (no CUDA in this build, no such
 * GPU); NVF_E_NOMEM. Close with nvf_backend_close().
 */
int nvf_backend_open(nvf_backend **out, const nvf_device *dev, int threads);

/** Release the backend (its buffers, streams and threads); NULL is fine. */
void nvf_backend_close(nvf_backend *b);

/** The device the backend computes on. */
const nvf_device *nvf_backend_device(const nvf_backend *b);

/**
 * A host buffer of at least `bytes` that the backend's device copies to and from directly:
 * pinned memory on a GPU (its copies are DMA, with no CPU copy through a driver staging buffer),
 * plain memory on the CPU. Owned by the backend and reused by the next call: valid until the
 * next nvf_backend_host_buffer or nvf_backend_close, its contents not kept when it grows. Where
 * the device refuses pinned memory, plain memory is used (slower copies, the same results).
 * @return 0, NVF_E_NOMEM.
 */
int nvf_backend_host_buffer(nvf_backend *b, void **out, size_t bytes);

/**
 * 1 when the backend computes a source faster from a copy in its host buffer than read in
 * place from a file mapping (a GPU: the copy is one read into pinned memory, then DMA), 0 when
 * it reads sources in place (the CPU).
 */
int nvf_backend_prefers_staged(const nvf_backend *b);

/**
 * Maximum magnitude of a checked source (nvf_quant_source_check). A NaN or infinity is
 * NVF_E_NONFINITE naming `name` and the first such [row, col] in row-major order unless
 * `allow_nonfinite` (then NaN is skipped and an infinity makes amax infinite).
 * @return 0, NVF_E_NONFINITE, NVF_E_NOMEM, NVF_E_CUDA.
 */
int nvf_backend_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                     const char *name);

/**
 * Quantize a checked source with group scale `gs` (nvf_quant_group_scale) into host memory owned by
 * the caller: `packed` rows*cols/2 bytes, `scales` rows*cols/16 bytes (layout in nvfp4/quant.h).
 * @return 0, NVF_E_NOMEM, NVF_E_CUDA.
 */
int nvf_backend_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales,
                         const nvf_quant_source *s, float gs, const nvf_quant_params *p);

/**
 * Quantize `n` checked sources as one global-scale group: amax over all of them (NaN/Inf as in
 * nvf_backend_amax, the message naming names[k]), gs = nvf_quant_group_scale(amax, p) into
 * *out_gs, then member k into packed[k] / scales[k].
 * @return 0, NVF_E_NONFINITE, NVF_E_NOMEM, NVF_E_CUDA.
 */
int nvf_backend_quantize_group(nvf_backend *b, float *out_gs, uint8_t *const *packed,
                               uint8_t *const *scales, const nvf_quant_source *srcs,
                               const char *const *names, size_t n, const nvf_quant_params *p,
                               int allow_nonfinite);

/**
 * A checked source written as BF16 (little-endian, rows*cols*2 bytes into `out`): each value
 * bf16(RN(f32(x) * scale)) for FP8-block sources, bf16(RN(x)) otherwise. With
 * `check_finite`, a NaN or infinity in the result is NVF_E_NONFINITE naming `name` and the
 * first [row, col]. @return 0, NVF_E_NONFINITE, NVF_E_NOMEM, NVF_E_CUDA.
 */
int nvf_backend_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                             int check_finite, const char *name);

/**
 * Re-lay the block scales of `n` matrices of `rows` x `kcols` scales each (host memory): matrix
 * i is read from src + i * nvf_layout_bytes(from, rows, kcols) in layout `from` and written to
 * dst + i * nvf_layout_bytes(to, rows, kcols) in layout `to`. Every destination byte is
 * written: the scale at its (m, k) (nvf_layout_coord), or 0 in the padding; padding bytes of
 * the source are never read. `from` == `to` copies with the padding zeroed. `src` and `dst`
 * must not overlap. rows, kcols or n of 0 write nothing.
 * @return 0; NVF_E_INVALID (a layout value outside nvf_layout, a negative size, sizes whose
 * bytes overflow); NVF_E_NOMEM, NVF_E_CUDA; NVF_E_UNSUPPORTED (a backend without it).
 */
int nvf_backend_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                       nvf_layout from, int64_t rows, int64_t kcols, size_t n);

/** What nvf_backend_bench_quant() times. */
typedef enum nvf_backend_bench_pass {
    NVF_BACKEND_BENCH_QUANTIZE = 0,      /* the quantizing pass, global scale given */
    NVF_BACKEND_BENCH_AMAX_QUANTIZE = 1, /* the amax pass, then the quantizing pass */
    NVF_BACKEND_BENCH_COPY = 2,          /* a copy of the input in device memory (GPU only) */
} nvf_backend_bench_pass;

/**
 * Time `pass` on the backend's own synthetic data of `rows` x `cols` values of `dtype` (BF16
 * close to N(0,1); on a GPU also F8_E4M3 with 128 x 128 F32 block scales): the median of
 * `runs` runs into *out_s (seconds). The CPU times by the wall clock; a GPU keeps the data on
 * the device and times with events after 3 warm-up runs. When `stop` is set and *stop becomes
 * non-zero (a signal handler), the call stops between runs.
 * @return 0; NVF_E_INTERRUPTED; NVF_E_UNSUPPORTED (a dtype or pass this backend does not
 * time); NVF_E_NOMEM, NVF_E_CUDA.
 */
int nvf_backend_bench_quant(nvf_backend *b, double *out_s, nvf_dtype dtype, int64_t rows,
                            int64_t cols, const nvf_quant_params *p, nvf_backend_bench_pass pass,
                            int runs, const volatile sig_atomic_t *stop);

/* MoE (SPEC section 7). The CPU twins of `moe_route` and `moe` are lib/moe's nvf_moe_route_ref
 * and nvf_moe_forward_ref (on the same NVFP4 values in the linear layout): lib/moe sits above
 * the backend and keeps its reference, the backend computes only on a device (the CPU backend
 * leaves both empty, and lib/moe calls its reference where there is no device). */

/** A router: the routing fields of nvf_moe_spec (nvfp4/moe.h). */
/* nvf_moe_router: nvfp4/moe_router.h */

/**
 * Route `t` tokens of logits [t, n_experts] f32 with correction bias `bias` [n_experts] (NULL:
 * none) into ids and weights [t, top_k], host memory: nvf_moe_route_ref's result (nvfp4/moe.h:
 * selection order, ties to the lower id, NaN never chosen, -1 / 0 where too few are left). The
 * CUDA backend computes it bit for bit as the reference does (kernels/export/kernels/
 * moe_route.h says where a libm other than glibc's could differ by an ulp). The arguments are
 * checked before the backend is asked.
 * @return 0; NVF_E_INVALID (a kind outside nvf_moe_route, t < 0, top_k outside [1, n_experts],
 * groups that do not divide the experts or cannot give top_k; the CUDA backend also refuses
 * more than about 6000 experts); NVF_E_UNSUPPORTED (the CPU: call nvf_moe_route_ref);
 * NVF_E_CUDA.
 */
int nvf_backend_moe_route(nvf_backend *b, int32_t *ids, float *weights, const float *logits,
                          const float *bias, int64_t t, const nvf_moe_router *r);

/** One MoE layer's routed experts in the prepared layout (SPEC section 5), host memory. */
typedef struct nvf_moe_prepared {
    int64_t n_experts;      /* E (a rank's experts under expert parallelism) */
    int64_t hidden, inter;  /* H, I */
    int32_t gated;          /* w13 holds 2I up/gate rows interleaved by 64; 0: I up rows */
    const uint8_t *w13;     /* U8 [E, N1, H/2] */
    const uint8_t *w13_sf;  /* E4M3, each expert nvf_layout_bytes(128x4, N1, H/16) bytes */
    const uint8_t *w2;      /* U8 [E, H, I/2] */
    const uint8_t *w2_sf;   /* E4M3, each expert nvf_layout_bytes(128x4, H, I/16) bytes */
    const float *w13_alpha; /* [E] */
    const float *w2_alpha;  /* [E] */
    /* W4A4 with the checkpoint's input scales: [E] and [1]; both NULL for W4A16 and for W4A4
     * with computed activation scales (act_scales) */
    const float *w13_input_scale, *fc2_input_scale;
    /* NVF_MOE_ACT_SCALES_INPUT: the input scales above (W4A16 without them); else W4A4 whose
     * activation global scales the kernels compute (the alphas then hold weight_scale_2 only) */
    int32_t act_scales;
} nvf_moe_prepared;

/** W4A4's activation global scales (nvf_moe_prepared.act_scales), as lib/moe's reference takes
 * them (nvf_moe_opts): from the checkpoint's input_scale; dynamic per tensor (FC1: the amax of
 * all of x; FC2: the amax of each expert's FC1 output); or per token row (FC1: the amax of the
 * token's x row; FC2: of its FC1 output row). */
enum {
    NVF_MOE_ACT_SCALES_INPUT = 0,
    NVF_MOE_ACT_SCALES_TENSOR = 1,
    NVF_MOE_ACT_SCALES_TOKEN = 2,
};

/** The FC1 activation: `act` an nvf_moe_act value (nvfp4/moe.h) and its parameters. */
typedef struct nvf_moe_act_params {
    int32_t act;
    float swiglu_alpha, swiglu_beta, swiglu_limit;
    float situ_beta, situ_beta_l;
} nvf_moe_act_params;

/**
 * The routed experts of one MoE block: y [t, H] f32 = for each token, the sum over its top_k
 * slots in order of weights[t, j] * expert ids[t, j]'s MLP of x[t] (x BF16 bits [t, H]; local
 * expert e is id expert0 + e, other ids contribute nothing). W4A4 when `w` has input scales
 * or computes them (act_scales; activations quantized with `q`, NULL: RTN). Deterministic: the
 * same inputs give the same bytes.
 * @return 0; NVF_E_UNSUPPORTED (a backend without the operation: the CPU); NVF_E_INVALID (a shape
 * the kernels do not take, named); NVF_E_CUDA; NVF_E_NOMEM.
 */
int nvf_backend_moe(nvf_backend *b, float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                    const float *weights, int64_t top_k, int64_t expert0, const nvf_moe_prepared *w,
                    const nvf_moe_act_params *act, const nvf_quant_params *q);

/** A synthetic MoE layer for nvf_backend_bench_moe. */
typedef struct nvf_moe_bench_shape {
    int64_t hidden, inter, n_experts_total, n_local, top_k;
    /* the model's router (n_experts and top_k are n_experts_total and top_k, set by the bench);
     * with router_bias > 0 a correction bias uniform in (-router_bias, router_bias), drawn once
     * per call (DeepSeek-V3's router) */
    nvf_moe_router router;
    float router_bias;
    /* launch the block's kernels one by one (0: capture them once per token count and replay
     * the CUDA graph, its input copied in before each timed run) */
    int32_t eager;
} nvf_moe_bench_shape;

/** One token count of nvf_backend_bench_moe. */
typedef struct nvf_moe_bench_result {
    double ms;             /* median time of the block */
    double weight_bytes;   /* NVFP4 bytes of the local experts reached (mean over runs) */
    double flops;          /* 2 x local routed rows x (N1 H + H I) (mean) */
    double copy_gbps;      /* device copy bandwidth (read + write) measured in the same call */
    double active_experts; /* local experts reached (mean) */
} nvf_moe_bench_result;

/**
 * Time the block (W4A16, or W4A4 with `w4a4`) on random prepared weights of `shape` for each of
 * the `n` token counts into out[n]: fresh random logits in (-4, 4) per run routed by
 * shape->router (on the device, outside the timed region),
 * activations rotated through 256 MiB, CUDA events, 3 warm-up runs, median of `runs`.
 * @return 0; NVF_E_UNSUPPORTED (the CPU); NVF_E_INTERRUPTED; NVF_E_CUDA; NVF_E_NOMEM.
 */
int nvf_backend_bench_moe(nvf_backend *b, nvf_moe_bench_result *out,
                          const nvf_moe_bench_shape *shape, const int64_t *tokens, size_t n,
                          int w4a4, int runs, const volatile sig_atomic_t *stop);

/** Number of launch configurations the backend can be set to (0: none, the CPU). */
int nvf_backend_config_count(const nvf_backend *b);

/**
 * For tests and benchmarks: make the backend's later calls use launch configuration `config`
 * (0 .. count-1; -1 restores the defaults) and stage `chunk_bytes` of input per chunk (0: the
 * default, 64 MiB; the layout operation stages whole matrices, at least one per chunk).
 * @return 0; NVF_E_INVALID (config out of range); NVF_E_UNSUPPORTED (a backend without launch
 * configurations).
 */
int nvf_backend_set_config(nvf_backend *b, int config, size_t chunk_bytes);

/**
 * Device-memory budget in bytes of a device-resident quantize group (nvf_backend_quantize_group
 * on a GPU): a group whose values, scales and outputs need more takes the chunked path. 0
 * restores the default: NVFP4_CUDA_GROUP_BUDGET (bytes) from the environment when set, else a
 * quarter of the device memory free when the backend was opened. Process-wide; for tests and
 * tuning. Without CUDA it does nothing.
 */
void nvf_backend_set_group_budget(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
