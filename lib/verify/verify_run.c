/*
 * nvf_verify_run (nvfp4/verify.h): open the checkpoint and its reference, choose the layers, and
 * per layer the structural checks (before any math) and then the numeric ones (verify_layer.c).
 * Structure, per MoE layer:
 *   1. experts lib/ckpt found missing (not for prepared shards, whose experts it does not map);
 *   2. a router, and its correction bias where the routing needs one (deepseek_v3, noaux_tc);
 *   3. ModelOpt: an expert's gate and up weight_scale_2 equal (loaders read only one);
 *   4. a reference whose layer is not MoE or has another expert count.
 */
#include "verify_internal.h"

#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Experts listed one by one in findings; the rest are counted. */
#define VF_MAX_LISTED 16

static const nvf_moe_layer *moe_layer(const nvf_ckpt *ck, int64_t index) {
    for (size_t i = 0; i < ck->moe.n_layers; i++)
        if (ck->moe.layers[i].index == index && ck->moe.layers[i].kind == NVF_LAYER_MOE)
            return &ck->moe.layers[i];
    return NULL;
}

static float f32_scalar(const nvf_st_tensor *t, int64_t i) {
    if (t->dtype != NVF_DTYPE_F32 || (uint64_t)i >= t->numel)
        return NAN;
    float v;
    memcpy(&v, t->data + 4 * (uint64_t)i, 4);
    return v;
}

/* ModelOpt: gate and up of each expert share weight_scale_2 (SPEC section 5). */
static int check_ws2(vf_ctx *c, const nvf_moe_layer *l, nvf_verify_layer *out) {
    size_t bad = 0;
    int rc = NVF_OK;
    for (int64_t e = 0; e < l->n_experts && rc == NVF_OK; e++) {
        const nvf_moe_proj *g = &l->experts[e].proj[NVF_PROJ_GATE];
        const nvf_moe_proj *u = &l->experts[e].proj[NVF_PROJ_UP];
        if (g->tensor == NVF_CKPT_NONE || u->tensor == NVF_CKPT_NONE ||
            g->scale_2 == NVF_CKPT_NONE || u->scale_2 == NVF_CKPT_NONE)
            continue;
        const nvf_st_tensor *gs = c->ck->tensors[g->scale_2].st,
                            *us = c->ck->tensors[u->scale_2].st;
        float a = f32_scalar(gs, gs->numel == 1 ? 0 : (g->expert > 0 ? g->expert : 0));
        float b = f32_scalar(us, us->numel == 1 ? 0 : (u->expert > 0 ? u->expert : 0));
        if (a == b)
            continue;
        if (bad++ < VF_MAX_LISTED)
            rc = vf_finding(c->r, "weight_scale_2", "error", l->index, e, gs->name,
                            "layer %" PRId64 " expert %" PRId64 ": gate weight_scale_2 %g ('%s') "
                            "differs from up weight_scale_2 %g ('%s'); loaders read only one",
                            l->index, e, (double)a, gs->name, (double)b, us->name);
        if (rc == NVF_OK)
            rc = vf_flag(out, e);
    }
    if (rc == NVF_OK)
        vf_check(out, "weight_scale_2", bad == 0,
                 "gate and up weight_scale_2 equal in every expert (%zu differ)", bad);
    return rc;
}

/* The structural checks; *fatal when the layer cannot be computed at all. */
static int structure(vf_ctx *c, const nvf_moe_layer *l, nvf_verify_layer *out, int *fatal) {
    int rc = NVF_OK;
    size_t problems = 0;
    char tensor[320];
    *fatal = 0;
    if (!c->prepared && l->n_missing > 0) {
        *fatal = 1;
        for (size_t i = 0; i < l->n_missing && rc == NVF_OK; i++) {
            problems++;
            snprintf(tensor, sizeof tensor, "%s.mlp.experts.%" PRId64, l->prefix, l->missing[i]);
            if (i < VF_MAX_LISTED)
                rc = vf_finding(c->r, "missing_expert", "error", l->index, l->missing[i], tensor,
                                "layer %" PRId64 ": expert %" PRId64 " of %" PRId64
                                " lacks a projection",
                                l->index, l->missing[i], l->n_experts);
            if (rc == NVF_OK)
                rc = vf_flag(out, l->missing[i]);
        }
    }
    if (rc == NVF_OK && !l->has_router) {
        *fatal = 1;
        problems++;
        snprintf(tensor, sizeof tensor, "%s.mlp.gate.weight", l->prefix);
        rc = vf_finding(c->r, "router", "error", l->index, -1, tensor,
                        "layer %" PRId64 ": no router '%s'", l->index, tensor);
    }
    int needs_bias = c->spec.route == NVF_MOE_ROUTE_DEEPSEEK_V3 ||
                     strcmp(c->ck->moe.config.topk_method, "noaux_tc") == 0;
    if (rc == NVF_OK && needs_bias && !l->has_router_bias) {
        problems++;
        snprintf(tensor, sizeof tensor, "%s.mlp.gate.e_score_correction_bias", l->prefix);
        rc = vf_finding(c->r, "router_bias", "error", l->index, -1, tensor,
                        "layer %" PRId64 ": the routing (%s, topk_method '%s') needs the "
                        "correction bias '%s', which the checkpoint lacks",
                        l->index, nvf_moe_route_name(c->spec.route), c->ck->moe.config.topk_method,
                        tensor);
    }
    const nvf_moe_layer *rl = c->ref ? moe_layer(c->ref, l->index) : NULL;
    if (rc == NVF_OK && c->ref && (!rl || rl->n_experts != l->n_experts)) {
        *fatal = 1;
        problems++;
        rc = vf_finding(c->r, "reference", "error", l->index, -1, NULL,
                        "layer %" PRId64 ": the reference %s", l->index,
                        rl ? "has another number of experts" : "has no such MoE layer");
    }
    if (rc == NVF_OK && problems)
        vf_check(out, "structure", 0, "%zu structural problem(s): see the findings", problems);
    else if (rc == NVF_OK)
        vf_check(out, "structure", 1, "experts, router%s present",
                 needs_bias ? " and its correction bias" : "");
    if (rc == NVF_OK && c->ck->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT)
        rc = check_ws2(c, l, out);
    return rc;
}

