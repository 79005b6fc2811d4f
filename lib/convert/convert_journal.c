/*
 * The progress journal DST/.nvfp4-progress.json (a part of --shard i/N keeps its own,
 * DST/.nvfp4-parts/i-of-N.progress.json, which the merge removes), written atomically after
 * every finished shard and removed when the conversion completes:
 *   1. "key": SHA-256 (hex) over the tool version, every source file's name, size and mtime,
 *      the --input-amax file's SHA-256, the options that change the output and the recipe;
 *   2. "shards": [{"name", "bytes", "sha256"}, ...] in the order they were finished.
 * --resume reuses a shard only when the key is this run's and the file still has the recorded
 * size and SHA-256; its tensors' CRC-32s are computed again from its bytes (never taken from the
 * journal), in the same pass. The journal is read with the strict JSON reader; one it cannot
 * read is reported and nothing is reused.
 */
#include "convert_internal.h"

#include "io/json_strict.h"
#include "manifest/hash_file.h"
#include "manifest/manifest_priv.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define JOURNAL_MAX_BYTES ((size_t)256 << 20)

static int make_key(cv_run *r) {
    const nvf_convert_options *o = r->opt;
    nvf_sha256 *h = nvf_sha256_new();
    char *rj = nvf_recipe_to_json(o->recipe);
    int rc = h && rj ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the resume key");
    char line[512];
    for (size_t i = 0; rc == NVF_OK && i < r->src.n; i++) {
        char *path = cv_sources_path(&r->src, i);
        struct stat sb;
        if (!path || stat(path, &sb) != 0) {
            rc =
                nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path ? path : "?", strerror(errno));
        } else {
            snprintf(line, sizeof line, "%s\n%lld %lld.%09ld\n", r->src.names[i],
                     (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
            rc = nvf_sha256_update(h, line, strlen(line));
        }
        free(path);
    }
    if (rc == NVF_OK && o->input_amax_path) {
        char sum[65];
        uint64_t n;
        rc = nvf_sha256_file(sum, &n, o->input_amax_path);
        if (rc == NVF_OK)
            rc = nvf_sha256_update(h, sum, 64);
    }
    if (rc == NVF_OK) {
        snprintf(line, sizeof line, "%s\nkeep_source_precision=%d allow_nonfinite=%d\n",
                 nvf_version(), o->keep_source_precision, o->allow_nonfinite);
        rc = nvf_sha256_update(h, line, strlen(line));
    }
    if (rc == NVF_OK)
        rc = nvf_sha256_update(h, rj, strlen(rj));
    if (rc == NVF_OK) {
        r->key = malloc(65);
        rc = r->key ? nvf_sha256_final(h, r->key) : nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    nvf_sha256_free(h);
    free(rj);
    return rc;
}

int cv_journal_start(cv_run *r) {
    const nvf_convert_options *o = r->opt;
    int rc = make_key(r);
    if (rc != NVF_OK)
        return rc;
    r->journal_path = o->shard_count > 0
                          ? cv_parts_path(o->dst, o->shard_index, o->shard_count, ".progress.json")
                          : nvf_path_join(o->dst, NVF_CONVERT_JOURNAL);
    if (!r->journal_path)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the journal");
    r->journal = cJSON_CreateObject();
    if (!r->journal || !cJSON_AddStringToObject(r->journal, "key", r->key) ||
        !cJSON_AddArrayToObject(r->journal, "shards"))
        return nvf_error_set(NVF_E_NOMEM, "no memory for the journal");
    return NVF_OK;
}

int cv_job_scales_put(cJSON *e, const cv_plan *p, const cv_shard *sh) {
    if (!p->job_scale_2)
        return 1;
    cJSON *a = cJSON_AddArrayToObject(e, "job_scale_2");
    int ok = a != NULL;
    for (size_t i = 0; ok && i < sh->n_jobs; i++) {
        float v = p->job_scale_2[sh->first_job + i];
        uint32_t bits;
        char hex[9] = "";
        memcpy(&bits, &v, sizeof bits);
        if (v > 0.0f)
            snprintf(hex, sizeof hex, "%08" PRIx32, bits);
        ok = cJSON_AddItemToArray(a, cJSON_CreateString(hex));
    }
    return ok;
}

int cv_job_scales_take(cv_plan *p, const cv_shard *sh, const cJSON *e) {
    if (!p->job_scale_2)
        return 1;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "job_scale_2"), *v;
    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != sh->n_jobs)
        return 0;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsString(v))
            return 0;
    }
    size_t k = 0;
    cJSON_ArrayForEach(v, a) {
        uint32_t bits = (uint32_t)strtoul(v->valuestring, NULL, 16);
        float x;
        memcpy(&x, &bits, sizeof x);
        p->job_scale_2[sh->first_job + k++] = v->valuestring[0] ? x : 0.0f;
    }
    return 1;
}

