/*
 * The targets `prepared-w4a16` and `prepared-w4a4` (SPEC section 5): kernel-ready shards for
 * FlashInfer's CuTe-DSL NVFP4 MoE and dense mm_bf16_fp4, layout "flashinfer-cutedsl-nvfp4-v1".
 * The plan is convert_prepared_plan.c's. A job's buffer is its pieces, in this order:
 *   1. w13 job (one expert's gate and up, one global scale): the expert's w13_weight rows
 *      [2I, H/2] (prepared row r holds row nvf_w13_source_row(r) of up or gate), its scales
 *      permuted the same way and laid out (nvf_layout_offset; padding 0), alpha F32
 *      (W4A4: then its input_scale F32);
 *   2. w2 job: the expert's down weight [H, I/2], its scales laid out, alpha (and, on the first
 *      w2 job of a layer-rank with W4A4, fc2_input_scale F32);
 *   3. dense job: per linear X.weight, X.weight_scale laid out, X.alpha (W4A4: X.input_scale).
 * alpha is the weight decode scale scale_2 (weight_scale_2: RN(1/gs) under the default arithmetic)
 * (W4A16), or RN(input_scale * scale_2) (W4A4); for stored NVFP4 (convert_nvfp4src.c) the stored
 * decode scale takes its place.
 * Metadata: each rank's config.json with quantization_config {"quant_method":
 * "nvfp4tool-prepared", ...}; no hf_quant_config.json (loaders would take it for ModelOpt).
 */
#include "convert_internal.h"

#include "io/json_build.h"
#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREPARED_LAYOUT "flashinfer-cutedsl-nvfp4-v1"

static uint8_t *put_f32(uint8_t *p, float v) {
    uint32_t b = nvf_f32_bits(v);
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(b >> (8 * k));
    return p + 4;
}

/* Scales [rows, kc] (row-major) into layout `l`, padding 0, on backend `b` (the CPU or the GPU
 * lays them out, the same bytes). */
static int put_scales(nvf_backend *b, uint8_t **p, nvf_layout l, const uint8_t *scales,
                      int64_t rows, int64_t kc) {
    int rc = nvf_backend_layout(b, *p, l, scales, NVF_LAYOUT_LINEAR, rows, kc, 1);
    *p += nvf_layout_bytes(l, rows, kc);
    return rc;
}

/* A job of stored NVFP4 (j->decode > 0) keeps its decode scale. */
static float alpha_of(const cv_job *j, float scale_2, int w4a4) {
    float ws2 = j->decode > 0.0f ? j->decode : scale_2;
    return w4a4 ? j->input_scale * ws2 : ws2;
}

/* One linear of rows x cols: weight, laid-out scales, alpha (and the input scale when
 * `input_too`: a W4A4 dense linear's). */
static int put_dense(nvf_backend *b, uint8_t **pp, const cv_job *j, const uint8_t *packed,
                     const uint8_t *scales, int64_t rows, int64_t cols, float scale_2, int w4a4,
                     int input_too) {
    size_t pb = (size_t)(rows * cols / 2);
    memcpy(*pp, packed, pb);
    *pp += pb;
    int rc = put_scales(b, pp, (nvf_layout)j->layout, scales, rows, cols / NVF_BLOCK);
    *pp = put_f32(*pp, alpha_of(j, scale_2, w4a4));
    if (input_too)
        *pp = put_f32(*pp, j->input_scale);
    return rc;
}

/*
 * The w13 rows of one expert: the gate and up matrices [I, H] are either two members or the two
 * halves of one split member (gate rows first). Row r of the output is nvf_w13_source_row(r);
 * the scale rows are permuted the same way (linear), then laid out on the backend.
 */
