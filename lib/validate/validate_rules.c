/*
 * The checks on an opened checkpoint (lib/ckpt's model: roles, companions, the expert map):
 *   1. the ModelOpt config rules (nvf_modelopt_check_config, lib/ckpt);
 *   2. every NVFP4 linear (ModelOpt or compressed-tensors) has its four tensors with dtypes U8 /
 *      F8_E4M3 / F32 / F32 and shapes weight [out, in/2], weight_scale [out, in/16], scalars
 *      (linear.*); compressed-tensors' input_global_scale is optional where no config group
 *      quantizes the input activations (W4A16 exports omit it), required where one does (W4A4);
 *   3. the members of a global-scale group (an expert's gate/up, an attention's q/k/v) share
 *      weight_scale_2 and input_scale (SPEC section 5; loaders keep one of them);
 *   4. every expert of every MoE layer is present with its three projections, each of the shape
 *      the config (hidden_size, moe_intermediate_size) and its siblings give (moe.*).
 */
#include "validate_internal.h"

#include "nvfp4/modelopt_rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 1024

static const char *file_of(const nvf_ckpt *ck, size_t ti, const char *prefix, char *buf,
                           size_t cap) {
    snprintf(buf, cap, "%s%s", prefix, ck->files[ck->tensors[ti].file].name);
    return buf;
}

static void shape_text(char *buf, size_t cap, const nvf_st_tensor *t) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int32_t d = 0; d < t->ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, d ? ", " : "", t->shape[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
}

/* Whether tensor i is an NVFP4 linear's weight: U8, or any weight with a decode scale. */
static int nvfp4_weight(const nvf_ckpt *ck, size_t i) {
    const nvf_ckpt_tensor *t = &ck->tensors[i];
    return t->is_weight && (t->st->dtype == NVF_DTYPE_U8 || t->scale_2 != NVF_CKPT_NONE);
}

/* Rule 2 for weight i. */
static int check_linear(vd_ctx *c, const nvf_ckpt *ck, size_t i, const char *prefix) {
    static const nvf_dtype want[4] = {NVF_DTYPE_U8, NVF_DTYPE_F8_E4M3, NVF_DTYPE_F32,
                                      NVF_DTYPE_F32};
    int ct = ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT;
    const nvf_ckpt_tensor *t = &ck->tensors[i];
    size_t idx[4] = {i, t->scale, t->scale_2, t->input_scale};
    char file[NAME_CAP], name[NAME_CAP], s1[160], s2[160];
    file_of(ck, i, prefix, file, sizeof file);
    int rc = NVF_OK;
    for (int k = 1; k < 4 && rc == NVF_OK; k++) {
        if (idx[k] != NVF_CKPT_NONE || (k == 3 && ct && !ck->quant.ct_input_activations))
            continue;
        rc = nvf_ckpt_companion_name(name, sizeof name, t->st->name, (nvf_companion)k, ct);
        if (rc == NVF_OK)
            rc = nvf_findings_add(c->out, "linear.missing-tensor", "error", file, name,
                                  "%s: NVFP4 linear '%s' has no '%s'%s", file, t->st->name, name,
                                  k == 3 ? " (loaders divide by the input scale)" : "");
    }
    for (int k = 0; k < 4 && rc == NVF_OK; k++) {
        if (idx[k] == NVF_CKPT_NONE || ck->tensors[idx[k]].st->dtype == want[k])
            continue;
        const nvf_st_tensor *s = ck->tensors[idx[k]].st;
        rc = nvf_findings_add(
            c->out, "linear.dtype", "error", file_of(ck, idx[k], prefix, name, sizeof name),
            s->name, "%s: tensor '%s' of NVFP4 linear '%s' is %s, expected %s", name, s->name,
            t->st->name, nvf_dtype_name(s->dtype), nvf_dtype_name(want[k]));
    }
    if (rc != NVF_OK || t->st->dtype != NVF_DTYPE_U8)
        return rc;
    const nvf_st_tensor *w = t->st;
    int fused = w->ndim == 3;
    int64_t n_e = fused ? w->shape[0] : 1;
    if (w->ndim != 2 && w->ndim != 3) {
        shape_text(s1, sizeof s1, w);
        return nvf_findings_add(c->out, "linear.shape", "error", file, w->name,
                                "%s: NVFP4 weight '%s' has shape %s, expected [out, in/2]", file,
                                w->name, s1);
    }
    if (idx[1] != NVF_CKPT_NONE) {
        const nvf_st_tensor *s = ck->tensors[idx[1]].st;
        int ok = s->ndim == w->ndim && (!fused || s->shape[0] == w->shape[0]) &&
                 s->shape[s->ndim - 2] == w->shape[w->ndim - 2] &&
                 s->shape[s->ndim - 1] * 8 == w->shape[w->ndim - 1];
        if (!ok) {
            shape_text(s1, sizeof s1, s);
            shape_text(s2, sizeof s2, w);
            rc = nvf_findings_add(c->out, "linear.shape", "error",
                                  file_of(ck, idx[1], prefix, name, sizeof name), s->name,
                                  "%s: weight_scale '%s' has shape %s; weight '%s' %s needs "
                                  "[out, in/16] (one E4M3 scale per 16 values)",
                                  name, s->name, s1, w->name, s2);
        }
    }
    for (int k = 2; k < 4 && rc == NVF_OK; k++) {
        if (idx[k] == NVF_CKPT_NONE)
            continue;
        const nvf_st_tensor *s = ck->tensors[idx[k]].st;
        if (s->numel == 1 || (fused && (int64_t)s->numel == n_e))
            continue;
        shape_text(s1, sizeof s1, s);
        rc = nvf_findings_add(c->out, "linear.shape", "error",
                              file_of(ck, idx[k], prefix, name, sizeof name), s->name,
                              "%s: '%s' has shape %s (%" PRIu64 " elements), expected a scalar",
                              name, s->name, s1, s->numel);
    }
    return rc;
}

