/*
 * The block arithmetic of the CUDA quantizer (kernels/quant.cu), written so that it compiles
 * both as CUDA device code and as plain C11 on the host: tests/gpu/test_quant_math.c runs the
 * host build against nvf_quant_block_ref on every hard case without a GPU.
 *
 * The results are those of lib/quant/quant.c, operation for operation (SPEC section 4). Two
 * paths:
 *   1. nvf_qm_block_exact: a direct transcription of block_quant (used for blocks holding a NaN,
 *      and where the fast path's sign rule could fail).
 *   2. nvf_qm_block_fast: the same values with fewer instructions, exact because
 *      - the E2M1 rounding of a = min(|t|, 6) is RN(a + c) - c with c = 2^(22 + E), E the
 *        binade of max(a, 1) (0, 1 or 2): the sum's ulp is the grid step (0.5, 1, 2) there, so
 *        the sum rounds a to the grid, ties to the even grid index, as e2m1_round_mag does;
 *        c comes from the exponent bits of max(a, 1) by one bitwise operation (NVF_QM_C_*);
 *      - the E2M1 index is the bits of RN(mag * 2^-126) >> 22 (mag = 0.5 lands on the binary32
 *        subnormal 2^-127, every other magnitude on a normal with one mantissa bit);
 *      - errors use |x|: RN is symmetric, so |q * sff - y| = |mag * sff - |y||, and likewise in
 *        the original domain;
 *      - the code's sign bit is x < 0 whenever no nonzero |x| * enc underflows to zero, which
 *        holds when enc >= 2^-149 / (smallest nonzero |x| of the source dtype) (min_enc);
 *      - mag * sff is exact (2 significant bits times 4, between 2^-10 and 2688), so the scaled
 *        domain's d = RN(RN(mag * sff) - y) is one fused multiply-add, fma(mag, sff, -y);
 *      - 4over6 keeps both candidates' magnitudes and builds the E2M1 codes of the winner only.
 */
#ifndef NVFP4_KERNELS_QUANT_MATH_H
#define NVFP4_KERNELS_QUANT_MATH_H

#include "nvfp4/format.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __CUDA_ARCH__
#include <cuda_fp8.h>
#define NVF_QM_MUL(a, b)    __fmul_rn((a), (b))
#define NVF_QM_ADD(a, b)    __fadd_rn((a), (b))
#define NVF_QM_SUB(a, b)    __fsub_rn((a), (b))
#define NVF_QM_DIV(a, b)    __fdiv_rn((a), (b))
#define NVF_QM_RCP(a)       __frcp_rn(a)
#define NVF_QM_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define NVF_QM_NOINLINE     __noinline__
#else
#define NVF_QM_MUL(a, b)    ((a) * (b))
#define NVF_QM_ADD(a, b)    ((a) + (b))
#define NVF_QM_SUB(a, b)    ((a) - (b))
#define NVF_QM_DIV(a, b)    ((a) / (b))
#define NVF_QM_RCP(a)       (1.0f / (a))
#define NVF_QM_FMA(a, b, c) fmaf((a), (b), (c))
#define NVF_QM_NOINLINE
#endif

#ifdef __CUDA_ARCH__
#define NVF_QM_UNROLL _Pragma("unroll")
#else
#define NVF_QM_UNROLL
#endif

/* c = 2^(22 + E) from the bits of e = max(a, 1) in [1, 8): exponent bit 0 kept, bit 1
 * inverted, the others fixed, mantissa cleared ((e & NVF_QM_C_KEEP) ^ NVF_QM_C_FLIP). */
#define NVF_QM_C_KEEP 0x01800000u
#define NVF_QM_C_FLIP 0x4B000000u

/** Per-tensor constants of the block arithmetic (quant.c's quant_consts plus the fast path's). */
typedef struct nvf_qm_consts {
    float gs;       /* global encode scale */
    float rcp_gs;   /* RN(1 / gs) */
    float rtn_mul;  /* RN(gs * RN(1 / 6)) */
    float min_enc;  /* the fast sign rule holds for enc >= min_enc */
    int32_t method; /* nvf_quant_method */
    int32_t error;  /* nvf_quant_error */
    int32_t domain; /* nvf_quant_domain */
} nvf_qm_consts;

/* E4M3 byte to binary32 and binary32 to E4M3 (satfinite): the hardware conversions on the GPU
 * (exact; satfinite is what nvf_f32_to_e4m3_sat models), the format.h ones on the host. */
NVF_HOST_DEVICE static inline float nvf_qm_e4m3_to_f32(uint8_t b) {
#ifdef __CUDA_ARCH__
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2float(__half(h));
#else
    return nvf_e4m3_to_f32(b);
#endif
}

