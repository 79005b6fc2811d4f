/*
 * The CUDA backend's compute state and operations (lib/backend/backend_cuda.c calls them; C
 * linkage). Every call takes host pointers — the data may be an mmap of a file — and:
 *   1. amax, quantize, dequant_bf16: stage the tensor through pinned buffers chunk by chunk
 *      (two streams, copies and kernels of consecutive chunks overlapped), so the GPU memory
 *      used is bounded whatever the tensor size;
 *   2. quantize_group: uploads each member once and keeps the group on the device through amax,
 *      global scale and quantization (no host round trip between the passes) when the group's
 *      device bytes fit the group budget; a larger group takes the chunked path.
 * A state belongs to one thread at a time; states of different devices run concurrently.
 */
#ifndef NVFP4_KERNELS_QUANT_PIPELINE_H
#define NVFP4_KERNELS_QUANT_PIPELINE_H

#include "nvfp4/quant.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_cuda_quant nvf_cuda_quant;

/** Open the state of CUDA device `device`. @return 0, NVF_E_DEVICE, NVF_E_CUDA, NVF_E_NOMEM. */
int nvf_cuda_quant_open(nvf_cuda_quant **out, int device);

/** Free the state (buffers, streams); NULL is fine. */
void nvf_cuda_quant_close(nvf_cuda_quant *q);

/** Pinned host memory on the state's device (nvf_backend_host_buffer), freed with
 * nvf_cuda_quant_host_free. @return 0, NVF_E_CUDA. */
int nvf_cuda_quant_host_alloc(nvf_cuda_quant *q, void **out, size_t bytes);
void nvf_cuda_quant_host_free(nvf_cuda_quant *q, void *p);

/** nvf_backend_amax on the GPU. */
int nvf_cuda_quant_amax(nvf_cuda_quant *q, float *out, const nvf_quant_source *s,
                        int allow_nonfinite, const char *name);

/** nvf_backend_quantize on the GPU. */
int nvf_cuda_quant_source(nvf_cuda_quant *q, uint8_t *packed, uint8_t *scales,
                          const nvf_quant_source *s, float gs, const nvf_quant_params *p);

/** nvf_backend_quantize_group on the GPU (device-resident within the group budget). */
int nvf_cuda_quant_group(nvf_cuda_quant *q, float *out_gs, uint8_t *const *packed,
                         uint8_t *const *scales, const nvf_quant_source *srcs,
                         const char *const *names, size_t n, const nvf_quant_params *p,
                         int allow_nonfinite);

/** nvf_backend_dequant_bf16 on the GPU. */
int nvf_cuda_quant_dequant_bf16(nvf_cuda_quant *q, uint8_t *out, const nvf_quant_source *s,
                                int check_finite, const char *name);

/** Number of launch configurations. */
int nvf_cuda_quant_config_count(void);

/**
 * Use launch configuration `config` (-1: the defaults) and `chunk_bytes` of input per staged
 * chunk (0: 64 MiB) for the later calls on `q`. @return 0 or NVF_E_INVALID.
 */
int nvf_cuda_quant_set_config(nvf_cuda_quant *q, int config, size_t chunk_bytes);

/**
 * Process-wide device-memory budget of a device-resident group in bytes (0: the default,
 * NVFP4_CUDA_GROUP_BUDGET from the environment when set, else a quarter of the device memory
 * free when the state was opened). Read at each group call.
 */
void nvf_cuda_quant_set_group_budget(size_t bytes);

/**
 * Time `pass` (0 quantize with gs given, 1 amax + quantize, 2 device-to-device copy of the
 * input) on device-resident synthetic data of rows x cols (BF16 close to N(0,1), or F8_E4M3
 * with 128 x 128 F32 block scales) with CUDA events: 3 warm-up runs, then the median of `runs`
 * into *out_s. `*stop` (may be NULL) set stops between runs with NVF_E_INTERRUPTED.
 * @return 0, NVF_E_INTERRUPTED, NVF_E_CUDA, NVF_E_NOMEM, NVF_E_UNSUPPORTED (another dtype).
 */
int nvf_cuda_quant_bench(nvf_cuda_quant *q, double *out_s, nvf_dtype dtype, int64_t rows,
                         int64_t cols, const nvf_quant_params *p, int pass, int runs,
                         const volatile sig_atomic_t *stop);

/* For quant_bench.cu: the state's context and launch configuration (-1: defaults). */
struct nvf_cuda_ctx *nvf_cuda_quant_ctx(nvf_cuda_quant *q);
int nvf_cuda_quant_cfg(const nvf_cuda_quant *q);

#ifdef __cplusplus
}
#endif
#endif
