/*
 * The CPU's row path (SPEC section 4): the bytes of nvf_qb_quantize (nvfp4/quant_block.h) for
 * every block of a row, NB blocks at a time so that the compiler keeps one block per vector
 * lane, and the row maxima of the amax pass. Every binary32 operation is written out one at a
 * time and the build forbids contraction (-ffp-contract=off), so each is rounded on its own as
 * in the shared block functions; the error sums, whose order is part of the contract, still add
 * their 16 terms in order. The unit tests compare this path with nvf_quant_block_ref byte for
 * byte.
 */
#include "quant_internal.h"

#include <math.h>

/* Rows: NB blocks side by side ------------------------------------------------------------
 *
 * The arithmetic of nvf_qb_quantize, operation for operation, on NB blocks at once: the values
 * are transposed to xt[i][b] (element i of block b) so that every loop runs over b, and the
 * error sum of each block still adds its terms for i = 0..15 in order.
 */
#define NB 8

/* x86-64: also compile the row loop for AVX2 and pick the variant at load time (the same
 * IEEE operations, only wider vectors: the bytes do not change). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NVF_ROW_CLONES __attribute__((target_clones("avx2", "default")))
#define NVF_INLINE     inline __attribute__((always_inline))
#else
#define NVF_ROW_CLONES
#define NVF_INLINE inline
#endif

/* The codes of NB blocks: e2m1(RN(x * enc)), or with `DIV` (a constant at each call site:
 * ModelOpt's arithmetic) e2m1(RN(x / enc)), a true division. */
static NVF_INLINE void chunk_codes(uint8_t *packed, float xt[NVF_BLOCK][NB], const float *enc,
                                   int DIV) {
    /* Codes of block b collected as 16 nibbles of one 64-bit word, element i at bits 4i. */
    uint64_t w[NB];
    for (int b = 0; b < NB; b++)
        w[b] = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        for (int b = 0; b < NB; b++) {
            float t = DIV ? xt[i][b] / enc[b] : xt[i][b] * enc[b];
            float a = fabsf(t);
            uint32_t idx = (uint32_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) +
                                      (a > 2.5f) + (a >= 3.5f) + (a > 5.0f));
            idx |= (uint32_t)(t < 0.0f) << 3;
            w[b] |= (uint64_t)idx << (4 * i);
        }
    }
    for (int b = 0; b < NB; b++) {
        for (int j = 0; j < NVF_BLOCK_BYTES; j++)
            packed[b * NVF_BLOCK_BYTES + j] = (uint8_t)(w[b] >> (8 * j));
    }
}

/* Error sums of both candidates for NB blocks; `ERR` and `DOM` are constants at each call site
 * so the compiler drops the untaken variants. */
static NVF_INLINE void chunk_errors(float *err6, float *err4, float xt[NVF_BLOCK][NB],
                                    const float *enc6, const float *enc4, const float *sff6,
                                    const float *sff4, const nvf_qb_consts *k, nvf_quant_error ERR,
                                    nvf_quant_domain DOM) {
    for (int b = 0; b < NB; b++)
        err6[b] = err4[b] = 0.0f;
    for (int i = 0; i < NVF_BLOCK; i++) {
        for (int b = 0; b < NB; b++) {
            float x = xt[i][b];
            float y = x * k->gs;
            float t6 = x * enc6[b], t4 = x * enc4[b];
            float m6 = nvf_qb_e2m1_round_mag(fabsf(t6)), m4 = nvf_qb_e2m1_round_mag(fabsf(t4));
            float q6 = t6 < 0.0f ? -m6 : m6, q4 = t4 < 0.0f ? -m4 : m4;
            float d6, d4;
            if (DOM == NVF_QUANT_DOMAIN_SCALED) {
                float c6 = q6 * sff6[b], c4 = q4 * sff4[b];
                d6 = c6 - y;
                d4 = c4 - y;
            } else {
                float p6 = q6 * sff6[b], p4 = q4 * sff4[b];
                float c6 = p6 * k->rcp_gs, c4 = p4 * k->rcp_gs;
                d6 = c6 - x;
                d4 = c4 - x;
            }
            float e6 = ERR == NVF_QUANT_ERROR_MSE ? d6 * d6 : fabsf(d6);
            float e4 = ERR == NVF_QUANT_ERROR_MSE ? d4 * d4 : fabsf(d4);
            err6[b] = err6[b] + e6;
            err4[b] = err4[b] + e4;
        }
    }
}

