/*
 * ModelOpt's export arithmetic (SPEC section 4 "ModelOpt arithmetic",
 * NVF_QUANT_METHOD_RTN_MODELOPT) against blocks worked by hand below: the group scale sf2 and its
 * decode scale, an all-zero block (scale 0x38), a block of 1e-9-sized values (scale 0x01), the
 * SPEC's worked block under both arithmetics, a block where the two arithmetics differ in a code,
 * the all-zero group (the default arithmetic's bytes), gate/up sharing one sf2 through the
 * backend's group, the CPU's row path against the block function, and the recipe's key, flag and
 * checks.
 *
 * Every binary32 value below was worked with exact rational arithmetic and rounded to the
 * nearest binary32 by hand (the neighbours and the distances are given where it is close).
 */
#include "check.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

static const nvf_quant_params k_mo = {NVF_QUANT_METHOD_RTN_MODELOPT, NVF_QUANT_ERROR_MSE,
                                      NVF_QUANT_DOMAIN_SCALED, 448};
static const nvf_quant_params k_fi = {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE,
                                      NVF_QUANT_DOMAIN_SCALED, 448};

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

/* SPEC section 4 "Worked block" (group amax 0.05). */
static const float k_worked[16] = {
    0.021240234375f,    -0.007110595703125f, 0.01019287109375f,  0.033935546875f,
    -0.018798828125f,   0.000701904296875f,  -0.025390625f,      0.01190185546875f,
    0.004608154296875f, -0.0301513671875f,   0.0164794921875f,   -0.0012969970703125f,
    0.02783203125f,     -0.00958251953125f,  0.005096435546875f, -0.01470947265625f};

static void test_group_scale(void) {
    /* 0.05f = 0.0500000007450580597; / 2688 = 1.86011907533698e-5, nearest binary32
     * 0x379c09c1 = 1.86011911864625e-5 (the same bits as FlashInfer's RN(1 / 53760) here). */
    float g = nvf_quant_group_scale(0.05f, &k_mo);
    CHECK(nvf_f32_bits(g) == 0x379c09c1u);
    CHECK(nvf_f32_bits(nvf_quant_group_decode(g, &k_mo)) == 0x379c09c1u);
    /* amax 5: 5 / 2688 = 0.00186011904761905; neighbours 0x3af3cf3d = 0.00186011905316263 and
     * 0x3af3cf3e = 0.00186011916957796: sf2 = 0x3af3cf3d, stored as it is. FlashInfer's gs =
     * RN(2688 / 5 = 537.6) = 537.599976 (0x44066666) and RN(1 / gs) = 0x3af3cf3e: one ulp up. */
    g = nvf_quant_group_scale(5.0f, &k_mo);
    CHECK(nvf_f32_bits(g) == 0x3af3cf3du);
    CHECK(nvf_f32_bits(nvf_quant_group_decode(g, &k_mo)) == 0x3af3cf3du);
    CHECK(nvf_quant_group_fallback(g, &k_mo) == 0);
    g = nvf_quant_group_scale(5.0f, &k_fi);
    CHECK(nvf_f32_bits(g) == 0x44066666u);
    CHECK(nvf_f32_bits(nvf_quant_group_decode(g, &k_fi)) == 0x3af3cf3eu);
    CHECK(nvf_quant_group_fallback(g, &k_fi) == 0);
    /* The all-zero group: sf2 = 0 (ModelOpt would divide by it), written as the default writes
     * an all-zero group: weight_scale_2 = RN(1 / FLT_MAX) = 2^-128. */
    g = nvf_quant_group_scale(0.0f, &k_mo);
    CHECK(g == 0.0f);
    CHECK(nvf_quant_group_fallback(g, &k_mo) == 1);
    CHECK(nvf_quant_group_decode(g, &k_mo) == 0x1p-128f);
}

