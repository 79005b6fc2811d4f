/*
 * `bench moe` on the GPU (kernels/moe_gemm.h nvf_cuda_moe_bench): a synthetic layer in the
 * prepared layout generated on the device (random E2M1 codes, E4M3 scales between 2^-3 and
 * 2^-1, alpha 2^-4), random BF16 activations in a 256 MiB pool read from a rotating offset, and
 * per run fresh random logits in (-4, 4) routed over all the experts by the shape's router
 * (kernels/moe_route.cu; with router_bias > 0, DeepSeek-V3's correction bias uniform in
 * (-router_bias, router_bias), drawn once per call), the rank's experts the first n_local (slots
 * routed elsewhere are another rank's).
 * Only the block itself (kernels/moe.cu nvf_cuda_moe_run) is inside the CUDA events; logits and
 * routing are made before the first event. Unless the shape says eager, the block is captured
 * once per token count and its CUDA graph replayed (the launches of its seven kernels are then
 * not what is timed at few tokens), as bench/moe_baseline.py replays the BF16 block.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"

#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BYTES ((size_t)256 << 20)
#define COPY_BYTES ((size_t)1 << 30)
#define WARMUP     3

/* ---- kernels ----------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* kind 0: random bytes; 1: E4M3 scale bytes 0x28..0x37 (2^-3 .. < 2^-1); 2: BF16 in (-4, 4);
 * 3: f32 in (-4 scale, 4 scale) (logits, the correction bias) */
__global__ void fill_kernel(void *p, size_t n, uint64_t seed, int kind, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t r = mix(seed * 0x9E3779B97F4A7C15ull + i);
        float f = ((float)(r >> 8) / 16777216.0f - 0.5f) * 8.0f;
        if (kind == 0)
            ((uint8_t *)p)[i] = (uint8_t)r;
        else if (kind == 1)
            ((uint8_t *)p)[i] = (uint8_t)(0x28u + (r & 15u));
        else if (kind == 2)
            ((uint16_t *)p)[i] = (uint16_t)(__float_as_uint(f) >> 16);
        else
            ((float *)p)[i] = f * scale;
    }
}

__global__ void const_kernel(float *p, size_t n, float v) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* ---- launchers --------------------------------------------------------------------------- */

