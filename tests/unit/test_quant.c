/*
 * NVFP4 quantization (SPEC section 4) against hand-worked blocks, the SPEC's worked block, and
 * statistics measured with an independent implementation.
 */
#include "check.h"

#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

static const nvf_quant_params k_rtn = {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE,
                                       NVF_QUANT_DOMAIN_SCALED, 448};

static nvf_quant_params p46(nvf_quant_error e, nvf_quant_domain d) {
    nvf_quant_params p = {NVF_QUANT_METHOD_4OVER6, e, d, 256};
    return p;
}

static void check_block(const char *what, const float *x, float gs, const nvf_quant_params *p,
                        const uint8_t *want_packed, uint8_t want_scale) {
    uint8_t packed[8], scale;
    nvf_quant_block_ref(packed, &scale, x, gs, p);
    int ok = memcmp(packed, want_packed, 8) == 0 && scale == want_scale;
    CHECK_MSG(ok,
              "%s: got %02x %02x %02x %02x %02x %02x %02x %02x scale %02x, expected %02x %02x "
              "%02x %02x %02x %02x %02x %02x scale %02x",
              what, packed[0], packed[1], packed[2], packed[3], packed[4], packed[5], packed[6],
              packed[7], scale, want_packed[0], want_packed[1], want_packed[2], want_packed[3],
              want_packed[4], want_packed[5], want_packed[6], want_packed[7], want_scale);
}

static void test_global_scale(void) {
    /* 2688 / 0.05f = 53759.9992 -> RN 53760 (0x47520000); RN(1/53760) = 0x379c09c1. */
    float gs = nvf_quant_global_scale(0.05f, 448);
    CHECK(nvf_f32_bits(gs) == 0x47520000u);
    CHECK(nvf_f32_bits(nvf_quant_decode_scale(gs)) == 0x379c09c1u);
    /* 1536 / 0.05f -> 30720 (0x46f00000); RN(1/30720) = 0x38088889. */
    gs = nvf_quant_global_scale(0.05f, 256);
    CHECK(nvf_f32_bits(gs) == 0x46f00000u);
    CHECK(nvf_f32_bits(nvf_quant_decode_scale(gs)) == 0x38088889u);
    /* amax = 0 -> FLT_MAX; its decode scale RN(1/FLT_MAX) = 2^-128 (a binary32 subnormal). */
    CHECK(nvf_quant_global_scale(0.0f, 448) == FLT_MAX);
    CHECK(nvf_quant_decode_scale(FLT_MAX) == 0x1p-128f);
    /* 2688 / 1e-45 overflows -> FLT_MAX; 2688 / inf = 0 -> 1. */
    CHECK(nvf_quant_global_scale(1e-45f, 448) == FLT_MAX);
    CHECK(nvf_quant_global_scale(INFINITY, 448) == 1.0f);
    /* amax = 2688 exactly -> 1; amax = 6 with E = 256 -> 256. */
    CHECK(nvf_quant_global_scale(2688.0f, 448) == 1.0f);
    CHECK(nvf_quant_global_scale(6.0f, 256) == 256.0f);
}

/* SPEC section 4 "Worked block" (group amax 0.05). */
static const float k_worked[16] = {
    0.021240234375f,    -0.007110595703125f, 0.01019287109375f,  0.033935546875f,
    -0.018798828125f,   0.000701904296875f,  -0.025390625f,      0.01190185546875f,
    0.004608154296875f, -0.0301513671875f,   0.0164794921875f,   -0.0012969970703125f,
    0.02783203125f,     -0.00958251953125f,  0.005096435546875f, -0.01470947265625f};

