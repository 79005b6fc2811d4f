/*
 * Prepared checkpoints (SPEC section 5, `convert --target prepared-w4a16|prepared-w4a4`):
 *   1. per MoE layer, the tensors lib/ckpt names (nvf_ckpt_prepared_name) exist with their
 *      dtypes and shapes: w13_weight U8 [E, 2I, H/2] (I a multiple of the 64-row interleave
 *      group), w13_weight_scale F8_E4M3 [E, pad(2I), padc(H/16)], w2_weight U8 [E, H, I/2],
 *      w2_weight_scale [E, pad(H), padc(I/16)], w13_alpha / w2_alpha F32 [E] finite and > 0,
 *      W4A4 also w13_input_scale F32 [E] and fc2_input_scale F32 [1]; E the rank's expert count;
 *   2. every padding byte of a swizzled scale tensor is 0 (the kernels read whole tiles);
 *   3. with --ep N: a rank-0000r-of-0000N directory for every r < N, and their expert_range
 *      entries cover the experts once, in equal contiguous ranges in rank order.
 * Every broken rule is prepared.layout, prepared.rank-missing or prepared.expert-split.
 */
#include "validate_internal.h"

#include "nvfp4/layout.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 1024

typedef struct prep_ctx {
    vd_ctx *c;
    const nvf_ckpt *ck;
    const char *prefix;
    char file[NAME_CAP];
} prep_ctx;

static const nvf_st_tensor *find(prep_ctx *p, const nvf_moe_layer *l, nvf_prep_part part,
                                 char *name) {
    if (nvf_ckpt_prepared_name(name, NAME_CAP, l->prefix, part) != NVF_OK)
        return NULL;
    size_t i = nvf_ckpt_find_index(p->ck, name);
    if (i == NVF_CKPT_NONE)
        return NULL;
    snprintf(p->file, sizeof p->file, "%s%s", p->prefix, p->ck->files[p->ck->tensors[i].file].name);
    return p->ck->tensors[i].st;
}

static void dims_text(char *buf, size_t cap, const int64_t *shape, int32_t ndim) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int32_t d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
}

/* Tensor `part` must exist with `dtype` and `shape`; *t it (NULL when it does not fit). */
static int need(prep_ctx *p, const nvf_moe_layer *l, nvf_prep_part part, nvf_dtype dtype,
                int32_t ndim, const int64_t *shape, const nvf_st_tensor **t) {
    char name[NAME_CAP], got[160], want[160];
    *t = find(p, l, part, name);
    dims_text(want, sizeof want, shape, ndim);
    if (!*t)
        return nvf_findings_add(p->c->out, "prepared.layout", "error", "", name,
                                "%s: prepared MoE layer %" PRId64 " has no '%s' (%s %s)",
                                p->prefix[0] ? p->prefix : p->c->top, l->index, name,
                                nvf_dtype_name(dtype), want);
    int ok = (*t)->dtype == dtype && (*t)->ndim == ndim;
    for (int32_t d = 0; ok && d < ndim; d++)
        ok = (*t)->shape[d] == shape[d];
    if (ok)
        return NVF_OK;
    dims_text(got, sizeof got, (*t)->shape, (*t)->ndim);
    int rc = nvf_findings_add(p->c->out, "prepared.layout", "error", p->file, name,
                              "%s: '%s' is %s %s, expected %s %s", p->file, name,
                              nvf_dtype_name((*t)->dtype), got, nvf_dtype_name(dtype), want);
    *t = NULL;
    return rc;
}

/* Rule 2: the padding bytes of every expert's scale tiles are 0. */
static int check_padding(prep_ctx *p, const nvf_st_tensor *s, nvf_layout layout, int64_t rows,
                         int64_t kcols) {
    if (!s->data)
        return NVF_OK;
    int64_t pr = nvf_layout_rows_padded(layout, rows), pc = nvf_layout_cols_padded(layout, kcols);
    if (pr == rows && pc == kcols)
        return NVF_OK;
    uint64_t n = 0;
    int64_t first_e = -1, first_m = 0, first_k = 0;
    uint8_t first_b = 0;
    for (int64_t e = 0; e < s->shape[0]; e++) {
        const uint8_t *base = s->data + (uint64_t)e * (uint64_t)(pr * pc);
        for (int64_t m = 0; m < pr; m++) {
            for (int64_t k = m < rows ? kcols : 0; k < pc; k++) {
                uint8_t b = base[nvf_layout_offset(layout, m, k, kcols)];
                if (b && n++ == 0) {
                    first_e = e;
                    first_m = m;
                    first_k = k;
                    first_b = b;
                }
            }
        }
    }
    if (n == 0)
        return NVF_OK;
    int rc = nvf_findings_add(
        p->c->out, "prepared.layout", "error", p->file, s->name,
        "%s: '%s' has %" PRIu64 " non-zero padding byte(s) (%s layout, %" PRId64 " x %" PRId64
        " scales padded to %" PRId64 " x %" PRId64 "); the first: expert %" PRId64 ", row %" PRId64
        ", column %" PRId64 ": 0x%02x",
        p->file, s->name, n, nvf_layout_name(layout), rows, kcols, pr, pc, first_e, first_m,
        first_k, first_b);
    if (rc == NVF_OK)
        p->c->out->v[p->c->out->n - 1].expert = first_e;
    return rc;
}

