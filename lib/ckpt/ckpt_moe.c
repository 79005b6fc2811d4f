/*
 * MoE structure discovery from tensor names and shapes (SPEC section 3 "MoE expert naming"),
 * cross-checked against config.json. Names read, under PREFIX.layers.{i}.mlp (or Mixtral's
 * .block_sparse_moe):
 *   1. experts.{e}.{gate,up,down}_proj.weight (or w1, w3, w2): per-expert [I, H], [I, H], [H, I]
 *   2. experts.gate_up_proj [E, 2I, H] (gate rows first) and experts.down_proj [E, H, I], with
 *      or without a ".weight" suffix: fused
 *   3. gate.weight [E, H] (router), gate.e_score_correction_bias [E] (DeepSeek)
 *   4. shared_experts.{gate,up,down}_proj.weight or shared_expert.* (+ shared_expert_gate)
 *   5. {gate,up,down}_proj.weight directly: a dense MLP
 * The names are read by ckpt_naming.c (per-expert and fused by the exact name). The result per
 * layer includes the expert map: for each expert id, where its gate, up and down weights and
 * their scales are (a 2-D tensor, or a slice of a fused one).
 * NVFP4 packs two values per byte: a U8 weight's logical input dimension is twice its last.
 */
#include "ckpt_internal.h"

#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXPERTS CKPT_MAX_EXPERTS

/* All three projections present. */
#define PROJ_ALL 7u

typedef struct expert_rec {
    int64_t id;
    int proj;
    int64_t out, in;
    size_t tensor;
} expert_rec;

typedef struct layer_acc {
    char *prefix;
    int64_t index;
    expert_rec *recs;
    size_t n_recs, cap;
    int w13;
    size_t fused_gu, fused_down; /* tensor indices or NVF_CKPT_NONE */
    size_t router, router_bias;
    unsigned shared_mask, dense_mask, shared_gate;
    int64_t shared_out, dense_out, dense_in;
} layer_acc;

typedef struct acc {
    layer_acc *layers;
    size_t n, cap;
} acc;

const char *nvf_router_kind_name(nvf_router_kind kind) {
    switch (kind) {
    case NVF_ROUTER_NONE:
        return "none";
    case NVF_ROUTER_SOFTMAX_TOPK:
        return "softmax_topk";
    case NVF_ROUTER_SIGMOID_TOPK:
        return "sigmoid_topk";
    case NVF_ROUTER_DEEPSEEK_V3:
        return "deepseek_v3";
    case NVF_ROUTER_TOPK_SOFTMAX:
        return "topk_softmax";
    }
    return "none";
}

static layer_acc *find_layer(acc *a, const char *name, size_t prefix_len, int64_t index) {
    for (size_t i = a->n; i-- > 0;) {
        if (strlen(a->layers[i].prefix) == prefix_len &&
            memcmp(a->layers[i].prefix, name, prefix_len) == 0)
            return &a->layers[i];
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        layer_acc *grown = realloc(a->layers, cap * sizeof *grown);
        if (!grown)
            return NULL;
        a->layers = grown;
        a->cap = cap;
    }
    layer_acc *l = &a->layers[a->n];
    memset(l, 0, sizeof *l);
    l->prefix = strndup(name, prefix_len);
    if (!l->prefix)
        return NULL;
    l->index = index;
    l->fused_gu = l->fused_down = l->router = l->router_bias = NVF_CKPT_NONE;
    l->shared_out = l->dense_out = l->dense_in = -1;
    a->n++;
    return l;
}

/* Logical [out, in] of a linear weight's last two dimensions. */
static void logical_out_in(const nvf_ckpt *ck, const nvf_st_tensor *t, int64_t *out, int64_t *in) {
    *out = t->ndim >= 2 ? t->shape[t->ndim - 2] : -1;
    *in = t->ndim >= 1 ? t->shape[t->ndim - 1] : -1;
    int nvfp4 = ck->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT ||
                ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT;
    if (nvfp4 && t->dtype == NVF_DTYPE_U8 && *in > 0)
        *in *= 2;
}

static int add_rec(layer_acc *l, int64_t id, int proj, int64_t out, int64_t in, size_t tensor) {
    if (l->n_recs == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        expert_rec *grown = realloc(l->recs, cap * sizeof *grown);
        if (!grown)
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        l->recs = grown;
        l->cap = cap;
    }
    l->recs[l->n_recs++] = (expert_rec){id, proj, out, in, tensor};
    return NVF_OK;
}

