/*
 * MoE routing on the GPU (kernels/export/kernels/moe_route.h): lib/moe's nvf_moe_route_ref
 * re-typed for one warp per token. Each warp keeps its token's scores in shared memory; every
 * arg-max of the reference (a strict comparison over ids in ascending order, NaN skipped) is a
 * warp-wide reduction under the order (value descending, id ascending), which picks the same id:
 * the lowest id among the largest values. What the reference sums sequentially (the softmax
 * denominator in id order, the weights in selection order) lane 0 sums in the same order. The
 * softmax maximum is a warp reduction with the reference's `>`: with NaN never taken it is the
 * same value, up to the sign of a zero, which changes neither l - m nor e^(l - m). All f32
 * arithmetic is written with the _rn intrinsics (never contracted) and expf is glibc's
 * (route_expf.h), so the GPU makes its choices on the reference's own bits.
 */
#include "kernels/moe_route.h"

#include "cuda_ctx.h"
#include "route_expf.h"

#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdint.h>

#define ROUTE_WARPS 4
#define ROUTE_SMEM  (48 * 1024) /* shared memory of a block without opting in */
#define FULL_MASK   0xFFFFFFFFu
#define RENORM_EPS  1e-20f /* lib/moe/moe_route.c: transformers' DeepSeek-V3 denominator */

enum { SOFTMAX_TOPK = 0, SIGMOID_TOPK = 1, DEEPSEEK_V3 = 2, TOPK_SOFTMAX = 3 };

struct arg_best {
    float v;
    int32_t i; /* -1: none */
};

/* The reference's arg_max over s[lo, hi) without id `skip` (-1: none) and NaN: the largest
 * value, the lowest id among equal values (-0 == +0); i -1 when none. Every lane returns it. */
