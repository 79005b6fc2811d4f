/*
 * NVFP4 quantization reference (SPEC section 4), see nvfp4/quant.h.
 *
 * Every binary32 operation is written out one at a time and the build forbids contraction
 * (-ffp-contract=off), so each product, quotient, sum and difference is rounded on its own,
 * exactly like FlashInfer's "TE" reference (ref_fp4_quant_te, ref_fp4_quant_4over6_te) and
 * like the GPU kernels with __fmul_rn/__fdiv_rn. The loops over the 16 elements of a block are
 * written so the compiler can vectorize them (selects, no early exits); the error sums, whose
 * order is part of the contract, are plain sequential loops.
 */
#include "nvfp4/quant.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Per-tensor constants of the block arithmetic, computed once per call. */
typedef struct quant_consts {
    nvf_quant_params p;
    float gs;      /* global encode scale */
    float rcp_gs;  /* RN(1 / gs) */
    float rtn_mul; /* RN(gs * RN(1 / 6)), RTN only */
} quant_consts;

nvf_quant_params nvf_quant_params_default(void) {
    nvf_quant_params p = {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED,
                          256};
    return p;
}

float nvf_quant_global_scale(float amax, int32_t e4m3_max) {
    if (amax == 0.0f)
        return FLT_MAX;
    float num = (float)e4m3_max * 6.0f; /* 2688 or 1536, exact */
    float gs = num / amax;
    if (gs > FLT_MAX)
        gs = FLT_MAX;
    if (gs == 0.0f)
        gs = 1.0f;
    return gs;
}

float nvf_quant_decode_scale(float gs) {
    return 1.0f / gs;
}

static quant_consts consts_make(float gs, const nvf_quant_params *p) {
    quant_consts k;
    k.p = *p;
    k.gs = gs;
    k.rcp_gs = 1.0f / gs;
    float sixth = 1.0f / 6.0f;
    k.rtn_mul = gs * sixth;
    return k;
}

/* Largest magnitude of 16 values with NaN skipped, as an integer max over the magnitude bits
 * (for non-NaN binary32, the order of the bits is the order of the magnitudes). */
static inline float block_vmax(const float *x) {
    uint32_t m = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t b = nvf_f32_bits(x[i]) & 0x7FFFFFFFu;
        b = b > 0x7F800000u ? 0u : b;
        m = b > m ? b : m;
    }
    return nvf_f32_from_bits(m);
}

/* The E4M3 scale byte of an unclamped non-negative block scale: min(s, 448), then satfinite. */
static inline uint8_t scale_encode(float s) {
    return nvf_f32_to_e4m3_sat(s < NVF_E4M3_MAX ? s : NVF_E4M3_MAX);
}

/* enc = min(RN(1 / RN(f32(sf) * rcp_gs)), FLT_MAX). */
static inline float scale_enc(uint8_t sf, float rcp_gs) {
    float dec = nvf_e4m3_to_f32(sf) * rcp_gs;
    float enc = 1.0f / dec;
    return enc < FLT_MAX ? enc : FLT_MAX;
}

/* Magnitude of the E2M1 value nearest to a = |t| (clamped to 6, ties to the even code), the
 * same rounding as nvf_e2m1_encode. From 1 up, E2M1 is a binary float with one mantissa bit, so
 * RN-even on the bits (drop 22 of 23 mantissa bits) gives it; below 1 the grid is 0, 0.5, 1.
 * Branch-free so that it vectorizes. */
static inline float e2m1_round_mag(float a) {
    a = a > NVF_E2M1_MAX ? NVF_E2M1_MAX : a; /* NaN stays NaN, compares false, gives 0 */
    uint32_t u = nvf_f32_bits(a);
    uint32_t r = (u + 0x1FFFFFu + ((u >> 22) & 1u)) & 0xFFC00000u;
    float big = nvf_f32_from_bits(r);
    float small = a > 0.25f ? 0.5f : 0.0f;
    small = a >= 0.75f ? 1.0f : small;
    return a >= 1.0f ? big : small;
}

/* Codes of one candidate: code[i] = e2m1(RN(x[i] * enc)). */
static inline void block_codes(uint8_t *code, const float *x, float enc) {
    for (int i = 0; i < NVF_BLOCK; i++)
        code[i] = nvf_e2m1_encode(x[i] * enc);
}