static void test_zero_and_tiny_blocks(void) {
    static const uint8_t zeros8[8] = {0};
    float x[16] = {0};
    x[3] = -0.0f;
    /* Group amax 5 (sf2 0x3af3cf3d): vmax = 0, s = RN(0 / RN(6 sf2)) = 0 -> 1 -> byte 0x38;
     * q = e2m1(RN(+-0 / RN(1 * sf2))) = +-0 -> code 0 (a -0 has no sign bit). */
    check_block("modelopt zero block", x, nvf_quant_group_scale(5.0f, &k_mo), &k_mo, zeros8, 0x38);
    /* FlashInfer RTN: RN(0 * rtn_mul) = 0 -> byte 0x00, codes 0. */
    check_block("flashinfer zero block", x, nvf_quant_group_scale(5.0f, &k_fi), &k_fi, zeros8,
                0x00);
    /* 1e-9-sized values in a group of amax 1: sf2 = RN(1 / 2688) = 3.7202381e-4, RN(6 sf2) =
     * 2.2321429e-3; s = 1e-9 / 2.23e-3 = 4.48e-7, below 2^-9 = 1.95e-3 -> 2^-9 -> byte 0x01
     * (FlashInfer: RN(1e-9 * 448) = 4.48e-7 encodes to 0x00). dec = RN(2^-9 * sf2) =
     * 7.2661e-7 (exact: a power of two); 1e-9 / 7.27e-7 = 1.38e-3 <= 0.25 -> code 0, the
     * negative one code 0x8 (element 1: high nibble of byte 0). */
    for (int i = 0; i < 16; i++)
        x[i] = 1e-9f;
    x[1] = -1e-9f;
    static const uint8_t tiny[8] = {0x80, 0, 0, 0, 0, 0, 0, 0};
    check_block("modelopt tiny block", x, nvf_quant_group_scale(1.0f, &k_mo), &k_mo, tiny, 0x01);
}

static void test_worked_block(void) {
    /* ModelOpt, group amax 0.05: sf2 = 0x379c09c1 = 1.86011911864625e-5 (test_group_scale).
     *   RN(6 sf2) = RN(1.11607147118775e-4) = 0x38ea0ea2 = 1.11607150756754e-4 (exact: 6 sf2 is
     *   1.116071471187750e-4, ulp 7.3e-12; neighbour 0x38ea0ea1 = 1.11607143480796e-4);
     *   s = RN(0.033935546875 / 1.11607150756754e-4 = 304.062478478) = 304.06246948 (ulp
     *   3.05e-5); e4m3: 304.06 = 1.1877 * 2^8, mantissa 1.5019 eighths -> 2 -> 1.25 * 2^8 =
     *   320 -> byte (8 + 7) << 3 | 2 = 0x7a;
     *   dec = RN(320 * sf2 = 5.95238118e-3) = 0x3bc30c31 = 5.95238106e-3;
     *   q[i] = e2m1(RN(x[i] / dec)): 3.5684 -> 4 (code 6), -1.1946 -> -1 (a), 1.7124 -> 1.5 (3),
     *   5.7012 -> 6 (7), -3.1582 -> -3 (d), 0.1179 -> 0 (0), -4.2656 -> -4 (e), 1.9995 -> 2 (4),
     *   0.7742 -> 1 (2), -5.0654 -> -6 (f), 2.7686 -> 3 (5), -0.2179 -> -0 (8), 4.6758 -> 4 (6),
     *   -1.6099 -> -1.5 (b), 0.8562 -> 1 (2), -2.4712 -> -2 (c).
     * The same codes and scale as FlashInfer's RTN (SPEC: a6 73 0d 4e f2 85 b6 c2, 7a). */
    static const uint8_t rtn[8] = {0xa6, 0x73, 0x0d, 0x4e, 0xf2, 0x85, 0xb6, 0xc2};
    check_block("worked modelopt", k_worked, nvf_quant_group_scale(0.05f, &k_mo), &k_mo, rtn, 0x7a);
    check_block("worked flashinfer", k_worked, nvf_quant_group_scale(0.05f, &k_fi), &k_fi, rtn,
                0x7a);
}

/* A block where the arithmetics differ in one code: x = {5, 0.625, 0 x 14}, group amax 5. */
static void test_differing_block(void) {
    float x[16] = {5.0f, 0.625f};
    /* ModelOpt: sf2 = 0x3af3cf3d = 0.00186011905316263; 6 sf2 = 0.0111607143189758 -> RN
     * 0x3c36db6e = 0.0111607145518065 (ulp 9.3e-10); s = RN(5 / 0.0111607145518065 =
     * 447.99998932) = 448 (ulp 3.05e-5 below 512: 448 - 1.07e-5 rounds up) -> byte 0x7e;
     * dec = RN(448 sf2 = 0.833333335816860) = 0x3f555555 = 0.833333313465118 (ulp 5.96e-8);
     * 5 / dec = 6.00000014 -> RN 6 -> code 7; 0.625 / dec = 0.7500000179 -> RN 0.75 (ulp
     * 5.96e-8) -> a tie between 0.5 and 1, which goes to the even code: 1 (code 2).
     * Packed byte 0 = 2 << 4 | 7 = 0x27. */
    static const uint8_t mo[8] = {0x27, 0, 0, 0, 0, 0, 0, 0};
    check_block("differing modelopt", x, nvf_quant_group_scale(5.0f, &k_mo), &k_mo, mo, 0x7e);
    /* FlashInfer: gs = 537.599976, RN(gs * RN(1/6)) = 89.5999985, 5 * that = 447.99999 -> 448
     * -> 0x7e; RN(1 / gs) = 0x3af3cf3e; RN(448 * that) = 0x3f555556 = 0.833333373;
     * enc = RN(1 / 0.833333373) = 0x3f999999 = 1.19999993; 0.625 * enc = 0.74999996 -> RN
     * 0.74999994 < 0.75 -> 0.5 (code 1); 5 * enc = 5.9999995 -> 6 (code 7). Byte 0 = 0x17. */
    static const uint8_t fi[8] = {0x17, 0, 0, 0, 0, 0, 0, 0};
    check_block("differing flashinfer", x, nvf_quant_group_scale(5.0f, &k_fi), &k_fi, fi, 0x7e);
}

