/*
 * The conversion plan: which jobs turn which source tensors into which output tensors, and
 * which shard each job's outputs go to. Everything here is decided before a byte is written
 * and depends only on the checkpoint and the options, so the output order and the shard
 * assignment are the same for every thread count and device.
 *
 * Jobs follow the source tensors in name order; a quantization group (an expert's gate and up
 * projections, w1 and w3, or q, k and v) becomes one job at the place of its first member, and
 * a fused 3-D expert tensor becomes one job per expert. All outputs of a job go to one shard:
 * shards are filled greedily in job order and a job that would push a non-empty shard past
 * the maximum size starts the next one (a job larger than the maximum gets a shard of its own).
 */
#include "convert_internal.h"

#include "ckpt/ckpt_source.h"

#include "io/json_strict.h"

#include "nvfp4/fileio.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cv_builder builder;

cv_job *cv_builder_job(builder *b, cv_job_kind kind) {
    cv_plan *p = b->p;
    if (p->n_jobs == b->cap_jobs) {
        size_t cap = b->cap_jobs ? 2 * b->cap_jobs : 256;
        cv_job *j = realloc(p->jobs, cap * sizeof *j);
        if (!j)
            return NULL;
        p->jobs = j;
        b->cap_jobs = cap;
    }
    cv_job *j = &p->jobs[p->n_jobs++];
    memset(j, 0, sizeof *j);
    j->kind = kind;
    j->first_out = p->n_outs;
    j->input_scale = 1.0f;
    return j;
}

int cv_builder_out(builder *b, char *name, nvf_dtype dtype, int32_t ndim, const int64_t *shape) {
    cv_plan *p = b->p;
    if (!name)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    if (p->n_outs == b->cap_outs) {
        size_t cap = b->cap_outs ? 2 * b->cap_outs : 1024;
        cv_out *o = realloc(p->outs, cap * sizeof *o);
        if (!o) {
            free(name);
            return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        }
        p->outs = o;
        b->cap_outs = cap;
    }
    cv_out *o = &p->outs[p->n_outs++];
    memset(o, 0, sizeof *o);
    o->name = name;
    o->dtype = dtype;
    o->ndim = ndim;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        o->shape[i] = shape[i];
        numel *= (uint64_t)shape[i];
    }
    nvf_dtype_nbytes(&o->bytes, dtype, numel);
    cv_job *j = &p->jobs[p->n_jobs - 1];
    o->job = p->n_jobs - 1;
    j->n_out++;
    j->bytes_out += o->bytes;
    p->total_size += o->bytes;
    return NVF_OK;
}

char *cv_with_suffix(const char *module, const char *suffix) {
    size_t a = strlen(module), k = strlen(suffix);
    char *s = malloc(a + k + 1);
    if (s) {
        memcpy(s, module, a);
        memcpy(s + a, suffix, k + 1);
    }
    return s;
}

/* The four NVFP4 tensors of one linear module with `rows` x `cols` weights (modelopt), or the
 * target's; the module is listed as NVFP4 either way. */
static int add_linear_outs(builder *b, const cv_plan_hooks *h, const char *module, int64_t rows,
                           int64_t cols) {
    if (h && h->linear_outs) {
        int rc = h->linear_outs(h->ctx, b, module, rows, cols);
        if (rc == NVF_OK && b->pass == 0 &&
            !cJSON_AddItemToArray(b->p->nvfp4_modules, cJSON_CreateString(module)))
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        return rc;
    }
    int64_t w[2] = {rows, cols / 2}, sc[2] = {rows, cols / NVF_BLOCK};
    int rc = cv_builder_out(b, cv_with_suffix(module, ".weight"), NVF_DTYPE_U8, 2, w);
    if (rc == 0)
        rc = cv_builder_out(b, cv_with_suffix(module, ".weight_scale"), NVF_DTYPE_F8_E4M3, 2, sc);
    if (rc == 0)
        rc = cv_builder_out(b, cv_with_suffix(module, ".weight_scale_2"), NVF_DTYPE_F32, 0, NULL);
    if (rc == 0)
        rc = cv_builder_out(b, cv_with_suffix(module, ".input_scale"), NVF_DTYPE_F32, 0, NULL);
    if (rc == 0 && b->pass == 0 &&
        !cJSON_AddItemToArray(b->p->nvfp4_modules, cJSON_CreateString(module)))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    return rc;
}

