/* The CUDA backend: the kernels of kernels/ behind the ops table (built only with CUDA). The
 * backend's state is the device's quantizer state (kernels/quant_pipeline.h: its context,
 * streams, staging buffers and launch configuration) and the layout staging state on the same
 * context (kernels/scale_layout.h), used by one thread at a time. */
#include "backend_internal.h"

#ifdef NVFP4_HAVE_CUDA

#include "kernels/moe_gemm.h"
#include "kernels/moe_route.h"
#include "kernels/quant_pipeline.h"
#include "kernels/scale_layout.h"

#include "nvfp4/status.h"

#include <stdlib.h>

typedef struct cuda_state {
    nvf_cuda_quant *q;
    nvf_cuda_layout *l;
} cuda_state;

static nvf_cuda_quant *quant_of(nvf_backend *b) {
    return ((cuda_state *)b->state)->q;
}

static void cuda_close(nvf_backend *b) {
    cuda_state *st = b->state;
    if (!st)
        return;
    nvf_cuda_layout_close(st->l); /* before the quantizer state, whose context it borrows */
    nvf_cuda_quant_close(st->q);
    free(st);
    b->state = NULL;
}

static int cuda_open(nvf_backend *b, int threads) {
    (void)threads;
    cuda_state *st = calloc(1, sizeof *st);
    if (!st)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the backend of cuda:%d", b->device.index);
    b->state = st;
    int rc = nvf_cuda_quant_open(&st->q, b->device.index);
    if (rc == NVF_OK)
        rc = nvf_cuda_layout_open(&st->l, nvf_cuda_quant_ctx(st->q));
    if (rc != NVF_OK)
        cuda_close(b);
    return rc;
}

static int cuda_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                     const char *name) {
    return nvf_cuda_quant_amax(quant_of(b), out, s, allow_nonfinite, name);
}

static int cuda_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales,
                         const nvf_quant_source *s, float gs, const nvf_quant_params *p) {
    return nvf_cuda_quant_source(quant_of(b), packed, scales, s, gs, p);
}

static int cuda_quantize_group(nvf_backend *b, float *out_gs, uint8_t *const *packed,
                               uint8_t *const *scales, const nvf_quant_source *srcs,
                               const char *const *names, size_t n, const nvf_quant_params *p,
                               int allow_nonfinite) {
    return nvf_cuda_quant_group(quant_of(b), out_gs, packed, scales, srcs, names, n, p,
                                allow_nonfinite);
}

static int cuda_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                             int check_finite, const char *name) {
    return nvf_cuda_quant_dequant_bf16(quant_of(b), out, s, check_finite, name);
}

static int cuda_bench_quant(nvf_backend *b, double *out_s, nvf_dtype dtype, int64_t rows,
                            int64_t cols, const nvf_quant_params *p, nvf_backend_bench_pass pass,
                            int runs, const volatile sig_atomic_t *stop) {
    return nvf_cuda_quant_bench(quant_of(b), out_s, dtype, rows, cols, p, (int)pass, runs, stop);
}

static int cuda_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                       nvf_layout from, int64_t rows, int64_t kcols, size_t n) {
    return nvf_cuda_layout_host(((cuda_state *)b->state)->l, dst, to, src, from, rows, kcols, n);
}

static int cuda_moe_route(nvf_backend *b, int32_t *ids, float *weights, const float *logits,
                          const float *bias, int64_t t, const nvf_moe_router *r) {
    return nvf_cuda_moe_route_host(ids, weights, logits, bias, t, r, b->device.index);
}

static int cuda_moe(nvf_backend *b, float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                    const float *weights, int64_t top_k, int64_t expert0, const nvf_moe_prepared *w,
                    const nvf_moe_act_params *act, const nvf_quant_params *q) {
    nvf_cuda_moe_layer l = {
        .n_experts = w->n_experts,
        .hidden = w->hidden,
        .inter = w->inter,
        .gated = w->gated,
        .w13 = w->w13,
        .w13_sf = w->w13_sf,
        .w2 = w->w2,
        .w2_sf = w->w2_sf,
        .w13_alpha = w->w13_alpha,
        .w2_alpha = w->w2_alpha,
        .w13_input_scale = w->w13_input_scale,
        .fc2_input_scale = w->fc2_input_scale,
        .act_scales = w->act_scales,
    };
    nvf_cuda_moe_act a = {act->act,          act->swiglu_alpha, act->swiglu_beta,
                          act->swiglu_limit, act->situ_beta,    act->situ_beta_l};
    return nvf_cuda_moe_host(y, x, t, ids, weights, top_k, expert0, &l, &a, q, b->device.index);
}

static int cuda_bench_moe(nvf_backend *b, nvf_moe_bench_result *out,
                          const nvf_moe_bench_shape *shape, const int64_t *tokens, size_t n,
                          int w4a4, int runs, const volatile sig_atomic_t *stop) {
    nvf_cuda_moe_bench_shape s = {shape->hidden,      shape->inter, shape->n_experts_total,
                                  shape->n_local,     shape->top_k, shape->router,
                                  shape->router_bias, shape->eager};
    nvf_cuda_moe_bench_result *r = calloc(n ? n : 1, sizeof *r);
    if (!r)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the bench results");
    int rc = nvf_cuda_moe_bench(r, &s, tokens, n, w4a4, runs, stop, b->device.index);
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        out[i].ms = r[i].ms;
        out[i].weight_bytes = r[i].weight_bytes;
        out[i].flops = r[i].flops;
        out[i].copy_gbps = r[i].copy_gbps;
        out[i].active_experts = r[i].active_experts;
    }
    free(r);
    return rc;
}

static int cuda_config_count(const nvf_backend *b) {
    (void)b;
    return nvf_cuda_quant_config_count();
}

static int cuda_set_config(nvf_backend *b, int config, size_t chunk_bytes) {
    int rc = nvf_cuda_quant_set_config(quant_of(b), config, chunk_bytes);
    if (rc == NVF_OK)
        nvf_cuda_layout_set_chunk(((cuda_state *)b->state)->l, chunk_bytes);
    return rc;
}

static int cuda_host_alloc(nvf_backend *b, void **out, size_t bytes) {
    return nvf_cuda_quant_host_alloc(quant_of(b), out, bytes);
}

static void cuda_host_free(nvf_backend *b, void *p) {
    nvf_cuda_quant_host_free(quant_of(b), p);
}

const nvf_backend_ops nvf_backend_cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .amax = cuda_amax,
    .quantize = cuda_quantize,
    .quantize_group = cuda_quantize_group,
    .dequant_bf16 = cuda_dequant_bf16,
    .layout = cuda_layout,
    .bench_quant = cuda_bench_quant,
    .moe_route = cuda_moe_route,
    .moe = cuda_moe,
    .bench_moe = cuda_bench_moe,
    .config_count = cuda_config_count,
    .set_config = cuda_set_config,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .prefers_staged = 1,
};

void nvf_backend_cuda_set_group_budget(size_t bytes) {
    nvf_cuda_quant_set_group_budget(bytes);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int nvf_backend_cuda_unused;

#endif
