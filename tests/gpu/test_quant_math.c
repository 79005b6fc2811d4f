/*
 * The CUDA quantizer's block arithmetic (kernels/quant_math.h: the fast path with its
 * magic-number rounding, falling back to the shared exact block of nvfp4/quant_block.h)
 * compiled for the host and compared byte for byte with the CPU reference nvf_quant_block_ref
 * (the shared block's nvf_qb_quantize) on hard cases and random blocks, for every recipe
 * variant. Runs without a GPU; tests/gpu/test_quant_cuda.c checks the device build of the same
 * code, and tests/unit/test_quant_block.c the shared block against hand-worked bytes.
 */
#include "check.h"

#define GPU_GEN_SEED 0x9E3779B97F4A7C15ull
#include "gpu_gen.h"

#include "../../kernels/quant_math.h"
#include "nvfp4/quant.h"
#include "nvfp4/quant_block.h"

#include <stdlib.h>

static float pick_gs(const float *x) {
    switch (rnd32() % 6) {
    case 0:
        return 1.0f;
    case 1:
        return FLT_MAX;
    case 2:
        return 1e-30f;
    case 3:
        return ldexpf(1.0f, (int)(rnd32() % 60) - 30);
    default: {
        uint32_t m = 0;
        for (int i = 0; i < NVF_BLOCK; i++) {
            uint32_t b = nvf_f32_bits(x[i]) & 0x7FFFFFFFu;
            m = b <= 0x7F800000u && b > m ? b : m;
        }
        return nvf_qb_global_scale(nvf_f32_from_bits(m), (rnd32() & 1) ? 448 : 256);
    }
    }
}

static int g_shown, g_fast, g_total;

/* Whether the fast path took the block (the rest goes through the exact path). */
static int took_fast(const float *x, const nvf_qm_consts *k, const nvf_quant_params *p, int bf16) {
    uint32_t ab[NVF_BLOCK], m = 0, w0, w1;
    uint8_t sf;
    for (int i = 0; i < NVF_BLOCK; i++) {
        ab[i] = nvf_f32_bits(x[i]) & 0x7FFFFFFFu;
        m = ab[i] > m ? ab[i] : m;
    }
    return nvf_qm_block_fast(&w0, &w1, &sf, ab, m, 0, 0, k, NULL, bf16, p->method, p->error,
                             p->domain);
}

/* `bf16`: the block's values are BF16 values, and the kernels' BF16 path is taken (RN(vmax / 6)
 * without a division, the block scales looked up in a table as on the GPU). */
static void compare(const float *x, float gs, const nvf_quant_params *p, float min_abs, int bf16) {
    uint8_t want[NVF_BLOCK_BYTES], want_sf;
    nvf_quant_block_ref(want, &want_sf, x, gs, p);
    nvf_qm_consts k = nvf_qm_consts_make(gs, p->method, p->error, p->domain, min_abs);
    nvf_qm_scale tab[NVF_QM_TAB_N];
    for (int i = 0; bf16 && i < NVF_QM_TAB_N; i++)
        tab[i] = nvf_qm_scale_of((uint8_t)i, k.b.rcp_gs);
    uint32_t w0, w1;
    uint8_t sf;
    nvf_qm_block(&w0, &w1, &sf, x, &k, bf16 ? tab : NULL, bf16, p->method, p->error, p->domain);
    uint8_t got[NVF_BLOCK_BYTES];
    for (int j = 0; j < 4; j++) {
        got[j] = (uint8_t)(w0 >> (8 * j));
        got[4 + j] = (uint8_t)(w1 >> (8 * j));
    }
    g_fast += took_fast(x, &k, p, bf16);
    g_total++;
    int ok = sf == want_sf && memcmp(got, want, sizeof got) == 0;
    CHECK(ok);
    if (!ok && g_shown++ < 10) {
        fprintf(stderr, "mismatch: method %d error %d domain %d gs %a (0x%08x)\n", p->method,
                p->error, p->domain, (double)gs, nvf_f32_bits(gs));
        for (int i = 0; i < NVF_BLOCK; i++)
            fprintf(stderr, "  x[%2d] = %-14g 0x%08x\n", i, (double)x[i], nvf_f32_bits(x[i]));
        fprintf(stderr, "  want sf %02x codes", want_sf);
        for (int j = 0; j < NVF_BLOCK_BYTES; j++)
            fprintf(stderr, " %02x", want[j]);
        fprintf(stderr, "\n  got  sf %02x codes", sf);
        for (int j = 0; j < NVF_BLOCK_BYTES; j++)
            fprintf(stderr, " %02x", got[j]);
        fprintf(stderr, "\n");
    }
}

/* nvf_qm_div against the division operator: edge numerators around multiples of d and the top
 * of the range, random ones, for small, power-of-two, typical (448 = 7168 / 16) and huge d. */