static inline void block_pack(uint8_t *packed, const uint8_t *code) {
    for (int j = 0; j < NVF_BLOCK_BYTES; j++)
        packed[j] = nvf_e2m1_pack(code[2 * j], code[2 * j + 1]);
}

/*
 * Error of one 4over6 candidate (SPEC section 4), summed over i = 0..15 in order from 0.
 * `y` holds RN(x[i] * gs) for the scaled domain. The terms are computed in a vectorizable
 * loop; only the sum is sequential.
 */
static inline float block_error(const float *x, const float *y, float enc, float sff,
                                const quant_consts *k) {
    float term[NVF_BLOCK];
    for (int i = 0; i < NVF_BLOCK; i++) {
        float t = x[i] * enc;
        float mag = e2m1_round_mag(fabsf(t));
        float q = t < 0.0f ? -mag : mag;
        float d;
        if (k->p.domain == NVF_QUANT_DOMAIN_SCALED) {
            float c = q * sff; /* exact: fits f16 */
            d = c - y[i];
        } else {
            float qs = q * sff;
            float c = qs * k->rcp_gs;
            d = c - x[i];
        }
        term[i] = k->p.error == NVF_QUANT_ERROR_MSE ? d * d : fabsf(d);
    }
    float err = 0.0f;
    for (int i = 0; i < NVF_BLOCK; i++)
        err = err + term[i];
    return err;
}

static inline void block_quant(uint8_t *packed, uint8_t *scale, const float *x,
                               const quant_consts *k) {
    uint8_t code[NVF_BLOCK];
    float vmax = block_vmax(x);
    if (k->p.method == NVF_QUANT_METHOD_RTN) {
        uint8_t sf = scale_encode(vmax * k->rtn_mul);
        block_codes(code, x, scale_enc(sf, k->rcp_gs));
        block_pack(packed, code);
        *scale = sf;
        return;
    }
    /* 4over6: the block maximum maps to 6 (sf6) or, with a 1.5x larger scale, to 4 (sf4). */
    float sf6h = 0.0f;
    if (vmax != 0.0f) {
        float v6 = vmax / 6.0f;
        sf6h = v6 * k->gs;
    }
    float sf4h = sf6h * 1.5f;
    uint8_t sf6 = scale_encode(sf6h), sf4 = scale_encode(sf4h);
    float enc6 = scale_enc(sf6, k->rcp_gs), enc4 = scale_enc(sf4, k->rcp_gs);
    float y[NVF_BLOCK];
    for (int i = 0; i < NVF_BLOCK; i++)
        y[i] = x[i] * k->gs;
    float err6 = block_error(x, y, enc6, nvf_e4m3_to_f32(sf6), k);
    float err4 = block_error(x, y, enc4, nvf_e4m3_to_f32(sf4), k);
    /* Strict: ties and NaN keep the 6-candidate. */
    int four = err4 < err6;
    block_codes(code, x, four ? enc4 : enc6);
    block_pack(packed, code);
    *scale = four ? sf4 : sf6;
}

void nvf_quant_block_ref(uint8_t *packed, uint8_t *scale, const float *x, float gs,
                         const nvf_quant_params *p) {
    quant_consts k = consts_make(gs, p);
    block_quant(packed, scale, x, &k);
}

