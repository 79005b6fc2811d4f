/*
 * The CUDA device context every kernel file uses: NVF_CUDA_TRY, a context per device (its
 * streams and SM count), device and pinned host allocations, staging buffers (a pinned host
 * buffer and a device buffer of one capacity) and the copies between them.
 *
 * A context belongs to one thread at a time (the backend that owns it); every call made through
 * it first makes its device current (nvf_cuda_ctx_activate), so threads driving different
 * devices never disturb each other.
 */
#ifndef NVFP4_KERNELS_CUDA_CTX_H
#define NVFP4_KERNELS_CUDA_CTX_H

#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stddef.h>

/* Run a CUDA call; on failure set `rc` to NVF_E_CUDA with the call, file:line and the CUDA
 * message, and jump to the function's `done:` label. */
#define NVF_CUDA_TRY(call)                                                                         \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            rc = nvf_cuda_error(e_, #call, __FILE__, __LINE__);                                    \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/** Record a failed CUDA call in the library's error (and clear CUDA's sticky last error).
 * @return NVF_E_CUDA. */
int nvf_cuda_error(cudaError_t e, const char *call, const char *file, int line);

#define NVF_CUDA_STREAMS 2

typedef struct nvf_cuda_ctx {
    int device;
    int sms; /* multiprocessors: the launchers size persistent grids by it */
    cudaStream_t streams[NVF_CUDA_STREAMS];
} nvf_cuda_ctx;

/**
 * Create the context of CUDA device `device`: make it current, read its SM count and create
 * NVF_CUDA_STREAMS non-blocking streams.
 * @return 0, NVF_E_DEVICE (no such usable device), NVF_E_CUDA or NVF_E_NOMEM. Free with
 * nvf_cuda_ctx_free().
 */
int nvf_cuda_ctx_create(nvf_cuda_ctx **out, int device);

/** Make the context's device current for the calling thread. @return 0 or NVF_E_CUDA. */
int nvf_cuda_ctx_activate(const nvf_cuda_ctx *c);

/** Destroy the streams and free the context; NULL is fine. */
void nvf_cuda_ctx_free(nvf_cuda_ctx *c);

/** Device memory of `bytes` (0 gives NULL). @return 0 or NVF_E_CUDA naming `what`. */
int nvf_cuda_alloc(void **out, size_t bytes, const char *what);
void nvf_cuda_free(void *p);

/** Pinned host memory of `bytes` (0 gives NULL). @return 0 or NVF_E_CUDA naming `what`. */
int nvf_cuda_host_alloc(void **out, size_t bytes, const char *what);
void nvf_cuda_host_free(void *p);

/** A staging buffer: pinned host memory and device memory of the same capacity. */
typedef struct nvf_cuda_stage {
    void *host, *dev;
    size_t cap;
} nvf_cuda_stage;

/** Grow `s` to hold at least `bytes` (contents are not kept). @return 0 or NVF_E_CUDA. */
int nvf_cuda_stage_reserve(nvf_cuda_stage *s, size_t bytes, const char *what);

/** Free both halves of `s` and zero it. */
void nvf_cuda_stage_release(nvf_cuda_stage *s);

/** Queue a host-to-device copy on `st`. @return 0 or NVF_E_CUDA. */
int nvf_cuda_upload(void *dev, const void *host, size_t bytes, cudaStream_t st);

/** Queue a device-to-host copy on `st`. @return 0 or NVF_E_CUDA. */
int nvf_cuda_download(void *host, const void *dev, size_t bytes, cudaStream_t st);

/** Wait for `st`, then check for a failed launch. @return 0 or NVF_E_CUDA. */
int nvf_cuda_sync(cudaStream_t st);

/** Free device memory of the current device in bytes. @return 0 or NVF_E_CUDA. */
int nvf_cuda_mem_free(size_t *out);

#endif
