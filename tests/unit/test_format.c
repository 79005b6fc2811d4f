/*
 * Codecs of nvfp4/format.h against values derived here from the format definitions with
 * ldexp (not with the bit operations under test).
 */
#include "check.h"

#include "nvfp4/format.h"

#include <float.h>
#include <math.h>

/* E4M3 "fn" value of a byte from its definition: bias 7, subnormals mant * 2^-9, S.1111.111
 * NaN. */
static double e4m3_def(int b) {
    int e = (b >> 3) & 15, m = b & 7;
    double s = (b & 0x80) ? -1.0 : 1.0;
    if (e == 15 && m == 7)
        return NAN;
    if (e == 0)
        return s * ldexp(m, -9);
    return s * ldexp(8 + m, e - 10); /* (1 + m/8) * 2^(e-7) */
}

/* IEEE binary16 value from its definition. */
static double f16_def(int h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, -24);
    return s * ldexp(1024 + m, e - 25);
}

static int same(double want, float got) {
    if (isnan(want))
        return isnan(got);
    return (double)got == want && !signbit(want) == !signbit(got);
}

static void test_e4m3_all_bytes(void) {
    for (int b = 0; b < 256; b++) {
        double want = e4m3_def(b);
        float v = nvf_e4m3_to_f32((uint8_t)b);
        CHECK_MSG(same(want, v), "e4m3 0x%02x decodes to %.9g, expected %.9g", b, v, want);
        uint8_t back = nvf_f32_to_e4m3_sat(v);
        int expect = isnan(want) ? 0x7F : b;
        CHECK_MSG(back == expect, "e4m3 0x%02x re-encodes to 0x%02x", b, back);
    }
    CHECK(nvf_e4m3_to_f32(0x7E) == 448.0f);
    CHECK(nvf_e4m3_to_f32(0x01) == 0x1p-9f);
    CHECK(nvf_e4m3_to_f32(0x08) == 0x1p-6f);
}

/* Every midpoint between neighbouring E4M3 values rounds to the even byte; one binary32 ulp
 * either side rounds to the nearer neighbour. Both signs. */
static void test_e4m3_midpoints(void) {
    for (int b = 0; b < 0x7E; b++) {
        double lo = e4m3_def(b), hi = e4m3_def(b + 1);
        float mid = (float)((lo + hi) / 2); /* exact: at most 5 significant bits */
        CHECK((double)mid == (lo + hi) / 2);
        int even = (b % 2 == 0) ? b : b + 1;
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            uint8_t sb = s ? 0x80 : 0;
            uint8_t got = nvf_f32_to_e4m3_sat(sg * mid);
            CHECK_MSG(got == (sb | even), "midpoint %.9g -> 0x%02x, expected 0x%02x", sg * mid, got,
                      sb | even);
            got = nvf_f32_to_e4m3_sat(sg * nextafterf(mid, 0.0f));
            CHECK_MSG(got == (sb | b), "below midpoint %.9g -> 0x%02x", sg * mid, got);
            got = nvf_f32_to_e4m3_sat(sg * nextafterf(mid, INFINITY));
            CHECK_MSG(got == (sb | (b + 1)), "above midpoint %.9g -> 0x%02x", sg * mid, got);
        }
    }
    /* Saturation (satfinite): everything from 448 up, infinities included, is +-448. */
    CHECK(nvf_f32_to_e4m3_sat(464.0f) == 0x7E);
    CHECK(nvf_f32_to_e4m3_sat(480.0f) == 0x7E);
    CHECK(nvf_f32_to_e4m3_sat(1e30f) == 0x7E);
    CHECK(nvf_f32_to_e4m3_sat(INFINITY) == 0x7E);
    CHECK(nvf_f32_to_e4m3_sat(-INFINITY) == 0xFE);
    CHECK(nvf_f32_to_e4m3_sat(-FLT_MAX) == 0xFE);
    CHECK(nvf_f32_to_e4m3_sat(NAN) == 0x7F);
    /* Below the smallest subnormal: 2^-10 is the midpoint of 0 and 2^-9, even is 0. */
    CHECK(nvf_f32_to_e4m3_sat(0x1p-10f) == 0x00);
    CHECK(nvf_f32_to_e4m3_sat(nextafterf(0x1p-10f, 1.0f)) == 0x01);
    CHECK(nvf_f32_to_e4m3_sat(-0x1p-12f) == 0x80);
    CHECK(nvf_f32_to_e4m3_sat(1e-45f) == 0x00);
    CHECK(nvf_f32_to_e4m3_sat(-0.0f) == 0x80);
    /* SPEC section 4 worked block: 304.0625 -> 0x7a (320), 260.625 -> 0x78, 173.75 -> 0x73. */
    CHECK(nvf_f32_to_e4m3_sat(304.0625f) == 0x7A);
    CHECK(nvf_f32_to_e4m3_sat(260.625f) == 0x78);
    CHECK(nvf_f32_to_e4m3_sat(173.75f) == 0x73);
}

