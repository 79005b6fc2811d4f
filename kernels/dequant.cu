/*
 * BF16 dequantization on the GPU: every value of a checked source as nvf_quant_source_load_row
 * gives it (FP8-block values bf16(RN(f32(fp8) * scale)), others exact), then rounded to BF16 by
 * nvf_f32_to_bf16_rn — the same format.h functions and the same single rounded multiply as the
 * CPU backend's nvf_backend_cpu_dequant_bf16, so the bytes (NaN signs and payloads included) are
 * equal.
 */
#include "quant_launch.h"

#include "nvfp4/format.h"

#include <cuda_runtime.h>

/* ---- kernels ----------------------------------------------------------------------------- */

/* Value l of the job, as the CPU's row loader computes it. */
__device__ static float dq_value(const quant_job &j, int32_t dtype, int64_t br, int64_t bc,
                                 int has_scale, int64_t l) {
    switch (dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32(((const uint16_t *)j.src)[l]);
    case NVF_DTYPE_F16:
        return nvf_f16_to_f32(((const uint16_t *)j.src)[l]);
    case NVF_DTYPE_F32:
        return ((const float *)j.src)[l];
    case NVF_DTYPE_F8_E5M2:
        return nvf_e5m2_to_f32(j.src[l]);
    default: {
        float v = nvf_e4m3_to_f32(j.src[l]);
        if (!has_scale)
            return v;
        int64_t row = j.w != j.cols ? j.row0 : j.row0 + l / j.w;
        int64_t col = j.w != j.cols ? j.col0 + l : l % j.w;
        float m = j.scale[(row / br - j.srow0) * j.ncb + col / bc];
        float x = __fmul_rn(v, m);
        /* A NaN product as the host's SSE multiply gives it, not the GPU's canonical NaN: the
         * NaN operand quieted (the value's when both are NaN), or the default NaN 0xFFC00000
         * for 0 * inf, so that the BF16 bytes keep the host's sign and payload. */
        if (v != v)
            x = v;
        else if (m != m)
            x = nvf_f32_from_bits(nvf_f32_bits(m) | 0x00400000u);
        else if (x != x)
            x = nvf_f32_from_bits(0xFFC00000u);
        return nvf_bf16_to_f32(nvf_f32_to_bf16_rn(x));
    }
    }
}

__global__ void dequant_kernel(quant_job j, int32_t dtype, int64_t br, int64_t bc, int has_scale,
                               uint16_t *out, int check_finite) {
    int64_t n = j.nblocks * 16;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < n;
         l += (int64_t)gridDim.x * blockDim.x) {
        uint16_t h = nvf_f32_to_bf16_rn(dq_value(j, dtype, br, bc, has_scale, l));
        out[l] = h;
        if (check_finite && (h & 0x7F80u) == 0x7F80u) {
            int64_t row = j.w != j.cols ? j.row0 : j.row0 + l / j.w;
            int64_t col = j.w != j.cols ? j.col0 + l : l % j.w;
            atomicMin(j.bad, (unsigned long long)(row * j.cols + col));
        }
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

void quant_launch_dequant(const quant_job &j, const nvf_quant_source *s, uint16_t *out,
                          int check_finite, int sms, cudaStream_t st) {
    int64_t n = j.nblocks * 16, threads = 256;
    int64_t grid = (n + threads - 1) / threads, cap = (int64_t)sms * 8;
    if (grid > cap)
        grid = cap;
    if (grid < 1)
        grid = 1;
    dequant_kernel<<<(int)grid, (int)threads, 0, st>>>(
        j, (int32_t)s->dtype, s->block_rows, s->block_cols, s->scale != NULL, out, check_finite);
}
