/*
 * The number formats of NVFP4 and of its sources, usable from C and CUDA (SPEC section 4).
 *
 * Bit layouts (most significant bit first):
 *   1. E2M1 (4 bits, NVFP4 element): sign(1) exp(2) mant(1), bias 1; magnitudes by index
 *      0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6. Two per byte: element 2j in the low nibble, 2j+1 in
 *      the high nibble of byte j.
 *   2. E4M3 "fn" (1 byte, NVFP4 block scale, OCP FP8): sign(1) exp(4) mant(3), bias 7; exp 0
 *      is subnormal (mant * 2^-9); S.1111.111 is NaN; no infinities; max 448 (0x7E).
 *   3. E5M2 (1 byte): sign(1) exp(5) mant(2), bias 15: the high byte of an IEEE binary16.
 *   4. E8M0 (1 byte, "ue8m0" scales): unsigned exponent e, value 2^(e-127); 0xFF is NaN.
 *   5. BF16 (2 bytes): the high half of an IEEE binary32.
 *   6. FP16 (2 bytes): IEEE binary16, sign(1) exp(5) mant(10), bias 15.
 *
 * Every conversion here works on the bits with integer operations, so the result never depends
 * on the floating-point environment (rounding mode, flush-to-zero) of the host or the device.
 * Only memcpy (for bit casts) is used from the C library.
 */
#ifndef NVFP4_FORMAT_H
#define NVFP4_FORMAT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NVF_HOST_DEVICE __host__ __device__
#else
#define NVF_HOST_DEVICE
#endif

#ifndef __cplusplus
_Static_assert(sizeof(float) == 4, "binary32 float required");
_Static_assert(sizeof(uint32_t) == 4 && sizeof(uint16_t) == 2 && sizeof(uint8_t) == 1,
               "exact-width integers required");
#else
static_assert(sizeof(float) == 4, "binary32 float required");
#endif

/** Elements per NVFP4 block: one E4M3 scale for every 16 consecutive input elements. */
#define NVF_BLOCK 16
/** Bytes of packed E2M1 codes per block (two codes per byte). */
#define NVF_BLOCK_BYTES (NVF_BLOCK / 2)
/** Largest finite E4M3 value and its byte. */
#define NVF_E4M3_MAX      448.0f
#define NVF_E4M3_MAX_BYTE 0x7E
/** Largest E2M1 magnitude. */
#define NVF_E2M1_MAX 6.0f

/* Bit casts -------------------------------------------------------------------------------- */

/** The bits of a binary32. */
NVF_HOST_DEVICE static inline uint32_t nvf_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/** The binary32 with bits `u`. */
NVF_HOST_DEVICE static inline float nvf_f32_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* BF16 / FP16 / E5M2 / E8M0 ----------------------------------------------------------------- */

/** BF16 bits to binary32 (exact). */
NVF_HOST_DEVICE static inline float nvf_bf16_to_f32(uint16_t h) {
    return nvf_f32_from_bits((uint32_t)h << 16);
}

/**
 * binary32 to BF16 bits, round to nearest, ties to even; overflow gives infinity, a NaN stays a
 * (quiet) NaN with its sign.
 */
NVF_HOST_DEVICE static inline uint16_t nvf_f32_to_bf16_rn(float f) {
    uint32_t u = nvf_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/** IEEE binary16 bits to binary32 (exact, subnormals, infinities and NaN included). */
NVF_HOST_DEVICE static inline float nvf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1F)
        return nvf_f32_from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return nvf_f32_from_bits(sign);
        /* Subnormal mant * 2^-24: normalize so the leading one becomes the implicit bit. */
        uint32_t e = 113; /* biased binary32 exponent of 2^-14 */
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            e--;
        }
        return nvf_f32_from_bits(sign | (e << 23) | ((mant & 0x3FFu) << 13));
    }
    return nvf_f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/** F8_E5M2 byte to binary32 (exact): it is the high byte of a binary16. */
NVF_HOST_DEVICE static inline float nvf_e5m2_to_f32(uint8_t b) {
    return nvf_f16_to_f32((uint16_t)((uint16_t)b << 8));
}

/** F8_E8M0 byte to binary32: 2^(b-127) exactly (2^-127 is a binary32 subnormal); 0xFF is NaN. */
NVF_HOST_DEVICE static inline float nvf_e8m0_to_f32(uint8_t b) {
    if (b == 0xFF)
        return nvf_f32_from_bits(0x7FC00000u);
    if (b == 0)
        return nvf_f32_from_bits(0x00400000u);
    return nvf_f32_from_bits((uint32_t)b << 23);
}