static int put_w13(nvf_backend *b, uint8_t *p, const cv_job *j, uint8_t *const *packed,
                   uint8_t *const *scales, float scale_2, int w4a4) {
    const cv_member *m0 = &j->members[0];
    int split = m0->split;
    int64_t I = split ? m0->src.rows / 2 : m0->src.rows, H = m0->src.cols;
    int64_t kc = H / NVF_BLOCK, rb = H / 2;
    /* indexed by NVF_PROJ_GATE (0), NVF_PROJ_UP (1) */
    const uint8_t *wp[2] = {packed[0], packed[0]}, *sp[2] = {scales[0], scales[0]};
    if (split) {
        wp[0] = packed[0];
        wp[1] = packed[0] + I * rb;
        sp[0] = scales[0];
        sp[1] = scales[0] + I * kc;
    } else {
        for (size_t k = 0; k < j->n_members && k < 2; k++) {
            int pr = j->members[k].proj == NVF_PROJ_UP ? 1 : 0;
            wp[pr] = packed[k];
            sp[pr] = scales[k];
        }
    }
    uint8_t *lin = malloc((size_t)(2 * I * kc) + 1);
    if (!lin)
        return nvf_error_set(NVF_E_NOMEM, "no memory to lay out '%s'", m0->module[0]);
    for (int64_t r = 0; r < 2 * I; r++) {
        int proj;
        int64_t row = nvf_w13_source_row(r, &proj);
        memcpy(p + r * rb, wp[proj] + row * rb, (size_t)rb);
        memcpy(lin + r * kc, sp[proj] + row * kc, (size_t)kc);
    }
    p += 2 * I * rb;
    int rc = put_scales(b, &p, (nvf_layout)j->layout, lin, 2 * I, kc);
    free(lin);
    p = put_f32(p, alpha_of(j, scale_2, w4a4));
    if (w4a4)
        put_f32(p, j->input_scale);
    return rc;
}

static int prepared_pack(nvf_backend *b, uint8_t *buf, const cv_job *j, uint8_t *const *packed,
                         uint8_t *const *scales, float scale_2, int w4a4) {
    uint8_t *p = buf;
    if (j->prep == CV_PREP_W13)
        return put_w13(b, p, j, packed, scales, scale_2, w4a4);
    if (j->prep == CV_PREP_W2) {
        const cv_member *m = &j->members[0];
        int rc =
            put_dense(b, &p, j, packed[0], scales[0], m->src.rows, m->src.cols, scale_2, w4a4, 0);
        if (j->fc2_span > 0)
            put_f32(p, j->fc2_input_scale);
        return rc;
    }
    int rc = NVF_OK;
    for (size_t k = 0; k < j->n_members && rc == NVF_OK; k++) {
        const cv_member *m = &j->members[k];
        int64_t rows = m->src.rows, cols = m->src.cols;
        if (m->split) {
            size_t pb = (size_t)(rows * cols / 2), sb = (size_t)(rows * cols / NVF_BLOCK);
            rc = put_dense(b, &p, j, packed[k], scales[k], rows / 2, cols, scale_2, w4a4, w4a4);
            if (rc == NVF_OK)
                rc = put_dense(b, &p, j, packed[k] + pb / 2, scales[k] + sb / 2, rows / 2, cols,
                               scale_2, w4a4, w4a4);
        } else {
            rc = put_dense(b, &p, j, packed[k], scales[k], rows, cols, scale_2, w4a4, w4a4);
        }
    }
    return rc;
}

static int pack_w4a16(nvf_backend *b, uint8_t *buf, const cv_job *j, uint8_t *const *packed,
                      uint8_t *const *scales, float scale_2) {
    return prepared_pack(b, buf, j, packed, scales, scale_2, 0);
}

static int pack_w4a4(nvf_backend *b, uint8_t *buf, const cv_job *j, uint8_t *const *packed,
                     uint8_t *const *scales, float scale_2) {
    return prepared_pack(b, buf, j, packed, scales, scale_2, 1);
}

static const char *precision_of(const nvf_recipe *r) {
    return r->target == NVF_TARGET_FORMAT_PREPARED_W4A4 ? "w4a4" : "w4a16";
}

static const char *scale_layout_of(const nvf_recipe *r) {
    return r->scale_layout == NVF_SCALE_LAYOUT_8X4 ? "8x4" : "128x4";
}

/* The directory of rank r ("." without ranks). */
static void rank_dir(char *buf, size_t cap, const cv_plan *p, int r) {
    if (p->ep > 1)
        snprintf(buf, cap, "rank-%05d-of-%05d", r, p->ep);
    else
        snprintf(buf, cap, ".");
}

static cJSON *experts_range(nvf_jb *b, const cv_plan *p, int r) {
    cJSON *a = nvf_jb_take(b, cJSON_CreateArray());
    int64_t first = p->ep_range ? p->ep_range[r][0] : 0,
            count = p->ep_range ? p->ep_range[r][1] : 0;
    nvf_jb_push(b, a, cJSON_CreateNumber((double)first));
    nvf_jb_push(b, a, cJSON_CreateNumber((double)count));
    return a;
}

