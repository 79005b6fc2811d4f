/*
 * Re-quantization onto a shared decode scale (lib/quant/quant_requant.c): the global scale that
 * rounds back to a decode scale, checked by a wider brute-force search written here; a block
 * worked by hand; and re-quantized rows against quantizing their dequantized values (computed
 * here from the E2M1 table) directly with nvf_quant_rows_ref.
 */
#include "check.h"

#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Whether some float within 16 ulps of 1/d has RN(1/g) == d (the test's own search). */
static int brute_exists(float d) {
    uint32_t b0 = to_bits(1.0f / d);
    for (int64_t s = -16; s <= 16; s++) {
        float g = from_bits((uint32_t)((int64_t)b0 + s));
        volatile float r = 1.0f / g;
        if (to_bits(r) == to_bits(d))
            return 1;
    }
    return 0;
}

static void test_global_scale_for_decode(void) {
    float gs = 0;
    /* Powers of two round-trip exactly. */
    CHECK(nvf_quant_global_scale_for_decode(&gs, 0.0078125f) == 0 && gs == 128.0f);
    /* The SPEC's worked RTN group: gs 53760, weight_scale_2 0x379c09c1. */
    CHECK(nvf_quant_global_scale_for_decode(&gs, from_bits(0x379c09c1u)) == 0);
    CHECK(to_bits(1.0f / gs) == 0x379c09c1u);
    CHECK(fabsf(gs - 53760.0f) <= 0.02f);
    /* Decode scales written as RN(1 / gs) for gs over many binades: always found again. */
    uint64_t state = 12345;
    int found = 0, tried = 0;
    for (int i = 0; i < 20000; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        float g = from_bits(0x3F800000u + (uint32_t)((state >> 33) % (30u << 23)));
        float d = 1.0f / g;
        tried++;
        float back = 0;
        if (nvf_quant_global_scale_for_decode(&back, d) == 0 && to_bits(1.0f / back) == to_bits(d))
            found++;
    }
    CHECK_MSG(found == tried, "found %d of %d", found, tried);
    /* Decode scales just below 1 that no reciprocal reaches (1/g for g just above 1 moves two
     * ulps of the result per ulp of g): the brute force and the function agree on each. */
    int skipped = 0;
    for (uint32_t b = 0x3F7FFFFFu; b > 0x3F7FFF00u; b--) {
        float d = from_bits(b);
        int exists = brute_exists(d);
        int rc = nvf_quant_global_scale_for_decode(&gs, d);
        CHECK_MSG(exists ? rc == 0 : rc == NVF_E_UNSUPPORTED, "d = 0x%08x: exists %d, rc %d",
                  (unsigned)b, exists, rc);
        skipped += !exists;
    }
    CHECK_MSG(skipped > 0, "no skipped decode scale near 1 (%d)", skipped);
    CHECK(nvf_quant_global_scale_for_decode(&gs, 0.0f) == NVF_E_INVALID);
    CHECK(nvf_quant_global_scale_for_decode(&gs, -1.0f) == NVF_E_INVALID);
    CHECK(nvf_quant_global_scale_for_decode(&gs, NAN) == NVF_E_INVALID);
    CHECK(nvf_quant_global_scale_for_decode(&gs, INFINITY) == NVF_E_INVALID);
}

/*
 * One block by hand, RTN with E = 448: element 0 is code 6 (4.0) with scale 0x7a (320) and decode
 * 2^-10, so w = 1.25; everything else 0. Onto decode 2^-8 (gs 256): rtn_mul = RN(256 *
 * RN(1/6)) = 42.66666793823242; vmax * rtn_mul = 53.33333... -> E4M3 52 (steps of 4 in
 * [32, 64)) = 0x65; enc = RN(1 / (52 / 256)) = 4.923077; 1.25 * enc = 6.15 -> code 7 (6.0).
 * Dequantized: 6 * 52 / 256 = 1.21875.
 */
static void test_hand_block(void) {
    const nvf_quant_params rtn = {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE,
                                  NVF_QUANT_DOMAIN_SCALED, 448};
    uint8_t packed[8] = {0x06}, scale = 0x7a, out_p[8], out_s;
    int rc = nvf_quant_requant_ref(out_p, &out_s, packed, &scale, 1, 16, 1.0f / 1024.0f,
                                   1.0f / 256.0f, &rtn);
    CHECK(rc == 0);
    static const uint8_t want[8] = {0x07};
    CHECK_MSG(memcmp(out_p, want, 8) == 0 && out_s == 0x65, "got %02x .. scale %02x", out_p[0],
              out_s);
    float row[16];
    nvf_quant_dequant_row_ref(row, out_p, &out_s, 16, 1.0f / 256.0f);
    CHECK(row[0] == 1.21875f && row[1] == 0.0f);
    CHECK(nvf_quant_requant_ref(out_p, &out_s, packed, &scale, 1, 8, 1.0f, 1.0f, &rtn) ==
          NVF_E_SHAPE);
    CHECK(nvf_quant_requant_ref(out_p, &out_s, packed, &scale, 1, 16, 0.0f, 1.0f, &rtn) ==
          NVF_E_INVALID);
}

