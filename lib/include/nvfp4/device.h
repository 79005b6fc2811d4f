/*
 * Device selection: auto | cpu | cuda[:N]. A build without CUDA, or a machine without a
 * working GPU, has zero CUDA devices; `auto` then falls back to the CPU and says so.
 */
#ifndef NVFP4_DEVICE_H
#define NVFP4_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_device_kind {
    NVF_DEVICE_CPU = 0,
    NVF_DEVICE_CUDA = 1,
} nvf_device_kind;

typedef struct nvf_device {
    nvf_device_kind kind;
    int index;      /* CUDA ordinal; 0 for the CPU */
    char name[128]; /* "cpu" or the GPU's name */
} nvf_device;

/** Number of usable CUDA devices (0 without CUDA support or a working driver). */
int nvf_cuda_device_count(void);

/** Whether this build has the CUDA kernels compiled in. */
int nvf_cuda_compiled(void);

/**
 * Resolve a --device string (NULL means "auto"). `cuda` or `cuda:N` that cannot be served is
 * NVF_E_DEVICE; a malformed string is NVF_E_INVALID. The choice is logged at info level.
 */
int nvf_device_select(nvf_device *out, const char *spec);

#ifdef __cplusplus
}
#endif
#endif
