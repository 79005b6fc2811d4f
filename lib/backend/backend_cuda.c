/* The CUDA backend: the kernels of kernels/ behind the ops table (built only with CUDA). */
#include "backend/backend_internal.h"

#ifdef NVFP4_HAVE_CUDA

#include "nvfp4/quant_cuda.h"

static int cuda_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                     const char *name) {
    return nvf_quant_amax_cuda(out, s, allow_nonfinite, b->device.index, name);
}

static int cuda_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales,
                         const nvf_quant_source *s, float gs, const nvf_quant_params *p) {
    return nvf_quant_source_cuda(packed, scales, s, gs, p, b->device.index);
}

const nvf_backend_ops nvf_backend_cuda_ops = {
    .name = "cuda",
    .amax = cuda_amax,
    .quantize = cuda_quantize,
    .dequant_bf16 = nvf_backend_cpu_dequant_bf16,
};

#else

/* ISO C forbids an empty translation unit. */
typedef int nvf_backend_cuda_unused;

#endif
