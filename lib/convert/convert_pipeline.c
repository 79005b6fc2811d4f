/*
 * The conversion pipeline (SPEC section 6):
 *   - compute workers take the live jobs (of shards not reused, nor another part's) in the
 *     processing order (convert_pipeline.h: groups of shards written side by side, their jobs
 *     interleaved), each claiming the next one when free (one worker per --devices CPU entry
 *     and CUDA_WORKERS per GPU, each with its own backend; one CPU: a single worker), and
 *     compute each buffered job (quantize, dequantize) into a buffer; a worker waits while the
 *     buffers in flight exceed --max-host-memory (one job always proceeds); the jobs reach the
 *     writers in that order, whichever worker finishes first;
 *   - the writer threads (convert_writer.c; up to CV_HASHERS, NVFP4_CONVERT_WRITERS) each write
 *     their shards' jobs at their offsets, and the hasher threads finish the shards (SHA-256
 *     following the writer, CRC-32s beside it, rename, journal);
 *   - the SHA-256 of every source file for the manifest, computed beside them as a task of the
 *     core pool.
 * Source pages are released (MADV_DONTNEED) once consumed, so the resident set stays bounded by
 * the buffers in flight plus one job, whatever the checkpoint size. Progress counts source bytes.
 */
#include "convert_pipeline.h"
#include "convert_profile.h"

#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void signal_all(cv_pipeline *pl, int *flag) {
    pthread_mutex_lock(&pl->mu);
    *flag = 1;
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
}

/* The processing order -------------------------------------------------------------------- */

/* Whether shard `s` is written here: neither reused nor another part's, and not empty. */
static int shard_live(const cv_shard *s) {
    return !s->reused && !s->other && s->n_jobs > 0;
}

/* Writer threads: CV_HASHERS, or NVFP4_CONVERT_WRITERS (1 to CV_HASHERS). */
static size_t writers_wanted(void) {
    const char *e = getenv("NVFP4_CONVERT_WRITERS");
    long v = e ? strtol(e, NULL, 10) : CV_HASHERS;
    return v >= 1 && v <= CV_HASHERS ? (size_t)v : CV_HASHERS;
}

int cv_pipeline_order(cv_pipeline *pl, size_t writers) {
    const cv_plan *p = pl->r->p;
    size_t n = 0, shards = 0;
    for (size_t s = 0; s < p->n_shards; s++)
        if (shard_live(&p->shards[s])) {
            n += p->shards[s].n_jobs;
            shards++;
        }
    pl->n_writers = writers < shards ? writers : shards > 0 ? shards : 1;
    pl->order = calloc(n ? n : 1, sizeof *pl->order);
    pl->slot = calloc(n ? n : 1, 1);
    pl->items = calloc(n ? n : 1, sizeof *pl->items);
    pl->ready = calloc(n ? n : 1, 1);
    if (!pl->order || !pl->slot || !pl->items || !pl->ready)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the job queue");
    size_t pos = 0, next[CV_HASHERS], end[CV_HASHERS];
    uint64_t dealt[CV_HASHERS];
    for (size_t s = 0; s < p->n_shards;) {
        size_t m = 0; /* the next n_writers live shards, the k-th to writer k */
        for (; s < p->n_shards && m < pl->n_writers; s++)
            if (shard_live(&p->shards[s])) {
                next[m] = p->shards[s].first_job;
                end[m] = next[m] + p->shards[s].n_jobs;
                dealt[m++] = 0;
            }
        for (;;) { /* the next job of the shard with the fewest output bytes dealt so far */
            size_t k = m;
            for (size_t i = 0; i < m; i++)
                if (next[i] < end[i] && (k == m || dealt[i] < dealt[k]))
                    k = i;
            if (k == m)
                break;
            pl->order[pos] = next[k];
            pl->slot[pos++] = (unsigned char)k;
            dealt[k] += p->jobs[next[k]++].bytes_out;
        }
    }
    pl->n_order = pos;
    return NVF_OK;
}

/* Compute --------------------------------------------------------------------------------- */

/*
 * Reserve `cost` bytes for the job at position `pos`, waiting while the buffers in flight would
 * exceed the budget. A job proceeds anyway when nothing is in flight, or when it is the one the
 * writers need next (the next to hand over) and the writers have nothing queued: other workers'
 * finished buffers wait for their turn, so without that exception they could hold the budget
 * that it waits for. While the writers have jobs queued they free budget as they write them (a
 * writer waiting for a hasher slot gets one: every pending shard is closed or being written).
 * @return non-zero when the conversion is failing (the caller stops).
 */
