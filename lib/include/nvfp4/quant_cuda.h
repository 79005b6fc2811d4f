/*
 * NVFP4 quantization on a CUDA GPU by device ordinal: the twins of nvf_quant_amax_ref and
 * nvf_quant_source_ref (nvfp4/quant.h), producing the same results byte for byte. New code uses
 * nvfp4/backend.h; these calls go through the calling thread's own CUDA backend
 * (lib/backend/backend_legacy.c).
 *
 * Both calls take host pointers (the data may be an mmap of a file) and stage the tensor
 * through pinned buffers on the given device, chunk by chunk, with the copies and kernels of
 * consecutive chunks overlapped on two streams; the GPU memory used is bounded whatever the
 * tensor size. A build without CUDA answers NVF_E_DEVICE. Threads may call concurrently (each
 * has its own backend).
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

/** Release the calling thread's CUDA backend (its buffers and streams; a thread's backend is
 * also released when the thread ends). Safe to call when none exists. */
void nvf_quant_cuda_shutdown(void);

/**
 * Device-memory budget in bytes of a device-resident quantize group (nvf_backend_quantize_group
 * on a GPU): a group whose values, scales and outputs need more takes the chunked path. 0
 * restores the default: NVFP4_CUDA_GROUP_BUDGET (bytes) from the environment when set, else a
 * quarter of the device memory free when the backend was opened. Process-wide; for tests and
 * tuning. Without CUDA it does nothing.
 */
void nvf_quant_cuda_set_group_budget(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
