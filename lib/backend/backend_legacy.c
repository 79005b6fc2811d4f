/*
 * nvfp4/quant_cuda.h: the per-call CUDA entry points, kept for the callers that predate the
 * backend seam. Each thread gets one CUDA backend (backends are single-threaded), opened on
 * its first call for a device and reopened when the device changes; it is closed when the
 * thread ends or calls nvf_quant_cuda_shutdown. Without CUDA, opening fails with NVF_E_DEVICE.
 */
#include "backend/backend_internal.h"

#include "nvfp4/quant_cuda.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <string.h>

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void close_backend(void *b) {
    nvf_backend_close(b);
}

static void key_init(void) {
    (void)pthread_key_create(&g_key, close_backend);
}

/* The calling thread's CUDA backend of `device`. */
static int thread_backend(nvf_backend **out, int device) {
    pthread_once(&g_key_once, key_init);
    nvf_backend *b = pthread_getspecific(g_key);
    if (b && b->device.index == device) {
        *out = b;
        return NVF_OK;
    }
    nvf_backend_close(b);
    (void)pthread_setspecific(g_key, NULL);
    nvf_device dev;
    memset(&dev, 0, sizeof dev);
    dev.kind = NVF_DEVICE_CUDA;
    dev.index = device;
    int rc = nvf_backend_open(&b, &dev, 0);
    if (rc != NVF_OK)
        return rc;
    (void)pthread_setspecific(g_key, b);
    *out = b;
    return NVF_OK;
}

int nvf_quant_amax_cuda(float *out, const nvf_quant_source *s, int allow_nonfinite, int device,
                        const char *name) {
    nvf_backend *b;
    int rc = thread_backend(&b, device);
    if (rc != NVF_OK)
        return rc;
    return nvf_backend_amax(b, out, s, allow_nonfinite, name);
}

int nvf_quant_source_cuda(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                          const nvf_quant_params *p, int device) {
    nvf_backend *b;
    int rc = thread_backend(&b, device);
    if (rc != NVF_OK)
        return rc;
    return nvf_backend_quantize(b, packed, scales, s, gs, p);
}

void nvf_quant_cuda_shutdown(void) {
    pthread_once(&g_key_once, key_init);
    nvf_backend_close(pthread_getspecific(g_key));
    (void)pthread_setspecific(g_key, NULL);
}

void nvf_quant_cuda_set_group_budget(size_t bytes) {
#ifdef NVFP4_HAVE_CUDA
    nvf_backend_cuda_set_group_budget(bytes);
#else
    (void)bytes;
#endif
}