static int scan_tensor(const nvf_ckpt *ck, acc *a, size_t ti) {
    const nvf_st_tensor *t = ck->tensors[ti].st;
    size_t prefix_len;
    int64_t index;
    const char *rest;
    if (!ckpt_split_mlp(t->name, &prefix_len, &index, &rest))
        return NVF_OK;
    int w13 = 0;
    nvf_proj proj;
    int64_t out, in;
    logical_out_in(ck, t, &out, &in);
    layer_acc *l = find_layer(a, t->name, prefix_len, index);
    if (!l)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    if (strncmp(rest, "experts.", 8) == 0) {
        nvf_ckpt_name n;
        nvf_ckpt_name_parse(&n, t->name, t->ndim);
        /* only this layer's own experts: "experts." right after the MLP marker */
        if (n.experts_len != (size_t)(rest - t->name) + 8)
            return NVF_OK;
        if (n.kind == NVF_NAME_EXPERT) {
            l->w13 |= n.w13;
            return add_rec(l, n.expert, n.proj, out, in, ti);
        }
        if (n.kind == NVF_NAME_FUSED && n.proj == NVF_PROJ_GATE_UP)
            l->fused_gu = ti;
        else if (n.kind == NVF_NAME_FUSED)
            l->fused_down = ti;
        return NVF_OK;
    }
    if (strcmp(rest, "gate.weight") == 0) {
        l->router = ti;
    } else if (strcmp(rest, "gate.e_score_correction_bias") == 0) {
        l->router_bias = ti;
    } else if (strcmp(rest, "shared_expert_gate.weight") == 0) {
        l->shared_gate = 1;
    } else if (strncmp(rest, "shared_experts.", 15) == 0 ||
               strncmp(rest, "shared_expert.", 14) == 0) {
        proj = ckpt_proj_weight(strchr(rest, '.') + 1, &w13);
        if (proj != NVF_PROJ_NONE) {
            l->shared_mask |= 1u << proj;
            if (proj == NVF_PROJ_GATE)
                l->shared_out = out;
        }
    } else if ((proj = ckpt_proj_weight(rest, &w13)) != NVF_PROJ_NONE) {
        l->dense_mask |= 1u << proj;
        if (proj == NVF_PROJ_GATE) {
            l->dense_out = out;
            l->dense_in = in;
        }
    }
    return NVF_OK;
}

static int cmp_rec(const void *a, const void *b) {
    const expert_rec *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->proj > y->proj) - (x->proj < y->proj);
}

/* Per-expert layers: H, I, present and missing experts; shape disagreements are warnings. */
static int finish_per_expert(nvf_ckpt *ck, layer_acc *a, nvf_moe_layer *l) {
    qsort(a->recs, a->n_recs, sizeof *a->recs, cmp_rec);
    int warned = 0, rc = NVF_OK;
    const expert_rec *ref = NULL;
    for (size_t i = 0; i < a->n_recs; i++) {
        const expert_rec *r = &a->recs[i];
        int64_t want_out, want_in;
        if (!ref && r->proj != NVF_PROJ_DOWN) {
            ref = r;
            l->intermediate = r->out;
            l->hidden = r->in;
        }
        if (!ref)
            continue;
        want_out = r->proj == NVF_PROJ_DOWN ? l->hidden : l->intermediate;
        want_in = r->proj == NVF_PROJ_DOWN ? l->intermediate : l->hidden;
        if ((r->out != want_out || r->in != want_in) && !warned) {
            warned = 1;
            rc = ckpt_warn(ck,
                           "expert weight '%s' is [%" PRId64 ", %" PRId64 "] (logical), expected "
                           "[%" PRId64 ", %" PRId64 "] like '%s'",
                           ck->tensors[r->tensor].st->name, r->out, r->in, want_out, want_in,
                           ck->tensors[ref->tensor].st->name);
            if (rc != NVF_OK)
                return rc;
        }
    }
    return NVF_OK;
}

/* One projection's place: the tensor and its companions, a fused tensor's expert and rows. */
static nvf_moe_proj proj_at(const nvf_ckpt *ck, size_t ti, int64_t expert, int64_t row0,
                            int64_t rows) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    return (nvf_moe_proj){ti, t->scale, t->scale_2, t->input_scale, expert, row0, rows};
}

