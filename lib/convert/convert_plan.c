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

static size_t scale_elem_size(nvf_dtype d) {
    return d == NVF_DTYPE_F32 ? 4 : d == NVF_DTYPE_BF16 ? 2 : 1;
}

/* A scale of one element per matrix is a per-tensor scale: one block the size of the matrix;
 * anything else is a block scale of the checkpoint's block size. */
void cv_source_view(nvf_quant_source *s, const nvf_ckpt *ck, size_t ti, int64_t e) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    const nvf_st_tensor *st = t->st;
    int64_t mats = st->ndim == 3 ? st->shape[0] : 1;
    memset(s, 0, sizeof *s);
    s->dtype = st->dtype;
    s->rows = st->ndim >= 2 ? st->shape[st->ndim - 2] : 1;
    s->cols = st->ndim >= 1 ? st->shape[st->ndim - 1] : 1;
    uint64_t esize = nvf_dtype_bits(st->dtype) / 8;
    uint64_t mat_bytes = (uint64_t)s->rows * (uint64_t)s->cols * esize;
    s->data = st->data + (e > 0 ? (uint64_t)e * mat_bytes : 0);
    if (st->dtype != NVF_DTYPE_F8_E4M3 || t->scale == NVF_CKPT_NONE)
        return;
    const nvf_st_tensor *sc = ck->tensors[t->scale].st;
    if (mats <= 0)
        return; /* an empty fused tensor has no matrix to view (the plan copies it) */
    uint64_t per = sc->numel / (uint64_t)mats;
    s->scale_dtype = sc->dtype;
    s->scale_numel = per;
    s->scale = sc->data + (e > 0 ? (uint64_t)e * per * scale_elem_size(sc->dtype) : 0);
    if (per == 1) {
        s->block_rows = s->rows > 0 ? s->rows : 1;
        s->block_cols = s->cols;
    } else {
        s->block_rows = ck->quant.block[0] > 0 ? ck->quant.block[0] : 128;
        s->block_cols = ck->quant.block[1] > 0 ? ck->quant.block[1] : 128;
    }
}

/* Growable arrays of jobs and outputs. */
typedef struct builder {
    cv_plan *p;
    size_t cap_jobs, cap_outs;
} builder;

static cv_job *new_job(builder *b, cv_job_kind kind) {
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

/* Append an output of the last job; `name` is taken over (freed on failure). */
static int add_out(builder *b, char *name, nvf_dtype dtype, int32_t ndim, const int64_t *shape) {
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

static char *with_suffix(const char *module, const char *suffix) {
    size_t a = strlen(module), k = strlen(suffix);
    char *s = malloc(a + k + 1);
    if (s) {
        memcpy(s, module, a);
        memcpy(s + a, suffix, k + 1);
    }
    return s;
}

/* The four NVFP4 tensors of one linear module with `rows` x `cols` weights. */
static int add_linear_outs(builder *b, const char *module, int64_t rows, int64_t cols) {
    int64_t w[2] = {rows, cols / 2}, sc[2] = {rows, cols / NVF_BLOCK};
    int rc = add_out(b, with_suffix(module, ".weight"), NVF_DTYPE_U8, 2, w);
    if (rc == 0)
        rc = add_out(b, with_suffix(module, ".weight_scale"), NVF_DTYPE_F8_E4M3, 2, sc);
    if (rc == 0)
        rc = add_out(b, with_suffix(module, ".weight_scale_2"), NVF_DTYPE_F32, 0, NULL);
    if (rc == 0)
        rc = add_out(b, with_suffix(module, ".input_scale"), NVF_DTYPE_F32, 0, NULL);
    if (rc == 0 && !cJSON_AddItemToArray(b->p->nvfp4_modules, cJSON_CreateString(module)))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    return rc;
}

static uint64_t source_bytes(const nvf_ckpt *ck, size_t ti, int64_t mats) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    if (mats <= 0)
        return 0;
    uint64_t b = (t->st->end - t->st->begin) / (uint64_t)mats;
    if (t->scale != NVF_CKPT_NONE)
        b += (ck->tensors[t->scale].st->end - ck->tensors[t->scale].st->begin) / (uint64_t)mats;
    return b;
}

/* Fused experts: PREFIX.experts.gate_up_proj[.weight] [E, 2I, H] -> one job per expert. */
static int add_fused_jobs(builder *b, const nvf_ckpt *ck, size_t ti) {
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
        cv_job *j = new_job(b, CV_JOB_QUANT);
        if (!j) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
            break;
        }
        cv_member *m = &j->members[0];
        j->n_members = 1;
        m->tensor = ti;
        m->expert = e;
        m->split = gate_up;
        cv_source_view(&m->src, ck, ti, e);
        j->bytes_in = source_bytes(ck, ti, E);
        m->module[0] = nvf_ckpt_fused_module(name, e, gate_up ? NVF_PROJ_GATE : NVF_PROJ_DOWN);
        m->module[1] = gate_up ? nvf_ckpt_fused_module(name, e, NVF_PROJ_UP) : NULL;
        if (!m->module[0] || (gate_up && !m->module[1])) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
            break;
        }
        int64_t rows = gate_up ? m->src.rows / 2 : m->src.rows;
        for (int h = 0; h < (gate_up ? 2 : 1) && rc == NVF_OK; h++)
            rc = add_linear_outs(b, m->module[h], rows, m->src.cols);
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

