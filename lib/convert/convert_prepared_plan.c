/*
 * The plan of a prepared target (SPEC section 5): the modelopt plan's handling of every tensor
 * that is not a routed expert (cv_plan_build_with), with
 *   1. a converted dense linear X as X.weight, X.weight_scale in the scale layout, X.alpha [1]
 *      (W4A4: X.input_scale []);
 *   2. the routed experts of an MoE layer, in each rank r of --ep N, as the tensors of
 *      P = "{mlp prefix}.experts": w13_weight, w13_weight_scale, w13_alpha (W4A4:
 *      w13_input_scale), w2_weight, w2_weight_scale, w2_alpha (W4A4: fc2_input_scale), holding
 *      experts [r*E/N, (r+1)*E/N) of the layer. One job per expert and projection group (gate+up,
 *      down) writes its pieces of these tensors; the jobs of a layer-rank share one shard.
 * What the layout cannot take is refused before a job exists (nothing is written yet).
 */
#include "convert_internal.h"

#include "ckpt/ckpt_source.h"

#include "nvfp4/ckpt_nvfp4.h"
#include "nvfp4/format.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct prep_ctx {
    int w4a4;
    nvf_layout layout;
    int ep;
    size_t *layer_of; /* tensor -> MoE layer index (NVF_CKPT_NONE: not an expert of the map) */
    int *planned;     /* per MoE layer: 1 + the last rank whose jobs are planned */
    int nvfp4;        /* an NVFP4 source: expert jobs lay out the stored bytes (CV_JOB_NVFP4) */
    int strict;       /* --strict: gate/up with different weight_scale_2 are an error */
    const char *input_amax; /* --input-amax (refused for an NVFP4 source) */
} prep_ctx;

static const char *tname(const nvf_ckpt *ck, size_t ti) {
    return ck->tensors[ti].st->name;
}

/* Record which MoE layer holds each expert tensor of the map. */
static void map_layers(prep_ctx *c, const nvf_ckpt *ck) {
    for (size_t i = 0; i < ck->n_tensors; i++)
        c->layer_of[i] = NVF_CKPT_NONE;
    for (size_t l = 0; l < ck->moe.n_layers; l++) {
        const nvf_moe_layer *L = &ck->moe.layers[l];
        if (L->kind != NVF_LAYER_MOE || !L->experts)
            continue;
        for (int64_t e = 0; e < L->n_experts; e++)
            for (int k = 0; k < 3; k++)
                if (L->experts[e].proj[k].tensor != NVF_CKPT_NONE)
                    c->layer_of[L->experts[e].proj[k].tensor] = l;
    }
}

/* The rows and columns an expert's projection must have: gate/up [I, H], down [H, I]. */
static int check_proj(const nvf_ckpt *ck, const nvf_moe_layer *L, int64_t e, int k) {
    const nvf_moe_proj *pr = &L->experts[e].proj[k];
    const nvf_st_tensor *st = ck->tensors[pr->tensor].st;
    /* Stored NVFP4 packs two values a byte. */
    int64_t cols = st->shape[st->ndim - 1] * (st->dtype == NVF_DTYPE_U8 ? 2 : 1);
    int64_t want_rows = k == NVF_PROJ_DOWN ? L->hidden : L->intermediate;
    int64_t want_cols = k == NVF_PROJ_DOWN ? L->intermediate : L->hidden;
    if (pr->rows != want_rows || cols != want_cols)
        return nvf_error_set(NVF_E_INVALID,
                             "%s: expert %" PRId64 " is [%" PRId64 ", %" PRId64 "], the layer's "
                             "experts are [%" PRId64 ", %" PRId64 "] (a prepared layer stacks "
                             "experts of one shape)",
                             st->name, e, pr->rows, cols, want_rows, want_cols);
    return NVF_OK;
}

/* A layer whose experts are converted: all of them, complete, of one shape that the layout
 * takes, in equal ranges per rank. */