static void test_worked_block(void) {
    /* RTN, E = 448: gs = 53760; RN(gs * RN(1/6)) = 8960; vmax * 8960 = 304.0625 -> 0x7a
     * (320); enc = RN(1 / RN(320 * RN(1/53760))) = 168; codes 6 a 3 7 d 0 e 4 2 f 5 8 6 b 2 c. */
    static const uint8_t rtn[8] = {0xa6, 0x73, 0x0d, 0x4e, 0xf2, 0x85, 0xb6, 0xc2};
    check_block("worked RTN", k_worked, nvf_quant_global_scale(0.05f, 448), &k_rtn, rtn, 0x7a);
    /* 4over6 MSE scaled, E = 256: gs = 30720; sf6h = 173.75 -> 0x73 (176), sf4h = 260.625 ->
     * 0x78 (256); err4 = 48425.6015625 < err6 = 65001.6015625 -> candidate 4. */
    static const uint8_t four[8] = {0xa5, 0x62, 0x0c, 0x3d, 0xe1, 0x84, 0xa5, 0xc1};
    nvf_quant_params p = nvf_quant_params_default();
    check_block("worked 4over6", k_worked, nvf_quant_global_scale(0.05f, 256), &p, four, 0x78);
}

/*
 * A block where MSE and MAE choose differently, worked by hand with gs = 2 (a power of two, so
 * every product below is exact unless noted):
 *   x = {3, 1.875, 1.875, 1.25 x5, 0 x8}, vmax = 3.
 *   sf6h = RN(RN(3/6) * 2) = 1 -> 0x38 (1.0); sf4h = 1.5 -> 0x3c (1.5); RN(1/gs) = 0.5.
 *   enc6 = 1 / RN(1 * 0.5) = 2; enc4 = RN(1 / RN(1.5 * 0.5)) = RN(4/3) = 1.33333337306976.
 *   Candidate 6: t = x*2 = {6, 3.75, 3.75, 2.5} -> codes {7 (6), 6 (4), 6 (4), 4 (2, tie)}.
 *   Candidate 4: t = RN(x * 1.3333334) = {4.0000001 -> 4.0, 2.50000007 -> 2.5, 1.66666672}
 *                (RN of 3 * 1.3333334 is 4.0; of 1.875 * 1.3333334 is 2.5 exactly, a tie ->
 *                code 4 (2.0)) -> codes {6 (4), 4 (2), 4 (2), 3 (1.5)}.
 *   Scaled domain (y = x * 2 = {6, 3.75, 3.75, 2.5}; c = e2m1 * sf):
 *     c6 = {6, 4, 4, 2}:       d6 = {0, .25, .25, -.5 x5}
 *     c4 = {6, 3, 3, 2.25}:    d4 = {0, -.75, -.75, -.25 x5}
 *     MSE: err6 = 2*.0625 + 5*.25 = 1.375;  err4 = 2*.5625 + 5*.0625 = 1.4375 -> 6 wins.
 *     MAE: err6 = 2*.25 + 5*.5 = 3.0;       err4 = 2*.75 + 5*.25 = 2.75     -> 4 wins.
 *   Original domain (c = RN(RN(e2m1 * sf) * 0.5), d = c - x):
 *     c6 = {3, 2, 2, 1}:       d6 = {0, .125, .125, -.25 x5}
 *     c4 = {3, 1.5, 1.5, 1.125}: d4 = {0, -.375, -.375, -.125 x5}
 *     MSE: err6 = 2*.015625 + 5*.0625 = .34375; err4 = 2*.140625 + 5*.015625 = .359375 -> 6.
 *     MAE: err6 = .25 + 1.25 = 1.5;             err4 = .75 + .625 = 1.375            -> 4.
 *   Packed (element 2j low nibble): 6 wins -> 67 46 44 44 00 00 00 00, scale 38;
 *                                   4 wins -> 46 34 33 33 00 00 00 00, scale 3c.
 *   RTN (E irrelevant, gs given): RN(2 * RN(1/6)) = 0.333333343; RN(3 * 0.333333343) = 1.0
 *   (1.0000000298 rounds to 1) -> 0x38, enc = 2: the same codes as candidate 6.
 */
