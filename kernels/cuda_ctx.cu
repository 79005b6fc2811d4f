/* The CUDA device context (cuda_ctx.h). */
#include "cuda_ctx.h"

#include <stdlib.h>
#include <string.h>

int nvf_cuda_error(cudaError_t e, const char *call, const char *file, int line) {
    (void)cudaGetLastError();
    return nvf_error_set(NVF_E_CUDA, "%s:%d: %s: %s", file, line, call, cudaGetErrorString(e));
}

/*
 * Host threads waiting for the device block (cudaDeviceScheduleBlockingSync) instead of spinning,
 * the runtime's default with fewer contexts than CPUs: a conversion's compute workers wait for
 * their uploads, kernels and downloads on CPUs that its hashing needs. NVFP4_CUDA_SYNC=spin keeps
 * the default (for timing one against the other). Best effort: where the device's flags cannot
 * be set, the default stays. Events and streams time the same either way.
 */
static void set_sync_flags(void) {
    const char *e = getenv("NVFP4_CUDA_SYNC");
    if (e && strcmp(e, "spin") == 0)
        return;
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess)
        (void)cudaGetLastError();
}

int nvf_cuda_ctx_create(nvf_cuda_ctx **out, int device) {
    int rc = 0, n = 0;
    *out = NULL;
    if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n) {
        (void)cudaGetLastError();
        return nvf_error_set(NVF_E_DEVICE, "cuda:%d is not a usable CUDA device (%d found)", device,
                             n);
    }
    nvf_cuda_ctx *c = (nvf_cuda_ctx *)calloc(1, sizeof *c);
    if (!c)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the context of cuda:%d", device);
    c->device = device;
    NVF_CUDA_TRY(cudaSetDevice(device));
    set_sync_flags();
    NVF_CUDA_TRY(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, device));
    for (int i = 0; i < NVF_CUDA_STREAMS; i++)
        NVF_CUDA_TRY(cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking));
    *out = c;
    return 0;
done:
    nvf_cuda_ctx_free(c);
    return rc;
}

int nvf_cuda_ctx_activate(const nvf_cuda_ctx *c) {
    int rc = 0;
    NVF_CUDA_TRY(cudaSetDevice(c->device));
done:
    return rc;
}

void nvf_cuda_ctx_free(nvf_cuda_ctx *c) {
    if (!c)
        return;
    if (cudaSetDevice(c->device) == cudaSuccess)
        for (int i = 0; i < NVF_CUDA_STREAMS; i++)
            if (c->streams[i])
                cudaStreamDestroy(c->streams[i]);
    (void)cudaGetLastError();
    free(c);
}

int nvf_cuda_alloc(void **out, size_t bytes, const char *what) {
    *out = NULL;
    if (bytes == 0)
        return 0;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        (void)cudaGetLastError();
        return nvf_error_set(NVF_E_CUDA, "cudaMalloc of %zu bytes for %s: %s", bytes, what,
                             cudaGetErrorString(e));
    }
    return 0;
}

void nvf_cuda_free(void *p) {
    if (p)
        cudaFree(p);
}

int nvf_cuda_host_alloc(void **out, size_t bytes, const char *what) {
    *out = NULL;
    if (bytes == 0)
        return 0;
    cudaError_t e = cudaMallocHost(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        (void)cudaGetLastError();
        return nvf_error_set(NVF_E_CUDA, "cudaMallocHost of %zu bytes for %s: %s", bytes, what,
                             cudaGetErrorString(e));
    }
    return 0;
}

void nvf_cuda_host_free(void *p) {
    if (p)
        cudaFreeHost(p);
}

int nvf_cuda_stage_reserve(nvf_cuda_stage *s, size_t bytes, const char *what) {
    if (bytes <= s->cap)
        return 0;
    nvf_cuda_stage_release(s);
    int rc = nvf_cuda_host_alloc(&s->host, bytes, what);
    if (rc == 0)
        rc = nvf_cuda_alloc(&s->dev, bytes, what);
    if (rc < 0) {
        nvf_cuda_stage_release(s);
        return rc;
    }
    s->cap = bytes;
    return 0;
}

void nvf_cuda_stage_release(nvf_cuda_stage *s) {
    nvf_cuda_host_free(s->host);
    nvf_cuda_free(s->dev);
    memset(s, 0, sizeof *s);
}

int nvf_cuda_upload(void *dev, const void *host, size_t bytes, cudaStream_t st) {
    int rc = 0;
    if (bytes)
        NVF_CUDA_TRY(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, st));
done:
    return rc;
}

int nvf_cuda_download(void *host, const void *dev, size_t bytes, cudaStream_t st) {
    int rc = 0;
    if (bytes)
        NVF_CUDA_TRY(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, st));
done:
    return rc;
}

int nvf_cuda_sync(cudaStream_t st) {
    int rc = 0;
    NVF_CUDA_TRY(cudaStreamSynchronize(st));
    NVF_CUDA_TRY(cudaGetLastError());
done:
    return rc;
}

int nvf_cuda_mem_free(size_t *out) {
    int rc = 0;
    size_t total = 0;
    *out = 0;
    NVF_CUDA_TRY(cudaMemGetInfo(out, &total));
done:
    return rc;
}