static int check_layer(const prep_ctx *c, const nvf_ckpt *ck, const nvf_plan *scope,
                       const nvf_moe_layer *L) {
    if (L->n_missing > 0)
        return nvf_error_set(NVF_E_INVALID,
                             "%s: MoE layer lacks a projection of expert %" PRId64 " (%zu experts "
                             "incomplete): a prepared layer needs all %" PRId64 " experts",
                             L->prefix, L->missing[0], L->n_missing, L->n_experts);
    const char *first = tname(ck, L->experts[0].proj[NVF_PROJ_GATE].tensor);
    if (L->intermediate <= 0 || L->intermediate % NVF_W13_GROUP != 0)
        return nvf_error_set(NVF_E_INVALID,
                             "%s: I=%" PRId64 " is not a multiple of %d (w13 interleave)", first,
                             L->intermediate, NVF_W13_GROUP);
    if (L->hidden <= 0 || L->hidden % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_INVALID, "%s: H=%" PRId64 " is not a multiple of %d", first,
                             L->hidden, NVF_BLOCK);
    if (L->n_experts % c->ep != 0)
        return nvf_error_set(NVF_E_INVALID,
                             "%s: E=%" PRId64 " experts do not split into --ep %d equal ranges",
                             first, L->n_experts, c->ep);
    for (int64_t e = 0; e < L->n_experts; e++) {
        for (int k = 0; k < 3; k++) {
            size_t ti = L->experts[e].proj[k].tensor;
            if (scope->entries[ti].action != NVF_PLAN_QUANTIZE)
                return nvf_error_set(NVF_E_INVALID,
                                     "%s: not converted (%s) while other experts of its layer "
                                     "are: a prepared layer holds all its experts",
                                     tname(ck, ti),
                                     scope->entries[ti].reason[0] ? scope->entries[ti].reason
                                                                  : "out of scope");
            int rc = check_proj(ck, L, e, k);
            if (rc != NVF_OK)
                return rc;
        }
    }
    return NVF_OK;
}

/*
 * An NVFP4 source (SPEC section 5 "Serialized NVFP4 in"): its routed expert weights in scope are
 * laid out from the stored bytes (their scales dropped); every other tensor is kept as stored
 * (BF16 stays BF16; an NVFP4 linear outside the experts keeps its ModelOpt tensors).
 */
static int take_nvfp4_experts(prep_ctx *c, const nvf_ckpt *ck, nvf_plan *scope,
                              const char *input_amax) {
    c->nvfp4 = 1;
    if (input_amax)
        return nvf_error_set(NVF_E_INVALID,
                             "--input-amax '%s': '%s' is already NVFP4 (%s); its own input "
                             "scales are used",
                             input_amax, ck->path, nvf_ckpt_format_name(ck->quant.format));
    for (size_t i = 0; i < ck->n_tensors; i++) {
        nvf_plan_entry *e = &scope->entries[i];
        if (ck->tensors[i].role == NVF_ROLE_EXPERT_WEIGHT && e->action == NVF_PLAN_SKIP &&
            ck->tensors[i].st->dtype == NVF_DTYPE_U8 && e->in_scope) {
            e->action = NVF_PLAN_QUANTIZE;
            e->reason[0] = '\0';
            scope->n_skip -= scope->n_skip > 0;
            scope->n_quantize++;
            /* Malformed stored tensors are exit 3 naming them, before the layer checks. */
            const nvf_st_tensor *st = ck->tensors[i].st;
            int64_t n = st->ndim == 3 ? st->shape[0] : 1;
            for (int64_t x = 0; x < n; x++) {
                nvf_nvfp4_view v;
                int rc = nvf_ckpt_nvfp4_view(&v, ck, i, st->ndim == 3 ? x : -1);
                if (rc != NVF_OK)
                    return rc;
            }
        }
    }
    return NVF_OK;
}

