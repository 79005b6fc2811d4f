/*
 * The exact NVFP4 block quantizer (SPEC section 4), one definition for the CPU reference
 * (lib/quant) and the CUDA kernels (kernels/quant.cu): every function is NVF_HOST_DEVICE
 * static inline, compiled as C11 on the host and as device code by nvcc.
 *
 * One block:
 *   1. in: 16 binary32 values x[0..15] (consecutive along the input dimension), the group's
 *      scale (nvf_qb_group_scale: the global encode scale gs, or ModelOpt's decode scale sf2)
 *      and the recipe (method, error, domain), together in nvf_qb_consts;
 *   2. out: 8 bytes of E2M1 codes (element 2j in the low nibble of byte j, 2j+1 in the high
 *      nibble) and one E4M3 scale byte.
 *
 * Every binary32 operation is rounded on its own (round to nearest even), exactly like
 * FlashInfer's "TE" reference (ref_fp4_quant_te, ref_fp4_quant_4over6_te): through the
 * nvf_qb_mul/add/sub/div/rcp helpers, which are __fmul_rn and friends on the device and the
 * plain operators on the host, where the build forbids contraction (-ffp-contract=off). The
 * E4M3 conversions are the hardware's on the device (exact, satfinite) and format.h's integer
 * code on the host; both give the same bytes. NVF_QUANT_METHOD_RTN_MODELOPT is ModelOpt's export
 * arithmetic instead (SPEC section 4 "ModelOpt arithmetic"): the same helpers, true divisions.
 *
 * The kernels' fast path (kernels/quant_math.h) and the CPU's vectorized row path
 * (lib/quant/quant_rows.c) are built on these functions and return the same bytes; W4A4
 * activation quantization (kernels/moe_steps.cu) reuses nvf_qb_quantize as it is, or spreads a
 * block over 4 lanes with its per-value pieces (nvf_qb_mag_bits, nvf_qb_error_term,
 * nvf_qb_code) and per-block ones (nvf_qb_rtn_scale, nvf_qb_4over6_cands, nvf_qb_4over6_pick).
 */
#ifndef NVFP4_QUANT_BLOCK_H
#define NVFP4_QUANT_BLOCK_H

#include "nvfp4/format.h"
#include "nvfp4/quant_types.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __CUDA_ARCH__
#include <cuda_fp8.h>
#endif

#ifndef __cplusplus
_Static_assert(NVF_BLOCK == 16 && NVF_BLOCK_BYTES == 8, "an NVFP4 block is 16 values, 8 bytes");
#else
static_assert(NVF_BLOCK == 16 && NVF_BLOCK_BYTES == 8, "an NVFP4 block is 16 values, 8 bytes");
#endif

/* Arithmetic: each operation rounded on its own ----------------------------------------------- */

