/*
 * Block-scale layouts and the w13 row order of prepared shards (SPEC section 5), written once as
 * NVF_HOST_DEVICE index functions: the CPU layout code (lib/backend), the CUDA layout kernels
 * (kernels/) and the MoE kernels' scale loads all call these, so a layout has one definition.
 *
 * A layout places the E4M3 block scales of one matrix (one expert, or one dense linear) of
 * `rows` rows and `kcols` scale columns (in/16) in a byte array:
 *   1. linear:     off = m * kcols + k; no padding;
 *   2. 128x4:      rows padded to 128, columns to 4 (zero bytes), tiles of 128 x 4 scales, each
 *                  512 bytes: off = (m/128)*ceil(K/4)*512 + (k/4)*512 + (m%32)*16
 *                                 + ((m%128)/32)*4 + (k%4)
 *                  (the order the tensor-core MMA's scale-factor loads read; FlashInfer's
 *                  CuTe-DSL NVFP4 MoE and mm_bf16_fp4);
 *   3. 8x4:        rows padded to 8, columns to 4: off = (m/8)*ceil(K/4)*32 + (k/4)*32
 *                                                     + (m%8)*4 + (k%4).
 * Every layout is a bijection between the padded [rows', K'] grid and [0, bytes): the inverse
 * (nvf_layout_coord) gives (m, k) of any offset, and a coordinate outside [rows, kcols] is
 * padding, written 0.
 *
 * w13 interleave: a prepared w13 matrix of an expert holds 2I rows, up (w3) and gate (w1) in
 * groups of 64: [up 0:64, gate 0:64, up 64:128, gate 64:128, ...]; I must be a multiple of 64.
 */
#ifndef NVFP4_LAYOUT_H
#define NVFP4_LAYOUT_H

#include "nvfp4/format.h"

#include <stdint.h>
#include <string.h>

/** A block-scale layout. The values are stable (kernel arguments, manifests). */
typedef enum nvf_layout {
    NVF_LAYOUT_LINEAR = 0, /* [rows, kcols] row-major */
    NVF_LAYOUT_128X4 = 1,  /* 128 x 4 swizzled tiles */
    NVF_LAYOUT_8X4 = 2,    /* 8 x 4 swizzled tiles */
} nvf_layout;

/* Rows of a w13 interleave group. */
#define NVF_W13_GROUP 64

/** Rows of the tile of `l` (1 for linear). */
NVF_HOST_DEVICE static inline int64_t nvf_layout_tile_rows(nvf_layout l) {
    return l == NVF_LAYOUT_128X4 ? 128 : l == NVF_LAYOUT_8X4 ? 8 : 1;
}

/** Scale columns of the tile of `l` (1 for linear). */
NVF_HOST_DEVICE static inline int64_t nvf_layout_tile_cols(nvf_layout l) {
    return l == NVF_LAYOUT_LINEAR ? 1 : 4;
}

/** `rows` padded to the tile of `l`. */
NVF_HOST_DEVICE static inline int64_t nvf_layout_rows_padded(nvf_layout l, int64_t rows) {
    int64_t t = nvf_layout_tile_rows(l);
    return (rows + t - 1) / t * t;
}

/** `kcols` padded to the tile of `l`. */
NVF_HOST_DEVICE static inline int64_t nvf_layout_cols_padded(nvf_layout l, int64_t kcols) {
    int64_t t = nvf_layout_tile_cols(l);
    return (kcols + t - 1) / t * t;
}

/** Bytes of one matrix's scales in layout `l` (padding included). */
NVF_HOST_DEVICE static inline int64_t nvf_layout_bytes(nvf_layout l, int64_t rows, int64_t kcols) {
    return nvf_layout_rows_padded(l, rows) * nvf_layout_cols_padded(l, kcols);
}

/**
 * Offset of scale (m, k) of a matrix with `kcols` scale columns in layout `l`; m and k may lie in
 * the padding (m < rows padded, k < kcols padded).
 */
NVF_HOST_DEVICE static inline int64_t nvf_layout_offset(nvf_layout l, int64_t m, int64_t k,
                                                        int64_t kcols) {
    int64_t kt = (kcols + 3) / 4; /* tiles along the columns */
    switch (l) {
    case NVF_LAYOUT_128X4:
        return (m / 128) * kt * 512 + (k / 4) * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 +
               (k % 4);
    case NVF_LAYOUT_8X4:
        return (m / 8) * kt * 32 + (k / 4) * 32 + (m % 8) * 4 + (k % 4);
    case NVF_LAYOUT_LINEAR:
    default:
        return m * kcols + k;
    }
}

/**
 * The inverse of nvf_layout_offset: the (m, k) that offset `off` (0 <= off < nvf_layout_bytes)
 * holds. (m, k) outside [rows, kcols] is padding.
 */
NVF_HOST_DEVICE static inline void nvf_layout_coord(nvf_layout l, int64_t off, int64_t kcols,
                                                    int64_t *m, int64_t *k) {
    int64_t kt = (kcols + 3) / 4;
    switch (l) {
    case NVF_LAYOUT_128X4: {
        int64_t tile = off / 512, r = off % 512;
        *m = (tile / kt) * 128 + ((r % 16) / 4) * 32 + r / 16;
        *k = (tile % kt) * 4 + r % 4;
        return;
    }
    case NVF_LAYOUT_8X4: {
        int64_t tile = off / 32, r = off % 32;
        *m = (tile / kt) * 8 + r / 4;
        *k = (tile % kt) * 4 + r % 4;
        return;
    }
    case NVF_LAYOUT_LINEAR:
    default:
        *m = kcols ? off / kcols : 0;
        *k = kcols ? off % kcols : 0;
        return;
    }
}

/**
 * The source of row `r` (0 <= r < 2I) of a prepared w13 matrix: *proj is 1 for up (w3), 0 for
 * gate (w1) (nvf_proj's NVF_PROJ_UP / NVF_PROJ_GATE), and the return value is the row within
 * that projection's [I, in] matrix.
 */
NVF_HOST_DEVICE static inline int64_t nvf_w13_source_row(int64_t r, int *proj) {
    int64_t g = r / NVF_W13_GROUP;
    *proj = (g % 2 == 0) ? 1 : 0;
    return (g / 2) * NVF_W13_GROUP + r % NVF_W13_GROUP;
}

/**
 * The inverse: the prepared w13 row of row `i` of projection `proj` (1 up, 0 gate).
 */
NVF_HOST_DEVICE static inline int64_t nvf_w13_prepared_row(int proj, int64_t i) {
    int64_t g = i / NVF_W13_GROUP;
    return (2 * g + (proj == 1 ? 0 : 1)) * NVF_W13_GROUP + i % NVF_W13_GROUP;
}

/** Stable names: "linear", "128x4", "8x4". Never NULL. */
static inline const char *nvf_layout_name(nvf_layout l) {
    return l == NVF_LAYOUT_128X4 ? "128x4" : l == NVF_LAYOUT_8X4 ? "8x4" : "linear";
}

/** A prepared scale layout by its name ("128x4" or "8x4") into *out. @return 1, or 0 for any
 * other name (NULL included). */
static inline int nvf_layout_from_name(const char *name, nvf_layout *out) {
    if (name && strcmp(name, "128x4") == 0)
        *out = NVF_LAYOUT_128X4;
    else if (name && strcmp(name, "8x4") == 0)
        *out = NVF_LAYOUT_8X4;
    else
        return 0;
    return 1;
}

#endif
