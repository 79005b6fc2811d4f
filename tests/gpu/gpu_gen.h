/*
 * Test data for the GPU tests (tests/gpu): one xorshift64 generator, seeded per test with
 * GPU_GEN_SEED (defined before this header), its 32-bit draws, near-normal floats, hard values
 * for the block quantizer, and stores of a float as a source dtype. Only tests include it.
 */
#ifndef NVFP4_TESTS_GPU_GEN_H
#define NVFP4_TESTS_GPU_GEN_H

#include "nvfp4/dtype.h"
#include "nvfp4/format.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef GPU_GEN_SEED
#error "define GPU_GEN_SEED (the test's seed) before including gpu_gen.h"
#endif

static uint64_t g_rng = GPU_GEN_SEED;

/* The next state of the generator. */
static inline uint64_t rnd64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* 32 bits of the state: its middle (bits 16..47) or its top (32..63). */
static inline uint32_t rnd32(void) {
    return (uint32_t)(rnd64() >> 16);
}

static inline uint32_t rnd(void) {
    return (uint32_t)(rnd64() >> 32);
}

/* Uniform in (-1, 1) from the top bits. */
static inline float urand(void) {
    return ((float)(rnd() >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

/* Close to N(0,1): four uniforms. */
static inline float gauss(void) {
    float a = 0.0f;
    for (int k = 0; k < 4; k++)
        a += (float)(rnd32() >> 8) / 16777216.0f;
    return (a - 2.0f) * 1.7320508f;
}

/* A value from a mix of hard cases: E2M1 grid points and ties scaled by powers of two,
 * subnormals, zeros of both signs, huge and tiny values, infinities and NaN. */
static inline float hard_value(int nonfinite) {
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                                 2.0f, 2.5f,  3.0f, 3.5f,  4.0f, 5.0f,  6.0f, 7.0f};
    float v;
    switch (rnd32() % (nonfinite ? 9 : 7)) {
    case 0:
        v = grid[rnd32() % 16] * ldexpf(1.0f, (int)(rnd32() % 20) - 10);
        break;
    case 1:
        v = nvf_f32_from_bits(rnd32() % 0x00800000u); /* subnormal */
        break;
    case 2:
        v = (rnd32() & 1) ? 1e30f : 1e-30f;
        break;
    case 3:
        v = 0.0f;
        break;
    case 4:
        v = nvf_bf16_to_f32((uint16_t)(rnd32() & 0x7F7F)); /* any finite BF16 magnitude */
        break;
    case 5:
        v = (float)((int)(rnd32() % 2001) - 1000) / 100.0f;
        break;
    case 6:
        v = nvf_f32_from_bits(rnd32() & 0x7F7FFFFFu);
        break;
    case 7:
        v = INFINITY;
        break;
    default:
        v = NAN;
        break;
    }
    return (rnd32() & 1) ? -v : v;
}

/* A value for whole-tensor quantization tests: E2M1 grid points and ties at powers of two,
 * zeros, huge and tiny values, near-normal values beyond 448 x 6 and small enough for subnormal
 * E4M3 scales, and (with `nonfinite`) infinities and NaN; either sign. */
static inline float hard_tensor_value(int nonfinite) {
    static const float grid[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    float v;
    switch (rnd32() % (nonfinite ? 8 : 6)) {
    case 0:
        v = grid[rnd32() % 10] * ldexpf(1.0f, (int)(rnd32() % 16) - 8); /* E2M1 ties */
        break;
    case 1:
        v = 0.0f;
        break;
    case 2:
        v = (rnd32() & 1) ? 1e30f : 1e-30f;
        break;
    case 3:
        v = gauss() * 3000.0f; /* beyond 448 * 6 */
        break;
    case 4:
        v = gauss() * 1e-6f; /* subnormal E4M3 scales */
        break;
    case 5:
        v = gauss();
        break;
    case 6:
        v = INFINITY;
        break;
    default:
        v = NAN;
        break;
    }
    return (rnd32() & 1) ? -v : v;
}

/* Store f as dtype d at element i of buffer p: F32, BF16 (nearest even), F16 (truncating: any
 * F16 bit pattern is a valid input; Inf/NaN kept), E5M2 (BF16's top byte), E4M3 (saturating). */
static inline void put(uint8_t *p, nvf_dtype d, size_t i, float f) {
    uint32_t b = nvf_f32_bits(f);
    switch (d) {
    case NVF_DTYPE_F32:
        memcpy(p + 4 * i, &f, 4);
        break;
    case NVF_DTYPE_BF16: {
        uint16_t h = nvf_f32_to_bf16_rn(f);
        memcpy(p + 2 * i, &h, 2);
        break;
    }
    case NVF_DTYPE_F16: {
        uint32_t e = (b >> 23) & 0xFF;
        uint16_t h = (uint16_t)((b >> 16) & 0x8000u);
        if (e == 0xFF)
            h |= (uint16_t)(0x7C00u | ((b & 0x7FFFFFu) ? 0x200u : 0u));
        else if (e > 142)
            h |= 0x7BFF;
        else if (e >= 113)
            h |= (uint16_t)(((e - 112) << 10) | ((b >> 13) & 0x3FFu));
        memcpy(p + 2 * i, &h, 2);
        break;
    }
    case NVF_DTYPE_F8_E5M2:
        p[i] = (uint8_t)(nvf_f32_to_bf16_rn(f) >> 8);
        break;
    default:
        p[i] = nvf_f32_to_e4m3_sat(f);
        break;
    }
}

#endif