uint64_t cv_source_bytes(const nvf_ckpt *ck, size_t ti, int64_t mats) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    if (mats <= 0)
        return 0;
    uint64_t b = (t->st->end - t->st->begin) / (uint64_t)mats;
    if (t->scale != NVF_CKPT_NONE)
        b += (ck->tensors[t->scale].st->end - ck->tensors[t->scale].st->begin) / (uint64_t)mats;
    return b;
}

/* Fused experts: PREFIX.experts.gate_up_proj[.weight] [E, 2I, H] -> one job per expert. */
static int add_fused_jobs(builder *b, const cv_plan_hooks *hk, const nvf_ckpt *ck, size_t ti) {
    const nvf_st_tensor *st = ck->tensors[ti].st;
    const char *name = st->name;
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, name, st->ndim);
    if (n.kind != NVF_NAME_FUSED)
        return nvf_error_set(NVF_E_SHAPE, "tensor '%s': a 3-D weight that is not a fused expert",
                             name);
    int gate_up = n.proj == NVF_PROJ_GATE_UP;
    int64_t E = st->shape[0];
    int rc = NVF_OK;
    if (gate_up && st->shape[1] % 2 != 0) {
        rc = nvf_error_set(NVF_E_SHAPE, "tensor '%s': gate_up_proj has an odd %" PRId64 " rows",
                           name, st->shape[1]);
        goto done;
    }
    for (int64_t e = 0; e < E && rc == NVF_OK; e++) {
        cv_job *j = cv_builder_job(b, CV_JOB_QUANT);
        if (!j) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
            break;
        }
        cv_member *m = &j->members[0];
        j->n_members = 1;
        m->tensor = ti;
        m->expert = e;
        m->split = gate_up;
        nvf_ckpt_source_view(&m->src, ck, ti, e);
        j->bytes_in = cv_source_bytes(ck, ti, E);
        m->module[0] = nvf_ckpt_fused_module(name, e, gate_up ? NVF_PROJ_GATE : NVF_PROJ_DOWN);
        m->module[1] = gate_up ? nvf_ckpt_fused_module(name, e, NVF_PROJ_UP) : NULL;
        if (!m->module[0] || (gate_up && !m->module[1])) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
            break;
        }
        int64_t rows = gate_up ? m->src.rows / 2 : m->src.rows;
        for (int h = 0; h < (gate_up ? 2 : 1) && rc == NVF_OK; h++)
            rc = add_linear_outs(b, hk, m->module[h], rows, m->src.cols);
    }
done:
    return rc;
}

/* A grouping entry: the group key of a 2-D tensor to quantize. */
typedef struct group_ref {
    char *key;
    size_t tensor;
} group_ref;

static int cmp_group_ref(const void *a, const void *b) {
    const group_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->tensor > y->tensor) - (x->tensor < y->tensor);
}

/*
 * For each 2-D tensor to quantize: the first member of its group (leader[i] == i for a
 * leader) and the next member (NVF_CKPT_NONE at the end), so that a job gathers its group.
 */
static int link_groups(size_t *leader, size_t *next, const nvf_ckpt *ck, const nvf_plan *sp) {
    size_t n = 0;
    group_ref *refs = calloc(ck->n_tensors ? ck->n_tensors : 1, sizeof *refs);
    int rc = NVF_OK;
    if (!refs)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    for (size_t i = 0; i < ck->n_tensors; i++) {
        leader[i] = i;
        next[i] = NVF_CKPT_NONE;
        if (sp->entries[i].action != NVF_PLAN_QUANTIZE || ck->tensors[i].st->ndim != 2)
            continue;
        char key[1024];
        if (nvf_ckpt_group_key(key, sizeof key, ck->tensors[i].st->name) != 1)
            continue;
        refs[n].key = strdup(key);
        refs[n].tensor = i;
        if (!refs[n++].key) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
            goto done;
        }
    }
    qsort(refs, n, sizeof *refs, cmp_group_ref);
    for (size_t a = 0; a < n;) {
        size_t z = a + 1;
        while (z < n && strcmp(refs[z].key, refs[a].key) == 0)
            z++;
        for (size_t k = a; k < z && z - a <= CV_MAX_MEMBERS; k++) {
            leader[refs[k].tensor] = refs[a].tensor;
            next[refs[k].tensor] = k + 1 < z ? refs[k + 1].tensor : NVF_CKPT_NONE;
        }
        a = z;
    }