static int prep_check(void *ctx, const nvf_ckpt *ck, nvf_plan *scope) {
    prep_ctx *c = ctx;
    if (ck->quant.format == NVF_CKPT_FORMAT_NVFP4_MODELOPT ||
        ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT) {
        int rc = take_nvfp4_experts(c, ck, scope, c->input_amax);
        if (rc != NVF_OK)
            return rc;
    }
    map_layers(c, ck);
    int *touched = calloc(ck->moe.n_layers ? ck->moe.n_layers : 1, sizeof *touched);
    if (!touched)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        nvf_plan_action a = scope->entries[i].action;
        if (ck->tensors[i].role != NVF_ROLE_EXPERT_WEIGHT ||
            (a != NVF_PLAN_QUANTIZE && a != NVF_PLAN_SKIP))
            continue;
        if (a == NVF_PLAN_SKIP)
            rc = nvf_error_set(NVF_E_INVALID, "%s: %s (the prepared layout needs it as NVFP4)",
                               tname(ck, i), scope->entries[i].reason);
        else if (c->layer_of[i] == NVF_CKPT_NONE)
            rc = nvf_error_set(NVF_E_INVALID,
                               "%s: an expert weight outside its layer's expert map (an expert "
                               "id beyond the layer's expert count?)",
                               tname(ck, i));
        else
            touched[c->layer_of[i]] = 1;
    }
    for (size_t l = 0; l < ck->moe.n_layers && rc == NVF_OK; l++)
        if (touched[l])
            rc = check_layer(c, ck, scope, &ck->moe.layers[l]);
    free(touched);
    return rc;
}

/* W4A4 adds the input scale of each dense linear. */
static int prep_linear_outs(void *ctx, cv_builder *b, const char *module, int64_t rows,
                            int64_t cols) {
    const prep_ctx *c = ctx;
    int64_t kc = cols / NVF_BLOCK;
    int64_t w[2] = {rows, cols / 2};
    int64_t sc[2] = {nvf_layout_rows_padded(c->layout, rows),
                     nvf_layout_cols_padded(c->layout, kc)};
    int64_t one[1] = {1};
    b->p->jobs[b->p->n_jobs - 1].prep = CV_PREP_DENSE;
    b->p->jobs[b->p->n_jobs - 1].layout = (int)c->layout;
    int rc = cv_builder_out(b, cv_with_suffix(module, ".weight"), NVF_DTYPE_U8, 2, w);
    if (rc == NVF_OK)
        rc = cv_builder_out(b, cv_with_suffix(module, ".weight_scale"), NVF_DTYPE_F8_E4M3, 2, sc);
    if (rc == NVF_OK)
        rc = cv_builder_out(b, cv_with_suffix(module, ".alpha"), NVF_DTYPE_F32, 1, one);
    if (rc == NVF_OK && c->w4a4)
        rc = cv_builder_out(b, cv_with_suffix(module, ".input_scale"), NVF_DTYPE_F32, 0, NULL);
    return rc;
}

/* "P.experts" of an expert tensor name (its ".experts." prefix without the final dot). */
static char *experts_prefix(const char *name, int32_t ndim) {
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, name, ndim);
    size_t len = n.experts_len > 0 ? n.experts_len - 1 : strlen(name);
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, name, len);
        s[len] = '\0';
    }
    return s;
}