static void test_hand_4over6(void) {
    static const float x[16] = {3, 1.875f, 1.875f, 1.25f, 1.25f, 1.25f, 1.25f, 1.25f};
    static const uint8_t six[8] = {0x67, 0x46, 0x44, 0x44, 0, 0, 0, 0};
    static const uint8_t four[8] = {0x46, 0x34, 0x33, 0x33, 0, 0, 0, 0};
    nvf_quant_params p;
    p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED);
    check_block("mse scaled", x, 2.0f, &p, six, 0x38);
    p = p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED);
    check_block("mae scaled", x, 2.0f, &p, four, 0x3c);
    p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL);
    check_block("mse original", x, 2.0f, &p, six, 0x38);
    p = p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL);
    check_block("mae original", x, 2.0f, &p, four, 0x3c);
    check_block("rtn", x, 2.0f, &k_rtn, six, 0x38);
    /* Dequantizing the 6-candidate with scale_2 = 0.5 gives c6 of the original domain. */
    uint8_t packed[8], scale;
    float back[16];
    p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED);
    nvf_quant_block_ref(packed, &scale, x, 2.0f, &p);
    nvf_quant_dequant_row_ref(back, packed, &scale, 16, 0.5f);
    CHECK(back[0] == 3.0f && back[1] == 2.0f && back[3] == 1.0f && back[15] == 0.0f);
}

/*
 * Subnormal E4M3 scales, gs = 1: x = {3*2^-8, 3*2^-9, -3*2^-10, 0 x13}, vmax = 3*2^-8.
 *   RTN: RN(1/6) = 11184811 * 2^-26; 3*2^-8 times it = (2^25 + 1) * 2^-34, 26 significant
 *   bits -> RN to 2^-9 exactly -> scale 0x01 (2^-9, the smallest subnormal); enc = 512;
 *   t = {6, 3, -1.5} -> codes {7, 5, b} -> packed 57 0b 00.., scale 01.
 *   4over6: sf6h = RN(2^-9 * 1) = 2^-9 -> 0x01; sf4h = 1.5 * 2^-9, the midpoint of 0x01 and
 *   0x02 -> even 0x02 (2^-8). Candidate 6 reproduces x exactly (err6 = 0), so 6 wins (strict <)
 *   for every error and domain -> the RTN bytes.
 */
static void test_subnormal_scales(void) {
    static const float x[16] = {0x3p-8f, 0x3p-9f, -0x3p-10f};
    static const uint8_t want[8] = {0x57, 0x0b};
    check_block("subnormal rtn", x, 1.0f, &k_rtn, want, 0x01);
    for (int e = 0; e < 2; e++) {
        for (int d = 0; d < 2; d++) {
            nvf_quant_params p = p46((nvf_quant_error)e, (nvf_quant_domain)d);
            check_block("subnormal 4over6", x, 1.0f, &p, want, 0x01);
        }
    }
    /* Values so small that even the scale rounds to 0: vmax * RN(1/6) < 2^-10. Scale 0 makes
     * enc = min(1/0, FLT_MAX) = FLT_MAX; x * FLT_MAX then saturates the codes: 2^-13 * FLT_MAX
     * is far above 6 -> 7, and the negative one -> f. */
    static const float tiny[16] = {0x1p-13f, -0x1p-13f};
    static const uint8_t tiny_want[8] = {0xf7};
    check_block("scale zero", tiny, 1.0f, &k_rtn, tiny_want, 0x00);
}

static void test_zero_blocks(void) {
    static const float zeros[16];
    static const uint8_t none[8];
    float negzero[16];
    for (int i = 0; i < 16; i++)
        negzero[i] = -0.0f;
    nvf_quant_params p = nvf_quant_params_default();
    check_block("zero rtn", zeros, 53760.0f, &k_rtn, none, 0);
    check_block("zero 4over6", zeros, 53760.0f, &p, none, 0);
    /* -0.0 is not < 0: code 0, not 8. */
    check_block("-0 rtn", negzero, 53760.0f, &k_rtn, none, 0);
    check_block("-0 4over6", negzero, 53760.0f, &p, none, 0);
    /* An all-zero tensor: amax 0 -> gs = FLT_MAX; every byte 0; scale_2 = 2^-128. */
    float t[4 * 32] = {0};
    uint8_t packed[4 * 16], scales[4 * 2];
    memset(packed, 0xAA, sizeof packed);
    memset(scales, 0xAA, sizeof scales);
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = t, .rows = 4, .cols = 32};
    float amax = -1;
    CHECK(nvf_quant_amax_ref(&amax, &s, 0, 2, "zeros") == 0 && amax == 0.0f);
    float gs = nvf_quant_global_scale(amax, 256);
    CHECK(nvf_quant_rows_ref(packed, scales, t, 4, 32, gs, &p, 2) == 0);
    int all_zero = 1;
    for (size_t i = 0; i < sizeof packed; i++)
        all_zero &= packed[i] == 0;
    for (size_t i = 0; i < sizeof scales; i++)
        all_zero &= scales[i] == 0;
    CHECK(all_zero);
}