/* A member of a global-scale group. */
typedef struct member {
    char key[NAME_CAP];
    int kind; /* nvf_ckpt_group */
    size_t weight;
    float s2, in;
    int has_in;
} member;

static int cmp_member(const void *a, const void *b) {
    const member *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->weight < y->weight ? -1 : x->weight > y->weight);
}

static int scalar_f32(const nvf_ckpt *ck, size_t ti, float *out) {
    if (ti == NVF_CKPT_NONE)
        return 0;
    const nvf_st_tensor *s = ck->tensors[ti].st;
    if (s->dtype != NVF_DTYPE_F32 || s->numel != 1 || !s->data)
        return 0;
    memcpy(out, s->data, 4);
    return 1;
}

/* Rule 3. */
static int check_groups(vd_ctx *c, const nvf_ckpt *ck, const char *prefix) {
    member *m = malloc((ck->n_tensors ? ck->n_tensors : 1) * sizeof *m);
    if (!m)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    size_t n = 0;
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        if (!nvfp4_weight(ck, i) || !scalar_f32(ck, t->scale_2, &m[n].s2))
            continue;
        int g = nvf_ckpt_group_of(m[n].key, sizeof m[n].key, t->st->name);
        if (g < 0)
            rc = g;
        if (g <= 0)
            continue;
        m[n].kind = g;
        m[n].weight = i;
        m[n].has_in = scalar_f32(ck, t->input_scale, &m[n].in);
        n++;
    }
    qsort(m, n, sizeof *m, cmp_member);
    char file[NAME_CAP];
    for (size_t i = 1; i < n && rc == NVF_OK; i++) {
        const member *a = &m[i - 1], *b = &m[i];
        if (strcmp(a->key, b->key) != 0)
            continue;
        /* b against the group's first member, found by walking back */
        const member *f = b;
        while (f > m && strcmp((f - 1)->key, b->key) == 0)
            f--;
        const nvf_ckpt_tensor *tf = &ck->tensors[f->weight], *tb = &ck->tensors[b->weight];
        int qkv = b->kind == NVF_GROUP_QKV;
        file_of(ck, tb->scale_2, prefix, file, sizeof file);
        if (f->s2 != b->s2)
            rc = nvf_findings_add(
                c->out, qkv ? "modelopt.qkv-scale-mismatch" : "modelopt.gate-up-scale-mismatch",
                "error", file, ck->tensors[tb->scale_2].st->name,
                "%s: '%s' is %.9g but '%s' is %.9g: %s share one weight_scale_2 (loaders keep "
                "one of them)",
                file, ck->tensors[tb->scale_2].st->name, (double)b->s2,
                ck->tensors[tf->scale_2].st->name, (double)f->s2, qkv ? "q/k/v" : "gate and up");
        if (rc == NVF_OK && f->has_in && b->has_in && f->in != b->in) {
            file_of(ck, tb->input_scale, prefix, file, sizeof file);
            rc = nvf_findings_add(c->out,
                                  qkv ? "modelopt.qkv-scale-mismatch"
                                      : "modelopt.gate-up-input-scale-mismatch",
                                  "error", file, ck->tensors[tb->input_scale].st->name,
                                  "%s: '%s' is %.9g but '%s' is %.9g: %s share one input_scale",
                                  file, ck->tensors[tb->input_scale].st->name, (double)b->in,
                                  ck->tensors[tf->input_scale].st->name, (double)f->in,
                                  qkv ? "q/k/v" : "gate and up");
        }
    }
    free(m);
    return rc;
}

static const char *const k_proj[3] = {"gate_proj", "up_proj", "down_proj"};

/* One projection's [out, in] (unpacked: a U8 NVFP4 weight holds two values a byte). */
static void proj_dims(const nvf_st_tensor *t, int64_t *out, int64_t *in) {
    int64_t pack = t->dtype == NVF_DTYPE_U8 ? 2 : 1;
    *out = t->shape[t->ndim - 2];
    *in = t->shape[t->ndim - 1] * pack;
}

