/* nvfp4/backend.h: open/close and the dispatch through the ops table. */
#include "backend_internal.h"

#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdlib.h>

int nvf_backend_open(nvf_backend **out, const nvf_device *dev, int threads) {
    *out = NULL;
    const nvf_backend_ops *ops = &nvf_backend_cpu_ops;
    if (dev->kind == NVF_DEVICE_CUDA) {
#ifdef NVFP4_HAVE_CUDA
        ops = &nvf_backend_cuda_ops;
#else
        return nvf_error_set(NVF_E_DEVICE, "cuda:%d requested but this build has no CUDA support",
                             dev->index);
#endif
    }
    nvf_backend *b = calloc(1, sizeof *b);
    if (!b)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the %s backend", ops->name);
    b->ops = ops;
    b->device = *dev;
    b->threads = threads;
    int rc = ops->open ? ops->open(b, threads) : NVF_OK;
    if (rc != NVF_OK) {
        free(b);
        return rc;
    }
    *out = b;
    return NVF_OK;
}

static void host_release(nvf_backend *b) {
    if (b->host_buf && b->host_buf_device)
        b->ops->host_free(b, b->host_buf);
    else
        free(b->host_buf);
    b->host_buf = NULL;
    b->host_buf_cap = 0;
}

void nvf_backend_close(nvf_backend *b) {
    if (!b)
        return;
    host_release(b); /* before the backend's state, whose device it belongs to */
    if (b->ops->close)
        b->ops->close(b);
    free(b);
}

const nvf_device *nvf_backend_device(const nvf_backend *b) {
    return &b->device;
}

int nvf_backend_host_buffer(nvf_backend *b, void **out, size_t bytes) {
    *out = NULL;
    if (bytes == 0)
        bytes = 1;
    if (bytes <= b->host_buf_cap && b->host_buf) {
        *out = b->host_buf;
        return NVF_OK;
    }
    host_release(b);
    /* rounded up to 1 MiB: jobs of nearly the same size share it */
    const size_t mib = (size_t)1 << 20;
    size_t cap = bytes <= SIZE_MAX - mib ? (bytes + mib - 1) / mib * mib : bytes;
    void *p = NULL;
    int device = 0;
    if (b->ops->host_alloc && b->ops->host_alloc(b, &p, cap) == NVF_OK)
        device = 1;
    else if (b->ops->host_alloc) /* pinned memory refused: plain memory works, more slowly */
        nvf_log(NVF_LOG_DEBUG, "%s", nvf_error_last());
    if (!p && !(p = malloc(cap)))
        return nvf_error_set(NVF_E_NOMEM, "no memory for a host buffer of %zu bytes", cap);
    b->host_buf = p;
    b->host_buf_cap = cap;
    b->host_buf_device = device;
    *out = p;
    return NVF_OK;
}

int nvf_backend_prefers_staged(const nvf_backend *b) {
    return b->ops->prefers_staged;
}

static int missing(const nvf_backend *b, const char *op) {
    return nvf_error_set(NVF_E_UNSUPPORTED, "the %s backend has no '%s' operation", b->ops->name,
                         op);
}

int nvf_backend_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                     const char *name) {
    if (!b->ops->amax)
        return missing(b, "amax");
    return b->ops->amax(b, out, s, allow_nonfinite, name);
}

int nvf_backend_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales,
                         const nvf_quant_source *s, float gs, const nvf_quant_params *p) {
    if (!b->ops->quantize)
        return missing(b, "quantize");
    return b->ops->quantize(b, packed, scales, s, gs, p);
}

int nvf_backend_quantize_group(nvf_backend *b, float *out_gs, uint8_t *const *packed,
                               uint8_t *const *scales, const nvf_quant_source *srcs,
                               const char *const *names, size_t n, const nvf_quant_params *p,
                               int allow_nonfinite) {
    if (b->ops->quantize_group)
        return b->ops->quantize_group(b, out_gs, packed, scales, srcs, names, n, p,
                                      allow_nonfinite);
    /* The generic group: the amax of each member, the largest (NaN wins), then each member. */
    float amax = 0.0f;
    for (size_t k = 0; k < n; k++) {
        float a;
        int rc = nvf_backend_amax(b, &a, &srcs[k], allow_nonfinite, names[k]);
        if (rc != NVF_OK)
            return rc;
        if (a > amax || a != a)
            amax = a;
    }
    float gs = nvf_quant_group_scale(amax, p);
    for (size_t k = 0; k < n; k++) {
        int rc = nvf_backend_quantize(b, packed[k], scales[k], &srcs[k], gs, p);
        if (rc != NVF_OK)
            return rc;
    }
    *out_gs = gs;
    return NVF_OK;
}

int nvf_backend_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                             int check_finite, const char *name) {
    if (!b->ops->dequant_bf16)
        return missing(b, "dequant_bf16");
    return b->ops->dequant_bf16(b, out, s, check_finite, name);
}

/* Sizes far beyond any checkpoint (2^31 rows or scale columns) are refused, so that a layout's
 * padded bytes fit an int64 in the index functions of every backend. */
#define LAYOUT_DIM_MAX ((int64_t)1 << 31)