static void test_zero_group(void) {
    /* An all-zero group under ModelOpt: sf2 = 0 -> FlashInfer's RTN with gs = FLT_MAX, which
     * writes scale 0x00 and codes 0 (ModelOpt's own would give 0 / 0 = NaN scales). */
    static const uint8_t zeros8[8] = {0};
    float x[16] = {0};
    check_block("zero group modelopt", x, nvf_quant_group_scale(0.0f, &k_mo), &k_mo, zeros8, 0x00);
    check_block("zero group flashinfer", x, nvf_quant_group_scale(0.0f, &k_fi), &k_fi, zeros8,
                0x00);
}

static void put_bf16(uint8_t *p, size_t i, float f) {
    uint16_t h = nvf_f32_to_bf16_rn(f);
    p[2 * i] = (uint8_t)h;
    p[2 * i + 1] = (uint8_t)(h >> 8);
}

/* Gate (amax 5) and up (amax 2.5) of one expert share sf2 = RN(5 / 2688) (SPEC section 5). */
static void test_gate_up_group(void) {
    nvf_device cpu;
    nvf_backend *b = NULL;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_backend_open(&b, &cpu, 2) == 0);
    if (!b)
        return;
    uint8_t gate[32], up[32];
    for (size_t i = 0; i < 16; i++) {
        put_bf16(gate, i, i == 0 ? 5.0f : i == 1 ? 0.625f : 0.0f);
        put_bf16(up, i, i == 0 ? 2.5f : i == 1 ? 0.3125f : 0.0f);
    }
    nvf_quant_source srcs[2] = {
        {.dtype = NVF_DTYPE_BF16, .data = gate, .rows = 1, .cols = 16},
        {.dtype = NVF_DTYPE_BF16, .data = up, .rows = 1, .cols = 16},
    };
    uint8_t pk0[8], sc0[1], pk1[8], sc1[1];
    uint8_t *packed[2] = {pk0, pk1}, *scales[2] = {sc0, sc1};
    const char *names[2] = {"e.gate_proj.weight", "e.up_proj.weight"};
    float g = 0.0f;
    CHECK(nvf_backend_quantize_group(b, &g, packed, scales, srcs, names, 2, &k_mo, 0) == 0);
    CHECK(nvf_f32_bits(g) == 0x3af3cf3du);
    /* Gate: test_differing_block's bytes (0x27, scale 0x7e). Up with the shared sf2: s =
     * RN(2.5 / 0.0111607145518065 = 223.99999466) = 224 (ulp 1.5e-5) -> 1.75 * 2^7 -> byte
     * (7 + 7) << 3 | 6 = 0x76; dec = RN(224 sf2) = 0.416666656732559 (half the gate's, exact);
     * 2.5 / dec -> 6 (code 7), 0.3125 / dec = 0.7500000179 -> 0.75 -> code 2: byte 0 = 0x27.
     * Alone, up would take sf2 = RN(2.5 / 2688) = 0x3a73cf3d instead. */
    static const uint8_t want[8] = {0x27, 0, 0, 0, 0, 0, 0, 0};
    CHECK(memcmp(pk0, want, 8) == 0 && sc0[0] == 0x7e);
    CHECK(memcmp(pk1, want, 8) == 0 && sc1[0] == 0x76);
    CHECK(nvf_f32_bits(nvf_quant_group_scale(2.5f, &k_mo)) == 0x3a73cf3du);
    nvf_backend_close(b);
}