/* The expert map: l->experts[0, n_experts) from the per-expert records (sorted) or the fused
 * tensors; a projection not found keeps tensor NVF_CKPT_NONE. */
static void map_experts(const nvf_ckpt *ck, const layer_acc *a, nvf_moe_layer *l) {
    const nvf_moe_proj none = {
        NVF_CKPT_NONE, NVF_CKPT_NONE, NVF_CKPT_NONE, NVF_CKPT_NONE, -1, 0, 0};
    for (int64_t e = 0; e < l->n_experts; e++)
        for (int p = 0; p < 3; p++)
            l->experts[e].proj[p] = none;
    for (size_t i = 0; i < a->n_recs; i++) {
        const expert_rec *r = &a->recs[i];
        if (r->id >= l->n_experts)
            break; /* sorted: the rest are beyond too */
        nvf_moe_proj *slot = &l->experts[r->id].proj[r->proj];
        if (slot->tensor == NVF_CKPT_NONE)
            *slot = proj_at(ck, r->tensor, -1, 0, r->out);
    }
    if (a->fused_gu != NVF_CKPT_NONE && ck->tensors[a->fused_gu].st->ndim == 3 &&
        ck->tensors[a->fused_gu].st->numel > 0) {
        const nvf_st_tensor *gu = ck->tensors[a->fused_gu].st;
        int64_t half = gu->shape[1] / 2;
        for (int64_t e = 0; e < l->n_experts && e < gu->shape[0]; e++) {
            l->experts[e].proj[NVF_PROJ_GATE] = proj_at(ck, a->fused_gu, e, 0, half);
            l->experts[e].proj[NVF_PROJ_UP] = proj_at(ck, a->fused_gu, e, half, half);
        }
    }
    if (a->fused_down != NVF_CKPT_NONE && ck->tensors[a->fused_down].st->ndim == 3 &&
        ck->tensors[a->fused_down].st->numel > 0) {
        const nvf_st_tensor *dn = ck->tensors[a->fused_down].st;
        for (int64_t e = 0; e < l->n_experts && e < dn->shape[0]; e++)
            l->experts[e].proj[NVF_PROJ_DOWN] = proj_at(ck, a->fused_down, e, 0, dn->shape[1]);
    }
}

