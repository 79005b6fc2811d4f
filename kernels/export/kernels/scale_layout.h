/*
 * Block-scale layouts on the GPU (kernels/layout.cu; C linkage): the conversion of
 * nvf_backend_layout with the index functions of nvfp4/layout.h, byte-identical to the CPU
 * twin (lib/backend/backend_layout.c).
 *   1. nvf_cuda_layout_launch: device pointers, queued on a stream — what device-resident
 *      callers (the MoE kernels' preparation, a device-resident convert) call;
 *   2. nvf_cuda_layout_host: host pointers, staged through pinned buffers whole matrices at a
 *      time on the context's two streams (copies and kernels of consecutive chunks overlapped),
 *      so the device memory used is bounded whatever `n` is.
 */
#ifndef NVFP4_KERNELS_SCALE_LAYOUT_H
#define NVFP4_KERNELS_SCALE_LAYOUT_H

#include "nvfp4/layout.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nvf_cuda_ctx;
struct CUstream_st; /* cudaStream_t is `struct CUstream_st *` */

/**
 * Queue the conversion of `n` matrices of `rows` x `kcols` scales from `d_src` (layout `from`,
 * matrix i at i * nvf_layout_bytes(from, rows, kcols)) to `d_dst` (layout `to`) on `stream`
 * (NULL: the default stream) of the current device: one thread per destination byte, padding
 * written 0. Device pointers that must not overlap; `sms` sizes the grid (<= 0: read from the
 * current device). Arguments as nvf_backend_layout checks them. Nothing is waited for.
 * @return 0 or NVF_E_CUDA (the launch failed).
 */
int nvf_cuda_layout_launch(uint8_t *d_dst, nvf_layout to, const uint8_t *d_src, nvf_layout from,
                           int64_t rows, int64_t kcols, size_t n, int sms,
                           struct CUstream_st *stream);

typedef struct nvf_cuda_layout nvf_cuda_layout;

/**
 * Open the staging state of the host-pointer path on context `ctx` (borrowed: it must outlive
 * the state; its streams are used). Buffers are allocated at first use.
 * @return 0 or NVF_E_NOMEM. Free with nvf_cuda_layout_close().
 */
int nvf_cuda_layout_open(nvf_cuda_layout **out, struct nvf_cuda_ctx *ctx);

/** Free the staging buffers and the state; NULL is fine. */
void nvf_cuda_layout_close(nvf_cuda_layout *l);

/** Stage about `chunk_bytes` (source and destination together) per chunk; 0: 64 MiB. */
void nvf_cuda_layout_set_chunk(nvf_cuda_layout *l, size_t chunk_bytes);

/**
 * nvf_backend_layout on the GPU: host pointers, arguments as nvf_backend_layout checks them.
 * @return 0, NVF_E_CUDA.
 */
int nvf_cuda_layout_host(nvf_cuda_layout *l, uint8_t *dst, nvf_layout to, const uint8_t *src,
                         nvf_layout from, int64_t rows, int64_t kcols, size_t n);

#ifdef __cplusplus
}
#endif
#endif
