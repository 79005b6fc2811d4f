/*
 * The ops table behind nvfp4/backend.h: one per backend (backend_cpu.c; backend_cuda.c where
 * the build has CUDA). nvf_backend_open picks the table of the device once.
 */
#ifndef NVFP4_BACKEND_INTERNAL_H
#define NVFP4_BACKEND_INTERNAL_H

#include "nvfp4/backend.h"

typedef struct nvf_backend_ops {
    const char *name;
    /* Create the backend's state for `b->device` (may be NULL: no state). */
    int (*open)(nvf_backend *b, int threads);
    void (*close)(nvf_backend *b);
    int (*amax)(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                const char *name);
    int (*quantize)(nvf_backend *b, uint8_t *packed, uint8_t *scales, const nvf_quant_source *s,
                    float gs, const nvf_quant_params *p);
    /* NULL: amax of each member, then quantize of each (the generic group in backend.c) */
    int (*quantize_group)(nvf_backend *b, float *out_gs, uint8_t *const *packed,
                          uint8_t *const *scales, const nvf_quant_source *srcs,
                          const char *const *names, size_t n, const nvf_quant_params *p,
                          int allow_nonfinite);
    int (*dequant_bf16)(nvf_backend *b, uint8_t *out, const nvf_quant_source *s, int check_finite,
                        const char *name);
    /* called with arguments checked by nvf_backend_layout, rows, kcols and n > 0 */
    int (*layout)(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src, nvf_layout from,
                  int64_t rows, int64_t kcols, size_t n);
    int (*bench_quant)(nvf_backend *b, double *out_s, nvf_dtype dtype, int64_t rows, int64_t cols,
                       const nvf_quant_params *p, nvf_backend_bench_pass pass, int runs,
                       const volatile sig_atomic_t *stop);
    /* NULL: no MoE routing (arguments checked by nvf_backend_moe_route, t > 0) */
    int (*moe_route)(nvf_backend *b, int32_t *ids, float *weights, const float *logits,
                     const float *bias, int64_t t, const nvf_moe_router *r);
    /* NULL: no MoE kernels (arguments checked by nvf_backend_moe) */
    int (*moe)(nvf_backend *b, float *y, const uint16_t *x, int64_t t, const int32_t *ids,
               const float *weights, int64_t top_k, int64_t expert0, const nvf_moe_prepared *w,
               const nvf_moe_act_params *act, const nvf_quant_params *q);
    int (*bench_moe)(nvf_backend *b, nvf_moe_bench_result *out, const nvf_moe_bench_shape *shape,
                     const int64_t *tokens, size_t n, int w4a4, int runs,
                     const volatile sig_atomic_t *stop);
    /* NULL: no launch configurations */
    int (*config_count)(const nvf_backend *b);
    int (*set_config)(nvf_backend *b, int config, size_t chunk_bytes);
    /* host memory the device copies directly (NULL: malloc and free) */
    int (*host_alloc)(nvf_backend *b, void **out, size_t bytes);
    void (*host_free)(nvf_backend *b, void *p);
    int prefers_staged; /* nvf_backend_prefers_staged */
} nvf_backend_ops;

struct nvf_backend {
    const nvf_backend_ops *ops;
    nvf_device device;
    int threads;
    void *state;    /* the backend's own */
    void *host_buf; /* nvf_backend_host_buffer */
    size_t host_buf_cap;
    int host_buf_device; /* from ops->host_alloc (else malloc: the device refused) */
};

extern const nvf_backend_ops nvf_backend_cpu_ops;
#ifdef NVFP4_HAVE_CUDA
extern const nvf_backend_ops nvf_backend_cuda_ops;
/* nvf_backend_set_group_budget of a build with CUDA */
void nvf_backend_cuda_set_group_budget(size_t bytes);
/** CPU layout conversion: the reference of every backend's `layout` (backend_layout.c). */
int nvf_backend_cpu_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                           nvf_layout from, int64_t rows, int64_t kcols, size_t n);

#endif

/** CPU dequantization, also the generic path of the other backends' error reports. */
int nvf_backend_cpu_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                                 int check_finite, const char *name);

/** CPU layout conversion: the reference of every backend's `layout` (backend_layout.c). */
int nvf_backend_cpu_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                           nvf_layout from, int64_t rows, int64_t kcols, size_t n);

#endif