/*
 * Huge and tiny magnitudes: x = m * {1, .75, .75, .75, .5, -.25, .0625, 0 x9} with m = 1e30 and
 * 1e-30 (group amax = the block's vmax, E = 256, so gs ~ 1536 / m).
 *   sf6h = RN(RN(vmax/6) * gs) ~ 256 -> 0x78; sf4h ~ 384 -> 0x7c.
 *   Scaled domain: y ~ {1536, 1152 x3, 768, -384, 96}.
 *     Candidate 6: t ~ {6, 4.5 x3, 3, -1.5, .375} -> {6, 4 x3, 3, -1.5, .5}; c6 = q * 256
 *     misses 1152 by 128 three times and 96 by 32: err6 ~ 3 * 16384 + 1024 = 50176.
 *     Candidate 4: t ~ {4, 3 x3, 2, -1, .25} -> {4, 3 x3, 2, -1, 0 (tie)}; c4 = q * 384 hits
 *     all but the last (96 -> 0): err4 ~ 9216 -> 4 wins (codes 6 5 5 5 4 a 0, scale 0x7c),
 *     for MSE and for MAE (err6 ~ 416 > err4 ~ 96).
 *   Original domain, MSE: d ~ 6e28 (m = 1e30) squares to inf for both candidates, and
 *   d ~ 6e-32 (m = 1e-30) squares to 0 for both: a tie -> 6 (codes 7 6 6 6 5 b 1, scale 0x78).
 *   Original domain, MAE: |d| stays finite and non-zero -> 4 wins as in the scaled domain.
 */
static void test_extreme_magnitudes(void) {
    static const float shape[7] = {1, .75f, .75f, .75f, .5f, -.25f, .0625f};
    static const uint8_t four[8] = {0x56, 0x55, 0xa4};
    static const uint8_t six[8] = {0x67, 0x66, 0xb5, 0x01};
    const float mags[2] = {1e30f, 1e-30f};
    for (int m = 0; m < 2; m++) {
        float x[16] = {0};
        for (int i = 0; i < 7; i++)
            x[i] = mags[m] * shape[i];
        float gs = nvf_quant_global_scale(mags[m], 256);
        nvf_quant_params p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED);
        check_block("extreme mse scaled", x, gs, &p, four, 0x7c);
        p = p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED);
        check_block("extreme mae scaled", x, gs, &p, four, 0x7c);
        p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL);
        check_block("extreme mse original", x, gs, &p, six, 0x78);
        p = p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL);
        check_block("extreme mae original", x, gs, &p, four, 0x7c);
    }
}

/* Deterministic N(0,1) samples, rounded to BF16 (splitmix64 + Box-Muller). */
static uint64_t g_rng;
static double rng_uniform(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}
static void fill_normal_bf16(float *x, size_t n, uint64_t seed) {
    g_rng = seed;
    for (size_t i = 0; i < n; i += 2) {
        double r = sqrt(-2.0 * log(rng_uniform())), a = 6.283185307179586 * rng_uniform();
        x[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn((float)(r * cos(a))));
        if (i + 1 < n)
            x[i + 1] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn((float)(r * sin(a))));
    }
}