/* E2M1 magnitudes by index (SPEC section 4), written out here. */
static const float k_e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/*
 * Rows quantized with gs_a, re-quantized onto RN(1/gs_b), equal the bytes of quantizing their
 * dequantized values (computed here) with gs_b, for both recipes.
 */
static void test_rows_against_direct(void) {
    enum { R = 6, C = 64 };
    float x[R * C], deq[R * C];
    uint64_t state = 7;
    for (int i = 0; i < R * C; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)((state >> 40) % 20001) - 10000.0f) * 2e-6f;
    }
    x[5] = 0.05f; /* the group amax */
    const nvf_quant_params params[2] = {
        nvf_quant_params_default(),
        {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448}};
    for (int pi = 0; pi < 2; pi++) {
        const nvf_quant_params *p = &params[pi];
        float gs_a = nvf_quant_global_scale(0.05f, p->e4m3_max);
        /* gs_b: the group amax of a partner 1.37x larger; its decode scale must round back to
         * gs_b itself for the direct path to use the same gs (checked). */
        float gs_b = nvf_quant_global_scale(0.0685f, p->e4m3_max);
        float dec_a = 1.0f / gs_a, dec_b = 1.0f / gs_b, g;
        CHECK(nvf_quant_global_scale_for_decode(&g, dec_b) == 0 && g == gs_b);
        uint8_t pa[R * C / 2], sa[R * C / 16], pr[R * C / 2], sr[R * C / 16], pd[R * C / 2],
            sd[R * C / 16];
        CHECK(nvf_quant_rows_ref(pa, sa, x, R, C, gs_a, p, 1) == 0);
        for (int i = 0; i < R * C; i++) {
            uint8_t code = (uint8_t)((pa[i / 2] >> (4 * (i % 2))) & 0xF);
            float v = k_e2m1[code & 7] * nvf_e4m3_to_f32(sa[i / 16]);
            deq[i] = (code & 8 ? -v : v) * dec_a;
        }
        CHECK(nvf_quant_requant_ref(pr, sr, pa, sa, R, C, dec_a, dec_b, p) == 0);
        CHECK(nvf_quant_rows_ref(pd, sd, deq, R, C, gs_b, p, 1) == 0);
        CHECK_MSG(memcmp(pr, pd, sizeof pr) == 0 && memcmp(sr, sd, sizeof sr) == 0,
                  "recipe %d: re-quantized bytes differ from the direct quantization", pi);
        /* and they are not the input's bytes: the scale really changed */
        CHECK(memcmp(sr, sa, sizeof sr) != 0);
    }
}

/*
 * A shared decode scale no reciprocal reaches (found here by the brute force): the result still
 * decodes with it, and its bytes are those of the shared block arithmetic (quant_block.h) with
 * gs = RN(1/d) and RN(1/gs) replaced by d, block by block.
 */
static void test_unreachable_decode(void) {
    float d = 0;
    for (uint32_t b = 0x3F7FFFFFu; b > 0x3F7FFF00u && d == 0; b--) {
        if (!brute_exists(from_bits(b)))
            d = from_bits(b);
    }
    CHECK(d != 0);
    d = d * 0.0009765625f; /* the same mantissa, 2^-10 smaller: a realistic decode scale */
    CHECK(!brute_exists(d));
    enum { C = 64 };
    float x[2 * C];
    for (int i = 0; i < 2 * C; i++)
        x[i] = (float)((i * 37) % 29 - 14) * 0.004f;
    nvf_quant_params p = nvf_quant_params_default();
    float gs_a = nvf_quant_global_scale(0.056f, p.e4m3_max), dec_a = 1.0f / gs_a;
    uint8_t pa[C], sa[8], pr[C], sr[8];
    CHECK(nvf_quant_rows_ref(pa, sa, x, 2, C, gs_a, &p, 1) == 0);
    CHECK(nvf_quant_requant_ref(pr, sr, pa, sa, 2, C, dec_a, d, &p) == 0);
    float deq[2 * C];
    for (int r = 0; r < 2; r++)
        nvf_quant_dequant_row_ref(deq + r * C, pa + r * C / 2, sa + r * C / 16, C, dec_a);
    nvf_qb_consts k = nvf_qb_consts_make(1.0f / d, p.method, p.error, p.domain);
    k.rcp_gs = d;
    for (int blk = 0; blk < 8; blk++) {
        uint8_t want[8], ws;
        nvf_qb_quantize(want, &ws, deq + 16 * blk, &k);
        CHECK_MSG(memcmp(want, pr + 8 * blk, 8) == 0 && ws == sr[blk], "block %d", blk);
    }
    /* and the values are close to the originals: rel-L2 of the round trip under 0.15 */
    float back[2 * C];
    for (int r = 0; r < 2; r++)
        nvf_quant_dequant_row_ref(back + r * C, pr + r * C / 2, sr + r * C / 16, C, d);
    double num = 0, den = 0;
    for (int i = 0; i < 2 * C; i++) {
        num += ((double)back[i] - x[i]) * ((double)back[i] - x[i]);
        den += (double)x[i] * x[i];
    }
    CHECK_MSG(sqrt(num / den) < 0.15, "rel-L2 %g", sqrt(num / den));
}

int main(void) {
    test_global_scale_for_decode();
    test_hand_block();
    test_rows_against_direct();
    test_unreachable_decode();
    return check_summary("test_quant_requant");
}