NVF_HOST_DEVICE static inline uint8_t nvf_qm_f32_to_e4m3(float f) {
#ifdef __CUDA_ARCH__
    return (uint8_t)__nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
#else
    return nvf_f32_to_e4m3_sat(f);
#endif
}

/* The E4M3 scale byte of an unclamped block scale: min(s, 448) (NaN gives 448), satfinite. */
NVF_HOST_DEVICE static inline uint8_t nvf_qm_scale_encode(float s) {
    return nvf_qm_f32_to_e4m3(s < NVF_E4M3_MAX ? s : NVF_E4M3_MAX);
}

/* enc = min(RN(1 / RN(f32(sf) * rcp_gs)), FLT_MAX). */
NVF_HOST_DEVICE static inline float nvf_qm_scale_enc(float sff, float rcp_gs) {
    float dec = NVF_QM_MUL(sff, rcp_gs);
    float enc = NVF_QM_RCP(dec);
    return enc < FLT_MAX ? enc : FLT_MAX;
}

/* 4over6 block scales before encoding: sf6h = RN(RN(vmax / 6) * gs) (0 when vmax is 0). */
NVF_HOST_DEVICE static inline float nvf_qm_sf6h(float vmax, float gs) {
    if (vmax == 0.0f)
        return 0.0f;
    return NVF_QM_MUL(NVF_QM_DIV(vmax, 6.0f), gs);
}

/* ---- exact path: quant.c's block_quant, one value at a time ------------------------------- */

NVF_HOST_DEVICE static inline float nvf_qm_round_mag_exact(float a) {
    a = a > NVF_E2M1_MAX ? NVF_E2M1_MAX : a;
    uint32_t u = nvf_f32_bits(a);
    uint32_t r = (u + 0x1FFFFFu + ((u >> 22) & 1u)) & 0xFFC00000u;
    float big = nvf_f32_from_bits(r);
    float small = a > 0.25f ? 0.5f : 0.0f;
    small = a >= 0.75f ? 1.0f : small;
    return a >= 1.0f ? big : small;
}

NVF_HOST_DEVICE static inline float nvf_qm_error_exact(const float *x, float enc, float sff,
                                                       const nvf_qm_consts *k) {
    float err = 0.0f;
    for (int i = 0; i < NVF_BLOCK; i++) {
        float t = NVF_QM_MUL(x[i], enc);
        float mag = nvf_qm_round_mag_exact(fabsf(t));
        float q = t < 0.0f ? -mag : mag;
        float d;
        if (k->domain == 0) {
            float y = NVF_QM_MUL(x[i], k->gs);
            d = NVF_QM_SUB(NVF_QM_MUL(q, sff), y);
        } else {
            float c = NVF_QM_MUL(NVF_QM_MUL(q, sff), k->rcp_gs);
            d = NVF_QM_SUB(c, x[i]);
        }
        float term = k->error == 0 ? NVF_QM_MUL(d, d) : fabsf(d);
        err = NVF_QM_ADD(err, term);
    }
    return err;
}

/** Quantize one block exactly as nvf_quant_block_ref: 8 packed bytes as two words, one scale. */
NVF_HOST_DEVICE static NVF_QM_NOINLINE void nvf_qm_block_exact(uint32_t *w0, uint32_t *w1,
                                                               uint8_t *scale, const float *x,
                                                               const nvf_qm_consts *k) {
    uint32_t m = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t b = nvf_f32_bits(x[i]) & 0x7FFFFFFFu;
        b = b > 0x7F800000u ? 0u : b;
        m = b > m ? b : m;
    }
    float vmax = nvf_f32_from_bits(m);
    uint8_t sf;
    if (k->method == 0) {
        sf = nvf_qm_scale_encode(NVF_QM_MUL(vmax, k->rtn_mul));
    } else {
        float sf6h = nvf_qm_sf6h(vmax, k->gs);
        float sf4h = NVF_QM_MUL(sf6h, 1.5f);
        uint8_t sf6 = nvf_qm_scale_encode(sf6h), sf4 = nvf_qm_scale_encode(sf4h);
        float sff6 = nvf_qm_e4m3_to_f32(sf6), sff4 = nvf_qm_e4m3_to_f32(sf4);
        float err6 = nvf_qm_error_exact(x, nvf_qm_scale_enc(sff6, k->rcp_gs), sff6, k);
        float err4 = nvf_qm_error_exact(x, nvf_qm_scale_enc(sff4, k->rcp_gs), sff4, k);
        sf = err4 < err6 ? sf4 : sf6; /* strict: ties and NaN keep 6 */
    }
    float enc = nvf_qm_scale_enc(nvf_qm_e4m3_to_f32(sf), k->rcp_gs);
    uint32_t w[2] = {0, 0};
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t code = nvf_e2m1_encode(NVF_QM_MUL(x[i], enc));
        w[i >> 3] |= code << (4 * (i & 7));
    }
    *w0 = w[0];
    *w1 = w[1];
    *scale = sf;
}