/* Relative MSE of quantize -> dequantize over a whole [rows, cols] tensor. */
static double rel_mse(const float *x, int64_t rows, int64_t cols, const nvf_quant_params *p) {
    size_t n = (size_t)(rows * cols);
    uint8_t *packed = malloc(n / 2), *scales = malloc(n / 16);
    float *back = malloc(cols * sizeof *back);
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = x, .rows = rows, .cols = cols};
    float amax;
    CHECK(nvf_quant_amax_ref(&amax, &s, 0, 2, "normal") == 0);
    float gs = nvf_quant_global_scale(amax, p->e4m3_max);
    CHECK(nvf_quant_rows_ref(packed, scales, x, rows, cols, gs, p, 2) == 0);
    double num = 0, den = 0;
    for (int64_t r = 0; r < rows; r++) {
        nvf_quant_dequant_row_ref(back, packed + r * cols / 2, scales + r * cols / 16, cols,
                                  nvf_quant_decode_scale(gs));
        for (int64_t c = 0; c < cols; c++) {
            double d = (double)back[c] - x[r * cols + c];
            num += d * d;
            den += (double)x[r * cols + c] * x[r * cols + c];
        }
    }
    free(packed);
    free(scales);
    free(back);
    return num / den;
}

/* Figures measured with an independent implementation on 65,536 BF16-rounded N(0,1) values:
 * relative MSE 0.0090 for RTN (E = 448) and 0.0075 for 4over6-MSE (E = 256). Within 2%. */
static void test_normal_rel_mse(void) {
    enum { ROWS = 64, COLS = 1024 };
    float *x = malloc(ROWS * COLS * sizeof *x);
    nvf_quant_params four = nvf_quant_params_default();
    for (uint64_t seed = 1; seed <= 4; seed++) {
        fill_normal_bf16(x, ROWS * COLS, seed);
        double e_rtn = rel_mse(x, ROWS, COLS, &k_rtn);
        double e_46 = rel_mse(x, ROWS, COLS, &four);
        printf("seed %llu: relative MSE rtn %.5f, 4over6-mse %.5f\n", (unsigned long long)seed,
               e_rtn, e_46);
        CHECK_MSG(fabs(e_rtn / 0.0090 - 1) < 0.02, "rtn relative MSE %.5f", e_rtn);
        CHECK_MSG(fabs(e_46 / 0.0075 - 1) < 0.02, "4over6 relative MSE %.5f", e_46);
        CHECK(e_46 < e_rtn);
        for (int e = 0; e < 2; e++) {
            for (int d = 0; d < 2; d++) {
                nvf_quant_params p = p46((nvf_quant_error)e, (nvf_quant_domain)d);
                CHECK(rel_mse(x, ROWS, COLS, &p) < e_rtn);
            }
        }
    }
    free(x);
}

/* The row path (8 blocks side by side, then single blocks) gives the bytes of
 * nvf_quant_block_ref for every block and every thread count, on hard cases: zero blocks,
 * exact E2M1 ties, subnormal scales, values beyond 448 * 6, and ordinary data. */
static void test_threads_identical(void) {
    enum { ROWS = 37, COLS = 16 * 19 }; /* two 8-block chunks and 3 single blocks per row */
    float *x = malloc(ROWS * COLS * sizeof *x);
    fill_normal_bf16(x, ROWS * COLS, 99);
    static const float ties[8] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f};
    for (int blk = 0; blk < ROWS * COLS / 16; blk++) {
        float *v = x + blk * 16;
        switch (blk % 7) {
        case 0: /* zero block, with -0.0 */
            for (int i = 0; i < 16; i++)
                v[i] = i % 2 ? -0.0f : 0.0f;
            break;
        case 1: /* ties of the E2M1 grid at gs = 1 scales */
            for (int i = 0; i < 16; i++)
                v[i] = (i % 3 ? 1.0f : -1.0f) * ties[(i + blk) % 8];
            break;
        case 2: /* tiny: subnormal or zero scales */
            for (int i = 0; i < 16; i++)
                v[i] *= 1e-7f;
            break;
        case 3: /* huge */
            for (int i = 0; i < 16; i++)
                v[i] *= 1e6f;
            break;
        default:
            break;
        }
    }
    nvf_quant_params params[5] = {k_rtn, nvf_quant_params_default(),
                                  p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL),
                                  p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED),
                                  p46(NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL)};
    const float gss[2] = {1.0f, nvf_quant_global_scale(4.0f, 256)};
    uint8_t *ref_p = malloc(ROWS * COLS / 2), *ref_s = malloc(ROWS * COLS / 16);
    uint8_t *pk = malloc(ROWS * COLS / 2), *sc = malloc(ROWS * COLS / 16);
    for (int k = 0; k < 5; k++) {
        for (int g = 0; g < 2; g++) {
            for (int b = 0; b < ROWS * COLS / 16; b++)
                nvf_quant_block_ref(ref_p + b * 8, ref_s + b, x + b * 16, gss[g], &params[k]);
            const int threads[5] = {1, 2, 3, 7, 0};
            for (int t = 0; t < 5; t++) {
                memset(pk, 0, ROWS * COLS / 2);
                memset(sc, 0, ROWS * COLS / 16);
                CHECK(nvf_quant_rows_ref(pk, sc, x, ROWS, COLS, gss[g], &params[k], threads[t]) ==
                      0);
                int bad = -1;
                for (int b = 0; b < ROWS * COLS / 16 && bad < 0; b++) {
                    if (memcmp(pk + b * 8, ref_p + b * 8, 8) != 0 || sc[b] != ref_s[b])
                        bad = b;
                }
                CHECK_MSG(bad < 0, "params %d, gs %g, %d threads: block %d differs", k,
                          (double)gss[g], threads[t], bad);
            }
        }
    }
    free(ref_p);
    free(ref_s);
    free(pk);
    free(sc);
    free(x);
}