/* Rows: NB blocks side by side ------------------------------------------------------------
 *
 * The same arithmetic as block_quant, operation for operation, on NB blocks at once: the values
 * are transposed to xt[i][b] (element i of block b) so that every loop runs over b, the error
 * sum of each block still adds its terms for i = 0..15 in order, and the compiler can keep one
 * block per vector lane. The unit tests compare this path with nvf_quant_block_ref byte for byte.
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

static NVF_INLINE void chunk_codes(uint8_t *packed, float xt[NVF_BLOCK][NB], const float *enc) {
    /* Codes of block b collected as 16 nibbles of one 64-bit word, element i at bits 4i. */
    uint64_t w[NB];
    for (int b = 0; b < NB; b++)
        w[b] = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        for (int b = 0; b < NB; b++) {
            float t = xt[i][b] * enc[b];
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
                                    const float *sff4, const quant_consts *k, nvf_quant_error ERR,
                                    nvf_quant_domain DOM) {
    for (int b = 0; b < NB; b++)
        err6[b] = err4[b] = 0.0f;
    for (int i = 0; i < NVF_BLOCK; i++) {
        for (int b = 0; b < NB; b++) {
            float x = xt[i][b];
            float y = x * k->gs;
            float t6 = x * enc6[b], t4 = x * enc4[b];
            float m6 = e2m1_round_mag(fabsf(t6)), m4 = e2m1_round_mag(fabsf(t4));
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
                                   const quant_consts *k) {
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
    if (k->p.method == NVF_QUANT_METHOD_RTN) {
        for (int b = 0; b < NB; b++) {
            uint8_t sf = scale_encode(nvf_f32_from_bits((uint32_t)vm[b]) * k->rtn_mul);
            scales[b] = sf;
            enc[b] = scale_enc(sf, k->rcp_gs);
        }
        chunk_codes(packed, xt, enc);
        return;
    }
    float enc6[NB], enc4[NB], sff6[NB], sff4[NB], err6[NB], err4[NB];
    uint8_t sf6[NB], sf4[NB];
    for (int b = 0; b < NB; b++) {
        float vmax = nvf_f32_from_bits((uint32_t)vm[b]);
        float sf6h = 0.0f;
        if (vmax != 0.0f) {
            float v6 = vmax / 6.0f;
            sf6h = v6 * k->gs;
        }
        float sf4h = sf6h * 1.5f;
        sf6[b] = scale_encode(sf6h);
        sf4[b] = scale_encode(sf4h);
        enc6[b] = scale_enc(sf6[b], k->rcp_gs);
        enc4[b] = scale_enc(sf4[b], k->rcp_gs);
        sff6[b] = nvf_e4m3_to_f32(sf6[b]);
        sff4[b] = nvf_e4m3_to_f32(sf4[b]);
    }
    if (k->p.error == NVF_QUANT_ERROR_MSE) {
        if (k->p.domain == NVF_QUANT_DOMAIN_SCALED)
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MSE,
                         NVF_QUANT_DOMAIN_SCALED);
        else
            chunk_errors(err6, err4, xt, enc6, enc4, sff6, sff4, k, NVF_QUANT_ERROR_MSE,
                         NVF_QUANT_DOMAIN_ORIGINAL);
    } else {
        if (k->p.domain == NVF_QUANT_DOMAIN_SCALED)
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
    chunk_codes(packed, xt, enc);
}

/* One row of nb blocks: NB at a time, the remainder one by one. */
NVF_ROW_CLONES static void row_quant(uint8_t *packed, uint8_t *scales, const float *x, int64_t nb,
                                     const quant_consts *k) {
    int64_t b = 0;
    for (; b + NB <= nb; b += NB)
        chunk_quant(packed + b * NVF_BLOCK_BYTES, scales + b, x + b * NVF_BLOCK, k);
    for (; b < nb; b++)
        block_quant(packed + b * NVF_BLOCK_BYTES, scales + b, x + b * NVF_BLOCK, k);
}

/* Sources --------------------------------------------------------------------------------- */

static int64_t ceil_div(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

int nvf_quant_source_check(const nvf_quant_source *s, const char *name) {
    switch (s->dtype) {
    case NVF_DTYPE_F32:
    case NVF_DTYPE_F16:
    case NVF_DTYPE_BF16:
    case NVF_DTYPE_F8_E4M3:
    case NVF_DTYPE_F8_E5M2:
        break;
    default:
        return nvf_error_set(NVF_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be quantized", name,
                             nvf_dtype_name(s->dtype));
    }
    if (s->rows < 0 || s->cols <= 0 || s->cols % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_SHAPE,
                             "tensor '%s': shape [%lld, %lld] cannot be quantized (the last "
                             "dimension must be a positive multiple of %d)",
                             name, (long long)s->rows, (long long)s->cols, NVF_BLOCK);
    if (s->rows > 0 && (uint64_t)s->cols > UINT64_MAX / (uint64_t)s->rows / 4)
        return nvf_error_set(NVF_E_SHAPE, "tensor '%s': shape [%lld, %lld] is too large", name,
                             (long long)s->rows, (long long)s->cols);
    if (!s->scale)
        return 0;
    if (s->dtype != NVF_DTYPE_F8_E4M3)
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "tensor '%s': block scales are supported for F8_E4M3 only, not %s",
                             name, nvf_dtype_name(s->dtype));
    if (s->scale_dtype != NVF_DTYPE_F32 && s->scale_dtype != NVF_DTYPE_BF16 &&
        s->scale_dtype != NVF_DTYPE_F8_E8M0)
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "tensor '%s': block scale dtype %s is not F32, BF16 or F8_E8M0", name,
                             nvf_dtype_name(s->scale_dtype));
    if (s->block_rows <= 0 || s->block_cols <= 0)
        return nvf_error_set(NVF_E_SHAPE, "tensor '%s': block size [%lld, %lld] is not positive",
                             name, (long long)s->block_rows, (long long)s->block_cols);
    uint64_t want =
        (uint64_t)ceil_div(s->rows, s->block_rows) * (uint64_t)ceil_div(s->cols, s->block_cols);
    if (s->scale_numel != want)
        return nvf_error_set(NVF_E_SHAPE,
                             "tensor '%s': block scale has %llu elements, expected %llu (%lld x "
                             "%lld blocks of %lld x %lld)",
                             name, (unsigned long long)s->scale_numel, (unsigned long long)want,
                             (long long)ceil_div(s->rows, s->block_rows),
                             (long long)ceil_div(s->cols, s->block_cols), (long long)s->block_rows,
                             (long long)s->block_cols);
    return 0;
}

/* Little-endian loads from possibly unaligned tensor data. */
static inline uint16_t load_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t load_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static float scale_at(const nvf_quant_source *s, uint64_t i) {
    const uint8_t *b = s->scale;
    switch (s->scale_dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32(load_u16(b + 2 * i));
    case NVF_DTYPE_F8_E8M0:
        return nvf_e8m0_to_f32(b[i]);
    default:
        return nvf_f32_from_bits(load_u32(b + 4 * i));
    }
}

/* E4M3 decoded through a table: the decode is exact either way, and the table is several times
 * faster than the bit manipulation in the hot FP8 row loads. */
static float g_e4m3_lut[256];
static pthread_once_t g_e4m3_once = PTHREAD_ONCE_INIT;

static void e4m3_lut_init(void) {
    for (int b = 0; b < 256; b++)
        g_e4m3_lut[b] = nvf_e4m3_to_f32((uint8_t)b);
}

void nvf_quant_source_load_row(float *out, const nvf_quant_source *s, int64_t row) {
    int64_t n = s->cols;
    const uint8_t *base = s->data;
    switch (s->dtype) {
    case NVF_DTYPE_BF16: {
        const uint8_t *p = base + (uint64_t)row * (uint64_t)n * 2;
        for (int64_t i = 0; i < n; i++)
            out[i] = nvf_bf16_to_f32(load_u16(p + 2 * i));
        return;
    }
    case NVF_DTYPE_F16: {
        const uint8_t *p = base + (uint64_t)row * (uint64_t)n * 2;
        for (int64_t i = 0; i < n; i++)
            out[i] = nvf_f16_to_f32(load_u16(p + 2 * i));
        return;
    }
    case NVF_DTYPE_F32:
        memcpy(out, base + (uint64_t)row * (uint64_t)n * 4, (size_t)n * 4);
        return;
    case NVF_DTYPE_F8_E5M2: {
        const uint8_t *p = base + (uint64_t)row * (uint64_t)n;
        for (int64_t i = 0; i < n; i++)
            out[i] = nvf_e5m2_to_f32(p[i]);
        return;
    }
    default: {
        const uint8_t *p = base + (uint64_t)row * (uint64_t)n;
        pthread_once(&g_e4m3_once, e4m3_lut_init);
        if (!s->scale) {
            for (int64_t i = 0; i < n; i++)
                out[i] = g_e4m3_lut[p[i]];
            return;
        }
        /* FP8 block: bf16(RN(f32(fp8) * scale_inv[r / br][c / bc])). */
        uint64_t ncb = (uint64_t)ceil_div(n, s->block_cols);
        uint64_t srow = (uint64_t)(row / s->block_rows) * ncb;
        for (int64_t c0 = 0; c0 < n; c0 += s->block_cols) {
            float m = scale_at(s, srow + (uint64_t)(c0 / s->block_cols));
            int64_t c1 = c0 + s->block_cols < n ? c0 + s->block_cols : n;
            for (int64_t i = c0; i < c1; i++) {
                float v = g_e4m3_lut[p[i]] * m;
                out[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(v));
            }
        }
        return;
    }
    }
}

/* Threads over row ranges ---------------------------------------------------------------- */

typedef struct row_job {
    const nvf_quant_source *src;
    int64_t row0, row1;
    float *buf; /* one row of f32 */
    /* quantize */
    const quant_consts *k;
    uint8_t *packed, *scales;
    /* amax */
    int allow_nonfinite;
    uint32_t amax_bits;
    int64_t bad_row, bad_col; /* first non-finite value, bad_row = -1 when none */
    float bad_value;
} row_job;

static void *quant_rows_worker(void *arg) {
    row_job *j = arg;
    const nvf_quant_source *s = j->src;
    int64_t nb = s->cols / NVF_BLOCK;
    for (int64_t r = j->row0; r < j->row1; r++) {
        const float *x = j->buf;
        if (s->dtype == NVF_DTYPE_F32 && ((uintptr_t)s->data & 3u) == 0)
            x = (const float *)s->data + (uint64_t)r * (uint64_t)s->cols;
        else
            nvf_quant_source_load_row(j->buf, s, r);
        uint8_t *pk = j->packed + (uint64_t)r * (uint64_t)(s->cols / 2);
        uint8_t *sc = j->scales + (uint64_t)r * (uint64_t)nb;
        row_quant(pk, sc, x, nb, j->k);
    }
    return NULL;
}

/* Largest magnitude bits of a BF16 row with NaN skipped, straight from the 16-bit values (the
 * order of the magnitude bits is the order of the magnitudes); *bad set by NaN/Inf. */
NVF_ROW_CLONES static uint32_t row_amax_bf16(const uint8_t *p, int64_t n, uint32_t *bad) {
    int16_t m = 0, nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        int16_t a = (int16_t)(load_u16(p + 2 * i) & 0x7FFF);
        nonfinite |= (int16_t)(a >= 0x7F80);
        a = a > 0x7F80 ? 0 : a;
        m = a > m ? a : m;
    }
    *bad = (uint32_t)nonfinite;
    return (uint32_t)m << 16;
}