/* The CPU's row path (several threads, several blocks a row) gives the block function's bytes. */
static void test_rows_match_blocks(void) {
    const int64_t rows = 5, cols = 16 * 11;
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    uint8_t *pk = malloc((size_t)(rows * cols / 2)), *sc = malloc((size_t)(rows * cols / 16));
    CHECK(x && pk && sc);
    if (!x || !pk || !sc)
        goto done;
    uint64_t s = 12345;
    for (int64_t i = 0; i < rows * cols; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        /* heavy-tailed: u / (1 - 2|u|)^2, some exact zeros and tiny values */
        double v = u / ((1.0 - 2.0 * fabs(u)) * (1.0 - 2.0 * fabs(u)) + 1e-3);
        x[i] = (i % 37 == 0) ? 0.0f : (i % 53 == 0) ? (float)(v * 1e-12) : (float)v;
    }
    for (int64_t i = 16; i < 32; i++)
        x[i] = 0.0f; /* an all-zero block */
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * cols; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float g = nvf_quant_group_scale(amax, &k_mo);
    CHECK(nvf_quant_rows_ref(pk, sc, x, rows, cols, g, &k_mo, 3) == 0);
    int bad = 0;
    for (int64_t blk = 0; blk < rows * cols / 16 && bad < 5; blk++) {
        uint8_t p8[8], s1;
        nvf_quant_block_ref(p8, &s1, x + blk * 16, g, &k_mo);
        if (memcmp(p8, pk + blk * 8, 8) != 0 || s1 != sc[blk])
            bad++;
    }
    CHECK_MSG(bad == 0, "%d blocks differ between the row path and the block function", bad);
    CHECK(sc[1] == 0x38); /* the all-zero block */
done:
    free(x);
    free(pk);
    free(sc);
}

/* Re-quantization onto a shared sf2 under ModelOpt's arithmetic: the bytes of quantizing the
 * dequantized values with that sf2 as the group scale. */
static void test_requant(void) {
    uint8_t pk[8], sc[1], pr[8], sr[1], pw[8], sw[1];
    float g = nvf_quant_group_scale(0.05f, &k_mo), shared = nvf_quant_group_scale(5.0f, &k_mo);
    float vals[16];
    CHECK(nvf_quant_rows_ref(pk, sc, k_worked, 1, 16, g, &k_mo, 1) == 0);
    nvf_quant_dequant_row_ref(vals, pk, sc, 16, g);
    CHECK(nvf_quant_requant_ref(pr, sr, pk, sc, 1, 16, g, shared, &k_mo) == 0);
    CHECK(nvf_quant_rows_ref(pw, sw, vals, 1, 16, shared, &k_mo, 1) == 0);
    CHECK(memcmp(pr, pw, 8) == 0 && sr[0] == sw[0]);
    /* the largest value decodes to RN(RN(6 * 320) * sf2) = 0.0357142873; over RN(6 * 5/2688) =
     * 0.0111607146: s = 3.2000000477 -> between 3.0 (0x44) and 3.25 (0x45), nearer 3.25 */
    CHECK(sr[0] == 0x45);
}

static void test_recipe(void) {
    nvf_recipe r;
    /* --arithmetic modelopt alone: method rtn, E 448. */
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(r.arith == NVF_QUANT_ARITH_FLASHINFER);
    CHECK(nvf_recipe_set(&r, "arithmetic", "modelopt") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN_MODELOPT && r.quant.e4m3_max == 448);
    CHECK(nvf_recipe_check(&r) == 0);
    char *js = nvf_recipe_to_json(&r);
    CHECK(js && strstr(js, "\"method\":\"rtn\"") && strstr(js, "\"arithmetic\":\"modelopt\""));
    free(js);
    /* back to flashinfer: plain RTN */
    CHECK(nvf_recipe_set(&r, "arithmetic", "flashinfer") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN);
    nvf_recipe_free(&r);
    /* an explicit 4over6 stays, and the check refuses it (exit 2: NVF_E_CONFIG) */
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_set(&r, "method", "4over6") == 0);
    CHECK(nvf_recipe_set(&r, "arithmetic", "modelopt") == 0);
    CHECK(nvf_recipe_check(&r) == NVF_E_CONFIG);
    CHECK_CONTAINS(nvf_error_last(), "4over6");
    nvf_recipe_free(&r);
    /* rtn with E 256 is refused; the order of the keys does not matter */
    static const char y[] = "quantization: {arithmetic: modelopt, method: rtn, e4m3_max: 256}\n";
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_parse(&r, y, sizeof y - 1, "y.yaml") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN_MODELOPT);
    CHECK(nvf_recipe_check(&r) == NVF_E_CONFIG);
    CHECK_CONTAINS(nvf_error_last(), "e4m3_max 448");
    nvf_recipe_free(&r);
    static const char y2[] = "quantization: {method: rtn, arithmetic: modelopt}\n";
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_parse(&r, y2, sizeof y2 - 1, "y2.yaml") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN_MODELOPT && nvf_recipe_check(&r) == 0);
    nvf_recipe_free(&r);
    /* a bad value */
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_set(&r, "arithmetic", "torch") == NVF_E_CONFIG);
    nvf_recipe_free(&r);
}

int main(void) {
    test_group_scale();
    test_zero_and_tiny_blocks();
    test_worked_block();
    test_differing_block();
    test_zero_group();
    test_gate_up_group();
    test_rows_match_blocks();
    test_requant();
    test_recipe();
    return check_summary("test_quant_modelopt");
}
