/*
 * Which tensors a conversion would touch (SPEC sections 4 and 5): scope globs, then the
 * quantizability of each weight in scope.
 */
#include "ckpt_internal.h"

#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVFP4 quantizes blocks of 16 consecutive values along the input dimension. */
#define NVFP4_BLOCK 16

const char *const nvf_plan_default_include[] = {NVF_CKPT_DEFAULT_SCOPE};

const char *nvf_plan_action_name(nvf_plan_action action) {
    switch (action) {
    case NVF_PLAN_KEEP:
        return "keep";
    case NVF_PLAN_QUANTIZE:
        return "quantize";
    case NVF_PLAN_SKIP:
        return "skip";
    case NVF_PLAN_DROP:
        return "drop";
    }
    return "keep";
}

static const char *first_match(const char *name, const char *const *globs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (fnmatch(globs[i], name, 0) == 0)
            return globs[i];
    }
    return NULL;
}

/* Why a weight in scope cannot be quantized, into reason; "" when it can. */
static void quantizable(const nvf_ckpt_tensor *t, char *reason, size_t len) {
    const nvf_st_tensor *st = t->st;
    reason[0] = '\0';
    if (!nvf_dtype_is_float(st->dtype)) {
        if (t->scale_2 != NVF_CKPT_NONE)
            snprintf(reason, len, "already NVFP4 (%s packed values with a global scale)",
                     nvf_dtype_name(st->dtype));
        else
            snprintf(reason, len, "dtype %s is not floating point", nvf_dtype_name(st->dtype));
        return;
    }
    if (t->role == NVF_ROLE_EMBEDDING) {
        snprintf(reason, len, "embedding table, not a linear layer");
        return;
    }
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, st->name, st->ndim);
    if (n.kind == NVF_NAME_EXPERT_UNKNOWN) {
        snprintf(reason, len, "unknown 3-D tensor (fused experts: gate_up_proj, down_proj)");
        return;
    }
    if (st->ndim != 2 && n.kind != NVF_NAME_FUSED) {
        snprintf(reason, len, "%d-D tensor, not a 2-D linear weight", (int)st->ndim);
        return;
    }
    int64_t in = st->shape[st->ndim - 1];
    /* A zero dimension: nothing to quantize, and no per-matrix size to divide by. */
    if (st->numel == 0) {
        snprintf(reason, len, "empty tensor, copied as it is");
        return;
    }
    if (in % NVFP4_BLOCK != 0)
        snprintf(reason, len, "in=%" PRId64 " is not a multiple of %d", in, NVFP4_BLOCK);
}

int nvf_ckpt_plan(nvf_plan **out, const nvf_ckpt *ck, const char *const *include, size_t n_include,
                  const char *const *exclude, size_t n_exclude) {
    *out = NULL;
    if (n_include == 0) {
        include = nvf_plan_default_include;
        n_include = NVF_PLAN_DEFAULT_N_INCLUDE;
    }
    nvf_plan *p = calloc(1, sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    p->n = ck->n_tensors;
    p->entries = calloc(p->n ? p->n : 1, sizeof *p->entries);
    if (!p->entries) {
        free(p);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the plan of %zu tensors", ck->n_tensors);
    }
    /* Weights first: a scale's fate follows its weight's. */
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        nvf_plan_entry *e = &p->entries[i];
        const char *name = t->st->name;
        const char *excl = NULL;
        e->in_scope = first_match(name, include, n_include) != NULL &&
                      (excl = first_match(name, exclude, n_exclude)) == NULL;
        if (t->role == NVF_ROLE_SCALE)
            continue;
        if (!e->in_scope) {
            e->action = NVF_PLAN_KEEP;
            if (excl)
                snprintf(e->reason, sizeof e->reason, "excluded by '%s'", excl);
            else
                snprintf(e->reason, sizeof e->reason, "not in scope");
        } else if (t->role == NVF_ROLE_BIAS || t->role == NVF_ROLE_ROUTER_BIAS) {
            e->action = NVF_PLAN_KEEP;
            snprintf(e->reason, sizeof e->reason, "bias, not a weight");
        } else {
            quantizable(t, e->reason, sizeof e->reason);
            e->action = e->reason[0] ? NVF_PLAN_SKIP : NVF_PLAN_QUANTIZE;
        }
    }
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        nvf_plan_entry *e = &p->entries[i];
        if (t->role != NVF_ROLE_SCALE)
            continue;
        if (t->owner != NVF_CKPT_NONE && p->entries[t->owner].action == NVF_PLAN_QUANTIZE) {
            e->action = NVF_PLAN_DROP;
            snprintf(e->reason, sizeof e->reason, "source scale of a quantized weight");
        } else {
            e->action = NVF_PLAN_KEEP;
            snprintf(e->reason, sizeof e->reason, "scale tensor");
        }
    }
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_st_tensor *st = ck->tensors[i].st;
        uint64_t bytes = st->end - st->begin;
        switch (p->entries[i].action) {
        case NVF_PLAN_QUANTIZE: {
            /* numel is a multiple of 16 here (the last dimension is) */
            uint64_t linears = st->ndim == 3 ? (uint64_t)st->shape[0] : 1;
            p->n_quantize++;
            p->bytes_quantize += bytes;
            p->bytes_nvfp4 += st->numel / 2 + st->numel / NVFP4_BLOCK + 8 * linears;
            break;
        }
        case NVF_PLAN_SKIP:
            p->n_skip++;
            p->bytes_keep += bytes;
            break;
        case NVF_PLAN_DROP:
            p->n_drop++;
            break;
        case NVF_PLAN_KEEP:
            p->n_keep++;
            p->bytes_keep += bytes;
            break;
        }
    }
    *out = p;
    return NVF_OK;
}

int nvf_ckpt_plan_recipe(nvf_plan **out, const nvf_ckpt *ck, const nvf_recipe *r) {
    return nvf_ckpt_plan(out, ck, (const char *const *)r->include, r->n_include,
                         (const char *const *)r->exclude, r->n_exclude);
}

void nvf_plan_free(nvf_plan *plan) {
    if (!plan)
        return;
    free(plan->entries);
    free(plan);
}