int cv_journal_add(cv_run *r, size_t si) {
    const cv_shard *s = &r->p->shards[si];
    cJSON *e = cJSON_CreateObject();
    int ok = e && cJSON_AddStringToObject(e, "name", s->name) &&
             cJSON_AddNumberToObject(e, "bytes", (double)s->file_bytes) &&
             cJSON_AddStringToObject(e, "sha256", s->sha256) && cv_job_scales_put(e, r->p, s) &&
             cJSON_AddItemToArray(cJSON_GetObjectItem(r->journal, "shards"), e);
    int rc = NVF_OK;
    if (!ok) {
        cJSON_Delete(e);
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the journal of shard '%s'", s->name);
    } else {
        rc = cv_write_json(r->journal_path, r->journal, NULL, NULL);
    }
    return rc;
}

int cv_shard_rehash(cv_plan *p, const cv_shard *sh, const char *path, char sha[65],
                    uint64_t *bytes) {
    nvf_st_file *f = NULL;
    uint64_t *begin = calloc(sh->n_out + 1, sizeof *begin);
    uint64_t *end = calloc(sh->n_out + 1, sizeof *end);
    uint32_t *crc = calloc(sh->n_out + 1, sizeof *crc);
    int ok = begin && end && crc && nvf_st_open(&f, path) == NVF_OK && f->n_tensors == sh->n_out;
    for (size_t i = 0; ok && i < sh->n_out; i++) {
        const cv_out *o = &p->outs[sh->first_out + i];
        const nvf_st_tensor *t = &f->tensors[i];
        ok = strcmp(t->name, o->name) == 0 && t->dtype == o->dtype && t->ndim == o->ndim &&
             memcmp(t->shape, o->shape, (size_t)o->ndim * sizeof *o->shape) == 0 &&
             t->end - t->begin == o->bytes;
        begin[i] = t->begin;
        end[i] = t->end;
    }
    nvf_hash_tensors ht = {f ? f->data_start : 0, sh->n_out, begin, end, crc, 0};
    nvf_st_close(f);
    ok = ok && nvf_hash_file_ex(sha, bytes, path, &ht, NULL, NULL) == NVF_OK;
    for (size_t i = 0; ok && i < sh->n_out; i++)
        p->outs[sh->first_out + i].crc32 = crc[i];
    free(begin);
    free(end);
    free(crc);
    nvf_error_clear();
    return ok;
}

static int stop_requested(void *ctx) {
    const cv_run *r = ctx;
    return r->opt->stop && *r->opt->stop;
}

/* Reuse shard `sh` if its file is what journal entry `e` recorded. */
static int try_reuse(cv_run *r, cv_shard *sh, const cJSON *e) {
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(e, "sha256");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(e, "bytes");
    if (!cJSON_IsString(sha) || !cJSON_IsNumber(bytes))
        return NVF_OK;
    char *path = nvf_path_join(r->opt->dst, sh->name);
    char got[65];
    uint64_t n = 0;
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    /* prepared targets also take back the jobs' weight_scale_2 (the inverse record needs them):
     * a shard journaled without them is converted again */
    int ok = cv_shard_rehash(r->p, sh, path, got, &n) && strcmp(got, sha->valuestring) == 0 &&
             (double)n == bytes->valuedouble && cv_job_scales_take(r->p, sh, e);
    free(path);
    if (!ok) {
        /* The writer computes these again from zero. */
        for (size_t i = 0; i < sh->n_out; i++)
            r->p->outs[sh->first_out + i].crc32 = 0;
        return NVF_OK;
    }
    cJSON *copy = cJSON_Duplicate(e, 1);
    if (!copy || !cJSON_AddItemToArray(cJSON_GetObjectItem(r->journal, "shards"), copy)) {
        cJSON_Delete(copy);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the journal");
    }
    sh->reused = 1;
    sh->file_bytes = n;
    memcpy(sh->sha256, got, sizeof got);
    r->p->counts.shards_reused++;
    r->prog.shards_done++;
    r->prog.bytes_done += sh->source_bytes;
    r->prog.tensors_done += sh->n_out;
    return NVF_OK;
}

