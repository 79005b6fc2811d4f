/*
 * The fast path of the CUDA quantizer (kernels/quant.cu) on top of the shared exact block
 * (nvfp4/quant_block.h), written so that it compiles both as CUDA device code and as plain C11
 * on the host: tests/gpu/test_quant_math.c runs the host build against nvf_quant_block_ref on
 * every hard case without a GPU.
 *
 * The results are those of nvf_qb_quantize, byte for byte (SPEC section 4). Two paths:
 *   1. nvf_qb_quantize_words (quant_block.h) itself: blocks holding a NaN, and blocks where the
 *      fast path's sign rule could fail.
 *   2. nvf_qm_block_fast: the same values with fewer instructions, exact because
 *      - the E2M1 rounding of a = min(|t|, 6) is RN(a + c) - c with c = 2^(22 + E), E the
 *        binade of max(a, 1) (0, 1 or 2): the sum's ulp is the grid step (0.5, 1, 2) there, so
 *        the sum rounds a to the grid, ties to the even grid index, as nvf_qb_e2m1_round_mag
 *        does; c comes from the exponent bits of max(a, 1) by one bitwise operation (NVF_QM_C_*);
 *      - the E2M1 index is the bits of RN(mag * 2^-126) >> 22 (mag = 0.5 lands on the binary32
 *        subnormal 2^-127, every other magnitude on a normal with one mantissa bit);
 *      - errors use |x|: RN is symmetric, so |q * sff - y| = |mag * sff - |y||, and likewise in
 *        the original domain;
 *      - the code's sign bit is x < 0 whenever no nonzero |x| * enc underflows to zero, which
 *        holds when enc >= 2^-149 / (smallest nonzero |x| of the source dtype) (min_enc);
 *      - mag * sff is exact (2 significant bits times 4, between 2^-10 and 2688), so the scaled
 *        domain's d = RN(RN(mag * sff) - y) is one fused multiply-add, fma(mag, sff, -y);
 *      - 4over6 builds both candidates' E2M1 code words as it goes and keeps the winner's;
 *      - min(t, 6) is left out for a block whose largest t = RN(vmax * enc) is below 7 (RN is
 *        monotone, so every t of the block is too, and the rounding maps [6, 7) to 6);
 *      - a block scale's enc and f32(sf) come from a table indexed by the E4M3 byte (built once
 *        per CUDA block), and for BF16-valued maxima RN(vmax / 6) is a multiply and two fused
 *        steps (nvf_qm_div6_bf16).
 */
#ifndef NVFP4_KERNELS_QUANT_MATH_H
#define NVFP4_KERNELS_QUANT_MATH_H

#include "nvfp4/format.h"
#include "nvfp4/quant_block.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#ifdef __CUDA_ARCH__
#define NVF_QM_UNROLL _Pragma("unroll")
#else
#define NVF_QM_UNROLL
#endif

/** RN(a * b + c) with one rounding (the fast path's exact products only, see above). */
NVF_HOST_DEVICE static inline float nvf_qm_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

/* c = 2^(22 + E) from the bits of e = max(a, 1) in [1, 8): exponent bit 0 kept, bit 1
 * inverted, the others fixed, mantissa cleared ((e & NVF_QM_C_KEEP) ^ NVF_QM_C_FLIP). */
#define NVF_QM_C_KEEP 0x01800000u
#define NVF_QM_C_FLIP 0x4B000000u

/** Per-tensor constants: the shared block's, and the fast path's. */
typedef struct nvf_qm_consts {
    nvf_qb_consts b;
    float min_enc;   /* the fast sign rule holds for enc >= min_enc */
    uint32_t c_keep; /* NVF_QM_C_KEEP; the kernels hide its value from the compiler, so that the
                      * rounding constant's (e & keep) ^ flip stays one instruction (LOP3 takes
                      * one immediate operand) */
} nvf_qm_consts;

/* RN(v / 6) for v a finite BF16 value, without a division: q = RN(v * RN(1/6)) corrected by one
 * fused step. Equal to the division for every finite BF16 magnitude (checked exhaustively by
 * tests/gpu/test_quant_math.c); not for every binary32, so only sources whose block maxima are
 * BF16 values (BF16, FP8-block) use it. */
NVF_HOST_DEVICE static inline float nvf_qm_div6_bf16(float v) {
    const float r6 = 0.166666672f; /* RN(1/6), 0x3E2AAAAB */
    float q = nvf_qb_mul(v, r6);
    float r = nvf_qm_fma(-q, 6.0f, v);
    return nvf_qm_fma(r, r6, q);
}

