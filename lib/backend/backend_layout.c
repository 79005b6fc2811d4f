/*
 * The CPU layout conversion (nvf_backend_layout), the reference of the GPU kernel
 * (kernels/layout.cu): written plainly with the index functions of nvfp4/layout.h, one
 * destination byte at a time. Byte g of the destination (matrix g / dbytes, offset g % dbytes)
 * holds the scale (m, k) = nvf_layout_coord(to, offset), read from the source at
 * nvf_layout_offset(from, m, k), or 0 where (m, k) is padding. The destination is split into
 * pieces of PIECE bytes run on the global pool; every byte is computed on its own, so the
 * output does not depend on the split.
 */
#include "backend_internal.h"

#include "nvfp4/layout.h"
#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#define PIECE ((int64_t)1 << 20)

typedef struct layout_pass {
    uint8_t *dst;
    const uint8_t *src;
    nvf_layout to, from;
    int64_t rows, kcols, sbytes, dbytes, total;
} layout_pass;

/* Destination bytes [g0, g1). */
static void layout_range(const layout_pass *p, int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1;) {
        int64_t i = g / p->dbytes, off = g % p->dbytes;
        int64_t end = (i + 1) * p->dbytes < g1 ? (i + 1) * p->dbytes : g1;
        uint8_t *d = p->dst + i * p->dbytes;
        const uint8_t *s = p->src + i * p->sbytes;
        for (; g < end; g++, off++) {
            int64_t m, k;
            nvf_layout_coord(p->to, off, p->kcols, &m, &k);
            d[off] =
                (m < p->rows && k < p->kcols) ? s[nvf_layout_offset(p->from, m, k, p->kcols)] : 0;
        }
    }
}

static int layout_task(void *ctx, size_t index) {
    const layout_pass *p = ctx;
    int64_t g0 = (int64_t)index * PIECE;
    layout_range(p, g0, g0 + PIECE < p->total ? g0 + PIECE : p->total);
    return NVF_OK;
}

int nvf_backend_cpu_layout(nvf_backend *b, uint8_t *dst, nvf_layout to, const uint8_t *src,
                           nvf_layout from, int64_t rows, int64_t kcols, size_t n) {
    layout_pass p = {
        .dst = dst,
        .src = src,
        .to = to,
        .from = from,
        .rows = rows,
        .kcols = kcols,
        .sbytes = nvf_layout_bytes(from, rows, kcols),
        .dbytes = nvf_layout_bytes(to, rows, kcols),
    };
    p.total = (int64_t)n * p.dbytes;
    size_t pieces = (size_t)((p.total + PIECE - 1) / PIECE);
    return nvf_pool_run(pieces > 1 ? nvf_pool_global() : NULL, pieces, b->threads, layout_task, &p);
}