static int pick_layers(vf_ctx *c) {
    const nvf_verify_opts *o = c->o;
    nvf_verify_report *r = c->r;
    size_t n = o->layers ? o->n_layers : c->ck->moe.n_moe;
    r->layers = calloc(n + 1, sizeof *r->layers);
    if (!r->layers)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; o->layers && i < o->n_layers; i++)
        if (!moe_layer(c->ck, o->layers[i])) {
            char list[256] = "";
            size_t at = 0;
            for (size_t j = 0; j < c->ck->moe.n_layers && at < sizeof list - 24; j++)
                if (c->ck->moe.layers[j].kind == NVF_LAYER_MOE)
                    at += (size_t)snprintf(list + at, sizeof list - at, "%s%" PRId64,
                                           at ? ", " : "", c->ck->moe.layers[j].index);
            return nvf_error_set(NVF_E_INVALID,
                                 "%s: layer %" PRId64 " is not an MoE layer; MoE "
                                 "layers: %s",
                                 c->ck->path, o->layers[i], at ? list : "none");
        }
    for (size_t i = 0; i < c->ck->moe.n_layers && !o->layers; i++)
        if (c->ck->moe.layers[i].kind == NVF_LAYER_MOE)
            r->layers[r->n_layers++].layer = c->ck->moe.layers[i].index;
    for (size_t i = 0; o->layers && i < o->n_layers; i++)
        r->layers[r->n_layers++].layer = o->layers[i];
    return NVF_OK;
}

static int open_all(vf_ctx *c, const char *ckpt_path, const char *reference_path) {
    nvf_verify_report *r = c->r;
    int rc = nvf_ckpt_open(&c->ck, ckpt_path);
    if (rc == NVF_OK)
        rc = nvf_moe_spec_from_ckpt(&c->spec, c->ck);
    if (rc != NVF_OK)
        return rc;
    snprintf(r->format, sizeof r->format, "%s", nvf_ckpt_format_name(c->ck->quant.format));
    c->prepared = c->ck->quant.format == NVF_CKPT_FORMAT_PREPARED;
    if (c->prepared && c->ck->quant.ep_size > 1)
        return nvf_error_set(NVF_E_UNSUPPORTED,
                             "%s: rank %" PRId64 " of %" PRId64 " of an expert-parallel prepared "
                             "checkpoint; verify reads whole layers (convert with --ep 1)",
                             ckpt_path, c->ck->quant.ep_rank, c->ck->quant.ep_size);
    if (reference_path) {
        rc = nvf_ckpt_open(&c->ref, reference_path);
        if (rc == NVF_OK)
            rc = nvf_moe_spec_from_ckpt(&c->ref_spec, c->ref);
        if (rc != NVF_OK)
            return rc;
        if (c->ref->quant.format == NVF_CKPT_FORMAT_PREPARED ||
            c->ref->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT ||
            c->ref->quant.format == NVF_CKPT_FORMAT_NVFP4_CT)
            return nvf_error_set(NVF_E_INVALID,
                                 "--reference %s is %s: the reference is the source checkpoint "
                                 "(BF16 or FP8)",
                                 reference_path, nvf_ckpt_format_name(c->ref->quant.format));
    }
    r->method = c->o->backend ? "cuda-kernels"
                : c->prepared ? "cpu-prepared-reader"
                              : "cpu-reference";
    r->layout_source = !c->prepared ? NULL : reference_path ? "reference" : "inverse-layout";
    return NVF_OK;
}

int nvf_verify_run(nvf_verify_report *out, const char *ckpt_path, const char *reference_path,
                   const nvf_verify_opts *o) {
    memset(out, 0, sizeof *out);
    vf_ctx c = {.o = o, .r = out};
    out->checkpoint = strdup(ckpt_path);
    out->reference = reference_path ? strdup(reference_path) : NULL;
    out->tokens = o->tokens;
    out->seed = o->seed;
    out->precision = o->precision;
    snprintf(out->device, sizeof out->device, "%s", o->device ? o->device : "cpu");
    int rc = out->checkpoint && (out->reference || !reference_path)
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK)
        rc = open_all(&c, ckpt_path, reference_path);
    if (rc == NVF_OK)
        rc = pick_layers(&c);
    for (size_t i = 0; i < out->n_layers && rc == NVF_OK; i++) {
        nvf_verify_layer *vl = &out->layers[i];
        const nvf_moe_layer *l = moe_layer(c.ck, vl->layer);
        if (o->progress)
            o->progress(o->progress_ctx, vl->layer, i, out->n_layers);
        vl->pass = 1;
        int fatal = 0;
        rc = structure(&c, l, vl, &fatal);
        if (rc == NVF_OK && !fatal)
            rc = vf_layer_math(&c, l, vl);
        if (vl->pass)
            out->passed++;
        else
            out->failed++;
    }
    if (o->progress && rc == NVF_OK)
        o->progress(o->progress_ctx, -1, out->n_layers, out->n_layers);
    out->pass = rc == NVF_OK && out->failed == 0 && out->n_layers > 0;
    nvf_ckpt_close(c.ck);
    nvf_ckpt_close(c.ref);
    return rc;
}