static void check_div(void) {
    const uint32_t ds[] = {1,   2,    3,         7,          8,          127,        128, 448,
                           999, 4096, 123456789, 0x40000000, 0x40000001, 0x7FFFFFFF, 0};
    uint32_t bad = 0;
    for (int j = 0; j < 64 + (int)(sizeof ds / sizeof ds[0]); j++) {
        uint32_t d = j < (int)(sizeof ds / sizeof ds[0]) ? ds[j] : 1 + rnd32() % 0x7FFFFFFFu;
        if (d == 0)
            d = 1 + (rnd32() >> 12); /* a random small-to-middle d */
        nvf_qm_div f = nvf_qm_div_make(d);
        for (int i = 0; i < 20000; i++) {
            uint32_t n;
            switch (i % 4) {
            case 0:
                n = rnd32() & 0x7FFFFFFFu;
                break;
            case 1: /* k * d - 1, k * d, k * d + 1 */
                n = (uint32_t)((uint64_t)(rnd32() % (0x7FFFFFFFu / d + 1)) * d) + i % 3 - 1;
                break;
            case 2:
                n = 0x7FFFFFFFu - (uint32_t)(i % 1000);
                break;
            default:
                n = (uint32_t)i;
                break;
            }
            n &= 0x7FFFFFFFu;
            if (nvf_qm_div_do(n, f) != n / d && bad++ < 5)
                fprintf(stderr, "div: %u / %u gave %u\n", n, d, nvf_qm_div_do(n, f));
        }
    }
    CHECK(bad == 0);
}

/* nvf_qm_div6_bf16 against the division for every finite BF16 magnitude. */
static void check_div6(void) {
    uint32_t bad = 0;
    for (uint32_t h = 0; h < 0x7F80u; h++) {
        float v = nvf_bf16_to_f32((uint16_t)h);
        float q = nvf_qm_div6_bf16(v), want = v / 6.0f;
        if (nvf_f32_bits(q) != nvf_f32_bits(want) && bad++ < 5)
            fprintf(stderr, "div6: %a / 6 gave %a, want %a\n", (double)v, (double)q, (double)want);
    }
    CHECK(bad == 0);
}

int main(void) {
    check_div();
    check_div6();
    printf("test_quant_math: seed 0x%016llx\n", (unsigned long long)g_rng);
    const nvf_quant_params variants[] = {
        {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
    };
    const float min_abs_f32 = 1.40129846e-45f; /* 2^-149: any binary32 source */
    float x[NVF_BLOCK];
    /* Every E2M1 tie and grid point against a power-of-two scale (max 6 maps to sf 1 or 2). */
    for (int v = 0; v < 5; v++) {
        for (int sh = -3; sh <= 3; sh++) {
            for (int i = 0; i < NVF_BLOCK; i++)
                x[i] = ldexpf((float)(i % 16) * 0.25f * ((i & 1) ? -1.0f : 1.0f), sh);
            x[15] = ldexpf(6.0f, sh);
            compare(x, 1.0f, &variants[v], min_abs_f32, 0);
            compare(x, ldexpf(1.0f, -sh), &variants[v], min_abs_f32, 0);
            compare(x, ldexpf(1.0f, -sh), &variants[v], 9.18354962e-41f, 1);
            /* A negative global scale (the library API takes any): negative scale bytes must
             * not index past the scale table before the block goes to the exact path. */
            compare(x, -ldexpf(1.0f, -sh), &variants[v], 9.18354962e-41f, 1);
        }
    }
    /* Random hard blocks, finite and with NaN/Inf; random BF16 blocks. */
    for (int n = 0; n < 200000; n++) {
        int nonfinite = n % 4 == 0;
        int bf16 = n % 3 == 0;
        for (int i = 0; i < NVF_BLOCK; i++) {
            x[i] = hard_value(nonfinite);
            if (bf16)
                x[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(x[i]));
        }
        /* Blocks of similar magnitudes as well, where 4over6's choice is close. */
        if (n % 5 == 1) {
            float base = ldexpf(1.0f, (int)(rnd32() % 40) - 20);
            for (int i = 0; i < NVF_BLOCK; i++)
                x[i] = base * (float)((int)(rnd32() % 4097) - 2048) / 256.0f;
        }
        if (n % 5 == 1 && bf16)
            for (int i = 0; i < NVF_BLOCK; i++)
                x[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(x[i]));
        float gs = pick_gs(x);
        compare(x, gs, &variants[n % 5], min_abs_f32, 0);
        if (bf16) {
            compare(x, gs, &variants[(n + 1) % 5], 9.18354962e-41f /* 2^-133 */, 1);
            compare(x, gs, &variants[(n + 2) % 5], 9.18354962e-41f, 1);
        }
    }
    printf("fast path: %d of %d blocks\n", g_fast, g_total);
    CHECK(g_fast > g_total / 4);
    return check_summary("test_quant_math");
}