/* ---- fast path ---------------------------------------------------------------------------- */

/* Grid magnitude of a = min(t, 6) for t = |x| * enc >= 0, and its E2M1 index placed at nibble
 * `i` of a word (bits 4i..4i+2). */
#define NVF_QM_ROUND_MAG(mag, t)                                                                   \
    do {                                                                                           \
        float a_ = fminf((t), NVF_E2M1_MAX);                                                       \
        float e_ = fmaxf(a_, 1.0f);                                                                \
        float c_ = nvf_f32_from_bits((nvf_f32_bits(e_) & NVF_QM_C_KEEP) ^ NVF_QM_C_FLIP);          \
        (mag) = NVF_QM_SUB(NVF_QM_ADD(a_, c_), c_);                                                \
    } while (0)
#define NVF_QM_NIBBLE(nib, mag, i)                                                                 \
    do {                                                                                           \
        uint32_t v_ = nvf_f32_bits(NVF_QM_MUL((mag), 1.17549435e-38f /* 2^-126 */));               \
        (nib) = (4 * ((i)&7) <= 22) ? v_ >> (22 - 4 * ((i)&7)) : v_ << (4 * ((i)&7) - 22);         \
    } while (0)
#define NVF_QM_ROUND(mag, nib, t, i)                                                               \
    do {                                                                                           \
        NVF_QM_ROUND_MAG(mag, t);                                                                  \
        NVF_QM_NIBBLE(nib, mag, i);                                                                \
    } while (0)

/*
 * Quantize one block of 16 values whose magnitude bits are `ab` and whose sign word (bit 4i+3
 * set for x[i] < 0, x[i] != 0) is split over `s0` (elements 0..7) and `s1` (8..15). `amax_bits`
 * is the largest of ab (NaN included). METHOD/ERR/DOM are constants at every call site.
 * @return 1, or 0 (nothing written) when the block must take nvf_qm_block_exact: it holds a
 * NaN, or its enc is below min_enc. The caller then passes the signed values itself (on the
 * GPU they are reloaded, so that the register copy never needs an address).
 */
NVF_HOST_DEVICE static inline int nvf_qm_block_fast(uint32_t *w0, uint32_t *w1, uint8_t *scale,
                                                    const uint32_t *ab, uint32_t amax_bits,
                                                    uint32_t s0, uint32_t s1,
                                                    const nvf_qm_consts *k, int METHOD, int ERR,
                                                    int DOM) {
    if (amax_bits > 0x7F800000u)
        return 0;
    float vmax = nvf_f32_from_bits(amax_bits);
    if (METHOD == 0) {
        uint8_t sf = nvf_qm_scale_encode(NVF_QM_MUL(vmax, k->rtn_mul));
        float enc = nvf_qm_scale_enc(nvf_qm_e4m3_to_f32(sf), k->rcp_gs);
        if (!(enc >= k->min_enc))
            return 0;
        uint32_t c0 = s0, c1 = s1;
        NVF_QM_UNROLL
        for (int i = 0; i < NVF_BLOCK; i++) {
            float mag;
            uint32_t nib;
            NVF_QM_ROUND(mag, nib, NVF_QM_MUL(nvf_f32_from_bits(ab[i]), enc), i);
            if (i < 8)
                c0 |= nib;
            else
                c1 |= nib;
        }
        *w0 = c0;
        *w1 = c1;
        *scale = sf;
        return 1;
    }
    float sf6h = nvf_qm_sf6h(vmax, k->gs);
    float sf4h = NVF_QM_MUL(sf6h, 1.5f);
    uint8_t sf6 = nvf_qm_scale_encode(sf6h), sf4 = nvf_qm_scale_encode(sf4h);
    float sff6 = nvf_qm_e4m3_to_f32(sf6), sff4 = nvf_qm_e4m3_to_f32(sf4);
    float enc6 = nvf_qm_scale_enc(sff6, k->rcp_gs), enc4 = nvf_qm_scale_enc(sff4, k->rcp_gs);
    if (!(enc6 >= k->min_enc && enc4 >= k->min_enc))
        return 0;
    float err6 = 0.0f, err4 = 0.0f;
    float m6[NVF_BLOCK], m4[NVF_BLOCK]; /* grid magnitudes of the 6 and the 4 candidate */
    NVF_QM_UNROLL
    for (int i = 0; i < NVF_BLOCK; i++) {
        float ax = nvf_f32_from_bits(ab[i]);
        NVF_QM_ROUND_MAG(m6[i], NVF_QM_MUL(ax, enc6));
        NVF_QM_ROUND_MAG(m4[i], NVF_QM_MUL(ax, enc4));
        float d6, d4;
        if (DOM == 0) {
            float ay = NVF_QM_MUL(ax, k->gs);
            d6 = NVF_QM_FMA(m6[i], sff6, -ay);
            d4 = NVF_QM_FMA(m4[i], sff4, -ay);
        } else {
            d6 = NVF_QM_SUB(NVF_QM_MUL(NVF_QM_MUL(m6[i], sff6), k->rcp_gs), ax);
            d4 = NVF_QM_SUB(NVF_QM_MUL(NVF_QM_MUL(m4[i], sff4), k->rcp_gs), ax);
        }
        if (ERR == 0) {
            err6 = NVF_QM_ADD(err6, NVF_QM_MUL(d6, d6));
            err4 = NVF_QM_ADD(err4, NVF_QM_MUL(d4, d4));
        } else {
            err6 = NVF_QM_ADD(err6, fabsf(d6));
            err4 = NVF_QM_ADD(err4, fabsf(d4));
        }
    }
    int four = err4 < err6; /* strict: ties keep 6 */
    uint32_t c0 = s0, c1 = s1;
    NVF_QM_UNROLL
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t nib;
        NVF_QM_NIBBLE(nib, four ? m4[i] : m6[i], i);
        if (i < 8)
            c0 |= nib;
        else
            c1 |= nib;
    }
    *w0 = c0;
    *w1 = c1;
    *scale = four ? sf4 : sf6;
    return 1;
}