done:
    for (size_t k = 0; k < n; k++)
        free(refs[k].key);
    free(refs);
    return rc;
}

static int add_group_job(builder *b, const cv_plan_hooks *h, const nvf_ckpt *ck, size_t first,
                         const size_t *next) {
    cv_job *j = cv_builder_job(b, CV_JOB_QUANT);
    if (!j)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    for (size_t ti = first; ti != NVF_CKPT_NONE; ti = next[ti]) {
        cv_member *m = &j->members[j->n_members++];
        m->tensor = ti;
        m->expert = -1;
        nvf_ckpt_source_view(&m->src, ck, ti, -1);
        j->bytes_in += cv_source_bytes(ck, ti, 1);
        m->module[0] = nvf_ckpt_module_of(ck->tensors[ti].st->name);
        if (!m->module[0])
            return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    }
    for (size_t k = 0; k < j->n_members; k++) {
        cv_member *m = &j->members[k];
        int rc = nvf_quant_source_check(&m->src, ck->tensors[m->tensor].st->name);
        if (rc == NVF_OK)
            rc = add_linear_outs(b, h, m->module[0], m->src.rows, m->src.cols);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

/* A weight that will be BF16 or FP8 in the output: a linear the loaders must not treat as
 * NVFP4. Norms, embeddings, biases and scales are not linears. */
static int is_linear(const nvf_ckpt_tensor *t) {
    return t->is_weight && (t->st->ndim == 2 || t->st->ndim == 3) && t->role != NVF_ROLE_NORM &&
           t->role != NVF_ROLE_EMBEDDING && t->role != NVF_ROLE_SCALE && t->role != NVF_ROLE_BIAS &&
           t->role != NVF_ROLE_ROUTER_BIAS;
}

static int note_unquantized(cv_plan *p, const nvf_ckpt *ck, size_t ti, int fp8_kept) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    if (!is_linear(t))
        return NVF_OK;
    char *m = nvf_ckpt_module_of(t->st->name);
    int ok = m != NULL;
    if (ok && fp8_kept) {
        const nvf_st_tensor *sc = ck->tensors[t->scale].st;
        ok = cJSON_AddStringToObject(p->fp8_modules, m,
                                     nvf_ckpt_is_scale_inv(sc->name) ? "FP8_PB_WO" : "FP8") != NULL;
    } else if (ok && t->st->dtype == NVF_DTYPE_U8 && t->scale_2 != NVF_CKPT_NONE) {
        /* stored NVFP4 copied as it is: still NVFP4 in the output, not an excluded module */
        ok = cJSON_AddItemToArray(p->nvfp4_modules, cJSON_CreateString(m)) != 0;
    } else if (ok) {
        ok = cJSON_AddItemToArray(p->exclude_modules, cJSON_CreateString(m));
    }
    free(m);
    return ok ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
}

/* Copy or dequantize one tensor that is not quantized. */
static int add_keep_job(builder *b, const nvf_ckpt *ck, size_t ti, const int *dequant) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    const nvf_st_tensor *st = t->st;
    cv_job *j = cv_builder_job(b, dequant[ti] ? CV_JOB_DEQUANT : CV_JOB_COPY);
    if (!j)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    j->n_members = 1;
    j->members[0].tensor = ti;
    j->members[0].expert = -1;
    j->bytes_in = st->end - st->begin;
    if (dequant[ti]) {
        j->bytes_in = cv_source_bytes(ck, ti, 1);
        nvf_ckpt_source_view(&j->members[0].src, ck, ti, -1);
        b->p->counts.tensors_dequantized += b->pass == 0;
    } else {
        b->p->counts.tensors_kept += b->pass == 0;
    }
    char *name = strdup(st->name);
    return cv_builder_out(b, name, dequant[ti] ? NVF_DTYPE_BF16 : st->dtype, st->ndim, st->shape);
}

