/*
 * Block-scale layouts on the GPU (kernels/scale_layout.h): the kernel computes every
 * destination byte as the CPU twin (lib/backend/backend_layout.c) does, with the same
 * nvfp4/layout.h functions — (m, k) of the byte by nvf_layout_coord, the source byte at
 * nvf_layout_offset, 0 in the padding — so the bytes are equal by construction.
 */
#include "kernels/scale_layout.h"

#include "cuda_ctx.h"

#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <stdlib.h>
#include <string.h>

#define CHUNK_DEFAULT ((size_t)64 << 20)
#define THREADS       256

/* ---- kernels ----------------------------------------------------------------------------- */

/* Destination bytes [0, total) of matrices of `dbytes` (source `sbytes`), grid-stride. */
__global__ void layout_kernel(uint8_t *dst, const uint8_t *src, int32_t to, int32_t from,
                              int64_t rows, int64_t kcols, int64_t sbytes, int64_t dbytes,
                              int64_t total) {
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = g / dbytes, off = g % dbytes, m, k;
        nvf_layout_coord((nvf_layout)to, off, kcols, &m, &k);
        dst[g] = (m < rows && k < kcols)
                     ? src[i * sbytes + nvf_layout_offset((nvf_layout)from, m, k, kcols)]
                     : (uint8_t)0;
    }
}

/* ---- launchers --------------------------------------------------------------------------- */

extern "C" int nvf_cuda_layout_launch(uint8_t *d_dst, nvf_layout to, const uint8_t *d_src,
                                      nvf_layout from, int64_t rows, int64_t kcols, size_t n,
                                      int sms, struct CUstream_st *stream) {
    int rc = 0;
    int64_t sbytes = nvf_layout_bytes(from, rows, kcols),
            dbytes = nvf_layout_bytes(to, rows, kcols);
    int64_t total = (int64_t)n * dbytes;
    if (total <= 0)
        return 0;
    if (sms <= 0) {
        int dev = 0;
        NVF_CUDA_TRY(cudaGetDevice(&dev));
        NVF_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    {
        /* A grid-stride grid of a few resident blocks per SM: the work per byte is a handful of
         * integer divisions, the kernel is bound by memory. */
        int64_t grid = (total + THREADS - 1) / THREADS, cap = (int64_t)sms * 16;
        if (grid > cap)
            grid = cap;
        layout_kernel<<<(int)grid, THREADS, 0, stream>>>(d_dst, d_src, (int32_t)to, (int32_t)from,
                                                         rows, kcols, sbytes, dbytes, total);
        NVF_CUDA_TRY(cudaGetLastError());
    }
done:
    return rc;
}

/* The staged host path: chunks of whole matrices through the pinned staging buffers of one slot
 * per stream of the context. */

struct layout_slot {
    nvf_cuda_stage in, out;
    int64_t first, count; /* matrices staged in the slot; count 0: none pending */
};

struct nvf_cuda_layout {
    nvf_cuda_ctx *ctx;
    size_t chunk;
    layout_slot slots[NVF_CUDA_STREAMS];
};

extern "C" int nvf_cuda_layout_open(nvf_cuda_layout **out, struct nvf_cuda_ctx *ctx) {
    *out = (nvf_cuda_layout *)calloc(1, sizeof **out);
    if (!*out)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the CUDA layout state of cuda:%d",
                             ctx->device);
    (*out)->ctx = ctx;
    return 0;
}

extern "C" void nvf_cuda_layout_close(nvf_cuda_layout *l) {
    if (!l)
        return;
    if (nvf_cuda_ctx_activate(l->ctx) == 0)
        for (int i = 0; i < NVF_CUDA_STREAMS; i++) {
            nvf_cuda_stage_release(&l->slots[i].in);
            nvf_cuda_stage_release(&l->slots[i].out);
        }
    free(l);
}

extern "C" void nvf_cuda_layout_set_chunk(nvf_cuda_layout *l, size_t chunk_bytes) {
    l->chunk = chunk_bytes;
}

/* The conversion of one host call: its arguments and matrix sizes. */
struct layout_call {
    uint8_t *dst;
    const uint8_t *src;
    nvf_layout to, from;
    int64_t rows, kcols, sbytes, dbytes;
};

/* Stage matrices [first, first + count) in `sl` and queue upload, kernel and download. */
static int slot_launch(nvf_cuda_layout *l, layout_slot *sl, cudaStream_t st, const layout_call &c,
                       int64_t first, int64_t count) {
    size_t in = (size_t)(count * c.sbytes), out = (size_t)(count * c.dbytes);
    int rc = nvf_cuda_stage_reserve(&sl->in, in, "staged scales");
    if (rc == 0)
        rc = nvf_cuda_stage_reserve(&sl->out, out, "re-laid scales");
    if (rc < 0)
        return rc;
    memcpy(sl->in.host, c.src + first * c.sbytes, in);
    rc = nvf_cuda_upload(sl->in.dev, sl->in.host, in, st);
    if (rc == 0)
        rc = nvf_cuda_layout_launch((uint8_t *)sl->out.dev, c.to, (const uint8_t *)sl->in.dev,
                                    c.from, c.rows, c.kcols, (size_t)count, l->ctx->sms, st);
    if (rc == 0)
        rc = nvf_cuda_download(sl->out.host, sl->out.dev, out, st);
    if (rc == 0) {
        sl->first = first;
        sl->count = count;
    }
    return rc;
}

/* Wait for the slot's chunk and copy it to the caller's destination. */
static int slot_finish(layout_slot *sl, cudaStream_t st, const layout_call &c) {
    int rc = nvf_cuda_sync(st);
    if (rc == 0 && sl->count > 0)
        memcpy(c.dst + sl->first * c.dbytes, sl->out.host, (size_t)(sl->count * c.dbytes));
    sl->count = 0;
    return rc;
}

extern "C" int nvf_cuda_layout_host(nvf_cuda_layout *l, uint8_t *dst, nvf_layout to,
                                    const uint8_t *src, nvf_layout from, int64_t rows,
                                    int64_t kcols, size_t n) {
    layout_call c = {dst,
                     src,
                     to,
                     from,
                     rows,
                     kcols,
                     nvf_layout_bytes(from, rows, kcols),
                     nvf_layout_bytes(to, rows, kcols)};
    int64_t cap = (int64_t)(l->chunk ? l->chunk : CHUNK_DEFAULT);
    int64_t per = cap / (c.sbytes + c.dbytes);
    if (per < 1)
        per = 1;
    int rc = nvf_cuda_ctx_activate(l->ctx);
    for (int64_t first = 0, i = 0; rc == 0 && first < (int64_t)n; first += per, i++) {
        layout_slot *sl = &l->slots[i % NVF_CUDA_STREAMS];
        cudaStream_t st = l->ctx->streams[i % NVF_CUDA_STREAMS];
        if (sl->count > 0)
            rc = slot_finish(sl, st, c);
        if (rc == 0)
            rc = slot_launch(l, sl, st, c, first,
                             first + per < (int64_t)n ? per : (int64_t)n - first);
    }
    for (int j = 0; j < NVF_CUDA_STREAMS; j++) {
        if (rc < 0)
            l->slots[j].count = 0; /* drain only: nothing more is copied after a failure */
        int e = slot_finish(&l->slots[j], l->ctx->streams[j], c);
        if (rc == 0)
            rc = e;
    }
    return rc;
}