/* nvf_qb_sf6h, with nvf_qm_div6_bf16 when `bf16` (vmax a BF16 value). */
NVF_HOST_DEVICE static inline float nvf_qm_sf6h_fast(float vmax, float gs, int bf16) {
    if (!bf16 || vmax == 0.0f)
        return nvf_qb_sf6h(vmax, gs);
    return nvf_qb_mul(nvf_qm_div6_bf16(vmax), gs);
}

/* A block scale's decoded value sff = f32(sf) and its encode multiplier enc. The kernels hold
 * them in a shared-memory table indexed by the E4M3 byte's low 7 bits (NVF_QM_TAB_N entries,
 * filled by nvf_qm_scale_of). Scales from a positive global scale are nonnegative bytes; a
 * negative global scale (min_enc is infinite then) makes negative ones, whose lookup stays in
 * the table and whose block then takes the exact path. */
typedef struct nvf_qm_scale {
    float enc, sff;
} nvf_qm_scale;
#define NVF_QM_TAB_N 128

NVF_HOST_DEVICE static inline nvf_qm_scale nvf_qm_scale_of(uint8_t sf, float rcp_gs) {
    nvf_qm_scale s;
    s.sff = nvf_qb_e4m3_to_f32(sf);
    s.enc = nvf_qb_scale_enc(s.sff, rcp_gs);
    return s;
}

/* Entry sf of `tab`, or computed where there is no table (host). */
NVF_HOST_DEVICE static inline nvf_qm_scale nvf_qm_scale_get(const nvf_qm_scale *tab, uint8_t sf,
                                                            float rcp_gs) {
#ifdef __CUDA_ARCH__
    (void)rcp_gs; /* the kernels always pass their table */
    return tab[sf & 0x7F];
#else
    return tab ? tab[sf & 0x7F] : nvf_qm_scale_of(sf, rcp_gs);
#endif
}

/* ---- fast path ---------------------------------------------------------------------------- */

/** Whether the fast rounding takes min(t, 6) first (NVF_QM_ROUND_MAG). */
typedef enum nvf_qm_clamp {
    NVF_QM_CLAMP_OFF = 0, /* every t of the block is below NVF_QM_NOCLAMP_BELOW */
    NVF_QM_CLAMP_ON = 1,
} nvf_qm_clamp;

/* Grid magnitude of a = min(t, 6) for t = |x| * enc >= 0, and its E2M1 index placed at nibble
 * `i` of a word (bits 4i..4i+2). NVF_QM_CLAMP_OFF leaves the min out: the caller has checked
 * t < 7, where the rounding below gives min(t, 6)'s grid value (t in [6, 7) rounds to 6 in the
 * binade [4, 8)).
 */
#define NVF_QM_ROUND_MAG(mag, t, CLAMP, keep)                                                      \
    do {                                                                                           \
        float a_ = (CLAMP) == NVF_QM_CLAMP_ON ? fminf((t), NVF_E2M1_MAX) : (t);                    \
        float e_ = fmaxf(a_, 1.0f);                                                                \
        float c_ = nvf_f32_from_bits((nvf_f32_bits(e_) & (keep)) ^ NVF_QM_C_FLIP);                 \
        (mag) = nvf_qb_sub(nvf_qb_add(a_, c_), c_);                                                \
    } while (0)

