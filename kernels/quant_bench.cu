/*
 * The quantizer's benchmark on device-resident data (nvf_cuda_quant_bench in quant_pipeline.h):
 * synthetic values generated on the device, the passes timed with CUDA events, nothing staged
 * from the host, so the figures are the kernels' own.
 */
#include "kernels/quant_pipeline.h"

#include "cuda_ctx.h"
#include "quant_launch.h"

#include "nvfp4/format.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

/* Deterministic synthetic values: BF16 close to N(0,1) (sum of four uniforms), or E4M3 bytes of
 * the same distribution (never NaN). */
__global__ void fill_kernel(uint8_t *dst, int64_t n, int fp8) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
        float acc = 0.0f;
        for (int k = 0; k < 4; k++) {
            h ^= h >> 31;
            h *= 0xBF58476D1CE4E5B9ull;
            h ^= h >> 29;
            acc = __fadd_rn(acc, __fmul_rn((float)(h >> 40), 5.96046448e-08f));
        }
        float v = __fmul_rn(__fsub_rn(acc, 2.0f), 1.7320508f);
        if (fp8)
            dst[i] = nvf_f32_to_e4m3_sat(__fmul_rn(v, 64.0f));
        else
            ((uint16_t *)dst)[i] = nvf_f32_to_bf16_rn(v);
    }
}

__global__ void fill_scale_kernel(float *dst, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = nvf_e8m0_to_f32((uint8_t)(118 + (i * 7) % 5)); /* 2^-9 .. 2^-5 */
}

static int cmp_float(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static int64_t ceil_div64(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

extern "C" int nvf_cuda_quant_bench(nvf_cuda_quant *q, double *out_s, nvf_dtype dtype, int64_t rows,
                                    int64_t cols, const nvf_quant_params *p, int pass, int runs,
                                    const volatile sig_atomic_t *stop) {
    if (dtype != NVF_DTYPE_BF16 && dtype != NVF_DTYPE_F8_E4M3)
        return nvf_error_set(NVF_E_UNSUPPORTED, "bench quant: no %s input on the GPU",
                             nvf_dtype_name(dtype));
    nvf_cuda_ctx *ctx = nvf_cuda_quant_ctx(q);
    int rc = nvf_cuda_ctx_activate(ctx);
    if (rc < 0)
        return rc;
    int fp8 = dtype == NVF_DTYPE_F8_E4M3;
    int64_t n = rows * cols, nsc = ceil_div64(rows, 128) * ceil_div64(cols, 128);
    size_t in_bytes = (size_t)n * (fp8 ? 1 : 2), out_bytes = (size_t)n / 2 + (size_t)n / 16;
    uint8_t *d_in = NULL, *d_out = NULL;
    float *d_scale = NULL, *times = NULL;
    unsigned int *d_amax = NULL;
    unsigned long long *d_bad = NULL;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    cudaStream_t st = ctx->streams[0];
    float gs; /* the quantizing pass alone: the group scale of amax 4 */
    nvf_quant_source s;
    memset(&s, 0, sizeof s);
    s.dtype = fp8 ? NVF_DTYPE_F8_E4M3 : NVF_DTYPE_BF16;
    s.rows = rows;
    s.cols = cols;
    s.block_rows = s.block_cols = 128;
    quant_job j;
    memset(&j, 0, sizeof j);
    const launch_cfg *cfg = NULL;
    times = (float *)calloc((size_t)runs, sizeof *times);
    if (!times) {
        rc = nvf_error_set(NVF_E_NOMEM, "out of memory");
        goto done;
    }
    NVF_CUDA_TRY(cudaMalloc((void **)&d_in, in_bytes));
    NVF_CUDA_TRY(cudaMalloc((void **)&d_out, pass == 2 ? in_bytes : out_bytes));
    NVF_CUDA_TRY(cudaMalloc((void **)&d_scale, (size_t)nsc * sizeof(float)));
    NVF_CUDA_TRY(cudaMalloc((void **)&d_amax, sizeof *d_amax));
    NVF_CUDA_TRY(cudaMalloc((void **)&d_bad, sizeof *d_bad));
    NVF_CUDA_TRY(cudaEventCreate(&ev0));
    NVF_CUDA_TRY(cudaEventCreate(&ev1));
    fill_kernel<<<ctx->sms * 8, 256, 0, st>>>(d_in, n, fp8);
    fill_scale_kernel<<<ctx->sms, 256, 0, st>>>(d_scale, nsc);
    NVF_CUDA_TRY(cudaGetLastError());
    s.data = d_in;
    s.scale = fp8 ? d_scale : NULL; /* the FP8 source is block-scaled */
    cfg = &quant_cfg_for(&s, nvf_cuda_quant_cfg(q));
    j.src = d_in;
    j.nblocks = n / NVF_BLOCK;
    j.w = cols;
    j.cols = cols;
    j.scale = fp8 ? d_scale : NULL;
    j.ncb = ceil_div64(cols, 128);
    j.amax = d_amax;
    j.bad = d_bad; /* the data is finite: never written */
    /* E = 256 (the times recorded so far), or ModelOpt's sf2 = RN(4 / 2688) */
    gs = p->method == NVF_QUANT_METHOD_RTN_MODELOPT ? nvf_qb_group_scale(4.0f, p) : 384.0f;
    for (int r = -3; r < runs; r++) {
        if (stop && *stop) {
            rc = nvf_error_set(NVF_E_INTERRUPTED, "bench quant: interrupted");
            goto done;
        }
        NVF_CUDA_TRY(cudaEventRecord(ev0, st));
        if (pass == 2) {
            NVF_CUDA_TRY(cudaMemcpyAsync(d_out, d_in, in_bytes, cudaMemcpyDeviceToDevice, st));
        } else {
            if (pass == 1) {
                NVF_CUDA_TRY(cudaMemsetAsync(d_amax, 0, sizeof(unsigned int), st));
                quant_launch_amax(j, &s, *cfg, ctx->sms, st);
            }
            quant_launch_quant(j, &s, d_out, d_out + n / 2, gs, pass == 1 ? d_amax : NULL, p, *cfg,
                               ctx->sms, st);
        }
        NVF_CUDA_TRY(cudaEventRecord(ev1, st));
        NVF_CUDA_TRY(cudaEventSynchronize(ev1));
        NVF_CUDA_TRY(cudaGetLastError());
        if (r >= 0)
            NVF_CUDA_TRY(cudaEventElapsedTime(&times[r], ev0, ev1));
    }
    qsort(times, (size_t)runs, sizeof *times, cmp_float);
    *out_s = (runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2])) * 1e-3;
done:
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_scale);
    cudaFree(d_amax);
    cudaFree(d_bad);
    free(times);
    return rc;
}