static void test_e2m1(void) {
    /* Each tie x lies between the E2M1 values of codes lo and lo + 1 and goes to the even
     * code: 0.25 -> 0 (0), 0.75 -> 2 (1.0), 1.25 -> 2 (1.0), 1.75 -> 4 (2.0), 2.5 -> 4 (2.0),
     * 3.5 -> 6 (4.0), 5 -> 6 (4.0). One ulp off the tie gives the nearer neighbour. */
    static const struct {
        float x;
        int lo;
    } ties[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 2}, {1.75f, 3}, {2.5f, 4}, {3.5f, 5}, {5.0f, 6}};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        float x = ties[i].x;
        int lo = ties[i].lo, even = lo % 2 == 0 ? lo : lo + 1;
        for (int neg = 0; neg < 2; neg++) {
            /* The sign bit is set because the value is < 0, even when it rounds to 0. */
            float sx = neg ? -x : x;
            int sb = neg ? 8 : 0;
            CHECK_MSG(nvf_e2m1_encode(sx) == (sb | even), "e2m1(%g) = %d", sx, nvf_e2m1_encode(sx));
            CHECK(nvf_e2m1_encode(nextafterf(sx, 0.0f)) == (sb | lo));
            CHECK(nvf_e2m1_encode(nextafterf(sx, neg ? -10.0f : 10.0f)) == (sb | (lo + 1)));
        }
    }
    CHECK(nvf_e2m1_encode(0.0f) == 0x0);
    CHECK(nvf_e2m1_encode(-0.0f) == 0x0);
    CHECK(nvf_e2m1_encode(-1e-30f) == 0x8);
    CHECK(nvf_e2m1_encode(6.0f) == 0x7);
    CHECK(nvf_e2m1_encode(7.0f) == 0x7);
    CHECK(nvf_e2m1_encode(1e30f) == 0x7);
    CHECK(nvf_e2m1_encode(-INFINITY) == 0xF);
    CHECK(nvf_e2m1_encode(NAN) == 0x0);
    CHECK(nvf_e2m1_encode(0.26f) == 0x1);
    CHECK(nvf_e2m1_encode(-2.9f) == 0xD);
    static const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) {
        float want = (c & 8) ? -values[c & 7] : values[c & 7];
        float got = nvf_e2m1_to_f32((uint8_t)c);
        CHECK_MSG(same(want, got), "e2m1 code %d -> %g", c, got);
        /* Every value encodes back to its code (except -0.0, whose sign bit is dropped). */
        CHECK(nvf_e2m1_encode(got) == (c == 8 ? 0 : c));
    }
    CHECK(nvf_e2m1_pack(0x6, 0xA) == 0xA6);
    uint8_t row[2] = {0xA6, 0x73};
    CHECK(nvf_e2m1_unpack(row, 0) == 0x6 && nvf_e2m1_unpack(row, 1) == 0xA);
    CHECK(nvf_e2m1_unpack(row, 2) == 0x3 && nvf_e2m1_unpack(row, 3) == 0x7);
}