/** RN(a * b). */
NVF_HOST_DEVICE static inline float nvf_qb_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/** RN(a + b). */
NVF_HOST_DEVICE static inline float nvf_qb_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/** RN(a - b). */
NVF_HOST_DEVICE static inline float nvf_qb_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/** RN(a / b), IEEE division (never an approximate reciprocal). */
NVF_HOST_DEVICE static inline float nvf_qb_div(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

/** RN(1 / a). */
NVF_HOST_DEVICE static inline float nvf_qb_rcp(float a) {
#ifdef __CUDA_ARCH__
    return __frcp_rn(a);
#else
    return 1.0f / a;
#endif
}

/* E4M3 -------------------------------------------------------------------------------------- */

/** E4M3 byte to binary32, exact (the hardware conversion on the device). */
NVF_HOST_DEVICE static inline float nvf_qb_e4m3_to_f32(uint8_t b) {
#ifdef __CUDA_ARCH__
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2float(__half(h));
#else
    return nvf_e4m3_to_f32(b);
#endif
}

/** binary32 to E4M3 byte, RN-even with saturation to ±448 (cvt.rn.satfinite on the device). */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_f32_to_e4m3(float f) {
#ifdef __CUDA_ARCH__
    return (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
#else
    return nvf_f32_to_e4m3_sat(f);
#endif
}

/* Global scale ------------------------------------------------------------------------------ */

/**
 * The global encode scale of a group with largest magnitude `amax`:
 * min(RN(E * 6 / amax), FLT_MAX), 1 where that is 0 (amax infinite), FLT_MAX where amax is 0.
 */
NVF_HOST_DEVICE static inline float nvf_qb_global_scale(float amax, int32_t e4m3_max) {
    if (amax == 0.0f)
        return FLT_MAX;
    float num = nvf_qb_mul((float)e4m3_max, 6.0f); /* 2688 or 1536, exact */
    float gs = nvf_qb_div(num, amax);
    if (gs > FLT_MAX)
        gs = FLT_MAX;
    if (gs == 0.0f)
        gs = 1.0f;
    return gs;
}

/** The decode scale written as `weight_scale_2`: RN(1 / gs). */
NVF_HOST_DEVICE static inline float nvf_qb_decode_scale(float gs) {
    return nvf_qb_rcp(gs);
}

/* Group scale ------------------------------------------------------------------------------- */

/* ModelOpt's 6 * 448: sf2 = RN(amax / 2688). */
#define NVF_QB_MODELOPT_DIV 2688.0f

/**
 * The scale of a quantization group with largest magnitude `amax` as the block arithmetic of
 * `p` takes it (the `gs` of nvf_backend_quantize and nvf_quant_source_ref): FlashInfer's global
 * encode scale nvf_qb_global_scale(amax, E); for NVF_QUANT_METHOD_RTN_MODELOPT ModelOpt's
 * sf2 = RN(amax / 2688), which is also its decode scale. sf2 is 0 for an all-zero group (and
 * for an amax below 2^-149 * 1344), where ModelOpt would write NaN scales: such a group is
 * quantized as the default arithmetic quantizes it (nvf_qb_group_fallback).
 */
NVF_HOST_DEVICE static inline float nvf_qb_group_scale(float amax, const nvf_quant_params *p) {
    if (p->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return nvf_qb_div(amax, NVF_QB_MODELOPT_DIV);
    return nvf_qb_global_scale(amax, p->e4m3_max);
}

/** 1 when group scale `g` of recipe `p` is ModelOpt's sf2 = 0: the group is quantized and
 * written as FlashInfer's RTN writes an all-zero group (gs = FLT_MAX). */
NVF_HOST_DEVICE static inline int nvf_qb_group_fallback(float g, const nvf_quant_params *p) {
    return p->method == NVF_QUANT_METHOD_RTN_MODELOPT && g == 0.0f;
}

/** The decode scale written as `weight_scale_2` for group scale `g` (nvf_qb_group_scale):
 * RN(1 / gs); ModelOpt's sf2 as it is (RN(1 / FLT_MAX) for the fallback group). */
NVF_HOST_DEVICE static inline float nvf_qb_group_decode(float g, const nvf_quant_params *p) {
    if (nvf_qb_group_fallback(g, p))
        return nvf_qb_decode_scale(FLT_MAX);
    if (p->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return g;
    return nvf_qb_decode_scale(g);
}

/** The group scale of a stored decode scale `dec` (an activation's `input_scale`), as the
 * quantization takes it: 1 / dec, or in ModelOpt's arithmetic, whose group scale is the decode
 * scale sf2, dec itself. */
NVF_HOST_DEVICE static inline float nvf_qb_group_of_decode(float dec, const nvf_quant_params *p) {
    return p->method == NVF_QUANT_METHOD_RTN_MODELOPT ? dec : 1.0f / dec;
}

/** Per-tensor constants of the block arithmetic: the group scale, what follows from it, and
 * the recipe. Made by nvf_qb_consts_make. For NVF_QUANT_METHOD_RTN_MODELOPT the three scales
 * are sf2, sf2 (the decode scale, as rcp_gs is for FlashInfer) and RN(6 * sf2). */
typedef struct nvf_qb_consts {
    float gs;      /* global encode scale (ModelOpt: sf2) */
    float rcp_gs;  /* RN(1 / gs), the decode scale (ModelOpt: sf2) */
    float rtn_mul; /* RN(gs * RN(1 / 6)), RTN's block scale factor (ModelOpt: the divisor
                      RN(6 * sf2)) */
    nvf_quant_method method;
    nvf_quant_error error;   /* 4over6 only */
    nvf_quant_domain domain; /* 4over6 only */
} nvf_qb_consts;

#ifndef __cplusplus
_Static_assert(sizeof(nvf_qb_consts) == 24, "nvf_qb_consts is six 32-bit fields");
#else
static_assert(sizeof(nvf_qb_consts) == 24, "nvf_qb_consts is six 32-bit fields");
#endif

/** The constants of group scale `gs` (nvf_qb_group_scale) and a recipe. ModelOpt's sf2 = 0
 * gives FlashInfer's RTN with gs = FLT_MAX (nvf_qb_group_fallback). */
NVF_HOST_DEVICE static inline nvf_qb_consts nvf_qb_consts_make(float gs, nvf_quant_method method,
                                                               nvf_quant_error error,
                                                               nvf_quant_domain domain) {
    nvf_qb_consts k;
    if (method == NVF_QUANT_METHOD_RTN_MODELOPT && gs == 0.0f) {
        gs = FLT_MAX;
        method = NVF_QUANT_METHOD_RTN;
    }
    if (method == NVF_QUANT_METHOD_RTN_MODELOPT) {
        k.gs = k.rcp_gs = gs;
        k.rtn_mul = nvf_qb_mul(6.0f, gs);
        k.method = method;
        k.error = error;
        k.domain = domain;
        return k;
    }
    k.gs = gs;
    k.rcp_gs = nvf_qb_rcp(gs);
    k.rtn_mul = nvf_qb_mul(gs, nvf_qb_rcp(6.0f));
    k.method = method;
    k.error = error;
    k.domain = domain;
    return k;
}

/* Block scales ------------------------------------------------------------------------------ */

/** The magnitude bits of x, 0 for a NaN: nvf_qb_vmax's order key (a block spread over lanes
 * takes the integer max of its lanes' keys). */
NVF_HOST_DEVICE static inline uint32_t nvf_qb_mag_bits(float x) {
    uint32_t b = nvf_f32_bits(x) & 0x7FFFFFFFu;
    return b > 0x7F800000u ? 0u : b;
}

/** Largest magnitude of the 16 values with NaN skipped (an integer max over the magnitude bits:
 * for non-NaN binary32 the order of the bits is the order of the magnitudes). */
NVF_HOST_DEVICE static inline float nvf_qb_vmax(const float *x) {
    uint32_t m = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t b = nvf_qb_mag_bits(x[i]);
        m = b > m ? b : m;
    }
    return nvf_f32_from_bits(m);
}

/** The E4M3 byte of an unclamped block scale: min(s, 448) (NaN gives 448), then satfinite. */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_scale_encode(float s) {
    return nvf_qb_f32_to_e4m3(s < NVF_E4M3_MAX ? s : NVF_E4M3_MAX);
}

/** A block's encode multiplier from its decoded scale sff = f32(sf):
 * enc = min(RN(1 / RN(sff * rcp_gs)), FLT_MAX). */
NVF_HOST_DEVICE static inline float nvf_qb_scale_enc(float sff, float rcp_gs) {
    float dec = nvf_qb_mul(sff, rcp_gs);
    float enc = nvf_qb_rcp(dec);
    return enc < FLT_MAX ? enc : FLT_MAX;
}

/** 4over6's 6-candidate before encoding: sf6h = RN(RN(vmax / 6) * gs), 0 when vmax is 0. The
 * 4-candidate is RN(sf6h * 1.5). */
NVF_HOST_DEVICE static inline float nvf_qb_sf6h(float vmax, float gs) {
    if (vmax == 0.0f)
        return 0.0f;
    return nvf_qb_mul(nvf_qb_div(vmax, 6.0f), gs);
}

/**
 * ModelOpt's block scale byte: s = RN(vmax / div) with div = RN(6 * sf2); s = 1 where that is
 * 0 (an all-zero block: byte 0x38); s = max(s, 2^-9), so that a tiny block keeps at least the
 * smallest subnormal (0x01); then clamped at 448 and encoded as every scale is.
 */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_modelopt_scale(float vmax, float div) {
    float s = nvf_qb_div(vmax, div);
    s = s == 0.0f ? 1.0f : s;
    s = s < 0x1p-9f ? 0x1p-9f : s;
    return nvf_qb_scale_encode(s);
}

/* E2M1 rounding and candidate error --------------------------------------------------------- */

/**
 * Magnitude of the E2M1 value nearest to a = |t| (clamped to 6, ties to the even code), the
 * same rounding as nvf_e2m1_encode. From 1 up E2M1 is a binary float with one mantissa bit, so
 * RN-even on the bits (dropping 22 of 23 mantissa bits) gives it; below 1 the grid is 0, 0.5,
 * 1. Branch-free so that it vectorizes. A NaN compares false everywhere and gives 0.
 */
NVF_HOST_DEVICE static inline float nvf_qb_e2m1_round_mag(float a) {
    a = a > NVF_E2M1_MAX ? NVF_E2M1_MAX : a;
    uint32_t u = nvf_f32_bits(a);
    uint32_t r = (u + 0x1FFFFFu + ((u >> 22) & 1u)) & 0xFFC00000u;
    float big = nvf_f32_from_bits(r);
    float small = a > 0.25f ? 0.5f : 0.0f;
    small = a >= 0.75f ? 1.0f : small;
    return a >= 1.0f ? big : small;
}

/**
 * One value's term of the error of a 4over6 candidate (encode multiplier `enc`, decoded scale
 * `sff`; SPEC section 4): q = ±e2m1(RN(x * enc)), d = RN(RN(q * sff) - RN(x * gs)) in the
 * scaled domain (q * sff is exact), or d = RN(RN(RN(q * sff) * rcp_gs) - x) in the original
 * one; the term is RN(d * d) or |d|.
 */
NVF_HOST_DEVICE static inline float nvf_qb_error_term(float x, float enc, float sff,
                                                      const nvf_qb_consts *k) {
    float t = nvf_qb_mul(x, enc);
    float mag = nvf_qb_e2m1_round_mag(fabsf(t));
    float q = t < 0.0f ? -mag : mag;
    float d;
    if (k->domain == NVF_QUANT_DOMAIN_SCALED) {
        float y = nvf_qb_mul(x, k->gs);
        d = nvf_qb_sub(nvf_qb_mul(q, sff), y);
    } else {
        float c = nvf_qb_mul(nvf_qb_mul(q, sff), k->rcp_gs);
        d = nvf_qb_sub(c, x);
    }
    return k->error == NVF_QUANT_ERROR_MSE ? nvf_qb_mul(d, d) : fabsf(d);
}

/** The candidate's error: the terms of i = 0..15 summed in order from 0, each sum rounded. */
NVF_HOST_DEVICE static inline float nvf_qb_error(const float *x, float enc, float sff,
                                                 const nvf_qb_consts *k) {
    float err = 0.0f;
    for (int i = 0; i < NVF_BLOCK; i++)
        err = nvf_qb_add(err, nvf_qb_error_term(x[i], enc, sff, k));
    return err;
}

/* One block ----------------------------------------------------------------------------------- */

/** The scale byte of a block with maximum `vmax` for RTN and ModelOpt's RTN (which need
 * nothing else of the block): e4m3(min(RN(vmax * rtn_mul), 448)), or nvf_qb_modelopt_scale. */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_rtn_scale(float vmax, const nvf_qb_consts *k) {
    if (k->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return nvf_qb_modelopt_scale(vmax, k->rtn_mul);
    return nvf_qb_scale_encode(nvf_qb_mul(vmax, k->rtn_mul));
}

/** 4over6's two candidates of a block with maximum `vmax`: [0] maps it to 6, [1] to 4 (scale
 * byte, decoded scale, encode multiplier). */
typedef struct nvf_qb_cands {
    uint8_t sf[2];
    float sff[2], enc[2];
} nvf_qb_cands;

NVF_HOST_DEVICE static inline nvf_qb_cands nvf_qb_4over6_cands(float vmax, const nvf_qb_consts *k) {
    nvf_qb_cands c;
    float sf6h = nvf_qb_sf6h(vmax, k->gs);
    c.sf[0] = nvf_qb_scale_encode(sf6h);
    c.sf[1] = nvf_qb_scale_encode(nvf_qb_mul(sf6h, 1.5f));
    for (int i = 0; i < 2; i++) {
        c.sff[i] = nvf_qb_e4m3_to_f32(c.sf[i]);
        c.enc[i] = nvf_qb_scale_enc(c.sff[i], k->rcp_gs);
    }
    return c;
}

/** 4over6's choice from the candidates' errors: the 4-candidate only if its error is strictly
 * smaller (ties and NaN keep the 6-candidate). */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_4over6_pick(const nvf_qb_cands *c, float err6,
                                                         float err4) {
    return err4 < err6 ? c->sf[1] : c->sf[0];
}

/**
 * The E4M3 scale byte of a block. RTN: e4m3(min(RN(vmax * rtn_mul), 448)). 4over6: the block
 * maximum maps to 6 (sf6) or, with a 1.5x larger scale, to 4 (sf4); sf4 is taken only if its
 * error is strictly smaller (ties and NaN keep sf6).
 */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_block_scale(const float *x, const nvf_qb_consts *k) {
    float vmax = nvf_qb_vmax(x);
    if (k->method != NVF_QUANT_METHOD_4OVER6)
        return nvf_qb_rtn_scale(vmax, k);
    nvf_qb_cands c = nvf_qb_4over6_cands(vmax, k);
    float err6 = nvf_qb_error(x, c.enc[0], c.sff[0], k);
    float err4 = nvf_qb_error(x, c.enc[1], c.sff[1], k);
    return nvf_qb_4over6_pick(&c, err6, err4);
}

/** The E2M1 codes of a block with encode multiplier `enc`, code i = e2m1(RN(x[i] * enc)) at
 * bits 4i of the 64-bit word w[0] | w[1] << 32 (little-endian: the packed bytes). */
NVF_HOST_DEVICE static inline void nvf_qb_block_codes(uint32_t *w, const float *x, float enc) {
    w[0] = w[1] = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t code = nvf_e2m1_encode(nvf_qb_mul(x[i], enc));
        w[i >> 3] |= code << (4 * (i & 7));
    }
}

/** ModelOpt's codes: code i = e2m1(RN(x[i] / dec)) with dec = RN(f32(sf) * sf2), a true
 * division (the words as nvf_qb_block_codes writes them). */
NVF_HOST_DEVICE static inline void nvf_qb_block_codes_div(uint32_t *w, const float *x, float dec) {
    w[0] = w[1] = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t code = nvf_e2m1_encode(nvf_qb_div(x[i], dec));
        w[i >> 3] |= code << (4 * (i & 7));
    }
}

/** What a block of scale byte `sf` takes its codes with: the encode multiplier
 * nvf_qb_scale_enc(f32(sf), rcp_gs); ModelOpt: the divisor RN(f32(sf) * sf2). */
NVF_HOST_DEVICE static inline float nvf_qb_code_mult(uint8_t sf, const nvf_qb_consts *k) {
    if (k->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return nvf_qb_mul(nvf_qb_e4m3_to_f32(sf), k->gs);
    return nvf_qb_scale_enc(nvf_qb_e4m3_to_f32(sf), k->rcp_gs);
}

/** The E2M1 code of one value of a block (as nvf_qb_block_codes or, for ModelOpt,
 * nvf_qb_block_codes_div): e2m1(RN(x * m)) or e2m1(RN(x / m)), m from nvf_qb_code_mult. */
NVF_HOST_DEVICE static inline uint32_t nvf_qb_code(float x, float m, const nvf_qb_consts *k) {
    if (k->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return nvf_e2m1_encode(nvf_qb_div(x, m));
    return nvf_e2m1_encode(nvf_qb_mul(x, m));
}

/**
 * Quantize one block as two words (the packed bytes little-endian, for 8-byte stores) and
 * return its scale byte.
 */
NVF_HOST_DEVICE static inline uint8_t nvf_qb_quantize_words(uint32_t *w, const float *x,
                                                            const nvf_qb_consts *k) {
    uint8_t sf = nvf_qb_block_scale(x, k);
    float m = nvf_qb_code_mult(sf, k);
    if (k->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        nvf_qb_block_codes_div(w, x, m);
    else
        nvf_qb_block_codes(w, x, m);
    return sf;
}

/**
 * Quantize one block of NVF_BLOCK (16) values `x`: 8 packed bytes to `packed`, the E4M3 scale
 * byte to `*scale` (the block's layout at the top of this file).
 */
NVF_HOST_DEVICE static inline void nvf_qb_quantize(uint8_t *packed, uint8_t *scale, const float *x,
                                                   const nvf_qb_consts *k) {
    uint32_t w[2];
    *scale = nvf_qb_quantize_words(w, x, k);
    for (int j = 0; j < NVF_BLOCK_BYTES; j++)
        packed[j] = (uint8_t)(w[j >> 2] >> (8 * (j & 3)));
}

#endif
