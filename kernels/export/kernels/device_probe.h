/*
 * CUDA device discovery (kernels/device_probe.cu), for lib/gpu: C linkage, no CUDA types, so a
 * C file includes it. A machine without a driver or GPU answers -1, which lib/gpu reads as "no
 * CUDA devices".
 */
#ifndef NVFP4_KERNELS_DEVICE_PROBE_H
#define NVFP4_KERNELS_DEVICE_PROBE_H

#ifdef __cplusplus
extern "C" {
#endif

/** Number of CUDA devices into *count (0 on failure). @return 0, or -1 without a driver. */
int nvf_cuda_probe(int *count);

/** "NAME (sm_XY)" of device `index` into `name` (`len` bytes). @return 0 or -1. */
int nvf_cuda_name(int index, char *name, int len);

#ifdef __cplusplus
}
#endif
#endif