__device__ arg_best warp_arg_max(const float *s, int64_t lo, int64_t hi, int64_t skip, int lane) {
    arg_best b = {0.0f, -1};
    for (int64_t e = lo + lane; e < hi; e += 32) {
        float v = s[e];
        if (e != skip && !isnan(v) && (b.i < 0 || v > b.v)) {
            b.v = v;
            b.i = (int32_t)e;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(FULL_MASK, b.v, off);
        int32_t oi = __shfl_xor_sync(FULL_MASK, b.i, off);
        if (oi >= 0 && (b.i < 0 || ov > b.v || (ov == b.v && oi < b.i))) {
            b.v = ov;
            b.i = oi;
        }
    }
    return b;
}

/* DeepSeek-V3's group limit (the reference's keep_groups): a group's score is the sum of its
 * two largest sb (one when a group has one expert, -inf when all are NaN); lane 0 keeps the
 * topk_group best groups by the reference's sequential arg-max; the experts of the other groups
 * get NaN, which no later arg-max takes (the reference's `allowed` mask). */
__device__ void keep_groups(float *sb, float *gscore, float *gkept, int64_t n, int64_t groups,
                            int64_t topk_group, int lane) {
    int64_t per = n / groups;
    for (int64_t g = 0; g < groups; g++) {
        arg_best a = warp_arg_max(sb, g * per, g * per + per, -1, lane);
        arg_best b = {0.0f, -1};
        if (per >= 2 && a.i >= 0)
            b = warp_arg_max(sb, g * per, g * per + per, a.i, lane);
        if (lane == 0) {
            gscore[g] = a.i >= 0 ? a.v : -INFINITY;
            if (b.i >= 0)
                gscore[g] = __fadd_rn(gscore[g], b.v);
            gkept[g] = 0.0f;
        }
    }
    if (lane == 0)
        for (int64_t j = 0; j < topk_group; j++) {
            int64_t best = -1;
            for (int64_t g = 0; g < groups; g++) {
                if (gkept[g] != 0.0f || isnan(gscore[g]))
                    continue;
                if (best < 0 || gscore[g] > gscore[best])
                    best = g;
            }
            if (best < 0)
                break;
            gkept[best] = 1.0f;
        }
    __syncwarp();
    for (int64_t e = lane; e < n; e += 32)
        if (gkept[e / per] == 0.0f)
            sb[e] = __int_as_float(0x7fc00000); /* NaN */
    __syncwarp();
}

/* Block: `warps` tokens, warp w token blockIdx.x * warps + w; shared memory per warp: score and
 * choice [n], and with groups gscore and gkept [n_group]. */
__global__ void route_kernel(int32_t *ids, float *weights, const float *logits, const float *bias,
                             int64_t t, nvf_moe_router r, int warps) {
    extern __shared__ float smem[];
    int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    int64_t tok = (int64_t)blockIdx.x * warps + warp;
    if (tok >= t)
        return;
    int64_t n = r.n_experts, k = r.top_k;
    int64_t groups = r.kind == DEEPSEEK_V3 && r.n_group > 1 ? r.n_group : 0;
    float *score = smem + (int64_t)warp * (2 * n + 2 * groups), *choice = score + n;
    const float *l = logits + tok * n;
    int32_t *id = ids + tok * k;
    float *w = weights + tok * k;
    if (r.kind == SOFTMAX_TOPK) {
        float m = -INFINITY;
        for (int64_t e = lane; e < n; e += 32)
            m = l[e] > m ? l[e] : m;
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_xor_sync(FULL_MASK, m, off);
            m = o > m ? o : m;
        }
        for (int64_t e = lane; e < n; e += 32)
            score[e] = nvf_route_expf(__fsub_rn(l[e], m));
        __syncwarp();
        float sum = 0.0f;
        if (lane == 0)
            for (int64_t e = 0; e < n; e++)
                sum = __fadd_rn(sum, score[e]);
        sum = __shfl_sync(FULL_MASK, sum, 0);
        __syncwarp();
        for (int64_t e = lane; e < n; e += 32) {
            float p = __fdiv_rn(score[e], sum);
            score[e] = p;
            choice[e] = p;
        }
    } else if (r.kind == TOPK_SOFTMAX) {
        for (int64_t e = lane; e < n; e += 32)
            choice[e] = bias ? __fadd_rn(l[e], bias[e]) : l[e];
    } else { /* sigmoid_topk, deepseek_v3 */
        for (int64_t e = lane; e < n; e += 32) {
            float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, nvf_route_expf(-l[e])));
            score[e] = s;
            choice[e] = bias ? __fadd_rn(s, bias[e]) : s;
        }
        if (groups) {
            __syncwarp();
            keep_groups(choice, choice + n, choice + n + groups, n, groups, r.topk_group, lane);
        }
    }
    __syncwarp();
    /* top-k in selection order; w[j] holds the chosen choice value until the weights */
    for (int64_t j = 0; j < k; j++) {
        arg_best b = warp_arg_max(choice, 0, n, -1, lane);
        if (lane == 0) {
            id[j] = b.i;
            w[j] = b.i >= 0 ? b.v : 0.0f;
            if (b.i >= 0)
                choice[b.i] = __int_as_float(0x7fc00000); /* taken */
        }
        __syncwarp();
    }
    if (lane != 0)
        return;
    if (r.kind == TOPK_SOFTMAX) {
        /* softmax over the selected choice values; the first is the largest */
        float m = id[0] >= 0 ? w[0] : 0.0f, sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            float v = id[j] >= 0 ? nvf_route_expf(__fsub_rn(w[j], m)) : 0.0f;
            w[j] = v;
            sum = __fadd_rn(sum, v);
        }
        for (int64_t j = 0; j < k; j++)
            w[j] = __fdiv_rn(w[j], sum);
    } else {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            float v = id[j] >= 0 ? score[id[j]] : 0.0f;
            w[j] = v;
            sum = __fadd_rn(sum, v);
        }
        if (r.renormalize) {
            if (r.kind != SOFTMAX_TOPK)
                sum = __fadd_rn(sum, RENORM_EPS);
            for (int64_t j = 0; j < k; j++)
                w[j] = __fdiv_rn(w[j], sum);
        }
    }
    for (int64_t j = 0; j < k; j++)
        w[j] = __fmul_rn(w[j], r.routed_scaling_factor);
}

