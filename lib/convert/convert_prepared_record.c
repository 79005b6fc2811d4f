/*
 * nvfp4-inverse.json: what a prepared checkpoint keeps so that `convert PREPARED DST --target
 * modelopt` (convert_unprepare.c) restores the ModelOpt tensors of its source exactly. The
 * prepared tensors carry the weights and block scales exactly (interleave and layout are
 * bijections) but not everything else:
 *   - the source's module names of each expert's gate, up and down (Qwen/DeepSeek
 *     "mlp.experts.{e}.gate_proj", Mixtral "block_sparse_moe.experts.{e}.w1", a fused tensor's
 *     per-expert modules), and of each converted dense linear;
 *   - each linear's weight_scale_2 and input_scale as four exact bytes (hex of the F32 bits):
 *     W4A4's alpha is RN(input_scale * weight_scale_2), W4A16 keeps no input scale, and an
 *     NVFP4 source's gate and up may carry input scales of their own;
 *   - the shapes the source stored those scalars in ([] or [1]; -1: absent);
 *   - the source's quantization documents (config.json's quantization_config and
 *     hf_quant_config.json), so that the restored source converts to the same metadata;
 *   - the jobs of the direct `convert SRC --target modelopt` plan with the same recipe (each the
 *     list of its output tensor names, in plan order: cv_plan_modelopt_jobs), so that the
 *     inverse writes the same tensors in the same order into the same shard files.
 * Document (record_version 2; version 1, without "modelopt_jobs", is still read):
 *   {"record_version": 1, "format", "scale_layout", "ep", "source_format",
 *    "source_quantization_config": {...} | null, "source_hf_quant_config": {...} | null,
 *    "layers": [{"prefix": "P" (the prepared "P.w13_weight"'s P), "experts": [{"gate": M,
 *    "up": M, "down": M}, ... all E experts of the layer in order, over every rank]}],
 *    "dense": [M, ...], "modelopt_jobs": [["NAME", ...], ...] | null (a compressed-tensors
 *    source: the inverse writes ModelOpt tensors, not the direct conversion's)}
 *   M = {"module", "weight_scale_2": "0x%08x" | null (unknown: only in records of
 *   earlier versions, whose resumed shards lost it; a resumed shard now takes it back from the
 *   journal, a merge from the part records; alpha then gives it where that is exact),
 * "input_scale": "0x%08x", "weight_scale_2_ndim", "input_scale_ndim", "requantized": true (only
 * when the member was re-quantized onto its expert's shared scale: its source bytes are not
 * restorable)}.
 */
#include "convert_internal.h"

#include "io/json_build.h"
#include "nvfp4/format.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <string.h>

static const char *hex32(char buf[11], float v) {
    snprintf(buf, 11, "0x%08x", (unsigned)nvf_f32_bits(v));
    return buf;
}

/* M of `module` with the given scalars (ws2 <= 0: unknown, null). */
static cJSON *member_doc(nvf_jb *b, const char *module, float ws2, float input, const int ndim[2],
                         int requantized) {
    char h[11];
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_str(b, o, "module", module);
    if (ws2 > 0.0f)
        nvf_jb_str(b, o, "weight_scale_2", hex32(h, ws2));
    else
        nvf_jb_put(b, o, "weight_scale_2", nvf_jb_take(b, cJSON_CreateNull()));
    nvf_jb_str(b, o, "input_scale", hex32(h, input));
    nvf_jb_num(b, o, "weight_scale_2_ndim", ndim[0]);
    nvf_jb_num(b, o, "input_scale_ndim", ndim[1]);
    if (requantized)
        nvf_jb_put(b, o, "requantized", nvf_jb_take(b, cJSON_CreateTrue()));
    return o;
}

/* The weight_scale_2 of member k of job i: an NVFP4 source's stored one (the shared one when it
 * was re-quantized onto it), or the one this run computed (0: unknown). */
static float ws2_of(const cv_plan *p, size_t i, size_t k) {
    const cv_job *j = &p->jobs[i];
    if (j->kind == CV_JOB_NVFP4)
        return j->requant == (int)k + 1 ? j->decode : j->members[k].decode;
    return p->job_scale_2 ? p->job_scale_2[i] : 0.0f;
}

static float input_of(const cv_job *j, size_t k) {
    return j->kind == CV_JOB_NVFP4 ? j->members[k].input : j->input_scale;
}