/* The shards of rank r's jobs [first[r], first[r + 1]), filled greedily; a same_shard job stays
 * with the job before it. With `span`, a job and the same_shard jobs after it are one unit that
 * is measured whole (the jobs of one planned job, cv_plan_order). Without ranks the names are
 * "model-0000k-of-0000M.safetensors"; with them "rank-0000r-of-0000N/" comes first. */
int cv_plan_assign_shards(cv_plan *p, uint64_t max_shard, const size_t *first, int ep, int span) {
    size_t *count = calloc((size_t)ep, sizeof *count), total = 0;
    if (!count)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    for (int r = 0; r < ep; r++) {
        size_t n = 0;
        uint64_t cur = 0;
        for (size_t i = first[r]; i < first[r + 1]; i++) {
            cv_job *j = &p->jobs[i];
            uint64_t unit = j->bytes_out;
            for (size_t k = i + 1; span && k < first[r + 1] && p->jobs[k].same_shard; k++)
                unit += p->jobs[k].bytes_out;
            if (i == first[r] || (!j->same_shard && cur > 0 && cur + unit > max_shard)) {
                n++;
                cur = 0;
            }
            j->shard = total + n - 1;
            cur += j->bytes_out;
        }
        count[r] = n ? n : 1; /* a checkpoint without tensors still gets one (empty) shard */
        total += count[r];
    }
    free(p->shards);
    p->n_shards = 0;
    p->shards = calloc(total, sizeof *p->shards);
    if (!p->shards) {
        free(count);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    }
    p->n_shards = total;
    for (size_t r = 0, s = 0; r < (size_t)ep; r++) {
        for (size_t k = 0; k < count[r]; k++, s++) {
            cv_shard *sh = &p->shards[s];
            char dir[48] = "", name[128];
            if (ep > 1)
                snprintf(dir, sizeof dir, "rank-%05zu-of-%05d/", r, ep);
            /* At most 4096 ranks (the recipe's bound) and shards: under 64 bytes. */
            snprintf(name, sizeof name, "%smodel-%05zu-of-%05zu.safetensors", dir, k + 1, count[r]);
            memcpy(sh->name, name, strlen(name) < sizeof sh->name ? strlen(name) + 1 : 0);
            sh->rank = (int)r;
            sh->first_job = first[r + 1];
            sh->first_out = first[r + 1] < p->n_jobs ? p->jobs[first[r + 1]].first_out : p->n_outs;
        }
    }
    free(count);
    for (size_t i = 0; i < p->n_jobs; i++) {
        cv_shard *s = &p->shards[p->jobs[i].shard];
        if (s->n_jobs == 0) {
            s->first_job = i;
            s->first_out = p->jobs[i].first_out;
        }
        s->n_jobs++;
        s->n_out += p->jobs[i].n_out;
        s->tensor_bytes += p->jobs[i].bytes_out;
    }
    return NVF_OK;
}

int cv_plan_whole_pieces(cv_plan *p) {
    free(p->pieces);
    p->n_pieces = p->n_outs;
    p->pieces = calloc(p->n_outs ? p->n_outs : 1, sizeof *p->pieces);
    if (!p->pieces)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    for (size_t i = 0; i < p->n_outs; i++)
        p->pieces[i] = (cv_piece){.out = i, .off = 0, .len = p->outs[i].bytes};
    for (size_t i = 0; i < p->n_jobs; i++) {
        p->jobs[i].first_piece = p->jobs[i].first_out;
        p->jobs[i].n_pieces = p->jobs[i].n_out;
    }
    return NVF_OK;
}