static int reserve(cv_pipeline *pl, size_t pos, uint64_t cost) {
    pthread_mutex_lock(&pl->mu);
    while (!pl->failed && !pl->compute_failed && pl->inflight > 0 &&
           pl->inflight + cost > pl->r->opt->max_host_memory &&
           !(pos == pl->handed && pl->queued == 0))
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->failed || pl->compute_failed;
    if (!failing)
        pl->inflight += cost;
    pthread_mutex_unlock(&pl->mu);
    return failing;
}

/* The next position of the processing order for a free compute worker (n_order: none left). */
static size_t claim(cv_pipeline *pl) {
    pthread_mutex_lock(&pl->mu);
    size_t pos = pl->claimed < pl->n_order ? pl->claimed++ : pl->n_order;
    pthread_mutex_unlock(&pl->mu);
    return pos;
}

/* Mark the job at position `pos` ready and hand over the ready positions from `handed` on (the
 * writers take positions below `handed`); waits for no other job. */
static int hand_over(cv_pipeline *pl, size_t pos, cv_item it) {
    pthread_mutex_lock(&pl->mu);
    int failing = pl->failed || pl->compute_failed;
    if (!failing) {
        pl->items[pos] = it;
        pl->ready[pos] = 1;
        for (; pl->handed < pl->n_order && pl->ready[pl->handed]; pl->handed++)
            pl->queued += pl->items[pl->handed].cost;
    }
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
    return failing;
}

/* The buffered job at position `pos`: reserve its budget, compute it into it->buf, release its
 * source pages; prefetches position pos + n (about the n-th next claimed: this worker's next
 * when the n workers keep pace). Adds the nanoseconds spent computing to *busy.
 * @return 0, a negative status, or 1 when the conversion is failing elsewhere (nothing done). */
static int compute_one(cv_pipeline *pl, nvf_backend *b, size_t pos, cv_item *it, size_t n,
                       uint64_t *busy) {
    cv_run *r = pl->r;
    cv_plan *p = r->p;
    const cv_job *j = &p->jobs[pl->order[pos]];
    it->cost = j->bytes_out + j->bytes_in;
    uint64_t t = cv_prof_now();
    if (reserve(pl, pos, it->cost))
        return 1;
    t = cv_prof_add(CV_P_WAIT_MEMORY, t);
    if (pos + n < pl->n_order && p->jobs[pl->order[pos + n]].kind == CV_JOB_QUANT)
        cv_prefetch_member(r->ck, &p->jobs[pl->order[pos + n]].members[0]);
    it->buf = malloc(j->bytes_out ? (size_t)j->bytes_out : 1);
    if (!it->buf)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the %llu bytes of '%s'",
                             (unsigned long long)j->bytes_out, p->outs[j->first_out].name);
    int rc = cv_compute_job(it->buf, r, b, j);
    uint64_t t1 = cv_prof_add(CV_P_COMPUTE, t);
    for (size_t m = 0; m < j->n_members; m++)
        cv_release_range(r->ck, j->members[m].tensor, j->members[m].src.data,
                         cv_member_bytes(&j->members[m]));
    *busy += cv_prof_add(CV_P_RELEASE, t1) - t;
    if (rc != NVF_OK) {
        free(it->buf);
        it->buf = NULL;
    }
    return rc;
}

/*
 * One of the `n` compute workers, on `dev`: claims the next position of the processing order
 * until none is left (copy jobs need no computing and are only marked ready).
 */
static int produce(cv_pipeline *pl, const nvf_device *dev, int threads, size_t n) {
    cv_plan *p = pl->r->p;
    nvf_backend *b = NULL;
    uint64_t t = cv_prof_now(), busy = 0, cpu = cv_prof_thread_cpu();
    int rc = nvf_backend_open(&b, dev, threads);
    cv_prof_add(CV_P_BACKEND_OPEN, t);
    for (size_t pos = claim(pl); rc == NVF_OK && pos < pl->n_order; pos = claim(pl)) {
        if (cv_pipeline_stopped(pl)) {
            rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
            break;
        }
        cv_item it = {0};
        if (p->jobs[pl->order[pos]].kind != CV_JOB_COPY) {
            rc = compute_one(pl, b, pos, &it, n, &busy);
            if (rc > 0) /* failing elsewhere: the failure is reported by the caller */
                rc = NVF_OK;
            if (rc != NVF_OK || !it.buf)
                break;
        }
        t = cv_prof_now();
        int failing = hand_over(pl, pos, it);
        cv_prof_add(CV_P_WAIT_HANDOVER, t);
        if (failing) {
            free(it.buf);
            break;
        }
    }
    nvf_backend_close(b);
    cv_prof_worker_busy(busy);
    cv_prof_cpu(CV_R_COMPUTE, cv_prof_thread_cpu() - cpu);
    return rc;
}

