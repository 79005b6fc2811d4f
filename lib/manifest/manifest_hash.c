/*
 * Hashing the files of a checkpoint directory: one task per file (biggest first) on the core
 * thread pool (nvf_pool_run, at most --threads at once). Each task reads its file once, computing
 * the SHA-256 and, for a safetensors file, every tensor's CRC-32 from the same chunks. Results land
 * in per-file slots, so the output does not depend on the thread count. Then the manifest of the
 * directory (write mode).
 */
#include "manifest_internal.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/pool.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct pool {
    nvf_hash_job *jobs;
    size_t n;
    size_t *order; /* biggest first */
    uint64_t done, total;
    const nvf_hash_opts *opts;
    pthread_mutex_t lock;
} pool;

static int stopped(const pool *p) {
    return p->opts->stop && *p->opts->stop;
}

static int on_chunk(void *user, uint64_t bytes) {
    pool *p = user;
    pthread_mutex_lock(&p->lock);
    p->done += bytes;
    if (p->opts->progress)
        p->opts->progress(p->opts->user, NULL, p->done, p->total);
    pthread_mutex_unlock(&p->lock);
    return stopped(p);
}

/* The worker's error for status `rc`, restored on the thread that joins it; a status that came
 * without a message gets its status string. */
static void save_error(nvf_error_state *out, int rc) {
    nvf_error_save(out);
    if (!out->msg[0])
        snprintf(out->msg, sizeof out->msg, "%s", nvf_status_str(out->code));
    out->code = rc;
}

static void run_job(pool *p, nvf_hash_job *j) {
    nvf_hash_tensors t;
    nvf_hash_tensors *tp = NULL;
    uint64_t *offs = NULL;
    if (stopped(p)) {
        j->rc = NVF_E_INTERRUPTED;
        return;
    }
    if (j->want_tensors) {
        j->st_rc = nvf_st_open(&j->st, j->path);
        if (j->st_rc != NVF_OK) {
            save_error(&j->st_err, j->st_rc);
        } else {
            size_t n = j->st->n_tensors;
            offs = malloc((2 * n + 1) * sizeof *offs);
            j->crc = calloc(n + 1, sizeof *j->crc);
            if (!offs || !j->crc) {
                j->rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", j->path);
                save_error(&j->err, j->rc);
                free(offs);
                return;
            }
            for (size_t i = 0; i < n; i++) {
                offs[i] = j->st->tensors[i].begin;
                offs[n + i] = j->st->tensors[i].end;
            }
            t.data_start = j->st->data_start;
            t.n = n;
            t.begin = offs;
            t.end = offs + n;
            t.crc = j->crc;
            t.cursor = 0;
            tp = &t;
        }
    }
    j->rc = nvf_hash_file_ex(j->sha256, &j->bytes, j->path, tp, on_chunk, p);
    if (j->rc != NVF_OK)
        save_error(&j->err, j->rc);
    free(offs);
    pthread_mutex_lock(&p->lock);
    if (j->rc == NVF_OK && p->opts->progress)
        p->opts->progress(p->opts->user, j->name, p->done, p->total);
    pthread_mutex_unlock(&p->lock);
}

/* Task k of the batch: the k-th biggest file. A job keeps its own status, so one failure
 * never keeps the others from running (the lowest in name order is reported). */
static int job_task(void *arg, size_t k) {
    pool *p = arg;
    run_job(p, &p->jobs[p->order[k]]);
    return NVF_OK;
}

static const nvf_hash_job *g_sort_jobs; /* qsort has no context argument; set under one call only */