/* The same for a row already converted to f32. */
NVF_ROW_CLONES static uint32_t row_amax_f32(const float *x, int64_t n, uint32_t *bad) {
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

static void *amax_rows_worker(void *arg) {
    row_job *j = arg;
    const nvf_quant_source *s = j->src;
    uint32_t m = 0;
    j->bad_row = -1;
    for (int64_t r = j->row0; r < j->row1; r++) {
        uint32_t rm, any_bad;
        if (s->dtype == NVF_DTYPE_BF16) {
            const uint8_t *p = (const uint8_t *)s->data + (uint64_t)r * (uint64_t)s->cols * 2;
            rm = row_amax_bf16(p, s->cols, &any_bad);
            if (any_bad && !j->allow_nonfinite)
                nvf_quant_source_load_row(j->buf, s, r);
        } else {
            nvf_quant_source_load_row(j->buf, s, r);
            rm = row_amax_f32(j->buf, s->cols, &any_bad);
        }
        m = rm > m ? rm : m;
        if (any_bad && !j->allow_nonfinite) {
            for (int64_t i = 0; i < s->cols; i++) {
                if (!isfinite(j->buf[i])) {
                    j->bad_row = r;
                    j->bad_col = i;
                    j->bad_value = j->buf[i];
                    break;
                }
            }
            break;
        }
    }
    j->amax_bits = m;
    return NULL;
}

static int threads_resolve(int threads, int64_t rows) {
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)(n < 1024 ? n : 1024) : 1;
    }
    if ((int64_t)threads > rows)
        threads = rows > 0 ? (int)rows : 1;
    return threads;
}