static int finish_layer(nvf_ckpt *ck, layer_acc *a, nvf_moe_layer *l) {
    const nvf_moe_config *c = &ck->moe.config;
    int rc = NVF_OK;
    l->prefix = a->prefix;
    a->prefix = NULL;
    l->index = a->index;
    l->hidden = l->intermediate = -1;
    l->shared_intermediate = -1;
    l->w13_naming = a->w13;
    l->router = a->router;
    l->router_bias = a->router_bias;
    l->fused_gate_up = a->fused_gu;
    l->fused_down = a->fused_down;
    l->has_router = a->router != NVF_CKPT_NONE;
    l->has_router_bias = a->router_bias != NVF_CKPT_NONE;
    l->has_shared = a->shared_mask != 0;
    l->has_shared_gate = (int)a->shared_gate;
    if (l->has_shared)
        l->shared_intermediate = a->shared_out;
    int moe = a->n_recs > 0 || a->fused_gu != NVF_CKPT_NONE || a->fused_down != NVF_CKPT_NONE ||
              l->has_router;
    if (!moe) {
        l->kind = NVF_LAYER_DENSE;
        l->intermediate = a->dense_out;
        l->hidden = a->dense_in;
        if (c->intermediate_size >= 0 && a->dense_out >= 0 && a->dense_out != c->intermediate_size)
            rc = ckpt_warn(ck,
                           "%s: dense MLP intermediate size %" PRId64
                           " differs from config intermediate_size %" PRId64,
                           l->prefix, a->dense_out, c->intermediate_size);
        return rc;
    }
    l->kind = NVF_LAYER_MOE;
    /* The counts the tensors show: router rows, fused E, highest expert id + 1. */
    int64_t from_names = -1, router_rows = -1, fused_e = -1;
    if (l->has_router) {
        const nvf_st_tensor *r = ck->tensors[a->router].st;
        router_rows = r->ndim == 2 ? r->shape[0] : -1;
    }
    if (a->fused_gu != NVF_CKPT_NONE || a->fused_down != NVF_CKPT_NONE) {
        l->fused = 1;
        const nvf_st_tensor *gu = a->fused_gu != NVF_CKPT_NONE ? ck->tensors[a->fused_gu].st : NULL;
        const nvf_st_tensor *dn =
            a->fused_down != NVF_CKPT_NONE ? ck->tensors[a->fused_down].st : NULL;
        int64_t e_gu = -1, e_dn = -1;
        if (gu && gu->ndim == 3) {
            int64_t out, in;
            logical_out_in(ck, gu, &out, &in);
            e_gu = gu->shape[0];
            l->hidden = in;
            l->intermediate = out / 2;
            if (out % 2 != 0)
                rc = ckpt_warn(ck, "fused '%s' has %" PRId64 " gate+up rows, not an even number",
                               gu->name, out);
        }
        if (rc == NVF_OK && dn && dn->ndim == 3) {
            int64_t out, in;
            logical_out_in(ck, dn, &out, &in);
            e_dn = dn->shape[0];
            if (l->hidden < 0) {
                l->hidden = out;
                l->intermediate = in;
            } else if (out != l->hidden || in != l->intermediate) {
                rc = ckpt_warn(ck,
                               "fused '%s' is [%" PRId64 ", %" PRId64 ", %" PRId64
                               "] but gate_up_proj implies [E, %" PRId64 ", %" PRId64 "]",
                               dn->name, e_dn, out, in, l->hidden, l->intermediate);
            }
        }
        if (rc == NVF_OK && e_gu >= 0 && e_dn >= 0 && e_gu != e_dn)
            rc = ckpt_warn(ck, "%s: fused gate_up_proj has %" PRId64 " experts, down_proj %" PRId64,
                           l->prefix, e_gu, e_dn);
        fused_e = e_gu >= 0 && e_dn >= 0 ? (e_gu < e_dn ? e_gu : e_dn) : -1;
        /* an empty tensor (a zero dimension) holds no expert, whatever its first dimension */
        if ((gu && gu->numel == 0) || (dn && dn->numel == 0))
            fused_e = 0;
        if (rc != NVF_OK)
            return rc;
    }
    if (a->n_recs > 0) {
        rc = finish_per_expert(ck, a, l);
        if (rc != NVF_OK)
            return rc;
        from_names = a->recs[a->n_recs - 1].id + 1;
    }
    /* Expected count: config first, then the router, then what the names show. */
    int64_t expected = c->n_experts;
    if (expected < 0 || expected > MAX_EXPERTS)
        expected = router_rows;
    if (expected < 0)
        expected = fused_e >= 0 ? fused_e : from_names;
    if (expected < 0 || expected > MAX_EXPERTS)
        expected = 0;
    l->n_experts = expected;
    if (c->n_experts >= 0 && router_rows >= 0 && router_rows != c->n_experts)
        rc = ckpt_warn(
            ck, "%s: router '%s.mlp.gate.weight' has %" PRId64 " rows but config %s is %" PRId64,
            l->prefix, l->prefix, router_rows, c->n_experts_key, c->n_experts);
    if (rc == NVF_OK && l->fused && fused_e >= 0 && fused_e != expected)
        rc = ckpt_warn(ck, "%s: fused experts hold %" PRId64 " experts, expected %" PRId64,
                       l->prefix, fused_e, expected);
    if (rc == NVF_OK && from_names > expected)
        rc = ckpt_warn(ck, "%s: expert id %" PRId64 " is beyond the expected %" PRId64 " experts",
                       l->prefix, from_names - 1, expected);
    if (rc == NVF_OK && l->has_router_bias) {
        const nvf_st_tensor *b = ck->tensors[a->router_bias].st;
        if (b->numel != (uint64_t)expected)
            rc = ckpt_warn(ck, "router bias '%s' has %" PRIu64 " elements, expected %" PRId64,
                           b->name, b->numel, expected);
    }
    if (rc == NVF_OK && l->hidden >= 0 && c->hidden_size >= 0 && l->hidden != c->hidden_size)
        rc = ckpt_warn(ck, "%s: experts have hidden size %" PRId64 ", config hidden_size %" PRId64,
                       l->prefix, l->hidden, c->hidden_size);
    if (rc == NVF_OK && l->intermediate >= 0 && c->moe_intermediate_size >= 0 &&
        l->intermediate != c->moe_intermediate_size)
        rc = ckpt_warn(ck,
                       "%s: experts have intermediate size %" PRId64
                       ", config moe_intermediate_size %" PRId64,
                       l->prefix, l->intermediate, c->moe_intermediate_size);
    if (rc != NVF_OK)
        return rc;
    /* Present / missing, in id order. */
    l->missing = calloc(expected > 0 ? (size_t)expected : 1, sizeof *l->missing);
    l->experts = calloc(expected > 0 ? (size_t)expected : 1, sizeof *l->experts);
    if (!l->missing || !l->experts)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    map_experts(ck, a, l);
    if (l->fused) {
        int64_t have = fused_e < 0 ? 0 : fused_e;
        for (int64_t e = 0; e < expected; e++) {
            if (e < have)
                l->n_present++;
            else
                l->missing[l->n_missing++] = e;
        }
        return NVF_OK;
    }
    size_t k = 0;
    for (int64_t e = 0; e < expected; e++) {
        unsigned mask = 0;
        while (k < a->n_recs && a->recs[k].id < e)
            k++;
        while (k < a->n_recs && a->recs[k].id == e)
            mask |= 1u << a->recs[k++].proj;
        if (mask == PROJ_ALL)
            l->n_present++;
        else
            l->missing[l->n_missing++] = e;
    }
    return NVF_OK;
}