static int cmp_order(const void *a, const void *b) {
    const nvf_hash_job *x = &g_sort_jobs[*(const size_t *)a], *y = &g_sort_jobs[*(const size_t *)b];
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Run every job; the first failure in name order (jobs are in name order) is returned. */
int nvf_hash_jobs_run(nvf_hash_job *jobs, size_t n, const nvf_hash_opts *opts) {
    pool p;
    memset(&p, 0, sizeof p);
    p.jobs = jobs;
    p.n = n;
    p.opts = opts;
    int rc = NVF_OK;
    p.order = malloc((n ? n : 1) * sizeof *p.order);
    if (!p.order)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
    for (size_t i = 0; i < n; i++) {
        p.order[i] = i;
        p.total += jobs[i].size;
    }
    /* Biggest first, so that one huge shard does not start last and run alone. The sort uses
     * a file-scope pointer; hashing runs are not started concurrently from several threads. */
    g_sort_jobs = jobs;
    qsort(p.order, n, sizeof *p.order, cmp_order);
    g_sort_jobs = NULL;
    pthread_mutex_init(&p.lock, NULL);
    (void)nvf_pool_run(nvf_pool_global(), n, opts->threads, job_task, &p);
    pthread_mutex_destroy(&p.lock);
    free(p.order);
    if (stopped(&p))
        return nvf_error_set(NVF_E_INTERRUPTED, "interrupted: hashing stopped");
    for (size_t i = 0; i < n && rc == NVF_OK; i++)
        if (jobs[i].rc != NVF_OK)
            rc = nvf_error_restore(&jobs[i].err);
    return rc;
}

void nvf_hash_jobs_free(nvf_hash_job *jobs, size_t n) {
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].path);
        free(jobs[i].crc);
        nvf_st_close(jobs[i].st);
    }
    free(jobs);
}

/* A job per name; `want` (may be NULL) says which open as safetensors. */
int nvf_hash_jobs_make(nvf_hash_job **out, const char *dir, char *const *names, size_t n,
                       const int *want) {
    nvf_hash_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
    for (size_t i = 0; i < n; i++) {
        jobs[i].name = names[i];
        jobs[i].path = nvf_path_join(dir, names[i]);
        if (!jobs[i].path) {
            nvf_hash_jobs_free(jobs, n);
            return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
        }
        struct stat st;
        if (stat(jobs[i].path, &st) == 0)
            jobs[i].size = (uint64_t)st.st_size;
        jobs[i].want_tensors = want ? want[i] : 0;
    }
    *out = jobs;
    return NVF_OK;
}

/* Hash (write mode) ---------------------------------------------------------------------- */

int nvf_manifest_hash_dir(nvf_manifest **out, const char *dir, const nvf_hash_opts *opts) {
    *out = NULL;
    char **names = NULL;
    size_t n = 0;
    nvf_hash_job *jobs = NULL;
    int *want = NULL;
    nvf_manifest *m = NULL;
    int rc = nvf_manifest_list_dir(&names, &n, dir, 1);
    if (rc != NVF_OK)
        return rc;
    want = calloc(n ? n : 1, sizeof *want);
    if (!want) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", dir);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        want[i] = nvf_manifest_ends_with(names[i], ".safetensors");
    rc = nvf_hash_jobs_make(&jobs, dir, names, n, want);
    if (rc == NVF_OK)
        rc = nvf_hash_jobs_run(jobs, n, opts);
    if (rc != NVF_OK)
        goto done;
    m = nvf_manifest_new();
    if (!m) {
        rc = NVF_E_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const nvf_hash_job *j = &jobs[i];
        if (j->want_tensors && j->st_rc != NVF_OK) {
            rc = nvf_error_restore(&j->st_err);
            break;
        }
        rc = nvf_manifest_add_file(m, j->name, j->bytes, j->sha256);
        for (size_t k = 0; j->st && k < j->st->n_tensors && rc == NVF_OK; k++) {
            const nvf_st_tensor *t = &j->st->tensors[k];
            rc = nvf_manifest_add_tensor(m, t->name, j->name, nvf_dtype_name(t->dtype), t->ndim,
                                         t->shape, j->crc[k]);
        }
    }
    if (rc != NVF_OK)
        goto done;
    *out = m;
    m = NULL;
done:
    nvf_manifest_free(m);
    nvf_hash_jobs_free(jobs, n);
    free(want);
    nvf_manifest_names_free(names, n);
    return rc;
}
