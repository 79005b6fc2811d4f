/*
 * The direct modelopt plan's output order, for the exact inverse of a prepared target
 * (nvfp4-inverse.json "modelopt_jobs", convert_unprepare.c).
 *
 * A direct `convert SRC --target modelopt` writes its jobs in the order of SRC's tensor names
 * (a quantization group at the place of its first member, its outputs X.weight, X.weight_scale,
 * X.weight_scale_2, X.input_scale member by member) and fills the shards greedily job by job
 * (convert_plan.c). The inverse converts a restored ModelOpt copy whose tensors are the same but
 * are all stored NVFP4 or kept: its plan has one copy job per tensor, in name order. So the
 * prepared conversion records the direct plan's jobs (each the list of its output names), and
 * the inverse reorders its copy jobs into that order, the copies of one recorded job kept in
 * one shard and measured together: the same tensors in the same order in the same shards, for
 * any --max-shard-size the inverse is given (the direct conversion with that size).
 */
#include "convert_internal.h"

#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cv_plan_modelopt_jobs(cJSON **out, const nvf_ckpt *ck, const nvf_convert_options *opt) {
    nvf_recipe r = *opt->recipe;
    r.target = NVF_TARGET_FORMAT_MODELOPT;
    r.scale_layout = NVF_SCALE_LAYOUT_128X4;
    r.ep = 1;
    nvf_convert_options o = *opt;
    o.recipe = &r;
    o.allow_empty = 1; /* an NVFP4 source converts with --allow-empty: the same order */
    cv_plan *p = NULL;
    cv_plan_hooks quiet = {.quiet = 1};
    *out = NULL;
    int rc = cv_plan_build_with(&p, ck, &o, &quiet);
    if (rc != NVF_OK)
        return rc;
    cJSON *doc = cJSON_CreateArray();
    for (size_t i = 0; doc && i < p->n_jobs; i++) {
        const cv_job *j = &p->jobs[i];
        cJSON *names = cJSON_CreateArray();
        if (!names || !cJSON_AddItemToArray(doc, names)) {
            cJSON_Delete(names);
            cJSON_Delete(doc);
            doc = NULL;
            break;
        }
        for (size_t k = 0; k < j->n_out && doc; k++) {
            cJSON *s = cJSON_CreateString(p->outs[j->first_out + k].name);
            if (!s || !cJSON_AddItemToArray(names, s)) {
                cJSON_Delete(s);
                cJSON_Delete(doc);
                doc = NULL;
            }
        }
    }
    cv_plan_free(p);
    if (!doc)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    *out = doc;
    return NVF_OK;
}

/* An output name and the job that writes it. */
typedef struct name_ref {
    const char *name;
    size_t out;
} name_ref;