/* The outputs of one layer in one rank, on the first job of the layer-rank. */
static int layer_outs(const prep_ctx *c, cv_builder *b, const char *P, int64_t Er, int64_t H,
                      int64_t I) {
    nvf_layout l = c->layout;
    int64_t w13[3] = {Er, 2 * I, H / 2};
    int64_t s13[3] = {Er, nvf_layout_rows_padded(l, 2 * I),
                      nvf_layout_cols_padded(l, H / NVF_BLOCK)};
    int64_t w2[3] = {Er, H, I / 2};
    int64_t s2[3] = {Er, nvf_layout_rows_padded(l, H), nvf_layout_cols_padded(l, I / NVF_BLOCK)};
    int64_t per[1] = {Er}, one[1] = {1};
    struct {
        const char *suffix;
        nvf_dtype dtype;
        int32_t ndim;
        const int64_t *shape;
        int w4a4_only;
    } t[] = {
        {".w13_weight", NVF_DTYPE_U8, 3, w13, 0},
        {".w13_weight_scale", NVF_DTYPE_F8_E4M3, 3, s13, 0},
        {".w13_alpha", NVF_DTYPE_F32, 1, per, 0},
        {".w13_input_scale", NVF_DTYPE_F32, 1, per, 1},
        {".w2_weight", NVF_DTYPE_U8, 3, w2, 0},
        {".w2_weight_scale", NVF_DTYPE_F8_E4M3, 3, s2, 0},
        {".w2_alpha", NVF_DTYPE_F32, 1, per, 0},
        {".fc2_input_scale", NVF_DTYPE_F32, 1, one, 1},
    };
    int rc = NVF_OK;
    for (size_t k = 0; k < sizeof t / sizeof t[0] && rc == NVF_OK; k++)
        if (!t[k].w4a4_only || c->w4a4)
            rc = cv_builder_out(b, cv_with_suffix(P, t[k].suffix), t[k].dtype, t[k].ndim,
                                t[k].shape);
    return rc;
}

/* Member `m` of a job: projection `k` of expert `e` (a fused gate_up member holds both). */
static int set_member(cv_member *m, const nvf_ckpt *ck, const nvf_moe_layer *L, int64_t e, int k,
                      int fused_gate_up) {
    const nvf_moe_proj *pr = &L->experts[e].proj[k];
    const nvf_st_tensor *st = ck->tensors[pr->tensor].st;
    m->tensor = pr->tensor;
    m->expert = pr->expert;
    m->split = fused_gate_up;
    m->proj = fused_gate_up ? NVF_PROJ_GATE_UP : k;
    nvf_ckpt_source_view(&m->src, ck, pr->tensor, pr->expert);
    if (pr->expert >= 0) {
        m->module[0] =
            nvf_ckpt_fused_module(st->name, pr->expert, fused_gate_up ? NVF_PROJ_GATE : k);
        m->module[1] =
            fused_gate_up ? nvf_ckpt_fused_module(st->name, pr->expert, NVF_PROJ_UP) : NULL;
    } else {
        m->module[0] = nvf_ckpt_module_of(st->name);
    }
    if (!m->module[0] || (fused_gate_up && !m->module[1]))
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    return nvf_quant_source_check(&m->src, st->name);
}

/* The jobs of layer L in `rank`: one per expert for gate+up, then one per expert for down. A
 * source-precision layer quantizes them (CV_JOB_QUANT); an NVFP4 source's jobs lay out the
 * stored bytes (CV_JOB_NVFP4, with the gate/up scale agreement of cv_nvfp4_job_scales). */
static int plan_layer(const prep_ctx *c, cv_builder *b, const nvf_ckpt *ck, const nvf_moe_layer *L,
                      int rank) {
    int64_t Er = L->n_experts / c->ep, e0 = (int64_t)rank * Er;
    const nvf_st_tensor *st0 = ck->tensors[L->experts[0].proj[NVF_PROJ_GATE].tensor].st;
    char *P = experts_prefix(st0->name, st0->ndim);
    if (!P)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    size_t out0 = b->p->n_outs;
    int rc = NVF_OK;
    for (int w2 = 0; w2 < 2 && rc == NVF_OK; w2++) {
        for (int64_t k = 0; k < Er && rc == NVF_OK; k++) {
            const nvf_moe_expert *x = &L->experts[e0 + k];
            cv_job *j = cv_builder_job(b, c->nvfp4 ? CV_JOB_NVFP4 : CV_JOB_QUANT);
            if (!j) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
                break;
            }
            j->prep = w2 ? CV_PREP_W2 : CV_PREP_W13;
            j->layout = (int)c->layout;
            j->same_shard = w2 || k > 0;
            j->prep_out = out0;
            j->prep_slot = k;
            j->fc2_span = w2 && k == 0 && c->w4a4 ? (size_t)Er : 0;
            int fused = !w2 && x->proj[NVF_PROJ_GATE].expert >= 0 &&
                        x->proj[NVF_PROJ_GATE].tensor == x->proj[NVF_PROJ_UP].tensor;
            int n = w2 || fused ? 1 : 2;
            for (int m = 0; m < n && rc == NVF_OK; m++) {
                int proj = w2 ? NVF_PROJ_DOWN : m == 0 ? NVF_PROJ_GATE : NVF_PROJ_UP;
                const nvf_moe_proj *pr = &x->proj[proj];
                const nvf_st_tensor *st = ck->tensors[pr->tensor].st;
                j->n_members++;
                rc = c->nvfp4
                         ? cv_nvfp4_member(&j->members[m], ck, pr->tensor, pr->expert, proj, fused)
                         : set_member(&j->members[m], ck, L, e0 + k, proj, fused);
                j->bytes_in += cv_source_bytes(ck, pr->tensor, pr->expert >= 0 ? st->shape[0] : 1);
            }
            if (rc == NVF_OK && c->nvfp4)
                rc = cv_nvfp4_job_scales(j, b->p, ck, L->prefix, e0 + k, c->strict, b->pass);
            if (rc == NVF_OK && !w2 && k == 0)
                rc = layer_outs(c, b, P, Er, L->hidden, L->intermediate);
        }
    }
    free(P);
    return rc;
}