static int fill(void *p, size_t n, uint64_t seed, int kind, cudaStream_t st, float scale = 1.0f) {
    int rc = 0;
    fill_kernel<<<1024, 256, 0, st>>>(p, n, seed, kind, scale);
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int copy_bandwidth(double *out, cudaStream_t st, cudaEvent_t ev0, cudaEvent_t ev1) {
    int rc = 0;
    void *a = NULL, *b = NULL;
    float times[5];
    if ((rc = nvf_cuda_alloc(&a, COPY_BYTES, "copy source")) ||
        (rc = nvf_cuda_alloc(&b, COPY_BYTES, "copy destination")))
        goto done;
    for (int r = -1; r < 5; r++) {
        NVF_CUDA_TRY(cudaEventRecord(ev0, st));
        NVF_CUDA_TRY(cudaMemcpyAsync(b, a, COPY_BYTES, cudaMemcpyDeviceToDevice, st));
        NVF_CUDA_TRY(cudaEventRecord(ev1, st));
        NVF_CUDA_TRY(cudaEventSynchronize(ev1));
        if (r >= 0)
            NVF_CUDA_TRY(cudaEventElapsedTime(&times[r], ev0, ev1));
    }
    qsort(times, 5, sizeof *times, cmp_float);
    *out = 2.0 * (double)COPY_BYTES / (times[2] * 1e-3) / 1e9; /* read + write */
done:
    nvf_cuda_free(a);
    nvf_cuda_free(b);
    return rc;
}

/* The block of t tokens (input xs) captured from stream st into *graph, instantiated in *exec. */
static int capture_block(cudaGraph_t *graph, cudaGraphExec_t *exec, nvf_cuda_moe *m, float *y,
                         const uint16_t *xs, int64_t t, const int32_t *ids, const float *wts,
                         const nvf_cuda_moe_act *act, cudaStream_t st) {
    int rc = 0;
    NVF_CUDA_TRY(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    rc = nvf_cuda_moe_run(m, y, xs, t, ids, wts, 0, act, NULL, st);
    {
        cudaError_t end = cudaStreamEndCapture(st, graph); /* ends the capture whatever rc */
        if (rc)
            goto done;
        NVF_CUDA_TRY(end);
    }
    NVF_CUDA_TRY(cudaGraphInstantiate(exec, *graph, 0));
done:
    return rc;
}

extern "C" int nvf_cuda_moe_bench(nvf_cuda_moe_bench_result *out,
                                  const nvf_cuda_moe_bench_shape *sh, const int64_t *tokens,
                                  size_t n_tokens, int w4a4, int runs,
                                  const volatile sig_atomic_t *stop, int device) {
    int rc = 0;
    int64_t H = sh->hidden, I = sh->inter, E = sh->n_local, Et = sh->n_experts_total, k = sh->top_k,
            N1 = 2 * I;
    int64_t max_t = 0;
    for (size_t i = 0; i < n_tokens; i++)
        max_t = tokens[i] > max_t ? tokens[i] : max_t;
    size_t w13_b = (size_t)(E * N1 * H / 2), w2_b = (size_t)(E * H * I / 2);
    size_t s13_b = (size_t)(E * nvf_layout_bytes(NVF_LAYOUT_128X4, N1, H / 16));
    size_t s2_b = (size_t)(E * nvf_layout_bytes(NVF_LAYOUT_128X4, H, I / 16));
    double expert_bytes = (double)(w13_b + w2_b + s13_b + s2_b) / (double)E;
    uint8_t *w13 = NULL, *w2 = NULL, *s13 = NULL, *s2 = NULL;
    float *alpha = NULL, *in_scale = NULL, *logits = NULL, *bias = NULL, *wts = NULL, *y = NULL;
    uint16_t *pool = NULL, *xs = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    int32_t *ids = NULL, *h_ids = NULL;
    float *times = NULL, *stages = NULL, *column = NULL;
    nvf_cuda_moe *m = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    double copy_gbps = 0;
    nvf_cuda_moe_layer L;
    nvf_cuda_moe_act act;
    nvf_moe_router router = sh->router;
    router.n_experts = Et;
    router.top_k = k;
    memset(&L, 0, sizeof L);
    memset(&act, 0, sizeof act);
    if (E <= 0 || Et < E || k <= 0 || k > Et || max_t <= 0 || runs <= 0)
        return nvf_error_set(NVF_E_INVALID, "bench moe: a shape or token count out of range");
    times = (float *)malloc((size_t)runs * sizeof *times);
    if (getenv("NVFP4_MOE_STAGE_EVENTS")) {
        stages = (float *)malloc((size_t)runs * NVF_CUDA_MOE_STAGES * sizeof *stages);
        column = (float *)malloc((size_t)runs * sizeof *column);
        if (!stages || !column) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the bench");
            goto done;
        }
    }
    h_ids = (int32_t *)malloc((size_t)(max_t * k) * sizeof *h_ids);
    if (!times || !h_ids) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the bench");
        goto done;
    }
    NVF_CUDA_TRY(cudaSetDevice(device));
    NVF_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    NVF_CUDA_TRY(cudaEventCreate(&ev0));
    NVF_CUDA_TRY(cudaEventCreate(&ev1));
    if ((rc = copy_bandwidth(&copy_gbps, st, ev0, ev1)))
        goto done;
    if ((rc = nvf_cuda_alloc((void **)&w13, w13_b, "bench w13")) ||
        (rc = nvf_cuda_alloc((void **)&w2, w2_b, "bench w2")) ||
        (rc = nvf_cuda_alloc((void **)&s13, s13_b, "bench w13 scales")) ||
        (rc = nvf_cuda_alloc((void **)&s2, s2_b, "bench w2 scales")) ||
        (rc = nvf_cuda_alloc((void **)&alpha, (size_t)(2 * E + 1) * 4, "bench alpha")) ||
        (rc = nvf_cuda_alloc((void **)&in_scale, (size_t)(E + 1) * 4, "bench input scales")) ||
        (rc = nvf_cuda_alloc((void **)&pool, POOL_BYTES, "bench activations")) ||
        (rc = nvf_cuda_alloc((void **)&logits, (size_t)(max_t * Et) * 4, "bench logits")) ||
        (rc = nvf_cuda_alloc((void **)&bias, (size_t)Et * 4, "bench correction bias")) ||
        (rc = nvf_cuda_alloc((void **)&ids, (size_t)(max_t * k) * 4, "bench ids")) ||
        (rc = nvf_cuda_alloc((void **)&wts, (size_t)(max_t * k) * 4, "bench weights")) ||
        (rc = nvf_cuda_alloc((void **)&y, (size_t)(max_t * H) * 4, "bench output")) ||
        (rc = nvf_cuda_alloc((void **)&xs, (size_t)(max_t * H) * 2, "bench graph input")))
        goto done;
    if ((rc = fill(w13, w13_b, 1, 0, st)) || (rc = fill(w2, w2_b, 2, 0, st)) ||
        (rc = fill(s13, s13_b, 3, 1, st)) || (rc = fill(s2, s2_b, 4, 1, st)) ||
        (rc = fill(pool, POOL_BYTES / 2, 5, 2, st)) ||
        (rc = fill(bias, (size_t)Et, 6, 3, st, sh->router_bias / 4.0f)))
        goto done;
    /* alpha 2^-4 keeps FC1's output in range; input scale 4 / (448 * 6): amax 4 */
    const_kernel<<<64, 256, 0, st>>>(alpha, (size_t)(2 * E + 1), 0.0625f);
    const_kernel<<<64, 256, 0, st>>>(in_scale, (size_t)(E + 1), 4.0f / 2688.0f);
    NVF_CUDA_TRY(cudaGetLastError());
    L.n_experts = E;
    L.n_experts_total = Et;
    L.hidden = H;
    L.inter = I;
    L.gated = 1;
    L.w13 = w13;
    L.w13_sf = s13;
    L.w2 = w2;
    L.w2_sf = s2;
    L.w13_alpha = alpha;
    L.w2_alpha = alpha + E;
    L.w13_input_scale = w4a4 ? in_scale : NULL;
    L.fc2_input_scale = w4a4 ? in_scale + E : NULL;
    if ((rc = nvf_cuda_moe_create(&m, &L, max_t, k)))
        goto done;
    for (size_t ti = 0; ti < n_tokens; ti++) {
        int64_t t = tokens[ti];
        size_t x_elems = (size_t)(t * H), pool_elems = POOL_BYTES / 2, off = 0;
        double active = 0, local_slots = 0;
        for (int r = -WARMUP; r < runs; r++) {
            if (stop && *stop) {
                rc = nvf_error_set(NVF_E_INTERRUPTED, "bench moe interrupted");
                goto done;
            }
            if ((rc = fill(logits, (size_t)(t * Et), 1000 + (uint64_t)(r + WARMUP), 3, st)) ||
                (rc = nvf_cuda_moe_route_spec(ids, wts, logits, sh->router_bias > 0 ? bias : NULL,
                                              t, &router, st)))
                goto done;
            off = (off + x_elems + 4095) / 4096 * 4096;
            if (off + x_elems > pool_elems)
                off = 0;
            /* a CUDA graph of the block (unless eager; the step events need the kernels
             * launched), captured after one eager run has set the kernels' attributes; its
             * input is copied to xs before the timed replay, as the BF16 baseline's is */
            int replay = !sh->eager && !stages && r > -WARMUP;
            if (replay) {
                NVF_CUDA_TRY(
                    cudaMemcpyAsync(xs, pool + off, x_elems * 2, cudaMemcpyDeviceToDevice, st));
                if (!exec && (rc = capture_block(&graph, &exec, m, y, xs, t, ids, wts, &act, st)))
                    goto done;
            }
            NVF_CUDA_TRY(cudaEventRecord(ev0, st));
            if (replay) {
                NVF_CUDA_TRY(cudaGraphLaunch(exec, st));
            } else if ((rc = nvf_cuda_moe_run(m, y, pool + off, t, ids, wts, 0, &act, NULL, st))) {
                goto done;
            }
            NVF_CUDA_TRY(cudaEventRecord(ev1, st));
            NVF_CUDA_TRY(cudaEventSynchronize(ev1));
            if (r < 0)
                continue;
            NVF_CUDA_TRY(cudaEventElapsedTime(&times[r], ev0, ev1));
            if (stages && (rc = nvf_cuda_moe_stage_ms(m, &stages[(size_t)r * NVF_CUDA_MOE_STAGES])))
                goto done;
            NVF_CUDA_TRY(cudaMemcpy(h_ids, ids, (size_t)(t * k) * 4, cudaMemcpyDeviceToHost));
            char seen[2048] = {0};
            for (int64_t i = 0; i < t * k; i++)
                if (h_ids[i] >= 0 && h_ids[i] < E) {
                    local_slots += 1;
                    if (!seen[h_ids[i]]) {
                        seen[h_ids[i]] = 1;
                        active += 1;
                    }
                }
        }
        if (stages) { /* each step's median, beside the block's (stderr: a diagnosis) */
            fprintf(stderr, "bench moe: %" PRId64 " tokens, step medians (ms):", t);
            static const char *names[] = {"perm", "w4a4-in", "fc1", "epilogue", "fc2", "finalize"};
            for (int i = 0; i < NVF_CUDA_MOE_STAGES; i++) {
                for (int r = 0; r < runs; r++)
                    column[r] = stages[(size_t)r * NVF_CUDA_MOE_STAGES + i];
                qsort(column, (size_t)runs, sizeof *column, cmp_float);
                fprintf(stderr, " %s %.4f", names[i], column[runs / 2]);
            }
            fprintf(stderr, "\n");
        }
        if (exec) {
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            exec = NULL;
            graph = NULL;
        }
        qsort(times, (size_t)runs, sizeof *times, cmp_float);
        out[ti].ms = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
        out[ti].active_experts = active / runs;
        out[ti].weight_bytes = active / runs * expert_bytes;
        out[ti].flops = 2.0 * local_slots / runs * (double)(N1 * H + H * I);
        out[ti].copy_gbps = copy_gbps;
    }
done:
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    nvf_cuda_free(xs);
    nvf_cuda_moe_free(m);
    nvf_cuda_free(w13);
    nvf_cuda_free(w2);
    nvf_cuda_free(s13);
    nvf_cuda_free(s2);
    nvf_cuda_free(alpha);
    nvf_cuda_free(in_scale);
    nvf_cuda_free(pool);
    nvf_cuda_free(logits);
    nvf_cuda_free(bias);
    nvf_cuda_free(ids);
    nvf_cuda_free(wts);
    nvf_cuda_free(y);
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    if (st)
        cudaStreamDestroy(st);
    free(times);
    free(stages);
    free(column);
    free(h_ids);
    return rc;
}