static int cmp_ref(const void *a, const void *b) {
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

/*
 * perm[k]: the plan's job that comes k-th, first[k]: whether it starts a recorded job; 0 when
 * every output of the plan is listed once, each plan job's outputs consecutively in its
 * recorded job; else 1 with `why` saying where it differs.
 */
static int match(const cv_plan *p, const cJSON *jobs, const name_ref *refs, size_t *perm,
                 int *first, char *why, size_t cap) {
    size_t k = 0, listed = 0;
    const cJSON *job;
    cJSON_ArrayForEach(job, jobs) {
        int n = cJSON_IsArray(job) ? cJSON_GetArraySize(job) : -1;
        if (n <= 0) {
            snprintf(why, cap, "a recorded job is not a non-empty list of names");
            return 1;
        }
        for (int i = 0; i < n;) {
            const cJSON *v = cJSON_GetArrayItem(job, i);
            name_ref key = {cJSON_IsString(v) ? v->valuestring : "", 0};
            const name_ref *f = bsearch(&key, refs, p->n_outs, sizeof *refs, cmp_ref);
            if (!f || k >= p->n_jobs) {
                snprintf(why, cap, "'%s' is not an output of this conversion", key.name);
                return 1;
            }
            const cv_job *j = &p->jobs[p->outs[f->out].job];
            if (f->out != j->first_out || i + (int)j->n_out > n) {
                snprintf(why, cap, "'%s' is written with other tensors here", key.name);
                return 1;
            }
            for (size_t o = 0; o < j->n_out; o++) {
                const cJSON *w = cJSON_GetArrayItem(job, i + (int)o);
                if (!cJSON_IsString(w) || strcmp(w->valuestring, p->outs[j->first_out + o].name)) {
                    snprintf(why, cap, "'%s' is written with other tensors here",
                             p->outs[j->first_out + o].name);
                    return 1;
                }
            }
            perm[k] = p->outs[f->out].job;
            first[k++] = i == 0;
            i += (int)j->n_out;
            listed += j->n_out;
        }
    }
    if (listed != p->n_outs || k != p->n_jobs) {
        snprintf(why, cap, "%zu recorded tensors, %zu here", listed, p->n_outs);
        return 1;
    }
    return 0;
}

int cv_plan_order(cv_plan *p, const cJSON *jobs, uint64_t max_shard, int *applied) {
    *applied = 0;
    name_ref *refs = calloc(p->n_outs ? p->n_outs : 1, sizeof *refs);
    size_t *perm = calloc(p->n_jobs ? p->n_jobs : 1, sizeof *perm);
    int *first = calloc(p->n_jobs ? p->n_jobs : 1, sizeof *first);
    cv_job *nj = calloc(p->n_jobs ? p->n_jobs : 1, sizeof *nj);
    cv_out *no = calloc(p->n_outs ? p->n_outs : 1, sizeof *no);
    int rc = refs && perm && first && nj && no
                 ? NVF_OK
                 : nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
    char why[1200] = "";
    if (rc != NVF_OK)
        goto done;
    for (size_t i = 0; i < p->n_outs; i++)
        refs[i] = (name_ref){p->outs[i].name, i};
    qsort(refs, p->n_outs, sizeof *refs, cmp_ref);
    /* A job listed twice (and so another not at all): mark each job's outputs as taken. */
    size_t *job_of = calloc(p->n_outs ? p->n_outs : 1, sizeof *job_of);
    if (!job_of) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the conversion plan");
        goto done;
    }
    for (size_t i = 0; i < p->n_outs; i++)
        job_of[i] = p->outs[i].job;
    int differs = match(p, jobs, refs, perm, first, why, sizeof why);
    for (size_t k = 0; !differs && k < p->n_jobs; k++) {
        /* every job once: a repeated one shows as a job whose outputs were taken */
        const cv_job *j = &p->jobs[perm[k]];
        if (p->outs[j->first_out].job == (size_t)-1) {
            snprintf(why, sizeof why, "'%s' is listed twice", p->outs[j->first_out].name);
            differs = 1;
        }
        for (size_t o = 0; o < j->n_out; o++)
            p->outs[j->first_out + o].job = (size_t)-1;
    }
    for (size_t i = 0; i < p->n_outs; i++)
        p->outs[i].job = job_of[i];
    free(job_of);
    if (differs) {
        nvf_log(NVF_LOG_WARN,
                "the recorded order of the direct modelopt conversion does not match this "
                "conversion's outputs (%s; options other than the prepared conversion's, such "
                "as --include or --keep-source-precision?): the shards follow the tensor names "
                "instead",
                why);
        goto done;
    }
    size_t n_out = 0;
    for (size_t k = 0; k < p->n_jobs; k++) {
        const cv_job *j = &p->jobs[perm[k]];
        nj[k] = *j;
        nj[k].first_out = n_out;
        nj[k].same_shard = !first[k];
        for (size_t o = 0; o < j->n_out; o++) {
            no[n_out] = p->outs[j->first_out + o];
            no[n_out++].job = k;
        }
    }
    free(p->jobs);
    free(p->outs);
    p->jobs = nj;
    p->outs = no;
    nj = NULL;
    no = NULL;
    size_t range[2] = {0, p->n_jobs};
    rc = cv_plan_assign_shards(p, max_shard, range, 1, 1);
    if (rc == NVF_OK)
        rc = cv_plan_whole_pieces(p);
    *applied = rc == NVF_OK;
done:
    free(refs);
    free(perm);
    free(first);
    free(nj);
    free(no);
    return rc;
}