static int prep_expert(void *ctx, cv_builder *b, const nvf_ckpt *ck, size_t ti, int rank) {
    prep_ctx *c = ctx;
    size_t l = c->layer_of[ti];
    if (c->planned[l] == rank + 1)
        return NVF_OK; /* the layer's jobs came with its first expert tensor */
    c->planned[l] = rank + 1;
    return plan_layer(c, b, ck, &ck->moe.layers[l], rank);
}

/* The bytes of a prepared job's pieces, in order (its buffer). */
static int add_piece(cv_plan *p, size_t *cap, cv_job *j, size_t out, uint64_t off, uint64_t len) {
    if (p->n_pieces == *cap) {
        size_t n = *cap ? 2 * *cap : 1024;
        cv_piece *q = realloc(p->pieces, n * sizeof *q);
        if (!q)
            return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        p->pieces = q;
        *cap = n;
    }
    p->pieces[p->n_pieces++] = (cv_piece){.out = out, .off = off, .len = len};
    j->n_pieces++;
    j->bytes_out += len;
    return NVF_OK;
}

/*
 * Every job's pieces: an expert job's slices (slot s of each of its layer-rank's tensors: the
 * weight, the laid-out scales, alpha, W4A4's input scale; the first w2 job also fc2_input_scale),
 * every other job's outputs whole.
 */
static int prep_pieces(cv_plan *p, int w4a4) {
    size_t cap = 0;
    free(p->pieces);
    p->pieces = NULL;
    p->n_pieces = 0;
    int rc = NVF_OK;
    for (size_t i = 0; i < p->n_jobs && rc == NVF_OK; i++) {
        cv_job *j = &p->jobs[i];
        j->first_piece = p->n_pieces;
        j->n_pieces = 0;
        j->bytes_out = 0;
        if (j->prep != CV_PREP_W13 && j->prep != CV_PREP_W2) {
            for (size_t k = 0; k < j->n_out && rc == NVF_OK; k++)
                rc = add_piece(p, &cap, j, j->first_out + k, 0, p->outs[j->first_out + k].bytes);
            continue;
        }
        /* The layer-rank's outputs: w13 (3 or 4 tensors), then w2 (3 or 4). */
        size_t per = w4a4 ? 4 : 3, o = j->prep_out + (j->prep == CV_PREP_W2 ? per : 0);
        for (size_t k = 0; k < 3 && rc == NVF_OK; k++) {
            uint64_t slice = p->outs[o + k].bytes / (uint64_t)p->outs[o + k].shape[0];
            rc = add_piece(p, &cap, j, o + k, slice * (uint64_t)j->prep_slot, slice);
        }
        if (rc == NVF_OK && w4a4 && j->prep == CV_PREP_W13)
            rc = add_piece(p, &cap, j, o + 3, 4 * (uint64_t)j->prep_slot, 4);
        if (rc == NVF_OK && j->fc2_span > 0)
            rc = add_piece(p, &cap, j, o + 3, 0, 4);
    }
    p->largest_job = 0;
    for (size_t i = 0; i < p->n_jobs; i++)
        if (p->jobs[i].kind != CV_JOB_COPY && p->jobs[i].bytes_out > p->largest_job)
            p->largest_job = p->jobs[i].bytes_out;
    return rc;
}

