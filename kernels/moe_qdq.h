/*
 * W4A4's block quantize-dequantize in the MoE steps (kernels/moe_steps.cu): 16 values through
 * the shared exact block (nvfp4/quant_block.h) into their E2M1 x E4M3 values in BF16, on one
 * thread (qdq_block) or spread over a quad of lanes (qdq_quad), the same bytes either way
 * (tests/gpu/test_moe_quant_cuda.c).
 */
#ifndef NVFP4_KERNELS_MOE_QDQ_H
#define NVFP4_KERNELS_MOE_QDQ_H

#include "nvfp4/format.h"
#include "nvfp4/quant_block.h"

#include <stdint.h>

/* Store 16 BF16 values at dst (32-byte aligned: a 16-value block of a row of a multiple of 16
 * values in memory from cudaMalloc) as two 16-byte stores. */
static __device__ __forceinline__ void store_bf16x16(uint16_t *dst, const uint16_t *v) {
    uint32_t w[NVF_BLOCK / 2];
    for (int i = 0; i < NVF_BLOCK / 2; i++)
        w[i] = (uint32_t)v[2 * i] | ((uint32_t)v[2 * i + 1] << 16);
    uint4 *d = (uint4 *)dst;
    d[0] = make_uint4(w[0], w[1], w[2], w[3]);
    d[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

/* The E2M1 x E4M3 values, as BF16, of 16 values quantized with global scale gs, written at dst
 * (as store_bf16x16). */
static __device__ void qdq_block(uint16_t *dst, const float *v, float gs,
                                 const nvf_quant_params q) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, q.method, q.error, q.domain);
    uint8_t packed[NVF_BLOCK_BYTES], scale;
    nvf_qb_quantize(packed, &scale, v, &k);
    float s = nvf_e4m3_to_f32(scale);
    uint16_t out[NVF_BLOCK];
    for (int j = 0; j < NVF_BLOCK; j++)
        out[j] = nvf_f32_to_bf16_rn(nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, j)) * s);
    store_bf16x16(dst, out);
}

/* ---- a block spread over a quad of lanes ------------------------------------------------ */

/* The mask of the calling lane's quad (lanes 4j .. 4j + 3 of its warp). The quad's lanes call
 * together (their loops run the same trips: work items come in whole
 * quads). */
static __device__ __forceinline__ unsigned quad_mask(void) {
    return 0xFu << (threadIdx.x & 28u);
}

/* One 4over6 candidate's error (nvf_qb_error) of the quad's block, in every lane: each lane
 * takes the terms of its 4 values, then the sum runs along the quad in the block's order
 * (lane 0 adds its terms to 0, lane 1 adds its own to that sum, ...), the same additions in the
 * same order as one thread's. */
static __device__ float quad_error(const float *v, float enc, float sff, const nvf_qb_consts *k) {
    unsigned mask = quad_mask(), sub = threadIdx.x & 3u;
    float t[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        t[j] = nvf_qb_error_term(v[j], enc, sff, k);
    float err = 0.0f;
#pragma unroll
    for (unsigned s = 0; s < 4; s++) {
        if (sub == s)
            for (int j = 0; j < 4; j++)
                err = nvf_qb_add(err, t[j]);
        err = __shfl_sync(mask, err, (int)s, 4);
    }
    return err;
}

/* qdq_block of a block spread over a quad: lane j of the quad holds values 4j .. 4j + 3 (v)
 * and gets their E2M1 x E4M3 values as 4 BF16 (out, as two words, low half first). The same
 * bytes as one thread's qdq_block: the block maximum is the max of the lanes' (an integer max,
 * exact), the errors are quad_error's, and every lane takes the same scale. With few blocks (1
 * token: a few hundred) one thread per block left most lanes idle and each block's ~700
 * dependent instructions set the time; a quad runs a quarter of them per lane. */
static __device__ void qdq_quad(uint32_t *out, const float *v, float gs, const nvf_quant_params q) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, q.method, q.error, q.domain);
    unsigned mask = quad_mask();
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        uint32_t b = nvf_qb_mag_bits(v[j]);
        m = b > m ? b : m;
    }
#pragma unroll
    for (int d = 1; d < 4; d *= 2) {
        uint32_t o = __shfl_xor_sync(mask, m, d, 4);
        m = o > m ? o : m;
    }
    float vmax = nvf_f32_from_bits(m);
    uint8_t sf;
    if (k.method != NVF_QUANT_METHOD_4OVER6) {
        sf = nvf_qb_rtn_scale(vmax, &k);
    } else {
        nvf_qb_cands c = nvf_qb_4over6_cands(vmax, &k);
        float err6 = quad_error(v, c.enc[0], c.sff[0], &k);
        float err4 = quad_error(v, c.enc[1], c.sff[1], &k);
        sf = nvf_qb_4over6_pick(&c, err6, err4);
    }
    float cm = nvf_qb_code_mult(sf, &k), s = nvf_e4m3_to_f32(sf);
    uint16_t h[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        h[j] = nvf_f32_to_bf16_rn(nvf_e2m1_to_f32(nvf_qb_code(v[j], cm, &k)) * s);
    out[0] = (uint32_t)h[0] | ((uint32_t)h[1] << 16);
    out[1] = (uint32_t)h[2] | ((uint32_t)h[3] << 16);
}

/* The W values at v (W = NVF_BLOCK: one thread's block; W = 4: a quad's lane) quantized with
 * global scale gs and stored as their E2M1 x E4M3 values in BF16 at dst (qdq_block or
 * qdq_quad). */
template <int W>
static __device__ __forceinline__ void qdq_store(uint16_t *dst, const float *v, float gs,
                                                 const nvf_quant_params q) {
    if constexpr (W == NVF_BLOCK) {
        qdq_block(dst, v, gs, q);
    } else {
        static_assert(W == 4, "a block on one thread or on a quad");
        uint32_t o[2];
        qdq_quad(o, v, gs, q);
        *(uint2 *)dst = make_uint2(o[0], o[1]); /* 8 bytes: rows of a multiple of 16 values */
    }
}

#endif