/* E4M3 --------------------------------------------------------------------------------------- */

/** E4M3 ("fn") byte to binary32, exact; 0x7F and 0xFF are NaN. */
NVF_HOST_DEVICE static inline float nvf_e4m3_to_f32(uint8_t b) {
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = (b >> 3) & 0xFu;
    uint32_t mant = b & 0x7u;
    if (exp == 0xF && mant == 0x7)
        return nvf_f32_from_bits(sign | 0x7FC00000u);
    if (exp == 0) {
        if (mant == 0)
            return nvf_f32_from_bits(sign);
        /* Subnormal mant * 2^-9: normalize. */
        uint32_t e = 121; /* biased binary32 exponent of 2^-6 */
        while ((mant & 0x8u) == 0) {
            mant <<= 1;
            e--;
        }
        return nvf_f32_from_bits(sign | (e << 23) | ((mant & 0x7u) << 20));
    }
    return nvf_f32_from_bits(sign | ((exp + 120u) << 23) | (mant << 20));
}

/**
 * binary32 to E4M3 byte: round to nearest, ties to even, saturating to ±448 (the `satfinite`
 * conversion of CUDA's cvt.rn.satfinite.e4m3x2.f32); infinities saturate; NaN gives 0x7F.
 */
NVF_HOST_DEVICE static inline uint8_t nvf_f32_to_e4m3_sat(float f) {
    uint32_t u = nvf_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return 0x7F;
    if (a >= 0x43E00000u) /* |f| >= 448 */
        return (uint8_t)(sign | NVF_E4M3_MAX_BYTE);
    if (a >= 0x3C800000u) { /* |f| >= 2^-6: normal; drop 20 mantissa bits, RN-even */
        uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
        /* Rebias 127 -> 7; a carry out of the mantissa correctly bumps the exponent. */
        return (uint8_t)(sign | (uint8_t)(r - (120u << 3)));
    }
    /* Subnormal target: q = RN(|f| * 2^9) in 0..8 (8 is the smallest normal, byte 0x08). */
    uint32_t e = a >> 23;
    if (e < 116) /* |f| < 2^-11: below half the smallest subnormal (2^-10) */
        return sign;
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 14u + 127u - e; /* value * 2^9 = m * 2^(e - 127 - 23 + 9) */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint8_t)(sign | q);
}

/* E2M1 --------------------------------------------------------------------------------------- */

/**
 * binary32 to E2M1 code (FlashInfer ref_fp4_quant_te): clamp to [-6, 6], round to nearest with
 * ties to the even code (|x| <= 0.25 -> 0, < 0.75 -> 0.5, <= 1.25 -> 1, < 1.75 -> 1.5,
 * <= 2.5 -> 2, < 3.5 -> 3, <= 5 -> 4, else 6). The sign bit is set iff x < 0, so -0.0 gives
 * 0x0 and NaN gives 0x0. Branch-free: the index is the number of thresholds passed.
 */
NVF_HOST_DEVICE static inline uint8_t nvf_e2m1_encode(float x) {
    float a = nvf_f32_from_bits(nvf_f32_bits(x) & 0x7FFFFFFFu);
    uint8_t idx = (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                            (a >= 3.5f) + (a > 5.0f));
    return (uint8_t)(idx | ((x < 0.0f) << 3));
}

/** E2M1 code (low 4 bits of `code`) to binary32, exact; code 0x8 is -0.0. */
NVF_HOST_DEVICE static inline float nvf_e2m1_to_f32(uint8_t code) {
    uint32_t sign = (uint32_t)(code & 0x8u) << 28;
    uint32_t idx = code & 0x7u;
    uint32_t bits;
    if (idx == 0)
        bits = 0;
    else if (idx == 1)
        bits = 0x3F000000u; /* 0.5 */
    else                    /* 2^(e-1) * (1 + m/2) with e = idx >> 1, m = idx & 1 */
        bits = ((126u + (idx >> 1)) << 23) | ((idx & 1u) << 22);
    return nvf_f32_from_bits(sign | bits);
}

/** Pack two E2M1 codes into one byte: `lo` is element 2j, `hi` element 2j+1. */
NVF_HOST_DEVICE static inline uint8_t nvf_e2m1_pack(uint8_t lo, uint8_t hi) {
    return (uint8_t)((lo & 0xFu) | ((hi & 0xFu) << 4));
}

/** E2M1 code of element `i` of a packed row. */
NVF_HOST_DEVICE static inline uint8_t nvf_e2m1_unpack(const uint8_t *packed, int64_t i) {
    return (uint8_t)((packed[i >> 1] >> ((i & 1) * 4)) & 0xFu);
}

#endif