/* Split the rows of `s` over `threads` jobs (the caller fills the per-call fields) and run
 * `fn` on each, the first in the calling thread. */
static int rows_run(row_job *jobs, int threads, const nvf_quant_source *s, void *(*fn)(void *)) {
    int rc = 0, started = 0;
    pthread_t *tid = NULL;
    for (int t = 0; t < threads; t++) {
        jobs[t].src = s;
        jobs[t].row0 = s->rows * t / threads;
        jobs[t].row1 = s->rows * (t + 1) / threads;
        jobs[t].buf = malloc((size_t)s->cols * sizeof(float));
        if (!jobs[t].buf) {
            rc = nvf_error_set(NVF_E_NOMEM, "out of memory for a row of %lld values",
                               (long long)s->cols);
            goto done;
        }
    }
    if (threads > 1) {
        tid = calloc((size_t)threads, sizeof *tid);
        if (!tid) {
            rc = nvf_error_set(NVF_E_NOMEM, "out of memory for %d threads", threads);
            goto done;
        }
    }
    for (started = 1; started < threads; started++) {
        if (pthread_create(&tid[started], NULL, fn, &jobs[started]) != 0)
            break; /* the calling thread takes over the jobs that got no thread */
    }
    fn(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (t < started)
            pthread_join(tid[t], NULL);
        else
            fn(&jobs[t]);
    }
done:
    for (int t = 0; t < threads; t++)
        free(jobs[t].buf);
    free(tid);
    return rc;
}

