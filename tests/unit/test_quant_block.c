/*
 * The shared exact block (nvfp4/quant_block.h) on hard inputs: exact E2M1 ties, subnormal E4M3
 * scales, zeros, block maxima beyond 448 * 6, NaN/Inf, and 4over6 choosing 4, 6 or tying.
 * Every expected byte is worked out by hand in the comment above it (binary32 products written
 * as integers times powers of two), never taken from the code under test. Each block is also
 * run through nvf_quant_block_ref and, as 8 copies in one row, through the CPU's vectorized row
 * path (nvf_quant_rows_ref), which must give the same bytes.
 *
 * Constants used below:
 *   RN(1/6) = 11184811 * 2^-26 (0x3E2AAAAB), and 6 * 11184811 = 2^26 + 2.
 *   RN(1/7) = 9586981 * 2^-26 (0x3E124925), and 7 * 9586981 = 2^26 + 3.
 *   RN(2/3) = 11184811 * 2^-24 (0x3F2AAAAB).
 *   gs = 6: rcp_gs = RN(1/6); rtn_mul = RN(6 * RN(1/6)) = RN(1 + 2^-25) = 1 (half an ulp of 1
 *   above is 2^-24); a scale sf gives dec = RN(f32(sf) * RN(1/6)).
 *   gs = 1: rcp_gs = 1, rtn_mul = RN(1/6).
 */
#include "check.h"

#include "nvfp4/quant.h"
#include "nvfp4/quant_block.h"

#include <float.h>
#include <math.h>

typedef struct block_case {
    const char *name;
    float x[NVF_BLOCK];
    float gs;
    nvf_quant_method method;
    uint8_t packed[NVF_BLOCK_BYTES], scale;
} block_case;

static void check_case(const block_case *c, nvf_quant_error err, nvf_quant_domain dom) {
    nvf_quant_params p = {c->method, err, dom, NVF_QUANT_E4M3_MAX_448};
    nvf_qb_consts k = nvf_qb_consts_make(c->gs, p.method, p.error, p.domain);
    uint8_t packed[NVF_BLOCK_BYTES], scale = 0xEE;
    nvf_qb_quantize(packed, &scale, c->x, &k);
    int ok = scale == c->scale && memcmp(packed, c->packed, sizeof packed) == 0;
    CHECK_MSG(ok,
              "%s (error %d, domain %d): got %02x %02x %02x %02x %02x %02x %02x %02x scale %02x, "
              "expected %02x %02x %02x %02x %02x %02x %02x %02x scale %02x",
              c->name, err, dom, packed[0], packed[1], packed[2], packed[3], packed[4], packed[5],
              packed[6], packed[7], scale, c->packed[0], c->packed[1], c->packed[2], c->packed[3],
              c->packed[4], c->packed[5], c->packed[6], c->packed[7], c->scale);

    /* The words are the packed bytes little-endian. */
    uint32_t w[2];
    CHECK(nvf_qb_quantize_words(w, c->x, &k) == c->scale);
    for (int j = 0; j < NVF_BLOCK_BYTES; j++)
        CHECK_MSG((uint8_t)(w[j / 4] >> (8 * (j % 4))) == c->packed[j], "%s: word byte %d", c->name,
                  j);

    /* The library's entry points: one block, and a row of 8 copies (the NB-wide row path). */
    uint8_t ref[NVF_BLOCK_BYTES], ref_scale;
    nvf_quant_block_ref(ref, &ref_scale, c->x, c->gs, &p);
    CHECK_MSG(ref_scale == c->scale && memcmp(ref, c->packed, sizeof ref) == 0,
              "%s: nvf_quant_block_ref differs", c->name);
    enum { COPIES = 8 };
    float row[COPIES * NVF_BLOCK];
    uint8_t rpk[COPIES * NVF_BLOCK_BYTES], rsc[COPIES];
    for (int b = 0; b < COPIES; b++)
        memcpy(row + b * NVF_BLOCK, c->x, sizeof c->x);
    CHECK(nvf_quant_rows_ref(rpk, rsc, row, 1, COPIES * NVF_BLOCK, c->gs, &p, 1) == 0);
    for (int b = 0; b < COPIES; b++)
        CHECK_MSG(rsc[b] == c->scale &&
                      memcmp(rpk + b * NVF_BLOCK_BYTES, c->packed, NVF_BLOCK_BYTES) == 0,
                  "%s: row path block %d differs", c->name, b);
}