/* Quantize NB consecutive blocks starting at x. */
static NVF_INLINE void chunk_quant(uint8_t *packed, uint8_t *scales, const float *x,
                                   const nvf_qb_consts *k) {
    float xt[NVF_BLOCK][NB];
    int32_t vm[NB]; /* magnitude bits: below 2^31, so signed compares order them */
    for (int b = 0; b < NB; b++) {
        int32_t m = 0;
        for (int i = 0; i < NVF_BLOCK; i++) {
            int32_t a = (int32_t)(nvf_f32_bits(x[b * NVF_BLOCK + i]) & 0x7FFFFFFFu);
            a = a > 0x7F800000 ? 0 : a;
            m = a > m ? a : m;
        }
        vm[b] = m;
    }
    for (int i = 0; i < NVF_BLOCK; i++) {
        for (int b = 0; b < NB; b++)
            xt[i][b] = x[b * NVF_BLOCK + i];
    }
    float enc[NB];
    if (k->method == NVF_QUANT_METHOD_RTN_MODELOPT) {
        /* ModelOpt: the scale of vmax / RN(6 sf2), codes of x / RN(f32(sf) * sf2) */
        for (int b = 0; b < NB; b++) {
            uint8_t sf = nvf_qb_modelopt_scale(nvf_f32_from_bits((uint32_t)vm[b]), k->rtn_mul);
            scales[b] = sf;
            enc[b] = nvf_qb_e4m3_to_f32(sf) * k->gs;
        }
        chunk_codes(packed, xt, enc, 1);
        return;
    }
    if (k->method == NVF_QUANT_METHOD_RTN) {
        for (int b = 0; b < NB; b++) {
            uint8_t sf = nvf_qb_scale_encode(nvf_f32_from_bits((uint32_t)vm[b]) * k->rtn_mul);
            scales[b] = sf;
            enc[b] = nvf_qb_scale_enc(nvf_qb_e4m3_to_f32(sf), k->rcp_gs);
        }
        chunk_codes(packed, xt, enc, 0);
        return;
    }
    float enc6[NB], enc4[NB], sff6[NB], sff4[NB], err6[NB], err4[NB];
    uint8_t sf6[NB], sf4[NB];
    for (int b = 0; b < NB; b++) {
        float vmax = nvf_f32_from_bits((uint32_t)vm[b]);
        float sf6h = nvf_qb_sf6h(vmax, k->gs);
        float sf4h = sf6h * 1.5f;
        sf6[b] = nvf_qb_scale_encode(sf6h);
        sf4[b] = nvf_qb_scale_encode(sf4h);
        sff6[b] = nvf_qb_e4m3_to_f32(sf6[b]);
        sff4[b] = nvf_qb_e4m3_to_f32(sf4[b]);
        enc6[b] = nvf_qb_scale_enc(sff6[b], k->rcp_gs);
        enc4[b] = nvf_qb_scale_enc(sff4[b], k->rcp_gs);
    }
    if (k->error == NVF_QUANT_ERROR_MSE) {
        if (k->domain == NVF_QUANT_DOMAIN_SCALED)
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MSE,
                         NVF_QUANT_DOMAIN_SCALED);
        else
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MSE,
                         NVF_QUANT_DOMAIN_ORIGINAL);
    } else {
        if (k->domain == NVF_QUANT_DOMAIN_SCALED)
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MAE,
                         NVF_QUANT_DOMAIN_SCALED);
        else
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MAE,
                         NVF_QUANT_DOMAIN_ORIGINAL);
    }
    for (int b = 0; b < NB; b++) {
        int four = err4[b] < err6[b]; /* strict: ties and NaN keep 6 */
        enc[b] = four ? enc4[b] : enc6[b];
        scales[b] = four ? sf4[b] : sf6[b];
    }
    chunk_codes(packed, xt, enc, 0);
}

/* One row of nb blocks: NB at a time, the remainder one by one. */
NVF_ROW_CLONES void nvf_quant_row_encode(uint8_t *packed, uint8_t *scales, const float *x,
                                         int64_t nb, const nvf_qb_consts *k) {
    int64_t b = 0;
    for (; b + NB <= nb; b += NB)
        chunk_quant(packed + b * NVF_BLOCK_BYTES, scales + b, x + b * NVF_BLOCK, k);
    for (; b < nb; b++)
        nvf_qb_quantize(packed + b * NVF_BLOCK_BYTES, scales + b, x + b * NVF_BLOCK, k);
}

/* Amax rows --------------------------------------------------------------------------------
 *
 * Straight from the 16-bit values for BF16: the order of the magnitude bits is the order of the
 * magnitudes. */
NVF_ROW_CLONES uint32_t nvf_quant_row_amax_bf16(const uint8_t *p, int64_t n, uint32_t *bad) {
    int16_t m = 0, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        int16_t a = (int16_t)(quant_load_u16(p + 2 * i) & 0x7FFF);
        nonfinite |= (int16_t)(a >= 0x7F80);
        a = a > 0x7F80 ? 0 : a;
        m = a > m ? a : m;
    }
    *bad = (uint32_t)nonfinite;
    return (uint32_t)m << 16;
}

NVF_ROW_CLONES uint32_t nvf_quant_row_amax_f32(const float *x, int64_t n, uint32_t *bad) {
    int32_t m = 0, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t a = (int32_t)(nvf_f32_bits(x[i]) & 0x7FFFFFFFu);
        nonfinite |= a >= 0x7F800000;
        a = a > 0x7F800000 ? 0 : a;
        m = a > m ? a : m;
    }
    *bad = (uint32_t)nonfinite;
    return (uint32_t)m;
}