static int add_group_job(builder *b, const nvf_ckpt *ck, size_t first, const size_t *next) {
    cv_job *j = new_job(b, CV_JOB_QUANT);
    if (!j)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    for (size_t ti = first; ti != NVF_CKPT_NONE; ti = next[ti]) {
        cv_member *m = &j->members[j->n_members++];
        m->tensor = ti;
        m->expert = -1;
        cv_source_view(&m->src, ck, ti, -1);
        j->bytes_in += source_bytes(ck, ti, 1);
        m->module[0] = nvf_ckpt_module_of(ck->tensors[ti].st->name);
        if (!m->module[0])
            return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    }
    for (size_t k = 0; k < j->n_members; k++) {
        cv_member *m = &j->members[k];
        int rc = nvf_quant_source_check(&m->src, ck->tensors[m->tensor].st->name);
        if (rc == NVF_OK)
            rc = add_linear_outs(b, m->module[0], m->src.rows, m->src.cols);
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
    cv_job *j = new_job(b, dequant[ti] ? CV_JOB_DEQUANT : CV_JOB_COPY);
    if (!j)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    j->n_members = 1;
    j->members[0].tensor = ti;
    j->members[0].expert = -1;
    j->bytes_in = st->end - st->begin;
    if (dequant[ti]) {
        j->bytes_in = source_bytes(ck, ti, 1);
        cv_source_view(&j->members[0].src, ck, ti, -1);
        b->p->counts.tensors_dequantized++;
    } else {
        b->p->counts.tensors_kept++;
    }
    char *name = strdup(st->name);
    return add_out(b, name, dequant[ti] ? NVF_DTYPE_BF16 : st->dtype, st->ndim, st->shape);
}

static int assign_shards(cv_plan *p, uint64_t max_shard) {
    size_t n = 0;
    uint64_t cur = 0;
    for (size_t i = 0; i < p->n_jobs; i++) {
        if (i == 0 || (cur > 0 && cur + p->jobs[i].bytes_out > max_shard)) {
            n++;
            cur = 0;
        }
        p->jobs[i].shard = n - 1;
        cur += p->jobs[i].bytes_out;
    }
    if (n == 0)
        n = 1; /* a checkpoint without tensors still gets one (empty) shard */
    p->shards = calloc(n, sizeof *p->shards);
    if (!p->shards)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    p->n_shards = n;
    for (size_t s = 0; s < n; s++) {
        snprintf(p->shards[s].name, sizeof p->shards[s].name, "model-%05zu-of-%05zu.safetensors",
                 s + 1, n);
        p->shards[s].first_job = p->n_jobs;
        p->shards[s].first_out = p->n_outs;
    }
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

int cv_plan_build(cv_plan **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    const nvf_recipe *r = opt->recipe;
    size_t n = ck->n_tensors;
    size_t *leader = NULL, *next = NULL;
    int *dequant = NULL;
    builder b = {0};
    int rc;
    *out = NULL;
    cv_plan *p = calloc(1, sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    b.p = p;
    p->exclude_modules = cJSON_CreateArray();
    p->fp8_modules = cJSON_CreateObject();
    p->nvfp4_modules = cJSON_CreateArray();
    leader = calloc(n ? n : 1, sizeof *leader);
    next = calloc(n ? n : 1, sizeof *next);
    dequant = calloc(n ? n : 1, sizeof *dequant);
    if (!p->exclude_modules || !p->fp8_modules || !p->nvfp4_modules || !leader || !next ||
        !dequant) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        goto done;
    }
    rc = nvf_ckpt_plan_recipe(&p->scope, ck, r);
    if (rc != NVF_OK || (rc = link_groups(leader, next, ck, p->scope)) != NVF_OK)
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
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        nvf_plan_action a = p->scope->entries[i].action;
        if (a == NVF_PLAN_QUANTIZE) {
            p->counts.tensors_quantized++;
            if (t->st->ndim == 3)
                rc = add_fused_jobs(&b, ck, i);
            else if (leader[i] == i)
                rc = add_group_job(&b, ck, i, next);
            continue;
        }
        /* A scale consumed by a quantization or a dequantization, and the FP8 input_scale of
         * a weight that no longer is FP8, are dropped. */
        if (t->role == NVF_ROLE_SCALE && t->owner != NVF_CKPT_NONE &&
            (p->scope->entries[t->owner].action == NVF_PLAN_QUANTIZE || dequant[t->owner])) {
            p->counts.tensors_dropped++;
            continue;
        }
        if (a == NVF_PLAN_SKIP)
            nvf_log(NVF_LOG_INFO, "keeping '%s' in source precision: %s", t->st->name,
                    p->scope->entries[i].reason);
        rc = note_unquantized(p, ck, i,
                              t->st->dtype == NVF_DTYPE_F8_E4M3 && !dequant[i] &&
                                  t->scale != NVF_CKPT_NONE);
        if (rc == NVF_OK)
            rc = add_keep_job(&b, ck, i, dequant);
    }
    if (rc == NVF_OK && p->counts.tensors_quantized == 0 && !opt->allow_empty)
        rc = nothing_in_scope(ck, r, p->scope);
    if (rc != NVF_OK)
        goto done;
    for (size_t i = 0; i < p->n_jobs; i++) {
        p->counts.linears_quantized += p->jobs[i].kind == CV_JOB_QUANT ? p->jobs[i].n_out / 4 : 0;
        p->counts.bytes_in += p->jobs[i].bytes_in;
        /* Buffered jobs hold their outputs (and a quantized job its f32-free source view). */
        if (p->jobs[i].kind != CV_JOB_COPY && p->jobs[i].bytes_out > p->largest_job)
            p->largest_job = p->jobs[i].bytes_out;
    }
    p->counts.tensors_written = p->n_outs;
    if (cJSON_GetArraySize(p->exclude_modules) == 0 &&
        !cJSON_AddItemToArray(p->exclude_modules, cJSON_CreateString("lm_head"))) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        goto done;
    }
    rc = assign_shards(p, r->max_shard_size);
    if (rc == NVF_OK)
        rc = cv_plan_whole_pieces(p);
done:
    free(leader);
    free(next);
    free(dequant);
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
    cJSON_Delete(p->exclude_modules);
    cJSON_Delete(p->fp8_modules);
    cJSON_Delete(p->nvfp4_modules);
    free(p->jobs);
    free(p->outs);
    free(p->pieces);
    free(p->shards);
    free(p);
}