static const block_case k_cases[] = {
    /* Every E2M1 tie, both signs. gs = 6, vmax = 6: sf = e4m3(RN(6 * 1)) = 6 = 1.5 * 2^2, byte
     * 0 1001 100 = 0x4C; dec = RN(6 * RN(1/6)) = RN(1 + 2^-25) = 1, enc = 1, so t = x. Ties go
     * to the even index: 0.25 -> 0, 0.75 -> 1 (2), 1.25 -> 1 (2), 1.75 -> 2 (4), 2.5 -> 2 (4),
     * 3.5 -> 4 (6), 5 -> 4 (6); a negative gets the sign bit 8 even when it rounds to 0
     * (-0.25 -> 0x8). Codes 0 0 2 2 4 4 6 6 8 a a c c e e 7, two per byte low nibble first. */
    {"E2M1 ties",
     {0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f,
      -3.5f, -5.0f, 6.0f},
     6.0f,
     NVF_QUANT_METHOD_RTN,
     {0x00, 0x22, 0x44, 0x66, 0xA8, 0xCA, 0xEC, 0x7E},
     0x4C},
    /* Zeros of both signs: vmax = 0, sf = 0x00, dec = 0, enc = min(1/0, FLT_MAX) = FLT_MAX;
     * RN(-0 * FLT_MAX) = -0, which is not < 0: no sign bit. All bytes 0. */
    {"zeros",
     {0.0f, -0.0f, 0.0f, -0.0f, 0.0f, 0.0f, -0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
      -0.0f},
     1.0f,
     NVF_QUANT_METHOD_RTN,
     {0, 0, 0, 0, 0, 0, 0, 0},
     0x00},
    /* Subnormal scale. gs = 6, vmax = 3 * 2^-9: sf = e4m3(3 * 2^-9) = subnormal mantissa 3,
     * byte 0x03. dec = RN(3 * 2^-9 * 11184811 * 2^-26) = 2^-9 * RN((2^25 + 1) * 2^-26)
     * = 2^-9 * RN(0.5 + 2^-26) = 2^-10 (an ulp of 0.5 is 2^-24), enc = 2^10.
     * t = x * 2^10: 6 (7), 2 (4), -1 (0xA), 1.5 (3), 0.25 (tie, 0), -0.75 (tie, 0xA), zeros.
     * Codes 7 4 a 3 0 a 0 ... -> 0x47 0x3A 0xA0 0 ... */
    {"subnormal E4M3 scale",
     {0x3p-9f, 0x1p-9f, -0x1p-10f, 0x3p-11f, 0x1p-12f, -0x3p-12f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     6.0f,
     NVF_QUANT_METHOD_RTN,
     {0x47, 0x3A, 0xA0, 0, 0, 0, 0, 0},
     0x03},
    /* A scale below half the smallest subnormal. gs = 6, vmax = 2^-12: RN(2^-12 * 2^9) = 0, byte
     * 0x00; dec = 0, enc = FLT_MAX; t = ±2^-12 * FLT_MAX ~ ±8e34, clamped to 6: codes 7 and
     * 0xF. */
    {"scale rounds to zero",
     {0x1p-12f, -0x1p-12f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     6.0f,
     NVF_QUANT_METHOD_RTN,
     {0xF7, 0, 0, 0, 0, 0, 0, 0},
     0x00},
    /* Block maximum beyond 448 * 6. gs = 1, vmax = 6000: RN(6000 * RN(1/6)) ~ 1000 > 448, so
     * sf = 0x7E (448); dec = 448, enc = RN(1/448) = RN(1/7) * 2^-6 = (2^26 + 3) / (7 * 2^32).
     * x = 448 * v gives t = RN(v * (1 + 3 * 2^-26)):
     *   6000 -> 13.4, 2688 (v 6) -> past 6: 7; 2240 (v 5): 5 + 15 * 2^-26 rounds to 5 (ulp
     *   2^-21), a tie: 6; 1568 (v 3.5): 3.5 + 10.5 * 2^-26 rounds up (half ulp 8 * 2^-26): 6;
     *   1120 (v 2.5): 2.5 + 7.5 * 2^-26 rounds to 2.5, a tie: 4; 112 (v 0.25): 0.25 + 0.75 *
     *   2^-26 rounds to 0.25 (half ulp 2^-26), a tie: 0; -336 (v 0.75): 0xA; 560 (v 1.25):
     *   1.25 + 3.75 * 2^-26 rounds to 1.25 (half ulp 4 * 2^-26), a tie: 2; 784 (v 1.75): 4.
     * Codes 7 7 6 6 4 0 a 2 4 0 ... -> 0x77 0x66 0x04 0x2A 0x04 0 0 0. */
    {"amax beyond 448*6",
     {6000.0f, 2688.0f, 2240.0f, 1568.0f, 1120.0f, 112.0f, -336.0f, 560.0f, 784.0f, 0, 0, 0, 0, 0,
      0, 0},
     1.0f,
     NVF_QUANT_METHOD_RTN,
     {0x77, 0x66, 0x04, 0x2A, 0x04, 0, 0, 0},
     0x7E},
    /* NaN of both signs: skipped by vmax (6, so sf 0x4C and enc 1 as in "E2M1 ties"); a NaN
     * product is not < 0 and passes no threshold: code 0. 1 -> 2, 6 -> 7.
     * Codes 0 7 0 2 0 ... -> 0x70 0x20 0 ... */
    {"NaN",
     {NAN, 6.0f, -NAN, 1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     6.0f,
     NVF_QUANT_METHOD_RTN,
     {0x70, 0x20, 0, 0, 0, 0, 0, 0},
     0x4C},
    /* Infinities: vmax = inf, RN(inf * RN(1/6)) = inf, min(inf, 448) = 448: sf 0x7E, and with
     * gs = 1 enc = RN(1/448) ~ 0.00223. ±inf * enc = ±inf -> 7, 0xF; 1 * enc -> 0; -1 * enc is
     * a small negative: 0x8. Codes 7 f 0 8 0 ... -> 0xF7 0x80 0 ... */
    {"Inf",
     {INFINITY, -INFINITY, 1.0f, -1.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     1.0f,
     NVF_QUANT_METHOD_RTN,
     {0xF7, 0x80, 0, 0, 0, 0, 0, 0},
     0x7E},
    /* 4over6 picks 4. gs = 1 (the scaled and original domains coincide: rcp_gs = 1), vmax = 6:
     * sf6h = RN(RN(6/6) * 1) = 1 -> 0x38, enc6 = 1; sf4h = 1.5 -> 0 0111 100 = 0x3C,
     * enc4 = RN(1/1.5) = RN(2/3). Candidate 6: 6 exact; 4.5 -> 4 (<= 5), d = -0.5, so
     * err6 = 15 * 0.25 (MSE) or 15 * 0.5 (MAE), sums exact. Candidate 4: t = RN(6 * RN(2/3))
     * = RN(4 + 2^-23) = 4 (ulp 2^-21) -> 4 * 1.5 = 6; t = RN(4.5 * RN(2/3)) = RN(3 + 1.5 * 2^-24)
     * = 3 (ulp 2^-22) -> 3 * 1.5 = 4.5: err4 = 0 < err6. Codes with enc4: 6 (4), 5 (3) x 15
     * -> 0x56 0x55 ... scale 0x3C. */
    {"4over6 picks 4",
     {6.0f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f,
      4.5f},
     1.0f,
     NVF_QUANT_METHOD_4OVER6,
     {0x56, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55},
     0x3C},
    /* 4over6 picks 6: as above with 1 instead of 4.5. Candidate 6 is exact (err6 = 0);
     * candidate 4: RN(1 * RN(2/3)) = 0.6667 < 0.75 -> 0.5 -> 0.75, d = -0.25, err4 > 0.
     * Codes with enc6 = 1: 7, 2 x 15 -> 0x27 0x22 ... scale 0x38. */
    {"4over6 picks 6",
     {6.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,
      1.0f},
     1.0f,
     NVF_QUANT_METHOD_4OVER6,
     {0x27, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22},
     0x38},
    /* 4over6 tie keeps 6: 3 is on both grids (candidate 4: RN(3 * RN(2/3)) = RN(2 + 2^-24) = 2
     * -> 2 * 1.5 = 3), so err4 = err6 = 0 and the strict test keeps 6. Codes with enc6 = 1:
     * 7, 5 x 15 -> 0x57 0x55 ... scale 0x38. */
    {"4over6 tie keeps 6",
     {6.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f, 3.0f,
      3.0f},
     1.0f,
     NVF_QUANT_METHOD_4OVER6,
     {0x57, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55},
     0x38},
    /* 4over6 with a NaN keeps 6 even where 4 is exact: the NaN's term is NaN in both sums
     * (RN(NaN * gs) in the scaled domain, NaN - ... in the original one), and NaN < NaN is
     * false. The rest as "4over6 picks 4" under candidate 6 (enc 1): NaN -> 0, 6 -> 7,
     * 4.5 -> 6 (4). Codes 0 7 6 ... -> 0x70 0x66 ... scale 0x38. */
    {"4over6 NaN keeps 6",
     {NAN, 6.0f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f, 4.5f,
      4.5f},
     1.0f,
     NVF_QUANT_METHOD_4OVER6,
     {0x70, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66},
     0x38},
};

static void test_blocks(void) {
    const nvf_quant_error errs[] = {NVF_QUANT_ERROR_MSE, NVF_QUANT_ERROR_MAE};
    const nvf_quant_domain doms[] = {NVF_QUANT_DOMAIN_SCALED, NVF_QUANT_DOMAIN_ORIGINAL};
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        /* RTN ignores error and domain; 4over6's choices above hold for all four (gs = 1). */
        for (int e = 0; e < 2; e++)
            for (int d = 0; d < 2; d++)
                check_case(&k_cases[i], errs[e], doms[d]);
    }
}

/* The pieces, on their edges. */
static void test_pieces(void) {
    /* E2M1 rounding of magnitudes: ties to the even index, clamp at 6, NaN to 0. */
    const float in[] = {0.25f, 0.26f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.01f, 7.0f, 1e30f};
    const float out[] = {0.0f, 0.5f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 6.0f, 6.0f, 6.0f};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK_MSG(nvf_qb_e2m1_round_mag(in[i]) == out[i], "round_mag(%g)", (double)in[i]);
    CHECK(nvf_qb_e2m1_round_mag(NAN) == 0.0f);

    /* Block scale bytes: min(s, 448) then satfinite. 2^-10 is half of the smallest subnormal
     * 2^-9: a tie, to the even 0; 1.5 * 2^-10 rounds up to 2^-9 (0x01); 448 = 0x7E; larger,
     * infinite and NaN clamp to 448. */
    CHECK(nvf_qb_scale_encode(0x1p-10f) == 0x00);
    CHECK(nvf_qb_scale_encode(0x3p-11f) == 0x01);
    CHECK(nvf_qb_scale_encode(0x1p-9f) == 0x01);
    CHECK(nvf_qb_scale_encode(448.0f) == 0x7E);
    CHECK(nvf_qb_scale_encode(1e9f) == 0x7E);
    CHECK(nvf_qb_scale_encode(INFINITY) == 0x7E);
    CHECK(nvf_qb_scale_encode(NAN) == 0x7E);
    /* 464 is halfway between 448 and 480 (past the E4M3 range): saturates, never NaN. */
    CHECK(nvf_qb_f32_to_e4m3(464.0f) == 0x7E);
    CHECK(nvf_qb_e4m3_to_f32(0x01) == 0x1p-9f && nvf_qb_e4m3_to_f32(0x7E) == 448.0f);

    /* enc of a zero scale is FLT_MAX, not infinity; of 448 with rcp_gs 1 it is RN(1/448). */
    CHECK(nvf_qb_scale_enc(0.0f, 1.0f) == FLT_MAX);
    CHECK(nvf_f32_bits(nvf_qb_scale_enc(448.0f, 1.0f)) == 0x3B124925u); /* RN(1/7) * 2^-6 */

    /* Global scale: 2688 / 0.05 -> 0x47520000 (SPEC worked block); 0 -> FLT_MAX; inf -> 1;
     * an overflowing quotient -> FLT_MAX. */
    CHECK(nvf_f32_bits(nvf_qb_global_scale(0.05f, NVF_QUANT_E4M3_MAX_448)) == 0x47520000u);
    CHECK(nvf_qb_global_scale(0.0f, NVF_QUANT_E4M3_MAX_256) == FLT_MAX);
    CHECK(nvf_qb_global_scale(INFINITY, NVF_QUANT_E4M3_MAX_448) == 1.0f);
    CHECK(nvf_qb_global_scale(1e-45f, NVF_QUANT_E4M3_MAX_448) == FLT_MAX);
    CHECK(nvf_f32_bits(nvf_qb_decode_scale(53760.0f)) == 0x379c09c1u);

    /* Constants: rtn_mul of gs = 6 is exactly 1 (see the top of this file). */
    nvf_qb_consts k = nvf_qb_consts_make(6.0f, NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE,
                                         NVF_QUANT_DOMAIN_SCALED);
    CHECK(k.rtn_mul == 1.0f && nvf_f32_bits(k.rcp_gs) == 0x3E2AAAABu);
}

int main(void) {
    test_blocks();
    test_pieces();
    return check_summary("test_quant_block");
}