/* Append `globs` to `buf` as 'a', 'b' (or "(none)"). */
static void glob_list(char *buf, size_t cap, char *const *globs, size_t n) {
    size_t k = strlen(buf);
    if (n == 0)
        snprintf(buf + k, cap - k, "(none)");
    for (size_t i = 0; i < n && k < cap; i++) {
        snprintf(buf + k, cap - k, "%s'%s'", i ? ", " : "", globs[i]);
        k = strlen(buf);
    }
}

/*
 * A conversion that quantizes nothing would write an "NVFP4" checkpoint with no NVFP4 tensor:
 * a usage error naming the globs (and, when weights matched but cannot be quantized, why).
 */
static int nothing_in_scope(const nvf_ckpt *ck, const nvf_recipe *r, const nvf_plan *sp) {
    char inc[512] = "", exc[512] = "", why[256] = "";
    glob_list(inc, sizeof inc, r->include, r->n_include);
    glob_list(exc, sizeof exc, r->exclude, r->n_exclude);
    for (size_t i = 0; i < ck->n_tensors; i++) {
        if (sp->entries[i].action == NVF_PLAN_SKIP) {
            snprintf(why, sizeof why, " (%zu weights in scope cannot be quantized, e.g. '%s': %s)",
                     sp->n_skip, ck->tensors[i].st->name, sp->entries[i].reason);
            break;
        }
    }
    return nvf_error_set(NVF_E_INVALID,
                         "nothing to quantize in '%s': no weight of its %zu tensors matches "
                         "--include %s (excluding %s)%s; use --allow-empty to convert anyway",
                         ck->path, ck->n_tensors, inc, exc, why);
}

/* One pass over the source tensors in name order (one per rank): the jobs of every tensor. */
static int plan_pass(builder *b, const nvf_ckpt *ck, const cv_plan_hooks *h, const size_t *leader,
                     const size_t *next, const int *dequant, int rank) {
    cv_plan *p = b->p;
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        nvf_plan_action a = p->scope->entries[i].action;
        if (a == NVF_PLAN_QUANTIZE) {
            p->counts.tensors_quantized += b->pass == 0;
            if (h && h->expert && t->role == NVF_ROLE_EXPERT_WEIGHT)
                rc = h->expert(h->ctx, b, ck, i, rank);
            else if (t->st->ndim == 3)
                rc = add_fused_jobs(b, h, ck, i);
            else if (leader[i] == i)
                rc = add_group_job(b, h, ck, i, next);
            continue;
        }
        /* A scale consumed by a quantization or a dequantization, and the FP8 input_scale of
         * a weight that no longer is FP8, are dropped. */
        if (t->role == NVF_ROLE_SCALE && t->owner != NVF_CKPT_NONE &&
            (p->scope->entries[t->owner].action == NVF_PLAN_QUANTIZE || dequant[t->owner])) {
            p->counts.tensors_dropped += b->pass == 0;
            continue;
        }
        if (a == NVF_PLAN_SKIP && b->pass == 0 && !(h && h->quiet))
            nvf_log(NVF_LOG_INFO, "keeping '%s' in source precision: %s", t->st->name,
                    p->scope->entries[i].reason);
        if (b->pass == 0)
            rc = note_unquantized(p, ck, i,
                                  t->st->dtype == NVF_DTYPE_F8_E4M3 && !dequant[i] &&
                                      t->scale != NVF_CKPT_NONE);
        if (rc == NVF_OK)
            rc = add_keep_job(b, ck, i, dequant);
    }
    return rc;
}

int cv_plan_build(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    return cv_plan_build_with(out, ck, opt, NULL);
}