/* An alpha or input scale vector: finite and > 0 (NaN/Inf is also tensor.nonfinite). */
static int check_positive(prep_ctx *p, const nvf_st_tensor *t) {
    if (!t || !t->data)
        return NVF_OK;
    for (uint64_t i = 0; i < t->numel; i++) {
        float v;
        memcpy(&v, t->data + 4 * i, 4);
        if (isfinite(v) && v > 0)
            continue;
        return nvf_findings_add(p->c->out, "prepared.layout", "error", p->file, t->name,
                                "%s: '%s'[%" PRIu64 "] is %g; it must be finite and > 0", p->file,
                                t->name, i, (double)v);
    }
    return NVF_OK;
}

static int check_layer(prep_ctx *p, const nvf_moe_layer *l, nvf_layout layout, int w4a4) {
    const nvf_ckpt *ck = p->ck;
    const nvf_ckpt_quant *q = &ck->quant;
    char name[NAME_CAP];
    const nvf_st_tensor *w2 = find(p, l, NVF_PREP_W2_WEIGHT, name);
    int64_t n_e = q->expert_count > 0 ? q->expert_count : l->n_experts;
    int64_t n_h = ck->moe.config.hidden_size, n_i = ck->moe.config.moe_intermediate_size;
    if (w2 && w2->ndim == 3) {
        n_h = n_h > 0 ? n_h : w2->shape[1];
        n_i = n_i > 0 ? n_i : 2 * w2->shape[2];
    }
    if (n_h <= 0 || n_i <= 0 || n_e <= 0)
        return nvf_findings_add(p->c->out, "prepared.layout", "error", "", name,
                                "%s: prepared MoE layer %" PRId64 ": no usable '%s' and no "
                                "hidden_size / moe_intermediate_size in config.json",
                                p->prefix[0] ? p->prefix : p->c->top, l->index, name);
    int rc = NVF_OK;
    if (n_i % NVF_W13_GROUP != 0 || n_h % NVF_BLOCK != 0)
        rc = nvf_findings_add(p->c->out, "prepared.layout", "error", "", "",
                              "%s: prepared MoE layer %" PRId64 " has H %" PRId64 ", I %" PRId64
                              ": the layout needs I %% %d == 0 and H %% %d == 0",
                              p->prefix[0] ? p->prefix : p->c->top, l->index, n_h, n_i,
                              NVF_W13_GROUP, NVF_BLOCK);
    int64_t kh = n_h / NVF_BLOCK, ki = n_i / NVF_BLOCK;
    const nvf_st_tensor *t;
    if (rc == NVF_OK)
        rc = need(p, l, NVF_PREP_W13_WEIGHT, NVF_DTYPE_U8, 3, (int64_t[3]){n_e, 2 * n_i, n_h / 2},
                  &t);
    if (rc == NVF_OK)
        rc = need(p, l, NVF_PREP_W2_WEIGHT, NVF_DTYPE_U8, 3, (int64_t[3]){n_e, n_h, n_i / 2}, &t);
    if (rc == NVF_OK)
        rc = need(p, l, NVF_PREP_W13_SCALE, NVF_DTYPE_F8_E4M3, 3,
                  (int64_t[3]){n_e, nvf_layout_rows_padded(layout, 2 * n_i),
                               nvf_layout_cols_padded(layout, kh)},
                  &t);
    if (rc == NVF_OK && t)
        rc = check_padding(p, t, layout, 2 * n_i, kh);
    if (rc == NVF_OK)
        rc = need(p, l, NVF_PREP_W2_SCALE, NVF_DTYPE_F8_E4M3, 3,
                  (int64_t[3]){n_e, nvf_layout_rows_padded(layout, n_h),
                               nvf_layout_cols_padded(layout, ki)},
                  &t);
    if (rc == NVF_OK && t)
        rc = check_padding(p, t, layout, n_h, ki);
    static const nvf_prep_part k_vec[] = {NVF_PREP_W13_ALPHA, NVF_PREP_W2_ALPHA, NVF_PREP_W13_INPUT,
                                          NVF_PREP_FC2_INPUT};
    for (size_t i = 0; i < 4 && rc == NVF_OK; i++) {
        if (i >= 2 && !w4a4)
            continue;
        rc = need(p, l, k_vec[i], NVF_DTYPE_F32, 1, (int64_t[1]){i == 3 ? 1 : n_e}, &t);
        if (rc == NVF_OK)
            rc = check_positive(p, t);
    }
    return rc;
}