int nvf_backend_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                       nvf_layout from, int64_t rows, int64_t kcols, size_t n) {
    if (!b->ops->layout)
        return missing(b, "layout");
    if ((unsigned)to > NVF_LAYOUT_8X4 || (unsigned)from > NVF_LAYOUT_8X4)
        return nvf_error_set(NVF_E_INVALID, "layout: unknown scale layout %d (to) or %d (from)",
                             (int)to, (int)from);
    if (rows < 0 || kcols < 0 || rows >= LAYOUT_DIM_MAX || kcols >= LAYOUT_DIM_MAX)
        return nvf_error_set(NVF_E_INVALID, "layout: %lld x %lld scales out of range",
                             (long long)rows, (long long)kcols);
    int64_t sb = nvf_layout_bytes(from, rows, kcols), db = nvf_layout_bytes(to, rows, kcols);
    int64_t most = sb > db ? sb : db;
    if (most > 0 && n > (size_t)(PTRDIFF_MAX / most))
        return nvf_error_set(NVF_E_INVALID,
                             "layout: %zu matrices of %lld x %lld scales overflow the address "
                             "space",
                             n, (long long)rows, (long long)kcols);
    if (n == 0 || rows == 0 || kcols == 0)
        return NVF_OK;
    return b->ops->layout(b, dst, to, src, from, rows, kcols, n);
}

int nvf_backend_moe_route(nvf_backend *b, int32_t *ids, float *weights, const float *logits,
                          const float *bias, int64_t t, const nvf_moe_router *r) {
    /* nvf_moe_route_ref's checks (lib/moe/moe_route.c), on every backend */
    int rc = nvf_moe_router_check(r, t);
    if (rc != NVF_OK)
        return rc;
    if (!b->ops->moe_route)
        return missing(b, "moe_route");
    if (t == 0)
        return NVF_OK;
    return b->ops->moe_route(b, ids, weights, logits, bias, t, r);
}

int nvf_backend_moe(nvf_backend *b, float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                    const float *weights, int64_t top_k, int64_t expert0, const nvf_moe_prepared *w,
                    const nvf_moe_act_params *act, const nvf_quant_params *q) {
    if (!b->ops->moe)
        return missing(b, "moe");
    if (t <= 0 || top_k <= 0 || !w || w->n_experts <= 0)
        return nvf_error_set(NVF_E_INVALID, "moe: %lld tokens, top-%lld, %lld experts",
                             (long long)t, (long long)top_k, w ? (long long)w->n_experts : 0LL);
    if ((w->w13_input_scale == NULL) != (w->fc2_input_scale == NULL))
        return nvf_error_set(NVF_E_INVALID,
                             "moe: W4A4 needs both w13_input_scale and fc2_input_scale");
    if (w->act_scales != NVF_MOE_ACT_SCALES_INPUT && w->act_scales != NVF_MOE_ACT_SCALES_TENSOR &&
        w->act_scales != NVF_MOE_ACT_SCALES_TOKEN)
        return nvf_error_set(NVF_E_INVALID, "moe: activation scales %d (0, 1 or 2)",
                             (int)w->act_scales);
    if (w->act_scales != NVF_MOE_ACT_SCALES_INPUT && w->w13_input_scale)
        return nvf_error_set(NVF_E_INVALID,
                             "moe: computed activation scales (%d) and input scales both given",
                             (int)w->act_scales);
    return b->ops->moe(b, y, x, t, ids, weights, top_k, expert0, w, act, q);
}

int nvf_backend_bench_moe(nvf_backend *b, nvf_moe_bench_result *out,
                          const nvf_moe_bench_shape *shape, const int64_t *tokens, size_t n,
                          int w4a4, int runs, const volatile sig_atomic_t *stop) {
    if (!b->ops->bench_moe)
        return missing(b, "bench_moe");
    return b->ops->bench_moe(b, out, shape, tokens, n, w4a4, runs, stop);
}

int nvf_backend_bench_quant(nvf_backend *b, double *out_s, nvf_dtype dtype, int64_t rows,
                            int64_t cols, const nvf_quant_params *p, nvf_backend_bench_pass pass,
                            int runs, const volatile sig_atomic_t *stop) {
    if (!b->ops->bench_quant)
        return missing(b, "bench_quant");
    if (runs <= 0 || rows < 1 || cols < NVF_BLOCK || cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_INVALID,
                             "bench quant: %d runs of [%lld, %lld] (need runs > 0, rows > 0, cols "
                             "a positive multiple of 16)",
                             runs, (long long)rows, (long long)cols);
    return b->ops->bench_quant(b, out_s, dtype, rows, cols, p, pass, runs, stop);
}

int nvf_backend_config_count(const nvf_backend *b) {
    return b->ops->config_count ? b->ops->config_count(b) : 0;
}

int nvf_backend_set_config(nvf_backend *b, int config, size_t chunk_bytes) {
    if (!b->ops->set_config)
        return nvf_error_set(NVF_E_UNSUPPORTED, "the %s backend has no launch configurations",
                             b->ops->name);
    return b->ops->set_config(b, config, chunk_bytes);
}

void nvf_backend_set_group_budget(size_t bytes) {
#ifdef NVFP4_HAVE_CUDA
    nvf_backend_cuda_set_group_budget(bytes);
#else
    (void)bytes;
#endif
}