/** Sign nibble bit of element i: x < 0 and x != 0, i.e. bits above 0x80000000. */
NVF_HOST_DEVICE static inline uint32_t nvf_qm_sign_bit(uint32_t xbits, int i) {
    return xbits > 0x80000000u ? 8u << (4 * (i & 7)) : 0u;
}

/**
 * Quantize one block of 16 binary32 values: the fast path with the magnitude/sign split done
 * here (what the kernels do for every source after conversion to binary32).
 */
NVF_HOST_DEVICE static inline void nvf_qm_block(uint32_t *w0, uint32_t *w1, uint8_t *scale,
                                                const float *x, const nvf_qm_consts *k, int METHOD,
                                                int ERR, int DOM) {
    uint32_t ab[NVF_BLOCK], m = 0, s0 = 0, s1 = 0;
    NVF_QM_UNROLL
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t b = nvf_f32_bits(x[i]);
        ab[i] = b & 0x7FFFFFFFu;
        m = ab[i] > m ? ab[i] : m;
        if (i < 8)
            s0 |= nvf_qm_sign_bit(b, i);
        else
            s1 |= nvf_qm_sign_bit(b, i);
    }
    if (!nvf_qm_block_fast(w0, w1, scale, ab, m, s0, s1, k, METHOD, ERR, DOM))
        nvf_qm_block_exact(w0, w1, scale, x, k);
}

/**
 * Division of n < 2^31 by a constant d in [1, 2^31) without a divide instruction:
 * q = (n * m) >> p with p = 31 + ceil(log2 d), m = ceil(2^p / d) (< 2^32). Exact: with
 * e = m * d - 2^p < d <= 2^(p - 31), n * m / 2^p = n / d + n * e / (d * 2^p), and n * e < 2^p
 * keeps the excess below 1 / d, which never reaches the next integer.
 */
typedef struct nvf_qm_div {
    uint32_t m, p;
} nvf_qm_div;

NVF_HOST_DEVICE static inline nvf_qm_div nvf_qm_div_make(uint32_t d) {
    uint32_t l = 0;
    while (l < 31 && (1u << l) < d)
        l++;
    nvf_qm_div r;
    r.p = 31 + l;
    r.m = (uint32_t)(((1ull << r.p) + d - 1) / d);
    return r;
}

NVF_HOST_DEVICE static inline uint32_t nvf_qm_div_do(uint32_t n, nvf_qm_div d) {
    return (uint32_t)(((uint64_t)n * d.m) >> d.p);
}

/** Constants for a call: gs, the parameters, and the smallest nonzero |x| of the source. */
NVF_HOST_DEVICE static inline nvf_qm_consts
nvf_qm_consts_make(float gs, int32_t method, int32_t error, int32_t domain, float min_abs) {
    nvf_qm_consts k;
    k.gs = gs;
    k.rcp_gs = NVF_QM_RCP(gs);
    k.rtn_mul = NVF_QM_MUL(gs, NVF_QM_RCP(6.0f));
    /* enc >= 2^-149 / min_abs keeps every nonzero |x| * enc >= 2^-149; the division is
     * rounded up by one ulp factor to stay on the safe side. */
    k.min_enc = NVF_QM_MUL(NVF_QM_DIV(1.40129846e-45f, min_abs), 1.0000002f);
    if (!(gs > 0.0f && gs <= FLT_MAX)) /* the sign rule needs enc > 0: exact path throughout */
        k.min_enc = INFINITY;
    k.method = method;
    k.error = error;
    k.domain = domain;
    return k;
}

#endif