static void test_bf16(void) {
    for (int h = 0; h < 65536; h += 7) {
        float v = nvf_bf16_to_f32((uint16_t)h);
        /* BF16 is the top half of binary32: the same sign/exponent fields, 7 mantissa bits. */
        int e = (h >> 7) & 255, m = h & 127;
        double s = (h & 0x8000) ? -1.0 : 1.0;
        double want = e == 255 ? (m ? NAN : s * INFINITY)
                      : e == 0 ? s * ldexp(m, -133)
                               : s * ldexp(128 + m, e - 134);
        CHECK_MSG(same(want, v), "bf16 0x%04x -> %g, expected %g", h, v, want);
        if (!isnan(want))
            CHECK(nvf_f32_to_bf16_rn(v) == h);
    }
    /* RN-even: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7 -> 1 (even); 1 + 3*2^-8 -> up. */
    CHECK(nvf_f32_to_bf16_rn(1.0f + 0x1p-8f) == 0x3F80);
    CHECK(nvf_f32_to_bf16_rn(1.0f + 0x3p-8f) == 0x3F82);
    CHECK(nvf_f32_to_bf16_rn(nextafterf(1.0f + 0x1p-8f, 2.0f)) == 0x3F81);
    CHECK(nvf_f32_to_bf16_rn(-(1.0f + 0x1p-8f)) == 0xBF80);
    CHECK(nvf_f32_to_bf16_rn(FLT_MAX) == 0x7F80); /* rounds past the largest bf16 */
    CHECK(nvf_f32_to_bf16_rn(INFINITY) == 0x7F80);
    uint16_t n = nvf_f32_to_bf16_rn(NAN);
    CHECK((n & 0x7F80) == 0x7F80 && (n & 0x7F) != 0);
    n = nvf_f32_to_bf16_rn(nvf_f32_from_bits(0x7F800001u)); /* NaN with only low payload */
    CHECK((n & 0x7F80) == 0x7F80 && (n & 0x7F) != 0);
}

static void test_f16_e5m2_e8m0(void) {
    for (int h = 0; h < 65536; h++) {
        double want = f16_def(h);
        float v = nvf_f16_to_f32((uint16_t)h);
        CHECK_MSG(same(want, v), "f16 0x%04x -> %g, expected %g", h, v, want);
    }
    for (int b = 0; b < 256; b++) {
        /* E5M2: bias 15, 2 mantissa bits, IEEE-style inf/NaN. */
        int e = (b >> 2) & 31, m = b & 3;
        double s = (b & 0x80) ? -1.0 : 1.0;
        double want = e == 31  ? (m ? NAN : s * INFINITY)
                      : e == 0 ? s * ldexp(m, -16)
                               : s * ldexp(4 + m, e - 17);
        CHECK_MSG(same(want, nvf_e5m2_to_f32((uint8_t)b)), "e5m2 0x%02x", b);
        double w8 = b == 255 ? NAN : ldexp(1.0, b - 127);
        CHECK_MSG(same(w8, nvf_e8m0_to_f32((uint8_t)b)), "e8m0 0x%02x", b);
    }
}

static void test_bits(void) {
    CHECK(nvf_f32_bits(1.0f) == 0x3F800000u);
    CHECK(nvf_f32_bits(-0.0f) == 0x80000000u);
    CHECK(nvf_f32_from_bits(0x47520000u) == 53760.0f);
    CHECK(NVF_BLOCK == 16 && NVF_BLOCK_BYTES == 8);
}

int main(void) {
    test_e4m3_all_bytes();
    test_e4m3_midpoints();
    test_e2m1();
    test_bf16();
    test_f16_e5m2_e8m0();
    test_bits();
    return check_summary("test_format");
}