static uint16_t bf16_nearest(double v) {
    /* Independent RN-even to BF16 for finite normal v: compare both neighbours. */
    float f = (float)v;
    uint32_t u = nvf_f32_bits(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs(nvf_bf16_to_f32(lo) - (double)f), dh = fabs(nvf_bf16_to_f32(hi) - (double)f);
    if (dl < dh || (dl == dh && (lo & 1) == 0))
        return lo;
    return hi;
}

static void test_sources(void) {
    /* BF16 rows are exact; unaligned data is fine. */
    uint8_t raw[2 + 2 * 32];
    for (int i = 0; i < 32; i++) { /* bits 0x3F80 + i (1 + i * 2^-7), little-endian */
        raw[1 + 2 * i] = (uint8_t)(0x80 + i);
        raw[2 + 2 * i] = 0x3F;
    }
    float row[144];
    nvf_quant_source s = {.dtype = NVF_DTYPE_BF16, .data = raw + 1, .rows = 1, .cols = 32};
    CHECK(nvf_quant_source_check(&s, "bf16") == 0);
    nvf_quant_source_load_row(row, &s, 0);
    CHECK(row[0] == 1.0f && row[2] == 1.0f + 2 * 0x1p-7f && row[31] == 1.0f + 31 * 0x1p-7f);

    /* FP8 block [130, 144] with 128 x 128 blocks: 2 x 2 scales, stored squeezed as [4]. */
    enum { R = 130, C = 144 };
    uint8_t *fp8 = malloc(R * C);
    for (int i = 0; i < R * C; i++)
        fp8[i] = (uint8_t)((i * 37 + 11) % 256 == 0x7F ? 0x3C : (i * 37 + 11) % 256);
    for (int i = 0; i < R * C; i++)
        if (fp8[i] == 0xFF)
            fp8[i] = 0xBC;
    float scale_inv[4] = {1.5e-3f, 2.5e-4f, 3.0e-2f, 7.0e-5f};
    s = (nvf_quant_source){.dtype = NVF_DTYPE_F8_E4M3,
                           .data = fp8,
                           .rows = R,
                           .cols = C,
                           .scale = scale_inv,
                           .scale_dtype = NVF_DTYPE_F32,
                           .scale_numel = 4,
                           .block_rows = 128,
                           .block_cols = 128};
    CHECK(nvf_quant_source_check(&s, "fp8") == 0);
    int bad = 0;
    for (int r = 0; r < R; r += 43) {
        nvf_quant_source_load_row(row, &s, r);
        for (int c = 0; c < C; c++) {
            double want =
                nvf_e4m3_to_f32(fp8[r * C + c]) * (double)scale_inv[(r / 128) * 2 + c / 128];
            float w = nvf_bf16_to_f32(bf16_nearest((float)want));
            bad += !(row[c] == w);
        }
    }
    CHECK_MSG(bad == 0, "%d fp8-block values differ", bad);
    /* E8M0 scales: 2^(b - 127), exact. */
    uint8_t e8[4] = {127, 120, 130, 1};
    s.scale = e8;
    s.scale_dtype = NVF_DTYPE_F8_E8M0;
    CHECK(nvf_quant_source_check(&s, "fp8") == 0);
    nvf_quant_source_load_row(row, &s, 129);
    CHECK(row[0] == (float)ldexp(nvf_e4m3_to_f32(fp8[129 * C]), 3));
    CHECK(row[130] ==
          nvf_bf16_to_f32(bf16_nearest(ldexp(nvf_e4m3_to_f32(fp8[129 * C + 130]), -126))));
    /* Rejections: a scale count that does not match, columns not a multiple of 16, I32. */
    s.scale_numel = 6;
    CHECK(nvf_quant_source_check(&s, "w") == NVF_E_SHAPE);
    CHECK_CONTAINS(nvf_error_last(), "expected 4");
    s.scale_numel = 4;
    s.cols = 100;
    CHECK(nvf_quant_source_check(&s, "w") == NVF_E_SHAPE);
    CHECK_CONTAINS(nvf_error_last(), "multiple of 16");
    s = (nvf_quant_source){.dtype = NVF_DTYPE_I32, .data = fp8, .rows = 1, .cols = 16};
    CHECK(nvf_quant_source_check(&s, "ints") == NVF_E_UNSUPPORTED);
    free(fp8);
}

static void test_amax_nonfinite(void) {
    enum { R = 9, C = 32 };
    float x[R * C];
    for (int i = 0; i < R * C; i++)
        x[i] = (float)((i * 7) % 13) - 6.0f;
    x[100] = -7.5f;
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = x, .rows = R, .cols = C};
    for (int t = 1; t <= 4; t++) {
        float amax = 0;
        CHECK(nvf_quant_amax_ref(&amax, &s, 0, t, "w") == 0 && amax == 7.5f);
    }
    x[2 * C + 5] = NAN;
    x[6 * C + 1] = INFINITY;
    for (int t = 1; t <= 4; t++) {
        float amax = 0;
        CHECK(nvf_quant_amax_ref(&amax, &s, 0, t, "model.w") == NVF_E_NONFINITE);
        CHECK_CONTAINS(nvf_error_last(), "'model.w'");
        CHECK_CONTAINS(nvf_error_last(), "[2, 5]");
        /* Passed through: NaN is skipped, the infinity makes amax infinite (gs = 1). */
        CHECK(nvf_quant_amax_ref(&amax, &s, 1, t, "w") == 0 && amax == INFINITY);
    }
    x[6 * C + 1] = 0.0f;
    float amax = 0;
    CHECK(nvf_quant_amax_ref(&amax, &s, 1, 3, "w") == 0 && amax == 7.5f);
}

