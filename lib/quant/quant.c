/*
 * NVFP4 quantization reference (SPEC section 4), see nvfp4/quant.h: the per-tensor numbers
 * (parameters, global and decode scales), one block, and the sources (checks and row loads).
 * The block arithmetic itself is nvfp4/quant_block.h, shared with the CUDA kernels; the row
 * path is quant_rows.c and the pool jobs over rows quant_run.c.
 */
#include "quant_internal.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <string.h>

nvf_quant_params nvf_quant_params_default(void) {
    nvf_quant_params p = {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED,
                          NVF_QUANT_E4M3_MAX_256};
    return p;
}

float nvf_quant_global_scale(float amax, int32_t e4m3_max) {
    return nvf_qb_global_scale(amax, e4m3_max);
}

float nvf_quant_decode_scale(float gs) {
    return nvf_qb_decode_scale(gs);
}

float nvf_quant_group_scale(float amax, const nvf_quant_params *p) {
    return nvf_qb_group_scale(amax, p);
}

float nvf_quant_group_decode(float g, const nvf_quant_params *p) {
    return nvf_qb_group_decode(g, p);
}

float nvf_quant_group_of_decode(float dec, const nvf_quant_params *p) {
    return nvf_qb_group_of_decode(dec, p);
}

int nvf_quant_group_fallback(float g, const nvf_quant_params *p) {
    return nvf_qb_group_fallback(g, p);
}

void nvf_quant_block_ref(uint8_t *packed, uint8_t *scale, const float *x, float gs,
                         const nvf_quant_params *p) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, p->method, p->error, p->domain);
    nvf_qb_quantize(packed, scale, x, &k);
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
            out[i] = nvf_bf16_to_f32(quant_load_u16(p + 2 * i));
        return;
    }
    case NVF_DTYPE_F16: {
        const uint8_t *p = base + (uint64_t)row * (uint64_t)n * 2;
        for (int64_t i = 0; i < n; i++)
            out[i] = nvf_f16_to_f32(quant_load_u16(p + 2 * i));
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
            float m = nvf_quant_source_scale(s, srow + (uint64_t)(c0 / s->block_cols));
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

void nvf_quant_dequant_row_ref(float *out, const uint8_t *packed, const uint8_t *scales,
                               int64_t cols, float scale_2) {
    for (int64_t i = 0; i < cols; i++) {
        float sf = nvf_e4m3_to_f32(scales[i / NVF_BLOCK]);
        float v = nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, i)) * sf;
        out[i] = v * scale_2;
    }
}