/* ---- launchers --------------------------------------------------------------------------- */

/* nvf_moe_router_check, plus the shared memory of one warp. */
static int check_router(const nvf_moe_router *r, int64_t t, int64_t *warp_bytes) {
    int rc = nvf_moe_router_check(r, t);
    if (rc)
        return rc;
    int64_t groups = r->kind == DEEPSEEK_V3 && r->n_group > 1 ? r->n_group : 0;
    *warp_bytes = (2 * r->n_experts + 2 * groups) * (int64_t)sizeof(float);
    if (*warp_bytes > ROUTE_SMEM)
        return nvf_error_set(NVF_E_INVALID,
                             "MoE routing on the GPU: %lld experts do not fit one warp's shared "
                             "memory (%d bytes)",
                             (long long)r->n_experts, ROUTE_SMEM);
    return 0;
}

extern "C" int nvf_cuda_moe_route_spec(int32_t *ids, float *weights, const float *logits,
                                       const float *bias, int64_t t, const nvf_moe_router *r,
                                       struct CUstream_st *stream) {
    int64_t warp_bytes = 0;
    int rc = check_router(r, t, &warp_bytes);
    if (rc || t == 0)
        return rc;
    int warps = warp_bytes * ROUTE_WARPS <= ROUTE_SMEM ? ROUTE_WARPS : 1;
    int64_t blocks = (t + warps - 1) / warps;
    if (blocks > INT32_MAX)
        return nvf_error_set(NVF_E_INVALID, "MoE routing: %lld tokens", (long long)t);
    route_kernel<<<(unsigned)blocks, (unsigned)(32 * warps), (size_t)(warp_bytes * warps),
                   stream>>>(ids, weights, logits, bias, t, *r, warps);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

extern "C" int nvf_cuda_moe_route_host(int32_t *ids, float *weights, const float *logits,
                                       const float *bias, int64_t t, const nvf_moe_router *r,
                                       int device) {
    int64_t warp_bytes = 0;
    int rc = check_router(r, t, &warp_bytes);
    if (rc || t == 0)
        return rc;
    size_t n_l = (size_t)(t * r->n_experts), n_s = (size_t)(t * r->top_k);
    float *d_logits = NULL, *d_bias = NULL, *d_w = NULL;
    int32_t *d_ids = NULL;
    NVF_CUDA_TRY(cudaSetDevice(device));
    if ((rc = nvf_cuda_alloc((void **)&d_logits, n_l * sizeof(float), "router logits")) ||
        (rc = nvf_cuda_alloc((void **)&d_ids, n_s * sizeof(int32_t), "routed expert ids")) ||
        (rc = nvf_cuda_alloc((void **)&d_w, n_s * sizeof(float), "routing weights")))
        goto done;
    if (bias && (rc = nvf_cuda_alloc((void **)&d_bias, (size_t)r->n_experts * sizeof(float),
                                     "router correction bias")))
        goto done;
    NVF_CUDA_TRY(cudaMemcpy(d_logits, logits, n_l * sizeof(float), cudaMemcpyHostToDevice));
    if (bias)
        NVF_CUDA_TRY(
            cudaMemcpy(d_bias, bias, (size_t)r->n_experts * sizeof(float), cudaMemcpyHostToDevice));
    if ((rc = nvf_cuda_moe_route_spec(d_ids, d_w, d_logits, d_bias, t, r, NULL)))
        goto done;
    NVF_CUDA_TRY(cudaMemcpy(ids, d_ids, n_s * sizeof(int32_t), cudaMemcpyDeviceToHost));
    NVF_CUDA_TRY(cudaMemcpy(weights, d_w, n_s * sizeof(float), cudaMemcpyDeviceToHost));
done:
    nvf_cuda_free(d_logits);
    nvf_cuda_free(d_bias);
    nvf_cuda_free(d_ids);
    nvf_cuda_free(d_w);
    return rc;
}