/* hi32(a * b) + c: one multiply-add instruction on the GPU. */
NVF_HOST_DEVICE static inline uint32_t nvf_qm_madhi(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("mad.hi.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    return (uint32_t)(((uint64_t)a * b) >> 32) + c;
#endif
}

/* acc += the E2M1 index of grid magnitude `mag` at nibble i: v = idx << 22, shifted right by
 * 22 - 4i as the high word of v * 2^(10 + 4i) (one multiply-add), or left for i = 6, 7. The
 * nibble's bits are clear in acc, so the sum is the bitwise or. */
#define NVF_QM_NIBBLE_ADD(acc, mag, i)                                                             \
    do {                                                                                           \
        uint32_t v_ = nvf_f32_bits(nvf_qb_mul((mag), 1.17549435e-38f /* 2^-126 */));               \
        if (4 * ((i)&7) <= 22)                                                                     \
            (acc) = nvf_qm_madhi(v_, 1u << ((10 + 4 * ((i)&7)) & 31), (acc));                      \
        else                                                                                       \
            (acc) += v_ << ((4 * ((i)&7) - 22) & 31);                                              \
    } while (0)

/* The largest t = RN(vmax * enc) for which NVF_QM_CLAMP_OFF is exact. */
#define NVF_QM_NOCLAMP_BELOW 7.0f

/* RTN codes of a block (sign words s0/s1 already holding the sign bits). */
NVF_HOST_DEVICE static inline void nvf_qm_rtn_codes(uint32_t *w0, uint32_t *w1, const uint32_t *xb,
                                                    float enc, uint32_t s0, uint32_t s1,
                                                    uint32_t keep, nvf_qm_clamp CLAMP) {
    uint32_t c0 = s0, c1 = s1;
    NVF_QM_UNROLL
    for (int i = 0; i < NVF_BLOCK; i++) {
        float mag;
        NVF_QM_ROUND_MAG(mag, nvf_qb_mul(fabsf(nvf_f32_from_bits(xb[i])), enc), CLAMP, keep);
        if (i < 8)
            NVF_QM_NIBBLE_ADD(c0, mag, i);
        else
            NVF_QM_NIBBLE_ADD(c1, mag, i);
    }
    *w0 = c0;
    *w1 = c1;
}

/* 4over6: the two candidates' errors and E2M1 index words (q6/q4, two words each): both
 * candidates' codes are built as they go, which keeps 4 words live instead of 32 magnitudes. */
NVF_HOST_DEVICE static inline void nvf_qm_4o6_errors(uint32_t *q6, uint32_t *q4, float *err6,
                                                     float *err4, const uint32_t *xb,
                                                     nvf_qm_scale c6, nvf_qm_scale c4,
                                                     const nvf_qm_consts *k, nvf_quant_error ERR,
                                                     nvf_quant_domain DOM, nvf_qm_clamp CLAMP) {
    float e6 = 0.0f, e4 = 0.0f;
    q6[0] = q6[1] = q4[0] = q4[1] = 0;
    NVF_QM_UNROLL
    for (int i = 0; i < NVF_BLOCK; i++) {
        float ax = fabsf(nvf_f32_from_bits(xb[i]));
        float m6, m4;
        NVF_QM_ROUND_MAG(m6, nvf_qb_mul(ax, c6.enc), CLAMP, k->c_keep);
        NVF_QM_ROUND_MAG(m4, nvf_qb_mul(ax, c4.enc), CLAMP, k->c_keep);
        NVF_QM_NIBBLE_ADD(q6[i >> 3], m6, i);
        NVF_QM_NIBBLE_ADD(q4[i >> 3], m4, i);
        float d6, d4;
        if (DOM == NVF_QUANT_DOMAIN_SCALED) {
            float ay = nvf_qb_mul(ax, k->b.gs);
            d6 = nvf_qm_fma(m6, c6.sff, -ay);
            d4 = nvf_qm_fma(m4, c4.sff, -ay);
        } else {
            d6 = nvf_qb_sub(nvf_qb_mul(nvf_qb_mul(m6, c6.sff), k->b.rcp_gs), ax);
            d4 = nvf_qb_sub(nvf_qb_mul(nvf_qb_mul(m4, c4.sff), k->b.rcp_gs), ax);
        }
        if (ERR == NVF_QUANT_ERROR_MSE) {
            e6 = nvf_qb_add(e6, nvf_qb_mul(d6, d6));
            e4 = nvf_qb_add(e4, nvf_qb_mul(d4, d4));
        } else {
            e6 = nvf_qb_add(e6, fabsf(d6));
            e4 = nvf_qb_add(e4, fabsf(d4));
        }
    }
    *err6 = e6;
    *err4 = e4;
}

/*
 * Quantize one block of 16 values given as binary32 bits `xb` (the sign bits are ignored here)
 * whose sign word (bit 4i+3 set for x[i] < 0, x[i] != 0) is split over `s0` (elements 0..7) and
 * `s1` (8..15). `amax_bits` is the largest magnitude's bits (NaN included). `tab` is the scale
 * table of k->b.rcp_gs (NULL: computed per block); `bf16` says vmax is a BF16 value
 * (nvf_qm_div6_bf16). METHOD/ERR/DOM/bf16 are constants at every call site.
 * @return 1, or 0 (nothing written) when the block must take nvf_qb_quantize_words: it holds a
 * NaN, or its enc is below min_enc. The caller then passes the signed values itself (on the
 * GPU they are reloaded, so that the register copy never needs an address).
 */
NVF_HOST_DEVICE static inline int nvf_qm_block_fast(uint32_t *w0, uint32_t *w1, uint8_t *scale,
                                                    const uint32_t *xb, uint32_t amax_bits,
                                                    uint32_t s0, uint32_t s1,
                                                    const nvf_qm_consts *k, const nvf_qm_scale *tab,
                                                    int bf16, nvf_quant_method METHOD,
                                                    nvf_quant_error ERR, nvf_quant_domain DOM) {
    if (amax_bits > 0x7F800000u)
        return 0;
    float vmax = nvf_f32_from_bits(amax_bits);
    if (METHOD == NVF_QUANT_METHOD_RTN) {
        uint8_t sf = nvf_qb_scale_encode(nvf_qb_mul(vmax, k->b.rtn_mul));
        float enc = nvf_qm_scale_get(tab, sf, k->b.rcp_gs).enc;
        if (!(enc >= k->min_enc))
            return 0;
        if (nvf_qb_mul(vmax, enc) < NVF_QM_NOCLAMP_BELOW)
            nvf_qm_rtn_codes(w0, w1, xb, enc, s0, s1, k->c_keep, NVF_QM_CLAMP_OFF);
        else
            nvf_qm_rtn_codes(w0, w1, xb, enc, s0, s1, k->c_keep, NVF_QM_CLAMP_ON);
        *scale = sf;
        return 1;
    }
    float sf6h = nvf_qm_sf6h_fast(vmax, k->b.gs, bf16);
    float sf4h = nvf_qb_mul(sf6h, 1.5f);
    uint8_t sf6 = nvf_qb_scale_encode(sf6h), sf4 = nvf_qb_scale_encode(sf4h);
    nvf_qm_scale c6 = nvf_qm_scale_get(tab, sf6, k->b.rcp_gs);
    nvf_qm_scale c4 = nvf_qm_scale_get(tab, sf4, k->b.rcp_gs);
    if (!(c6.enc >= k->min_enc && c4.enc >= k->min_enc))
        return 0;
    float err6, err4;
    uint32_t q6[2], q4[2];
    if (nvf_qb_mul(vmax, c6.enc) < NVF_QM_NOCLAMP_BELOW &&
        nvf_qb_mul(vmax, c4.enc) < NVF_QM_NOCLAMP_BELOW)
        nvf_qm_4o6_errors(q6, q4, &err6, &err4, xb, c6, c4, k, ERR, DOM, NVF_QM_CLAMP_OFF);
    else
        nvf_qm_4o6_errors(q6, q4, &err6, &err4, xb, c6, c4, k, ERR, DOM, NVF_QM_CLAMP_ON);
    int four = err4 < err6; /* strict: ties keep 6 */
    *w0 = s0 | (four ? q4[0] : q6[0]);
    *w1 = s1 | (four ? q4[1] : q6[1]);
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
                                                const float *x, const nvf_qm_consts *k,
                                                const nvf_qm_scale *tab, int bf16,
                                                nvf_quant_method METHOD, nvf_quant_error ERR,
                                                nvf_quant_domain DOM) {
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
    if (!nvf_qm_block_fast(w0, w1, scale, ab, m, s0, s1, k, tab, bf16, METHOD, ERR, DOM)) {
        uint32_t w[2];
        *scale = nvf_qb_quantize_words(w, x, &k->b);
        *w0 = w[0];
        *w1 = w[1];
    }
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

/** Constants for a call: gs, the recipe, and the smallest nonzero |x| of the source. */
NVF_HOST_DEVICE static inline nvf_qm_consts nvf_qm_consts_make(float gs, nvf_quant_method method,
                                                               nvf_quant_error error,
                                                               nvf_quant_domain domain,
                                                               float min_abs) {
    nvf_qm_consts k;
    k.b = nvf_qb_consts_make(gs, method, error, domain);
    /* enc >= 2^-149 / min_abs keeps every nonzero |x| * enc >= 2^-149; the division is
     * rounded up by one ulp factor to stay on the safe side. */
    k.min_enc = nvf_qb_mul(nvf_qb_div(1.40129846e-45f, min_abs), 1.0000002f);
    k.c_keep = NVF_QM_C_KEEP;
    if (!(gs > 0.0f && gs <= FLT_MAX)) /* the sign rule needs enc > 0: exact path throughout */
        k.min_enc = INFINITY;
    return k;
}

#endif