int cv_plan_build_with(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt,
                       const cv_plan_hooks *h) {
    const nvf_recipe *r = opt->recipe;
    size_t n = ck->n_tensors;
    int ep = h && h->ep > 1 ? h->ep : 1;
    size_t *leader = NULL, *next = NULL, *first = NULL;
    int *dequant = NULL;
    builder b = {0};
    int rc;
    *out = NULL;
    cv_plan *p = calloc(1, sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    b.p = p;
    p->ep = ep;
    p->exclude_modules = cJSON_CreateArray();
    p->fp8_modules = cJSON_CreateObject();
    p->nvfp4_modules = cJSON_CreateArray();
    leader = calloc(n ? n : 1, sizeof *leader);
    next = calloc(n ? n : 1, sizeof *next);
    dequant = calloc(n ? n : 1, sizeof *dequant);
    first = calloc((size_t)ep + 1, sizeof *first);
    if (!p->exclude_modules || !p->fp8_modules || !p->nvfp4_modules || !leader || !next ||
        !dequant || !first) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        goto done;
    }
    rc = nvf_ckpt_plan_recipe(&p->scope, ck, r);
    if (rc != NVF_OK || (rc = link_groups(leader, next, ck, p->scope)) != NVF_OK)
        goto done;
    if (h && h->check && (rc = h->check(h->ctx, ck, p->scope)) != NVF_OK)
        goto done;
    /* FP8 weights that are not quantized become BF16 unless the source precision is kept. */
    for (size_t i = 0; i < n; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        nvf_plan_action a = p->scope->entries[i].action;
        /* An empty tensor is copied as it is (with its scale): no values to convert, and
         * never sized by its other dimensions. */
        dequant[i] = !opt->keep_source_precision && a != NVF_PLAN_QUANTIZE &&
                     t->role != NVF_ROLE_SCALE && t->st->dtype == NVF_DTYPE_F8_E4M3 &&
                     t->scale != NVF_CKPT_NONE && t->st->ndim >= 1 && t->st->ndim <= 3 &&
                     t->st->numel > 0;
    }
    for (int k = 0; k < ep && rc == NVF_OK; k++) {
        b.pass = k;
        first[k] = p->n_jobs;
        rc = plan_pass(&b, ck, h, leader, next, dequant, k);
    }
    first[ep] = p->n_jobs;
    if (rc == NVF_OK && p->counts.tensors_quantized == 0 && !opt->allow_empty)
        rc = nothing_in_scope(ck, r, p->scope);
    if (rc != NVF_OK)
        goto done;
    for (size_t i = 0; i < p->n_jobs; i++) {
        const cv_job *j = &p->jobs[i];
        for (size_t k = 0; (j->kind == CV_JOB_QUANT || j->kind == CV_JOB_NVFP4) && k < j->n_members;
             k++)
            p->counts.linears_quantized += j->members[k].split ? 2 : 1;
        p->counts.bytes_in += j->bytes_in;
        /* Buffered jobs hold their outputs (and a quantized job its f32-free source view). */
        if (j->kind != CV_JOB_COPY && j->bytes_out > p->largest_job)
            p->largest_job = j->bytes_out;
    }
    p->counts.tensors_written = p->n_outs;
    if (cJSON_GetArraySize(p->exclude_modules) == 0 &&
        !cJSON_AddItemToArray(p->exclude_modules, cJSON_CreateString("lm_head"))) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        goto done;
    }
    rc = cv_plan_assign_shards(p, r->max_shard_size, first, ep, 0);
    if (rc == NVF_OK)
        rc = cv_plan_whole_pieces(p);
done:
    free(leader);
    free(next);
    free(dequant);
    free(first);
    if (rc != NVF_OK) {
        cv_plan_free(p);
        return rc;
    }
    *out = p;
    return NVF_OK;
}

void cv_plan_free(cv_plan *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n_jobs; i++) {
        for (size_t k = 0; k < p->jobs[i].n_members; k++) {
            free(p->jobs[i].members[k].module[0]);
            free(p->jobs[i].members[k].module[1]);
        }
    }
    for (size_t i = 0; i < p->n_outs; i++)
        free(p->outs[i].name);
    nvf_plan_free(p->scope);
    free(p->ep_range);
    free(p->job_scale_2);
    cJSON_Delete(p->exclude_modules);
    cJSON_Delete(p->fp8_modules);
    cJSON_Delete(p->nvfp4_modules);
    cJSON_Delete(p->requantized);
    cJSON_Delete(p->modelopt_jobs);
    free(p->jobs);
    free(p->outs);
    free(p->pieces);
    free(p->shards);
    free(p);
}
