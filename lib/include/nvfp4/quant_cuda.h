/*
 * NVFP4 quantization on a CUDA GPU: the twins of nvf_quant_amax_ref and nvf_quant_source_ref
 * (nvfp4/quant.h), producing the same results byte for byte (kernels/quant.cu).
 *
 * Both calls take host pointers (the data may be an mmap of a file) and stage the tensor
 * through pinned buffers on the given device, chunk by chunk, with the copies and kernels of
 * consecutive chunks overlapped on two or more streams; the GPU memory used is bounded whatever
 * the tensor size. A build without CUDA (lib/gpu/quant_cuda_stub.c) answers NVF_E_DEVICE.
 * Calls for different devices may run concurrently; calls for one device are serialized.
 */
#ifndef NVFP4_QUANT_CUDA_H
#define NVFP4_QUANT_CUDA_H

#include "nvfp4/quant.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Maximum magnitude of a (checked, see nvf_quant_source_check) source on CUDA device `device`,
 * after FP8-block dequantization: the same value as nvf_quant_amax_ref. A NaN or infinity is
 * NVF_E_NONFINITE naming `name` and the first such [row, col] in row-major order unless
 * `allow_nonfinite` (then NaN is skipped and an infinity makes amax infinite).
 * @return 0, NVF_E_NONFINITE, NVF_E_DEVICE (no CUDA in this build, or the device is unusable),
 * NVF_E_CUDA (a CUDA call failed; the message names file:line and the CUDA error) or
 * NVF_E_NOMEM.
 */
int nvf_quant_amax_cuda(float *out, const nvf_quant_source *s, int allow_nonfinite, int device,
                        const char *name);

/**
 * Quantize a (checked) source with global scale `gs` on CUDA device `device`: the same bytes as
 * nvf_quant_source_ref. `packed` (rows * cols/2 bytes) and `scales` (rows * cols/16 bytes) are
 * host memory owned by the caller.
 * @return 0, NVF_E_DEVICE, NVF_E_CUDA or NVF_E_NOMEM.
 */
int nvf_quant_source_cuda(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                          const nvf_quant_params *p, int device);

/** Release the per-device buffers and streams (at exit). Safe to call when none exist. */
void nvf_quant_cuda_shutdown(void);

/** Number of launch configurations the launcher can pick (0 without CUDA). */
int nvf_quant_cuda_config_count(void);

/**
 * For tests and benchmarks: make every later call use launch configuration `config` (0 ..
 * count-1; -1 restores the default) and stage `chunk_bytes` of input per chunk (0: the
 * default, 64 MiB). Not thread-safe against running calls.
 * @return 0 or NVF_E_INVALID (config out of range), NVF_E_DEVICE without CUDA.
 */
int nvf_quant_cuda_set_config(int config, size_t chunk_bytes);

/** What nvf_quant_cuda_bench() times. */
typedef enum nvf_quant_cuda_pass {
    NVF_QUANT_CUDA_QUANTIZE = 0,      /* the quantizing pass, global scale given */
    NVF_QUANT_CUDA_AMAX_QUANTIZE = 1, /* amax pass, then the quantizing pass (gs on the GPU) */
    NVF_QUANT_CUDA_COPY = 2,          /* cudaMemcpy device to device of the input */
} nvf_quant_cuda_pass;

/**
 * Time `pass` on device-resident synthetic data of `rows` x `cols` (BF16 close to N(0,1), or
 * F8_E4M3 with 128 x 128 F32 block scales) with CUDA events: 3 warm-up runs, then the median
 * of `runs` into `*out_s` (seconds). @return 0, NVF_E_DEVICE, NVF_E_CUDA or NVF_E_NOMEM.
 */
int nvf_quant_cuda_bench(double *out_s, nvf_dtype dtype, int64_t rows, int64_t cols,
                         const nvf_quant_params *p, nvf_quant_cuda_pass pass, int runs, int device);

#ifdef __cplusplus
}
#endif
#endif