int vd_check_prepared(vd_ctx *c, const nvf_ckpt *ck, const char *prefix) {
    const nvf_ckpt_quant *q = &ck->quant;
    if (q->format != NVF_CKPT_FORMAT_PREPARED)
        return NVF_OK;
    prep_ctx p = {c, ck, prefix, ""};
    char cfg[NAME_CAP];
    snprintf(cfg, sizeof cfg, "%sconfig.json", prefix);
    nvf_layout layout;
    if (!nvf_layout_from_name(q->prep_scale_layout, &layout))
        return nvf_findings_add(c->out, "prepared.layout", "error", cfg, "",
                                "%s: quantization_config.scale_layout is '%s'; expected 128x4 or "
                                "8x4",
                                cfg, q->prep_scale_layout);
    int w4a4 = strcmp(q->prep_precision, "w4a4") == 0;
    if (!w4a4 && strcmp(q->prep_precision, "w4a16") != 0)
        return nvf_findings_add(c->out, "prepared.layout", "error", cfg, "",
                                "%s: quantization_config.precision is '%s'; expected w4a16 or "
                                "w4a4",
                                cfg, q->prep_precision);
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->moe.n_layers && rc == NVF_OK; i++)
        if (ck->moe.layers[i].kind == NVF_LAYER_MOE)
            rc = check_layer(&p, &ck->moe.layers[i], layout, w4a4);
    return rc;
}

int vd_check_ranks(vd_ctx *c, char *const *ranks, const nvf_ckpt *const *cks, size_t n) {
    int64_t r, size = 0, want_size = 0;
    int rc = NVF_OK;
    /* The split every directory name gives must be one; each rank of it present. */
    for (size_t i = 0; i < n; i++) {
        if (!nvf_ckpt_rank_dir_parse(ranks[i], &r, &size))
            continue;
        if (want_size == 0)
            want_size = size;
        else if (size != want_size && rc == NVF_OK)
            rc = nvf_findings_add(c->out, "prepared.expert-split", "error", ranks[i], "",
                                  "rank directory '%s' belongs to a split of %" PRId64
                                  " ranks, '%s' to one of %" PRId64,
                                  ranks[i], size, ranks[0], want_size);
    }
    for (int64_t k = 0; k < want_size && rc == NVF_OK; k++) {
        char name[64];
        rc = nvf_ckpt_rank_dir_name(name, sizeof name, k, want_size);
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp(ranks[i], name) == 0;
        if (rc == NVF_OK && !found)
            rc = nvf_findings_add(c->out, "prepared.rank-missing", "error", name, "",
                                  "%s: the expert-parallel split has %" PRId64
                                  " ranks but no directory '%s'",
                                  c->top, want_size, name);
    }
    /* expert_range of each rank, in rank order: contiguous, equal, covering every expert. */
    int64_t next = 0, count = -1, total = -1;
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const nvf_ckpt *ck = cks[i];
        if (!ck)
            continue;
        const nvf_ckpt_quant *q = &ck->quant;
        total = ck->moe.config.n_experts;
        if (q->expert_first != next || q->expert_count <= 0 ||
            (count >= 0 && q->expert_count != count) || q->ep_size != want_size)
            rc = nvf_findings_add(
                c->out, "prepared.expert-split", "error", ranks[i], "",
                "%s/config.json: expert_range [%" PRId64 ", %" PRId64 "] of ep_size %" PRId64
                "; expected experts from %" PRId64 "%s in %" PRId64 " equal contiguous ranges",
                ranks[i], q->expert_first, q->expert_count, q->ep_size, next,
                count >= 0 ? " in ranges like the previous rank's" : "", want_size);
        next = q->expert_first + (q->expert_count > 0 ? q->expert_count : 0);
        count = q->expert_count;
    }
    if (rc == NVF_OK && total > 0 && next != total && n == (size_t)want_size)
        rc = nvf_findings_add(c->out, "prepared.expert-split", "error", "", "",
                              "%s: the ranks' expert ranges end at expert %" PRId64
                              " but the model has %" PRId64 " experts",
                              c->top, next, total);
    return rc;
}