typedef struct worker {
    cv_pipeline *pl;
    nvf_device device;
    int threads;
    size_t k, n, copy; /* worker k of n, copy `copy` on its device */
    int rc;
    nvf_error_state err;
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    if (wk->device.kind == NVF_DEVICE_CPU)
        cv_prof_name_thread("nvf-cpu%zu", wk->k);
    else
        cv_prof_name_thread("nvf-cuda%dw%zu", wk->device.index, wk->copy);
    wk->rc = produce(wk->pl, &wk->device, wk->threads, wk->n);
    if (wk->rc != NVF_OK) {
        nvf_error_save(&wk->err);
        signal_all(wk->pl, &wk->pl->compute_failed);
    }
    return NULL;
}

/* Compute workers per GPU: one worker's host side (source pages into staging, the packed job
 * out) cannot keep a GPU busy, so several share it, each with its own backend (streams, staging).
 * NVFP4_CUDA_WORKERS overrides the default (1 to 16). */
#define CUDA_WORKERS 4

static size_t cuda_workers(void) {
    const char *e = getenv("NVFP4_CUDA_WORKERS");
    long v = e ? strtol(e, NULL, 10) : CUDA_WORKERS;
    return v >= 1 && v <= 16 ? (size_t)v : CUDA_WORKERS;
}

/*
 * Run the compute workers: the calling thread alone for one CPU device, else one thread per
 * --devices CPU entry (sharing the CPU threads) and cuda_workers() threads per GPU. Which worker
 * computes a job depends on timing, but the writers take the jobs in order and every backend
 * writes the same bytes, so the output does not. The first failure, in worker order, is the one
 * reported.
 */
static int compute_all(cv_pipeline *pl) {
    const nvf_convert_options *o = pl->r->opt;
    size_t n_dev = o->n_devices > 1 ? o->n_devices : 1;
    const nvf_device *devs = o->n_devices >= 1 ? o->devices : &o->device;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->threads > 0 ? o->threads : (int)(cores > 0 ? cores : 1);
    size_t per_gpu = cuda_workers(), n = 0, n_cpu = 0;
    for (size_t i = 0; i < n_dev; i++) {
        n_cpu += devs[i].kind == NVF_DEVICE_CPU;
        n += devs[i].kind == NVF_DEVICE_CPU ? 1 : per_gpu;
    }
    cv_prof_threads(CV_R_COMPUTE, (int)n);
    if (n == 1) {
        int rc = produce(pl, &devs[0], o->threads, 1);
        if (rc != NVF_OK)
            signal_all(pl, &pl->compute_failed);
        return rc;
    }
    worker *wk = calloc(n, sizeof *wk);
    pthread_t *tid = calloc(n, sizeof *tid);
    int rc = NVF_OK;
    size_t started = 0;
    if (!wk || !tid)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for %zu compute workers", n);
    for (size_t i = 0, k = 0; rc == NVF_OK && i < n_dev; i++) {
        size_t copies = devs[i].kind == NVF_DEVICE_CPU ? 1 : per_gpu;
        for (size_t c = 0; rc == NVF_OK && c < copies; c++, k++) {
            wk[k].pl = pl;
            wk[k].device = devs[i];
            wk[k].threads = n_cpu ? (threads / (int)n_cpu > 0 ? threads / (int)n_cpu : 1) : 1;
            wk[k].k = k;
            wk[k].n = n;
            wk[k].copy = c;
            if (pthread_create(&tid[k], NULL, worker_main, &wk[k]) != 0)
                rc = nvf_error_set(NVF_E_NOMEM, "cannot start compute worker %zu", k);
            else
                started++;
        }
    }
    if (rc != NVF_OK)
        signal_all(pl, &pl->compute_failed);
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    for (size_t i = 0; rc == NVF_OK && i < started; i++)
        if (wk[i].rc != NVF_OK)
            rc = nvf_error_restore(&wk[i].err);
    free(wk);
    free(tid);
    return rc;
}

