/* The CPU backend: the reference implementations of lib/quant (SPEC section 4). */
#include "backend/backend_internal.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <stdlib.h>

static int cpu_amax(nvf_backend *b, float *out, const nvf_quant_source *s, int allow_nonfinite,
                    const char *name) {
    return nvf_quant_amax_ref(out, s, allow_nonfinite, b->threads, name);
}

static int cpu_quantize(nvf_backend *b, uint8_t *packed, uint8_t *scales, const nvf_quant_source *s,
                        float gs, const nvf_quant_params *p) {
    return nvf_quant_source_ref(packed, scales, s, gs, p, b->threads);
}

int nvf_backend_cpu_dequant_bf16(nvf_backend *b, uint8_t *out, const nvf_quant_source *s,
                                 int check_finite, const char *name) {
    (void)b;
    float *row = malloc((size_t)(s->cols > 0 ? s->cols : 1) * sizeof *row);
    if (!row)
        return nvf_error_set(NVF_E_NOMEM, "no memory to dequantize '%s'", name);
    uint8_t *p = out;
    for (int64_t r = 0; r < s->rows; r++) {
        nvf_quant_source_load_row(row, s, r);
        for (int64_t c = 0; c < s->cols; c++) {
            uint16_t h = nvf_f32_to_bf16_rn(row[c]);
            if (check_finite && (h & 0x7F80u) == 0x7F80u) {
                double v = (double)row[c];
                free(row);
                return nvf_error_set(NVF_E_NONFINITE,
                                     "tensor '%s': non-finite value %g at index [%lld, %lld] (use "
                                     "--allow-nonfinite to pass such values through)",
                                     name, v, (long long)r, (long long)c);
            }
            *p++ = (uint8_t)h;
            *p++ = (uint8_t)(h >> 8);
        }
    }
    free(row);
    return NVF_OK;
}

const nvf_backend_ops nvf_backend_cpu_ops = {
    .name = "cpu",
    .amax = cpu_amax,
    .quantize = cpu_quantize,
    .dequant_bf16 = nvf_backend_cpu_dequant_bf16,
};
