/*
 * The launchers of kernels/quant.cu and kernels/dequant.cu as the host pipeline
 * (quant_pipeline.cu) and the benchmark (quant_bench.cu) see them: every pointer in a job is a
 * device pointer, every launch is queued on the stream given.
 */
#ifndef NVFP4_KERNELS_QUANT_LAUNCH_H
#define NVFP4_KERNELS_QUANT_LAUNCH_H

#include "nvfp4/quant.h"

#include <cuda_runtime.h>

#include <stdint.h>

/* Launch configurations: threads per CUDA block, CUDA blocks per SM (0: one thread per
 * 16-value block, no grid-stride loop; -1: as many as fit at once, by the occupancy API),
 * 16-value blocks in flight per thread, next step's loads issued early (unroll 1 only). */
struct launch_cfg {
    int threads, per_sm, unroll, prefetch;
};

/** Number of launch configurations. */
int quant_cfg_count(void);

/** The configuration for source `s`: `forced` (0 .. count-1), else the default of its kind. */
const launch_cfg &quant_cfg_for(const nvf_quant_source *s, int forced);

/* One contiguous run of a source's values on the device (a chunk or a whole tensor): `nblocks`
 * blocks of 16 starting at [row0, col0] of a tensor with `cols` columns, `w` values per chunk
 * row (w == cols: whole rows; else a piece of row row0). FP8-block scales as f32, scale rows
 * srow0.. of ncb columns. */
struct quant_job {
    const uint8_t *src;
    int64_t nblocks, w, row0, col0, cols;
    const float *scale;
    int64_t srow0, ncb;
    unsigned int *amax;      /* amax: atomicMax of the magnitude bits */
    unsigned long long *bad; /* amax, dequant: atomicMin of the first NaN/Inf's linear index */
    int32_t allow_nonfinite;
};

/** Queue the amax kernel of `j` (source `s` gives dtype and block shape). */
void quant_launch_amax(const quant_job &j, const nvf_quant_source *s, const launch_cfg &c, int sms,
                       cudaStream_t st);

/**
 * Queue the quantizing kernel of `j` into `packed` (nblocks * 8 bytes) and `scales` (nblocks
 * bytes): with group scale `gs` (nvf_qb_group_scale), or, when `amax_in` is set, with the group
 * scale of the amax there (computed on the device). ModelOpt's arithmetic takes the exact kernel
 * (the shared block as it is), every other recipe the fast path (quant_math.h).
 */
void quant_launch_quant(const quant_job &j, const nvf_quant_source *s, uint8_t *packed,
                        uint8_t *scales, float gs, const unsigned int *amax_in,
                        const nvf_quant_params *p, const launch_cfg &c, int sms, cudaStream_t st);

/**
 * Queue the BF16 dequantization of `j` into `out` (nblocks * 16 BF16 values): bf16(RN(x)) of
 * each value as nvf_quant_source_load_row gives it. With `check_finite`, the linear index of a
 * NaN/Inf result goes to j.bad.
 */
void quant_launch_dequant(const quant_job &j, const nvf_quant_source *s, uint16_t *out,
                          int check_finite, int sms, cudaStream_t st);

#endif