int cv_journal_resume(cv_run *r) {
    const char *jpath = r->journal_path;
    cJSON *doc = NULL;
    int rc = NVF_OK;
    if (!nvf_path_is_file(jpath))
        goto done;
    if ((rc = nvf_json_read_strict(&doc, jpath, JOURNAL_MAX_BYTES, "progress journal", 0)) !=
        NVF_OK) {
        if (rc == NVF_E_NOMEM) /* not the journal's fault: say so, do not start over */
            goto done;
        rc = NVF_OK;
        nvf_log(NVF_LOG_WARN, "resume: %s; starting over", nvf_error_last());
        nvf_error_clear();
        goto done;
    }
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(doc, "key");
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(doc, "shards");
    if (!cJSON_IsString(key) || strcmp(key->valuestring, r->key) != 0 || !cJSON_IsArray(shards)) {
        nvf_log(NVF_LOG_INFO, "resume: the journal is for another source, recipe or options; "
                              "starting over");
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, shards) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        for (size_t s = 0; rc == NVF_OK && cJSON_IsString(name) && s < r->p->n_shards; s++) {
            cv_shard *sh = &r->p->shards[s];
            if (sh->reused || sh->other || strcmp(sh->name, name->valuestring) != 0)
                continue;
            rc = stop_requested(r) ? nvf_error_set(NVF_E_INTERRUPTED,
                                                   "interrupted while checking the finished "
                                                   "shards in '%s'; nothing was changed",
                                                   r->opt->dst)
                                   : try_reuse(r, sh, e);
        }
    }
    if (rc == NVF_OK && r->p->counts.shards_reused)
        nvf_log(NVF_LOG_INFO, "resume: reusing %llu of %zu shards",
                (unsigned long long)r->p->counts.shards_reused, (size_t)r->prog.shards_total);
done:
    cJSON_Delete(doc);
    return rc;
}

/* Complete output ------------------------------------------------------------------------- */

static int cmp_out_ptr(const void *a, const void *b) {
    return strcmp((*(cv_out *const *)a)->name, (*(cv_out *const *)b)->name);
}

/* The planned output `name` in shard file `file` (with expert-parallel ranks, every rank has
 * its own copy of a replicated tensor: the same name in another file). NULL when none. */
static cv_out *find_out(cv_out **by_name, const cv_plan *p, const char *name, const char *file) {
    cv_out key = {.name = (char *)name}, *kp = &key;
    cv_out **hit = bsearch(&kp, by_name, p->n_outs, sizeof *by_name, cmp_out_ptr);
    if (!hit)
        return NULL;
    while (hit > by_name && strcmp(hit[-1]->name, name) == 0)
        hit--;
    for (; hit < by_name + p->n_outs && strcmp((*hit)->name, name) == 0; hit++)
        if (strcmp(p->shards[p->jobs[(*hit)->job].shard].name, file) == 0)
            return *hit;
    return NULL;
}

/* Whether manifest `m` records this conversion: recipe, target, sources, planned tensors.
 * @return 1, 0, or NVF_E_NOMEM. */
static int records_this(cv_run *r, const nvf_manifest *m, cv_out **by_name) {
    const cv_plan *p = r->p;
    const nvf_manifest_priv *pm = nvf_manifest_priv_of_const(m);
    char *rj = nvf_recipe_to_json(r->opt->recipe);
    cJSON *recipe = rj ? cJSON_Parse(rj) : NULL; /* our own text: NULL is out of memory */
    cJSON *target = r->target->manifest_target(r->p, r->opt->recipe);
    free(rj);
    int ok = recipe && target;
    if (!ok) {
        cJSON_Delete(recipe);
        cJSON_Delete(target);
        return nvf_error_set(NVF_E_NOMEM, "no memory to compare the output's manifest");
    }
    ok = pm->recipe && cJSON_Compare(pm->recipe, recipe, 1) && pm->target &&
         cJSON_Compare(pm->target, target, 1) && m->n_source == r->src.n &&
         m->n_tensors == p->n_outs;
    cJSON_Delete(recipe);
    cJSON_Delete(target);
    for (size_t i = 0; ok && i < r->src.n; i++) {
        const nvf_manifest_file *f = NULL;
        for (size_t k = 0; k < m->n_source && !f; k++)
            if (strcmp(m->source[k].name, r->src.names[i]) == 0)
                f = &m->source[k];
        ok = f && f->bytes == r->src.bytes[i] && strcmp(f->sha256, r->src.sha[i]) == 0;
    }
    for (size_t i = 0; ok && i < m->n_tensors; i++) {
        const nvf_manifest_tensor *t = &m->tensors[i];
        const cv_out *o = find_out(by_name, p, t->name, t->file);
        ok = o && strcmp(t->dtype, nvf_dtype_name(o->dtype)) == 0 && t->ndim == o->ndim &&
             memcmp(t->shape, o->shape, (size_t)o->ndim * sizeof *o->shape) == 0;
    }
    return ok;
}

