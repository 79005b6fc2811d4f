/*
 * CUDA device discovery. The runtime is linked statically; a machine without a driver or GPU
 * answers with an error here, which the library treats as "no CUDA devices".
 */
#include "kernels/device_probe.h"

#include <cuda_runtime.h>

#include <stdio.h>

/* ---- launchers ------------------------------------------------------------------------- */

int nvf_cuda_probe(int *count) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        *count = 0;
        return -1;
    }
    *count = n;
    return 0;
}

int nvf_cuda_name(int index, char *name, int len) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    snprintf(name, (size_t)len, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    return 0;
}