/* Callers on several threads at once share the global pool (their batches interleave on its
 * workers): each must still get the bytes of a one-thread run, and its own amax. */
enum { CC_CALLERS = 3, CC_ROWS = 37, CC_COLS = 64 };

typedef struct cc_job {
    const float *x;
    uint8_t packed[CC_ROWS * CC_COLS / 2], scales[CC_ROWS * CC_COLS / 16];
    float amax;
    int rc;
} cc_job;

static void *cc_run(void *arg) {
    cc_job *j = arg;
    nvf_quant_params p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED);
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = j->x, .rows = CC_ROWS, .cols = CC_COLS};
    j->rc = nvf_quant_amax_ref(&j->amax, &s, 0, 0, "cc");
    for (int k = 0; k < 20 && j->rc == 0; k++)
        j->rc = nvf_quant_rows_ref(j->packed, j->scales, j->x, CC_ROWS, CC_COLS, 64.0f, &p, 0);
    return NULL;
}

static void test_concurrent_callers(void) {
    static float x[CC_CALLERS][CC_ROWS * CC_COLS];
    static cc_job jobs[CC_CALLERS], want;
    for (int c = 0; c < CC_CALLERS; c++) {
        for (int i = 0; i < CC_ROWS * CC_COLS; i++)
            x[c][i] = (float)((i * (7 + 2 * c)) % 29 - 14) / (float)(c + 1);
        jobs[c].x = x[c];
    }
    pthread_t tid[CC_CALLERS];
    for (int c = 0; c < CC_CALLERS; c++)
        CHECK(pthread_create(&tid[c], NULL, cc_run, &jobs[c]) == 0);
    for (int c = 0; c < CC_CALLERS; c++)
        pthread_join(tid[c], NULL);
    nvf_quant_params p = p46(NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED);
    for (int c = 0; c < CC_CALLERS; c++) {
        CHECK(jobs[c].rc == 0);
        /* The largest |x| is 14 / (c + 1) (i * (7 + 2c) mod 29 takes every value 0..28). */
        CHECK(jobs[c].amax == 14.0f / (float)(c + 1));
        CHECK(nvf_quant_rows_ref(want.packed, want.scales, x[c], CC_ROWS, CC_COLS, 64.0f, &p, 1) ==
              0);
        CHECK(memcmp(jobs[c].packed, want.packed, sizeof want.packed) == 0);
        CHECK(memcmp(jobs[c].scales, want.scales, sizeof want.scales) == 0);
    }
    /* No rows: amax 0, nothing to quantize. */
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = x[0], .rows = 0, .cols = CC_COLS};
    float amax = -1.0f;
    CHECK(nvf_quant_amax_ref(&amax, &s, 0, 0, "empty") == 0 && amax == 0.0f);
    CHECK(nvf_quant_source_ref(want.packed, want.scales, &s, 1.0f, &p, 0) == 0);
}