/* The pipeline ---------------------------------------------------------------------------- */

int cv_pipeline_quit(void *ctx) {
    cv_pipeline *pl = ctx;
    pthread_mutex_lock(&pl->mu);
    int quit = pl->abort || pl->failed || pl->compute_failed;
    pthread_mutex_unlock(&pl->mu);
    return quit || cv_pipeline_stopped(pl);
}

/* The two long tasks of the core pool batch: 0 computes, 1 hashes the sources. A hashing
 * failure is kept aside: it is reported after the writers'. */
static int stage_task(void *ctx, size_t i) {
    cv_pipeline *pl = ctx;
    if (i == 0)
        return compute_all(pl);
    int rc = cv_sources_hash(&pl->r->src, cv_pipeline_quit, pl);
    if (rc != NVF_OK) {
        pl->hash_rc = rc;
        nvf_error_save(&pl->hash_err);
    }
    return NVF_OK;
}

/* Start threads running fn(pl) until *started (those that did) is n; `what` names them. */
static int start(pthread_t *tid, size_t n, size_t *started, void *(*fn)(void *), cv_pipeline *pl,
                 const char *what) {
    for (; *started < n; ++*started)
        if (pthread_create(&tid[*started], NULL, fn, pl) != 0)
            return nvf_error_set(NVF_E_NOMEM, "cannot start the %s threads", what);
    return NVF_OK;
}

int cv_pipeline_run(cv_run *r) {
    cv_pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.r = r;
    cv_compute_settings(r);
    pthread_mutex_init(&pl.mu, NULL);
    pthread_mutex_init(&pl.prog_mu, NULL);
    pthread_cond_init(&pl.cv, NULL);
    pthread_t writers[CV_HASHERS], hashers[CV_HASHERS];
    size_t n_hashers = 0, n_writers = 0;
    int rc = cv_pipeline_order(&pl, writers_wanted());
    cv_prof_pipeline(1);
    cv_prof_threads(CV_R_WRITER, (int)pl.n_writers);
    cv_prof_threads(CV_R_HASHER, CV_HASHERS);
    int pool = nvf_pool_size(nvf_pool_global());
    cv_prof_threads(CV_R_POOL, pool);
    cv_prof_threads(CV_R_CRC, CV_HASHERS);
    if (rc == NVF_OK)
        rc = start(hashers, CV_HASHERS, &n_hashers, cv_hasher_main, &pl, "shard hashing");
    if (rc == NVF_OK)
        rc = start(writers, pl.n_writers, &n_writers, cv_writer_main, &pl, "writer");
    /* Computing and hashing side by side: with a pool of one thread they run one after the
     * other, which is slower but still correct (neither waits for the other). */
    if (rc == NVF_OK)
        rc = nvf_pool_run(nvf_pool_global(), 2, 2, stage_task, &pl);
    /* The writers leave after their last position, or at once when the compute failed or
     * stopped before handing every job over (the compute threads are done: handed is theirs). */
    if (rc != NVF_OK || pl.handed < pl.n_order)
        signal_all(&pl, &pl.abort);
    for (size_t i = 0; i < n_writers; i++)
        pthread_join(writers[i], NULL);
    /* The hashers finish the shards handed to them (or drop them, when failing), then leave. */
    signal_all(&pl, &pl.fin_end);
    for (size_t i = 0; i < n_hashers; i++)
        pthread_join(hashers[i], NULL);
    for (size_t i = 0; pl.items && i < pl.n_order; i++) /* buffers no writer took */
        free(pl.items[i].buf);
    if (rc == NVF_OK && pl.failed)
        rc = nvf_error_restore(&pl.fail);
    if (rc == NVF_OK && cv_pipeline_stopped(&pl))
        rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
    if (rc == NVF_OK && pl.hash_rc)
        rc = nvf_error_restore(&pl.hash_err);
    cv_prof_pipeline(0);
    r->prog.bytes_done = r->prog.bytes_total;
    cv_pipeline_report(r, 1);
    free(pl.items);
    free(pl.ready);
    free(pl.order);
    free(pl.slot);
    pthread_mutex_destroy(&pl.mu);
    pthread_mutex_destroy(&pl.prog_mu);
    pthread_cond_destroy(&pl.cv);
    return rc;
}
