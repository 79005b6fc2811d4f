/*
 * Serialized NVFP4 in (SPEC section 5): the routed experts of a ModelOpt or compressed-tensors
 * NVFP4 checkpoint laid out by a prepared target without re-quantizing. A CV_JOB_NVFP4 job has
 * the members of a prepared expert job (gate + up, a fused gate_up slice, or down); its
 * "compute" reads the stored packed values and linear block scales through the validated view
 * (nvf_ckpt_nvfp4_view) and hands them to the target's pack_job, which interleaves and lays
 * them out as it does for freshly quantized bytes. alpha comes from the stored decode scale
 * (j->decode), the input scale from the checkpoint's (the largest of the members').
 *
 * When an expert's gate and up carry different decode scales (weight_scale_2), the prepared
 * w13 has one alpha: the shared scale is the larger one, and the smaller-scaled member is
 * re-quantized onto it (nvf_quant_requant_ref: dequantize exactly, quantize with the recipe).
 * Each such member is logged, counted (summary "experts_requantized") and listed in the plan's
 * `requantized` (the manifest target's "requantized_experts"); with --strict it is an error
 * (NVF_E_VERIFY, exit 3) found at plan time, before anything is written.
 */
#include "convert_internal.h"

#include "nvfp4/ckpt_nvfp4.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A ModelOpt linear's weight_scale_2 and input_scale tensors as stored (shape [] or [1]; the
 * input scale may be absent), for the exact inverse (nvfp4-inverse.json). */
static void scalar_shapes(cv_member *m, const nvf_ckpt *ck) {
    static const char *const suffix[2] = {".weight_scale_2", ".input_scale"};
    for (int k = 0; k < 2; k++) {
        char name[1024];
        snprintf(name, sizeof name, "%s%s", m->module[0], suffix[k]);
        const nvf_ckpt_tensor *t = nvf_ckpt_find(ck, name);
        m->scalar_ndim[k] = t ? t->st->ndim : -1;
    }
}

int cv_nvfp4_member(cv_member *m, const nvf_ckpt *ck, size_t ti, int64_t e, int proj,
                    int fused_gate_up) {
    const nvf_st_tensor *st = ck->tensors[ti].st;
    nvf_nvfp4_view v;
    int rc = nvf_ckpt_nvfp4_view(&v, ck, ti, e);
    if (rc != NVF_OK)
        return rc;
    m->tensor = ti;
    m->expert = e;
    m->split = fused_gate_up;
    m->proj = fused_gate_up ? NVF_PROJ_GATE_UP : proj;
    memset(&m->src, 0, sizeof m->src);
    /* F4: the packed values (no prefetch or release sizing by a whole-byte dtype). */
    m->src.dtype = NVF_DTYPE_F4;
    m->src.data = v.packed;
    m->src.rows = v.rows;
    m->src.cols = v.cols;
    m->decode = v.decode_scale;
    m->input = v.input_scale;
    m->scalar_ndim[0] = m->scalar_ndim[1] = 0;
    if (e >= 0) {
        m->module[0] = nvf_ckpt_fused_module(st->name, e, fused_gate_up ? NVF_PROJ_GATE : proj);
        m->module[1] = fused_gate_up ? nvf_ckpt_fused_module(st->name, e, NVF_PROJ_UP) : NULL;
    } else {
        m->module[0] = nvf_ckpt_module_of(st->name);
    }
    if (!m->module[0] || (fused_gate_up && !m->module[1]))
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    if (e < 0 && v.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT)
        scalar_shapes(m, ck);
    return NVF_OK;
}

static int note_requant(cv_plan *p, const char *layer, int64_t expert, const char *member,
                        float from, float to) {
    if (!p->requantized && !(p->requantized = cJSON_CreateArray()))
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(p->requantized, o) ||
        !cJSON_AddStringToObject(o, "layer", layer) ||
        !cJSON_AddNumberToObject(o, "expert", (double)expert) ||
        !cJSON_AddStringToObject(o, "member", member) ||
        !cJSON_AddNumberToObject(o, "from", (double)from) ||
        !cJSON_AddNumberToObject(o, "to", (double)to))
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    p->counts.experts_requantized++;
    return NVF_OK;
}

int cv_nvfp4_job_scales(cv_job *j, cv_plan *p, const nvf_ckpt *ck, const char *layer,
                        int64_t expert, int strict, int pass) {
    float shared = 0.0f, in = 0.0f;
    for (size_t k = 0; k < j->n_members; k++) {
        const cv_member *m = &j->members[k];
        nvf_nvfp4_view v;
        int rc = nvf_ckpt_nvfp4_view(&v, ck, m->tensor, m->expert);
        if (rc != NVF_OK)
            return rc;
        if (m->decode > shared)
            shared = m->decode;
        if (v.input_scale > in)
            in = v.input_scale;
    }
    j->decode = shared;
    j->input_scale = in;
    j->requant = 0;
    if (j->n_members != 2 || j->members[0].decode == j->members[1].decode)
        return NVF_OK;
    size_t low = j->members[0].decode < j->members[1].decode ? 0 : 1;
    const cv_member *m = &j->members[low];
    const char *which = m->proj == NVF_PROJ_UP ? "up" : "gate";
    if (strict)
        return nvf_error_set(NVF_E_VERIFY,
                             "%s: expert %" PRId64 " has gate and up with different "
                             "weight_scale_2 (%s '%s' %.9g, the other %.9g): --strict refuses to "
                             "re-quantize it onto the shared scale",
                             layer, expert, which, ck->tensors[m->tensor].st->name, m->decode,
                             shared);
    j->requant = (int)low + 1;
    /* Each expert is planned in one pass only (its rank's). */
    (void)pass;
    nvf_log(NVF_LOG_WARN,
            "%s: expert %" PRId64 ": %s weight_scale_2 %.9g differs from %s's %.9g; "
            "re-quantized onto the shared scale %.9g",
            layer, expert, which, m->decode, low ? "gate" : "up", shared, shared);
    return note_requant(p, layer, expert, which, m->decode, shared);
}

int cv_compute_nvfp4(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j) {
    uint8_t *packed[CV_MAX_MEMBERS] = {NULL}, *scales[CV_MAX_MEMBERS] = {NULL};
    uint8_t *own = NULL;
    int rc = NVF_OK;
    for (size_t k = 0; k < j->n_members && rc == NVF_OK; k++) {
        const cv_member *m = &j->members[k];
        nvf_nvfp4_view v;
        rc = nvf_ckpt_nvfp4_view(&v, r->ck, m->tensor, m->expert);
        if (rc != NVF_OK)
            break;
        packed[k] = (uint8_t *)(uintptr_t)v.packed;
        scales[k] = (uint8_t *)(uintptr_t)v.scales;
        if (j->requant != (int)k + 1)
            continue;
        size_t pb = (size_t)(v.rows * v.cols / 2), sb = (size_t)(v.rows * v.cols / NVF_BLOCK);
        own = malloc(pb + sb + 1);
        if (!own) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory to re-quantize '%s'", v.name);
            break;
        }
        rc = nvf_quant_requant_ref(own, own + pb, v.packed, v.scales, v.rows, v.cols, m->decode,
                                   j->decode, &r->opt->recipe->quant);
        if (rc != NVF_OK)
            nvf_error_prefix("'%s': re-quantizing '%s'", v.file, v.name);
        packed[k] = own;
        scales[k] = own + pb;
    }
    if (rc == NVF_OK)
        rc = r->target->pack_job(b, buf, j, packed, scales, 0.0f);
    free(own);
    return rc;
}