/* Rule 4 for one MoE layer. */
static int check_layer(vd_ctx *c, const nvf_ckpt *ck, const nvf_moe_layer *l, const char *prefix) {
    const nvf_moe_config *cfg = &ck->moe.config;
    int rc = NVF_OK;
    char file[NAME_CAP];
    for (size_t i = 0; i < l->n_missing && rc == NVF_OK; i++) {
        int64_t e = l->missing[i];
        char lacks[64] = "";
        for (int p = 0; p < 3 && l->experts; p++)
            if (l->experts[e].proj[p].tensor == NVF_CKPT_NONE)
                snprintf(lacks + strlen(lacks), sizeof lacks - strlen(lacks), "%s%s",
                         lacks[0] ? ", " : "", k_proj[p]);
        rc = nvf_findings_add(c->out, "moe.missing-expert", "error", "", "",
                              "%s: MoE layer %" PRId64 " (%s) expert %" PRId64 " of %" PRId64
                              " lacks %s",
                              prefix[0] ? prefix : c->top, l->index, l->prefix, e, l->n_experts,
                              lacks[0] ? lacks : "its projections");
        if (rc == NVF_OK) {
            c->out->v[c->out->n - 1].layer = l->index;
            c->out->v[c->out->n - 1].expert = e;
        }
    }
    if (rc != NVF_OK || !l->experts || l->fused)
        return rc;
    /* Expected [I, H] for gate/up, [H, I] for down: the config's sizes, else the first
     * present expert's. */
    int64_t want_h = cfg->hidden_size > 0 ? cfg->hidden_size : -1;
    int64_t want_i = cfg->moe_intermediate_size > 0 ? cfg->moe_intermediate_size
                     : cfg->intermediate_size > 0   ? cfg->intermediate_size
                                                    : -1;
    for (int64_t e = 0; e < l->n_experts && (want_h < 0 || want_i < 0); e++) {
        const nvf_moe_proj *d = &l->experts[e].proj[NVF_PROJ_DOWN];
        if (d->tensor == NVF_CKPT_NONE)
            continue;
        int64_t o, in;
        proj_dims(ck->tensors[d->tensor].st, &o, &in);
        want_h = want_h < 0 ? o : want_h;
        want_i = want_i < 0 ? in : want_i;
    }
    for (int64_t e = 0; e < l->n_experts && rc == NVF_OK; e++) {
        for (int p = 0; p < 3 && rc == NVF_OK; p++) {
            size_t ti = l->experts[e].proj[p].tensor;
            if (ti == NVF_CKPT_NONE)
                continue;
            const nvf_st_tensor *t = ck->tensors[ti].st;
            if (t->ndim != 2)
                continue;
            int64_t o, in, wo = p == NVF_PROJ_DOWN ? want_h : want_i;
            int64_t wi = p == NVF_PROJ_DOWN ? want_i : want_h;
            proj_dims(t, &o, &in);
            if (o == wo && in == wi)
                continue;
            char s[160];
            shape_text(s, sizeof s, t);
            file_of(ck, ti, prefix, file, sizeof file);
            rc = nvf_findings_add(c->out, "moe.expert-shape", "error", file, t->name,
                                  "%s: '%s' %s %s holds [%" PRId64 ", %" PRId64
                                  "] values; layer %" PRId64 "'s experts are [%" PRId64 ", %" PRId64
                                  "] (hidden %" PRId64 ", intermediate %" PRId64 ")",
                                  file, t->name, nvf_dtype_name(t->dtype), s, o, in, l->index, wo,
                                  wi, want_h, want_i);
            if (rc == NVF_OK) {
                c->out->v[c->out->n - 1].layer = l->index;
                c->out->v[c->out->n - 1].expert = e;
            }
        }
    }
    return rc;
}

int vd_check_rules(vd_ctx *c, const nvf_ckpt *ck, const char *prefix) {
    size_t before = c->out->n;
    int rc = nvf_modelopt_check_config(c->out, ck);
    /* lib/ckpt names files relative to the checkpoint; the report, relative to the top. */
    for (size_t i = before; i < c->out->n && prefix[0]; i++) {
        char buf[sizeof c->out->v[i].file];
        snprintf(buf, sizeof buf, "%s%s", prefix, c->out->v[i].file);
        memcpy(c->out->v[i].file, buf, sizeof buf);
    }
    nvf_ckpt_format fmt = ck->quant.format;
    int nvfp4 = fmt == NVF_CKPT_FORMAT_NVFP4_MODELOPT || fmt == NVF_CKPT_FORMAT_NVFP4_CT;
    for (size_t i = 0; nvfp4 && i < ck->n_tensors && rc == NVF_OK; i++)
        if (nvfp4_weight(ck, i))
            rc = check_linear(c, ck, i, prefix);
    if (rc == NVF_OK && nvfp4)
        rc = check_groups(c, ck, prefix);
    for (size_t i = 0; fmt != NVF_CKPT_FORMAT_PREPARED && i < ck->moe.n_layers && rc == NVF_OK; i++)
        if (ck->moe.layers[i].kind == NVF_LAYER_MOE)
            rc = check_layer(c, ck, &ck->moe.layers[i], prefix);
    return rc;
}