/* fc2_input_scale: the largest down_proj input_scale of the layer's experts in the rank. */
static void prep_fc2(cv_plan *p) {
    for (size_t i = 0; i < p->n_jobs; i++) {
        cv_job *j = &p->jobs[i];
        j->fc2_input_scale = 0.0f;
        for (size_t k = i; k < i + j->fc2_span && k < p->n_jobs; k++)
            if (p->jobs[k].input_scale > j->fc2_input_scale)
                j->fc2_input_scale = p->jobs[k].input_scale;
    }
}

/* The experts [first, count] of each rank: the ranges of the first MoE layer (all are equal
 * ranges of E/N; layers with other expert counts split the same way). */
static int prep_ranges(cv_plan *p, const nvf_ckpt *ck, int ep) {
    p->ep_range = calloc((size_t)ep, sizeof *p->ep_range);
    if (!p->ep_range)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    int64_t E = 0;
    for (size_t l = 0; l < ck->moe.n_layers && E == 0; l++)
        if (ck->moe.layers[l].kind == NVF_LAYER_MOE)
            E = ck->moe.layers[l].n_experts;
    for (int r = 0; r < ep; r++) {
        p->ep_range[r][0] = (int64_t)r * (E / ep);
        p->ep_range[r][1] = E / ep;
    }
    return NVF_OK;
}

int cv_prepared_plan(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt, int w4a4) {
    const nvf_recipe *r = opt->recipe;
    prep_ctx c = {
        .w4a4 = w4a4,
        .layout = r->scale_layout == NVF_SCALE_LAYOUT_8X4 ? NVF_LAYOUT_8X4 : NVF_LAYOUT_128X4,
        .ep = r->ep > 1 ? r->ep : 1,
        .strict = opt->strict,
        .input_amax = opt->input_amax_path,
    };
    *out = NULL;
    c.layer_of = calloc(ck->n_tensors ? ck->n_tensors : 1, sizeof *c.layer_of);
    c.planned = calloc(ck->moe.n_layers ? ck->moe.n_layers : 1, sizeof *c.planned);
    int rc = c.layer_of && c.planned
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    cv_plan_hooks h = {
        .ep = c.ep,
        .ctx = &c,
        .check = prep_check,
        .linear_outs = prep_linear_outs,
        .expert = prep_expert,
    };
    cv_plan *p = NULL;
    if (rc == NVF_OK)
        rc = cv_plan_build_with(&p, ck, opt, &h);
    if (rc == NVF_OK)
        rc = cv_plan_input_scales(p, opt->input_amax_path);
    if (rc == NVF_OK) {
        prep_fc2(p);
        rc = prep_pieces(p, w4a4);
    }
    if (rc == NVF_OK)
        rc = prep_ranges(p, ck, c.ep);
    if (rc == NVF_OK && !(p->job_scale_2 = calloc(p->n_jobs ? p->n_jobs : 1, sizeof(float))))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    /* What the direct modelopt conversion of the source writes, for the inverse record (not for
     * compressed-tensors: the direct conversion keeps its tensors, the inverse writes ModelOpt
     * ones). */
    if (rc == NVF_OK && ck->quant.format != NVF_CKPT_FORMAT_NVFP4_CT)
        rc = cv_plan_modelopt_jobs(&p->modelopt_jobs, ck, opt);
    free(c.layer_of);
    free(c.planned);
    if (rc != NVF_OK) {
        cv_plan_free(p);
        return rc;
    }
    *out = p;
    return NVF_OK;
}
