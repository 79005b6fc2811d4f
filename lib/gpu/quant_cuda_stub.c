/*
 * The CUDA quantization API of nvfp4/quant_cuda.h in a build without CUDA: every call answers
 * NVF_E_DEVICE, so callers (`--device auto`) fall back to the CPU reference. With CUDA the
 * definitions come from kernels/quant.cu and this file compiles to nothing.
 */
#include "nvfp4/quant_cuda.h"

#include "nvfp4/status.h"

#ifndef NVFP4_HAVE_CUDA

int nvf_quant_amax_cuda(float *out, const nvf_quant_source *s, int allow_nonfinite, int device,
                        const char *name) {
    (void)out;
    (void)s;
    (void)allow_nonfinite;
    return nvf_error_set(NVF_E_DEVICE,
                         "tensor '%s': cuda:%d requested but this build has no CUDA support", name,
                         device);
}

int nvf_quant_source_cuda(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                          const nvf_quant_params *p, int device) {
    (void)packed;
    (void)scales;
    (void)s;
    (void)gs;
    (void)p;
    return nvf_error_set(NVF_E_DEVICE, "cuda:%d requested but this build has no CUDA support",
                         device);
}

void nvf_quant_cuda_shutdown(void) {}

int nvf_quant_cuda_config_count(void) {
    return 0;
}

int nvf_quant_cuda_set_config(int config, size_t chunk_bytes) {
    (void)config;
    (void)chunk_bytes;
    return nvf_error_set(NVF_E_DEVICE, "this build has no CUDA support");
}

int nvf_quant_cuda_bench(double *out_s, nvf_dtype dtype, int64_t rows, int64_t cols,
                         const nvf_quant_params *p, nvf_quant_cuda_pass pass, int runs,
                         int device) {
    (void)out_s;
    (void)dtype;
    (void)rows;
    (void)cols;
    (void)p;
    (void)pass;
    (void)runs;
    return nvf_error_set(NVF_E_DEVICE, "cuda:%d requested but this build has no CUDA support",
                         device);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int nvf_quant_cuda_stub_unused;

#endif