/*
 * --input-amax: {"MODULE": amax, ...} with the calibrated maximum magnitude of each module's
 * input. ModelOpt writes the NVFP4 activation scale as amax / (6 * 448) (E2M1 max times E4M3
 * max; NVFP4QTensor.get_weights_scaling_factor_2 applied to the input quantizer's amax), and the
 * loaders multiply by it; the members of a group share one input, so they take the largest
 * amax of the group.
 */
int cv_plan_input_scales(cv_plan *p, const char *path) {
    if (!path)
        return NVF_OK;
    cJSON *doc = NULL;
    int rc = nvf_json_read_strict(&doc, path, 256u << 20, "--input-amax file", NVF_E_INVALID);
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return nvf_error_set(NVF_E_INVALID, "--input-amax '%s': not a JSON object", path);
    }
    size_t used = 0, entries = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, doc) {
        entries++;
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble <= 0 ||
            it->valuedouble > 3.0e38) {
            rc = nvf_error_set(NVF_E_INVALID,
                               "--input-amax '%s': '%s' must be a positive finite number", path,
                               it->string);
            goto done;
        }
    }
    for (size_t i = 0; i < p->n_jobs; i++) {
        cv_job *j = &p->jobs[i];
        if (j->kind != CV_JOB_QUANT)
            continue;
        float amax = 0.0f;
        for (size_t k = 0; k < j->n_members; k++) {
            for (int h = 0; h < 2; h++) {
                const cJSON *v =
                    j->members[k].module[h]
                        ? cJSON_GetObjectItemCaseSensitive(doc, j->members[k].module[h])
                        : NULL;
                if (v) {
                    used++;
                    if ((float)v->valuedouble > amax)
                        amax = (float)v->valuedouble;
                }
            }
        }
        if (amax > 0.0f) {
            j->input_scale = amax / (NVF_E2M1_MAX * NVF_E4M3_MAX);
            if (!(j->input_scale > 0.0f)) {
                rc = nvf_error_set(NVF_E_INVALID,
                                   "--input-amax '%s': amax %g of '%s' gives input_scale 0", path,
                                   (double)amax, j->members[0].module[0]);
                goto done;
            }
        }
    }
    if (used < entries)
        nvf_log(NVF_LOG_WARN, "--input-amax '%s': %zu of %zu entries name no converted module",
                path, entries - used, entries);
done:
    cJSON_Delete(doc);
    return rc;
}