int nvf_quant_amax_ref(float *out, const nvf_quant_source *s, int allow_nonfinite, int threads,
                       const char *name) {
    threads = threads_resolve(threads, s->rows);
    row_job *jobs = calloc((size_t)threads, sizeof *jobs);
    if (!jobs)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for %d threads", threads);
    for (int t = 0; t < threads; t++)
        jobs[t].allow_nonfinite = allow_nonfinite;
    int rc = rows_run(jobs, threads, s, amax_rows_worker);
    if (rc < 0)
        goto done;
    uint32_t m = 0;
    for (int t = 0; t < threads; t++) {
        if (jobs[t].bad_row >= 0) {
            rc = nvf_error_set(NVF_E_NONFINITE,
                               "tensor '%s': non-finite value %g at index [%lld, %lld] (use "
                               "--allow-nonfinite to pass such values through)",
                               name, (double)jobs[t].bad_value, (long long)jobs[t].bad_row,
                               (long long)jobs[t].bad_col);
            goto done;
        }
        m = jobs[t].amax_bits > m ? jobs[t].amax_bits : m;
    }
    *out = nvf_f32_from_bits(m);
done:
    free(jobs);
    return rc;
}

int nvf_quant_source_ref(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                         const nvf_quant_params *p, int threads) {
    quant_consts k = consts_make(gs, p);
    threads = threads_resolve(threads, s->rows);
    row_job *jobs = calloc((size_t)threads, sizeof *jobs);
    if (!jobs)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for %d threads", threads);
    for (int t = 0; t < threads; t++) {
        jobs[t].k = &k;
        jobs[t].packed = packed;
        jobs[t].scales = scales;
    }
    int rc = rows_run(jobs, threads, s, quant_rows_worker);
    free(jobs);
    return rc;
}

int nvf_quant_rows_ref(uint8_t *packed, uint8_t *scales, const float *x, int64_t rows, int64_t cols,
                       float gs, const nvf_quant_params *p, int threads) {
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = x, .rows = rows, .cols = cols};
    int rc = nvf_quant_source_check(&s, "(f32 rows)");
    if (rc < 0)
        return rc;
    return nvf_quant_source_ref(packed, scales, &s, gs, p, threads);
}

void nvf_quant_dequant_row_ref(float *out, const uint8_t *packed, const uint8_t *scales,
                               int64_t cols, float scale_2) {
    for (int64_t i = 0; i < cols; i++) {
        float sf = nvf_e4m3_to_f32(scales[i / NVF_BLOCK]);
        float v = nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, i)) * sf;
        out[i] = v * scale_2;
    }
}