/* nvf_quant_source_value (header-only, what kernels/ uses to name a non-finite value) gives the
 * bits of nvf_quant_source_load_row's element for every dtype and block-scale dtype, over bytes
 * that include NaN and infinity patterns and FP8 blocks cut at the edges (5 x 48, blocks 2 x 32).
 */
static void test_source_value(void) {
    enum { R = 5, C = 48 };
    uint8_t data[R * C * 4];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)((i * 37 + 11) % 256);
    uint8_t scales[3 * 2 * 4];
    for (size_t i = 0; i < sizeof scales; i++)
        scales[i] = (uint8_t)(0x3C + (i * 7) % 9); /* finite, around 1 in F32, BF16 and E8M0 */
    const nvf_dtype dtypes[] = {NVF_DTYPE_BF16, NVF_DTYPE_F16, NVF_DTYPE_F32, NVF_DTYPE_F8_E5M2,
                                NVF_DTYPE_F8_E4M3};
    const nvf_dtype sdtypes[] = {NVF_DTYPE_F32, NVF_DTYPE_BF16, NVF_DTYPE_F8_E8M0};
    float row[C];
    int bad = 0, cases = 0;
    for (int d = 0; d < 5 + 3; d++) {
        nvf_quant_source s = {
            .dtype = d < 5 ? dtypes[d] : NVF_DTYPE_F8_E4M3, .data = data, .rows = R, .cols = C};
        if (d >= 5) {
            s.scale = scales;
            s.scale_dtype = sdtypes[d - 5];
            s.scale_numel = 3 * 2;
            s.block_rows = 2;
            s.block_cols = 32;
        }
        CHECK(nvf_quant_source_check(&s, "v") == 0);
        for (int r = 0; r < R; r++) {
            nvf_quant_source_load_row(row, &s, r);
            for (int c = 0; c < C; c++, cases++)
                bad += nvf_f32_bits(nvf_quant_source_value(&s, r, c)) != nvf_f32_bits(row[c]);
        }
    }
    CHECK_MSG(bad == 0, "%d of %d values differ from the row loader", bad, cases);
}

int main(void) {
    test_global_scale();
    test_worked_block();
    test_hand_4over6();
    test_subnormal_scales();
    test_zero_blocks();
    test_extreme_magnitudes();
    test_normal_rel_mse();
    test_threads_identical();
    test_sources();
    test_source_value();
    test_amax_nonfinite();
    test_concurrent_callers();
    return check_summary("test_quant");
}