/* The layer entry of prefix P (created with E null experts on first use). */
static cJSON *layer_of(nvf_jb *b, cJSON *layers, const char *P, int64_t E) {
    cJSON *l;
    cJSON_ArrayForEach(l, layers) {
        const cJSON *pre = cJSON_GetObjectItemCaseSensitive(l, "prefix");
        if (cJSON_IsString(pre) && strcmp(pre->valuestring, P) == 0)
            return l;
    }
    l = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_push(b, layers, l); /* freed on failure */
    if (b->failed)
        return NULL;
    nvf_jb_str(b, l, "prefix", P);
    cJSON *ex = nvf_jb_arr(b, l, "experts");
    for (int64_t e = 0; e < E; e++)
        nvf_jb_push(b, ex, nvf_jb_take(b, cJSON_CreateObject()));
    return l;
}

/* One expert job's members into its expert's entry. */
static void expert_job(nvf_jb *b, cJSON *layers, const cv_plan *p, size_t i) {
    const cv_job *j = &p->jobs[i];
    const cv_out *o = &p->outs[j->prep_out];
    size_t plen = strlen(o->name) - strlen(".w13_weight");
    char P[1024];
    snprintf(P, sizeof P, "%.*s", (int)(plen < sizeof P ? plen : sizeof P - 1), o->name);
    int64_t Er = o->shape[0], E = Er * p->ep;
    int64_t e = (int64_t)p->shards[j->shard].rank * Er + j->prep_slot;
    cJSON *layer = layer_of(b, layers, P, E);
    cJSON *x = layer
                   ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(layer, "experts"), (int)e)
                   : NULL;
    if (!x)
        return; /* out of memory: nvf_jb_done reports it */
    for (size_t k = 0; k < j->n_members; k++) {
        const cv_member *m = &j->members[k];
        for (int h = 0; h < (m->split ? 2 : 1); h++) {
            int proj = m->split ? (h == 0 ? NVF_PROJ_GATE : NVF_PROJ_UP) : m->proj;
            const char *key = proj == NVF_PROJ_DOWN ? "down" : proj == NVF_PROJ_UP ? "up" : "gate";
            nvf_jb_put(b, x, key,
                       member_doc(b, m->module[h], ws2_of(p, i, k), input_of(j, k), m->scalar_ndim,
                                  j->requant == (int)k + 1));
        }
    }
}

/* A dense job (rank 0's: the ranks repeat it) into "dense". */
static void dense_job(nvf_jb *b, cJSON *dense, const cv_plan *p, size_t i) {
    const cv_job *j = &p->jobs[i];
    for (size_t k = 0; k < j->n_members; k++) {
        const cv_member *m = &j->members[k];
        for (int h = 0; h < (m->split ? 2 : 1); h++)
            nvf_jb_push(
                b, dense,
                member_doc(b, m->module[h], ws2_of(p, i, k), input_of(j, k), m->scalar_ndim, 0));
    }
}

static cJSON *dup_or_null(nvf_jb *b, const cJSON *doc) {
    return nvf_jb_take(b, doc ? cJSON_Duplicate(doc, 1) : cJSON_CreateNull());
}

cJSON *cv_prepared_record(const cv_finish_args *a) {
    const cv_plan *p = a->plan;
    const nvf_recipe *r = a->recipe;
    nvf_jb b = {0};
    cJSON *doc = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_num(&b, doc, "record_version", 2);
    nvf_jb_str(&b, doc, "format", a->target->name);
    nvf_jb_str(&b, doc, "scale_layout", r->scale_layout == NVF_SCALE_LAYOUT_8X4 ? "8x4" : "128x4");
    nvf_jb_num(&b, doc, "ep", p->ep);
    nvf_jb_str(&b, doc, "source_format", a->source_format ? a->source_format : "unknown");
    const cJSON *qc =
        a->source_config ? cJSON_GetObjectItemCaseSensitive(a->source_config, "quantization_config")
                         : NULL;
    nvf_jb_put(&b, doc, "source_quantization_config", dup_or_null(&b, qc));
    nvf_jb_put(&b, doc, "source_hf_quant_config", dup_or_null(&b, a->source_hf_quant_config));
    nvf_jb_put(&b, doc, "modelopt_jobs", dup_or_null(&b, p->modelopt_jobs));
    cJSON *layers = nvf_jb_arr(&b, doc, "layers");
    cJSON *dense = nvf_jb_arr(&b, doc, "dense");
    for (size_t i = 0; i < p->n_jobs && doc && layers && dense; i++) {
        const cv_job *j = &p->jobs[i];
        if (j->prep == CV_PREP_W13 || j->prep == CV_PREP_W2)
            expert_job(&b, layers, p, i);
        else if (j->prep == CV_PREP_DENSE && p->shards[j->shard].rank == 0)
            dense_job(&b, dense, p, i);
    }
    return nvf_jb_done(&b, doc);
}