/* Whether DST verifies against `m` (our lock file aside). */
static int verifies(cv_run *r, const nvf_manifest *m) {
    nvf_manifest_report *rep = NULL;
    nvf_hash_opts ho = {.threads = r->opt->threads, .tensors = 1};
    int rc = nvf_manifest_check_dir(&rep, r->opt->dst, m, &ho);
    int ok = rc == NVF_OK;
    for (size_t i = 0; ok && i < rep->n_findings; i++) {
        const nvf_manifest_finding *f = &rep->findings[i];
        ok = f->kind == NVF_FINDING_EXTRA && strcmp(f->name, CV_LOCK_NAME) == 0;
        if (!ok)
            nvf_log(NVF_LOG_INFO, "resume: the output does not verify (%s)", f->line);
    }
    nvf_manifest_report_free(rep);
    return ok;
}

int cv_journal_complete(cv_run *r, int *complete) {
    *complete = 0;
    const nvf_convert_options *o = r->opt;
    char *jpath = nvf_path_join(o->dst, NVF_CONVERT_JOURNAL);
    char *mpath = nvf_path_join(o->dst, NVF_MANIFEST_NAME);
    cv_out **by_name = malloc((r->p->n_outs ? r->p->n_outs : 1) * sizeof *by_name);
    nvf_manifest *m = NULL;
    int rc = jpath && mpath && by_name ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc != NVF_OK || !o->resume || nvf_path_is_file(jpath) || !nvf_path_is_file(mpath))
        goto done;
    if (o->input_amax_path) {
        nvf_log(NVF_LOG_INFO,
                "resume: '%s' holds a complete output, converted again since "
                "--input-amax values are not recorded in its manifest",
                o->dst);
        goto done;
    }
    if ((rc = nvf_manifest_read(&m, mpath)) != NVF_OK) {
        if (rc == NVF_E_NOMEM)
            goto done;
        rc = NVF_OK;
        nvf_log(NVF_LOG_INFO, "resume: %s; converting again", nvf_error_last());
        nvf_error_clear();
        goto done;
    }
    if ((rc = cv_sources_hash(&r->src, stop_requested, r)) != NVF_OK)
        goto done;
    if (stop_requested(r)) {
        rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing the source");
        goto done;
    }
    for (size_t i = 0; i < r->p->n_outs; i++)
        by_name[i] = &r->p->outs[i];
    qsort(by_name, r->p->n_outs, sizeof *by_name, cmp_out_ptr);
    int same = records_this(r, m, by_name);
    if (same < 0) {
        rc = same;
        goto done;
    }
    if (!same) {
        nvf_log(NVF_LOG_INFO, "resume: '%s' holds another conversion; converting again", o->dst);
        goto done;
    }
    if (!verifies(r, m)) {
        nvf_error_clear();
        goto done;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        /* found: records_this checked every (name, file) */
        find_out(by_name, r->p, m->tensors[i].name, m->tensors[i].file)->crc32 =
            m->tensors[i].crc32;
    }
    for (size_t s = 0; s < r->p->n_shards; s++) {
        cv_shard *sh = &r->p->shards[s];
        for (size_t k = 0; k < m->n_files; k++)
            if (strcmp(m->files[k].name, sh->name) == 0) {
                sh->file_bytes = m->files[k].bytes;
                memcpy(sh->sha256, m->files[k].sha256, sizeof sh->sha256);
            }
        sh->reused = 1;
        r->p->counts.shards_reused++;
    }
    *complete = 1;
done:
    nvf_manifest_free(m);
    free(by_name);
    free(jpath);
    free(mpath);
    return rc;
}