static int cmp_layer(const void *a, const void *b) {
    const nvf_moe_layer *x = a, *y = b;
    const char *dx = strrchr(x->prefix, '.'), *dy = strrchr(y->prefix, '.');
    size_t sx = dx ? (size_t)(dx - x->prefix) : 0, sy = dy ? (size_t)(dy - y->prefix) : 0;
    size_t n = sx < sy ? sx : sy;
    int c = memcmp(x->prefix, y->prefix, n);
    if (c != 0)
        return c;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

int ckpt_discover_moe(nvf_ckpt *ck) {
    nvf_moe *m = &ck->moe;
    acc a = {0};
    int rc = ckpt_moe_read_config(ck, &m->config);
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++)
        rc = scan_tensor(ck, &a, i);
    if (rc == NVF_OK && a.n > 0) {
        m->layers = calloc(a.n, sizeof *m->layers);
        if (!m->layers)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    int any_bias = 0;
    for (size_t i = 0; i < a.n && rc == NVF_OK; i++) {
        if (a.layers[i].dense_mask == 0 && a.layers[i].n_recs == 0 &&
            a.layers[i].fused_gu == NVF_CKPT_NONE && a.layers[i].fused_down == NVF_CKPT_NONE &&
            a.layers[i].router == NVF_CKPT_NONE)
            continue;
        nvf_moe_layer *l = &m->layers[m->n_layers++];
        rc = finish_layer(ck, &a.layers[i], l);
        if (l->kind == NVF_LAYER_MOE) {
            m->n_moe++;
            m->experts_present += l->n_present;
            m->experts_missing += (int64_t)l->n_missing;
            any_bias |= l->has_router_bias;
        } else {
            m->n_dense++;
        }
    }
    for (size_t i = 0; i < a.n; i++) {
        free(a.layers[i].prefix);
        free(a.layers[i].recs);
    }
    free(a.layers);
    if (rc != NVF_OK)
        return rc;
    if (m->n_layers > 1)
        qsort(m->layers, m->n_layers, sizeof *m->layers, cmp_layer);
    m->config.router = m->n_moe == 0 ? NVF_ROUTER_NONE : ckpt_moe_router_kind(&m->config, any_bias);
    for (size_t i = 0; i < m->n_layers; i++) {
        if (m->layers[i].n_missing > 0) {
            rc = ckpt_warn(ck, "%s: %zu of %" PRId64 " experts missing (first: %" PRId64 ")",
                           m->layers[i].prefix, m->layers[i].n_missing, m->layers[i].n_experts,
                           m->layers[i].missing[0]);
            if (rc != NVF_OK)
                return rc;
        }
    }
    return NVF_OK;
}

void ckpt_moe_free(nvf_moe *m) {
    for (size_t i = 0; i < m->n_layers; i++) {
        free(m->layers[i].prefix);
        free(m->layers[i].missing);
        free(m->layers[i].experts);
    }
    free(m->layers);
    memset(m, 0, sizeof *m);
}
