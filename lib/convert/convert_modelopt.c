/*
 * The target `modelopt` (SPEC section 5): a ModelOpt NVFP4 checkpoint as vLLM, SGLang and
 * TensorRT-LLM load it. A quantized linear X becomes, in this order:
 *   1. X.weight         U8 [out, in/2]: two E2M1 codes per byte, low nibble first;
 *   2. X.weight_scale   F8_E4M3 [out, in/16]: one block scale per 16 values;
 *   3. X.weight_scale_2 F32 []: the decode scale (the global scale's reciprocal; ModelOpt's
 *      arithmetic: its sf2);
 *   4. X.input_scale    F32 []: from --input-amax, else 1.0.
 * A fused gate_up member is written as two linears (gate: rows [0, I), up: rows [I, 2I)).
 * Metadata: hf_quant_config.json and config.json (convert_meta.c).
 */
#include "convert_internal.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <string.h>

static int modelopt_plan(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    int rc = cv_plan_build(out, ck, opt);
    if (rc == NVF_OK)
        rc = cv_plan_input_scales(*out, opt->input_amax_path);
    return rc;
}

static uint8_t *put_f32(uint8_t *p, float v) {
    uint32_t b = nvf_f32_bits(v);
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(b >> (8 * k));
    return p + 4;
}

static uint8_t *put_linear(uint8_t *p, const uint8_t *packed, const uint8_t *scales, int64_t rows,
                           int64_t cols, float scale_2, float input_scale) {
    size_t pb = (size_t)(rows * cols / 2), sb = (size_t)(rows * cols / NVF_BLOCK);
    memcpy(p, packed, pb);
    memcpy(p + pb, scales, sb);
    p = put_f32(p + pb + sb, scale_2);
    return put_f32(p, input_scale);
}

static int modelopt_pack_job(nvf_backend *b, uint8_t *buf, const cv_job *j, uint8_t *const *packed,
                             uint8_t *const *scales, float scale_2) {
    (void)b; /* linear scales: nothing to lay out */
    uint8_t *p = buf;
    for (size_t k = 0; k < j->n_members; k++) {
        const cv_member *m = &j->members[k];
        int64_t rows = m->src.rows, cols = m->src.cols;
        if (m->split) {
            size_t pb = (size_t)(rows * cols / 2), sb = (size_t)(rows * cols / NVF_BLOCK);
            p = put_linear(p, packed[k], scales[k], rows / 2, cols, scale_2, j->input_scale);
            p = put_linear(p, packed[k] + pb / 2, scales[k] + sb / 2, rows / 2, cols, scale_2,
                           j->input_scale);
        } else {
            p = put_linear(p, packed[k], scales[k], rows, cols, scale_2, j->input_scale);
        }
    }
    return NVF_OK;
}

static cJSON *modelopt_manifest_target(const cv_plan *p, const nvf_recipe *r) {
    (void)p;
    (void)r;
    cJSON *t = cJSON_CreateObject();
    if (t && (!cJSON_AddStringToObject(t, "format", "modelopt") ||
              !cJSON_AddNullToObject(t, "layout"))) {
        cJSON_Delete(t);
        return NULL;
    }
    return t;
}

static int modelopt_write_metadata(const cv_finish_args *a, nvf_manifest *m) {
    int rc = cv_finish_write_json(a, m, "hf_quant_config.json",
                                  cv_meta_hf_quant_config(a->plan, a->mixed));
    if (rc == NVF_OK)
        rc = cv_finish_write_json(a, m, "config.json",
                                  cv_meta_config(a->plan, a->source_config, a->mixed));
    return rc;
}

const cv_target cv_target_modelopt = {
    .name = "modelopt",
    .plan = modelopt_plan,
    .pack_job = modelopt_pack_job,
    .manifest_target = modelopt_manifest_target,
    .write_metadata = modelopt_write_metadata,
};