/* {"format", "layout", "scale_layout", "precision", "ep": {"size", "ranks": [{"rank", "dir",
 * "experts": [first, count]}]}} */
static cJSON *prepared_manifest_target(const cv_plan *p, const nvf_recipe *r) {
    nvf_jb b = {0};
    cJSON *t = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_str(&b, t, "format",
               r->target == NVF_TARGET_FORMAT_PREPARED_W4A4 ? "prepared-w4a4" : "prepared-w4a16");
    nvf_jb_str(&b, t, "layout", PREPARED_LAYOUT);
    nvf_jb_str(&b, t, "scale_layout", scale_layout_of(r));
    nvf_jb_str(&b, t, "precision", precision_of(r));
    cJSON *ep = nvf_jb_obj(&b, t, "ep");
    nvf_jb_num(&b, ep, "size", p->ep);
    cJSON *ranks = nvf_jb_arr(&b, ep, "ranks");
    for (int k = 0; k < p->ep; k++) {
        char dir[32];
        rank_dir(dir, sizeof dir, p, k);
        cJSON *o = nvf_jb_take(&b, cJSON_CreateObject());
        nvf_jb_num(&b, o, "rank", k);
        nvf_jb_str(&b, o, "dir", dir);
        nvf_jb_put(&b, o, "experts", experts_range(&b, p, k));
        nvf_jb_push(&b, ranks, o);
    }
    if (p->requantized)
        nvf_jb_put(&b, t, "requantized_experts",
                   nvf_jb_take(&b, cJSON_Duplicate(p->requantized, 1)));
    return nvf_jb_done(&b, t);
}

/* config.json's quantization_config of rank r. */
static cJSON *quant_config(const cv_plan *p, const nvf_recipe *r, int rank) {
    nvf_jb b = {0};
    cJSON *q = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_str(&b, q, "quant_method", "nvfp4tool-prepared");
    nvf_jb_str(&b, q, "layout", PREPARED_LAYOUT);
    nvf_jb_str(&b, q, "precision", precision_of(r));
    nvf_jb_str(&b, q, "scale_layout", scale_layout_of(r));
    nvf_jb_num(&b, q, "group_size", 16);
    nvf_jb_num(&b, q, "ep_size", p->ep);
    nvf_jb_num(&b, q, "ep_rank", rank);
    nvf_jb_put(&b, q, "expert_range", experts_range(&b, p, rank));
    nvf_jb_put(&b, q, "ignore", nvf_jb_take(&b, cJSON_Duplicate(p->exclude_modules, 1)));
    cJSON *prod = nvf_jb_obj(&b, q, "producer");
    nvf_jb_str(&b, prod, "name", "nvfp4tool");
    nvf_jb_str(&b, prod, "version", nvf_version());
    return nvf_jb_done(&b, q);
}

static int prepared_write_metadata(const cv_finish_args *a, nvf_manifest *m) {
    const cv_plan *p = a->plan;
    /* The record of the exact inverse first (nvfp4-inverse.json, at the top: all ranks). */
    cJSON *record = cv_prepared_record(a);
    int rc = record ? cv_finish_write_json(a, m, CV_INVERSE_NAME, record) : nvf_error_code();
    for (int k = 0; k < p->ep && rc == NVF_OK; k++) {
        char name[64];
        if (p->ep > 1)
            snprintf(name, sizeof name, "rank-%05d-of-%05d/config.json", k, p->ep);
        else
            snprintf(name, sizeof name, "config.json");
        rc = cv_finish_write_json(
            a, m, name,
            cv_meta_config_with(a->source_config, a->mixed, quant_config(p, a->recipe, k)));
    }
    return rc;
}

static int plan_w4a16(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    return cv_prepared_plan(out, ck, opt, 0);
}

static int plan_w4a4(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    return cv_prepared_plan(out, ck, opt, 1);
}

const cv_target cv_target_prepared_w4a16 = {
    .name = "prepared-w4a16",
    .plan = plan_w4a16,
    .pack_job = pack_w4a16,
    .manifest_target = prepared_manifest_target,
    .write_metadata = prepared_write_metadata,
};

const cv_target cv_target_prepared_w4a4 = {
    .name = "prepared-w4a4",
    .plan = plan_w4a4,
    .pack_job = pack_w4a4,
    .manifest_target = prepared_manifest_target,
    .write_metadata = prepared_write_metadata,
};
