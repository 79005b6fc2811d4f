/*
 * The conversion pipeline (SPEC section 6):
 *   - compute workers take the jobs of shards not reused (nor another part's) in order (one
 *     worker per --devices CPU entry and CUDA_WORKERS per GPU, each with its own backend; one CPU:
 * a single worker) and compute each buffered job (quantize, dequantize) into a buffer; a worker
 *     waits while the buffers in flight exceed --max-host-memory (one job always proceeds);
 *   - the writer thread takes the jobs in order and writes each job's pieces of output tensors
 *     at their offsets (copied tensors are streamed from the source mapping in chunks); a shard
 *     goes to a hasher as it is opened (at most HASHERS pending: the writer waits beyond that),
 *     is published after every job and closed after its last, and the writer moves on;
 *   - the hasher threads read each shard back once from the page cache: its SHA-256 follows
 *     the published bytes, its tensor CRC-32s run on the core pool once it is closed; then it
 *     is renamed into place and recorded in the journal (under a mutex), several side by side;
 *   - the SHA-256 of every source file for the manifest, computed beside them as a task of the
 *     core pool.
 * Source pages are released (MADV_DONTNEED) once consumed, so the resident set stays bounded by
 * the buffers in flight plus one job, whatever the checkpoint size. Progress counts source bytes.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COPY_CHUNK ((size_t)64 << 20)

typedef struct queue_item {
    size_t job;
    uint8_t *buf; /* NULL for a copy job or the end marker */
    uint64_t cost;
    int end;
} queue_item;

/* Shards hashed side by side at most (the writer waits for one to finish beyond it): each is a
 * sequential SHA-256 stream, so several keep the cores busy while bounding the shards whose
 * bytes the page cache must still hold. */
#define HASHERS 4

typedef struct pending_shard {
    cv_writer *w;
    size_t shard;
} pending_shard;

typedef struct pipeline {
    cv_run *r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    queue_item *items; /* jobs + 1 entries: a job enters once */
    size_t head, tail, cap;
    uint64_t inflight;  /* bytes of buffers reserved by the compute workers, not yet written */
    uint64_t queued;    /* the part of them handed to the writer */
    size_t next_job;    /* the job the writer needs next (jobs are handed over in order) */
    int compute_failed; /* a compute worker failed: the others stop */
    int failed;         /* status of the writer's failure */
    nvf_error_state fail;
    int abort;
    int hash_rc;
    nvf_error_state hash_err;
    /* Shards written and handed to the hashers (a ring of HASHERS), under mu. */
    pending_shard fin[HASHERS];
    size_t n_named;            /* hasher threads named so far (nvf-hashN) */
    size_t fin_head, fin_tail; /* queued: [fin_head, fin_tail) */
    size_t pending;            /* queued or being hashed */
    int fin_end;               /* the writer is done: hashers leave once the ring is empty */
    /* The progress counters and the journal, touched by the writer and the hashers. */
    pthread_mutex_t prog_mu;
} pipeline;

static int stopped(const pipeline *pl) {
    return pl->r->opt->stop && *pl->r->opt->stop;
}

static void signal_all(pipeline *pl, int *flag) {
    pthread_mutex_lock(&pl->mu);
    *flag = 1;
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
}

/* Writer ---------------------------------------------------------------------------------- */

static void report(cv_run *r, int final) {
    if (r->opt->progress)
        r->opt->progress(&r->prog, final, r->opt->progress_user);
}

/* Add to the progress counters and report (the hashers count shards beside the writer). */
static void progress(pipeline *pl, uint64_t bytes, size_t tensors, int tell) {
    pthread_mutex_lock(&pl->prog_mu);
    pl->r->prog.bytes_done += bytes;
    pl->r->prog.tensors_done += tensors;
    if (tell)
        report(pl->r, 0);
    pthread_mutex_unlock(&pl->prog_mu);
}

/* 1 when piece `pc` reaches the end of its tensor: the tensor then counts as written. */
static size_t piece_ends(const cv_run *r, const cv_piece *pc) {
    return pc->off + pc->len == r->p->outs[pc->out].bytes;
}

/* A copy job: its one piece streamed from the source mapping in chunks at increasing offsets. */
static int write_copy(pipeline *pl, cv_writer *w, const cv_job *j) {
    cv_run *r = pl->r;
    size_t ti = j->members[0].tensor;
    const nvf_st_tensor *st = r->ck->tensors[ti].st;
    const cv_piece *pc = &r->p->pieces[j->first_piece];
    uint64_t len = st->end - st->begin;
    for (uint64_t off = 0; off < len;) {
        if (stopped(pl))
            return nvf_error_set(NVF_E_INTERRUPTED, "interrupted while copying '%s'", st->name);
        size_t k = len - off < COPY_CHUNK ? (size_t)(len - off) : COPY_CHUNK;
        int rc = cv_writer_write_at(w, pc->out, pc->off + off, st->data + off, k);
        cv_release_range(r->ck, ti, st->data + off, k);
        if (rc != NVF_OK)
            return rc;
        off += k;
        progress(pl, k, off < len ? 0 : piece_ends(r, pc), off < len);
    }
    return NVF_OK;
}

/* A buffered job: its buffer is its pieces one after the other. */
static int write_buffered(pipeline *pl, cv_writer *w, const cv_job *j, const uint8_t *buf) {
    cv_run *r = pl->r;
    size_t tensors = 0;
    for (size_t i = 0; i < j->n_pieces; i++) {
        const cv_piece *pc = &r->p->pieces[j->first_piece + i];
        int rc = cv_writer_write_at(w, pc->out, pc->off, buf, (size_t)pc->len);
        if (rc != NVF_OK)
            return rc;
        buf += pc->len;
        tensors += piece_ends(r, pc);
    }
    progress(pl, j->bytes_in, tensors, 0);
    return NVF_OK;
}

/* Record the first failure of the writer or a hasher; everyone stops. */
static void fail(pipeline *pl, int rc) {
    pthread_mutex_lock(&pl->mu);
    if (!pl->failed) {
        pl->failed = rc;
        nvf_error_save(&pl->fail);
    }
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
}

static int hash_quit(void *ctx);

/* Hashers ---------------------------------------------------------------------------------- */

/* Hand the shard just opened to the hashers, waiting while HASHERS are pending. When failing,
 * the shard is dropped here (its temporary file removed). @return non-zero when failing. */
static int hand_to_hashers(pipeline *pl, cv_writer *w, size_t si) {
    pthread_mutex_lock(&pl->mu);
    while (pl->pending >= HASHERS && !pl->failed && !pl->abort)
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->failed || pl->abort;
    if (!failing) {
        pl->fin[pl->fin_tail++ % HASHERS] = (pending_shard){w, si};
        pl->pending++;
        pthread_cond_broadcast(&pl->cv);
    }
    pthread_mutex_unlock(&pl->mu);
    if (failing)
        cv_writer_abort(w);
    return failing;
}

/*
 * A hasher: takes a shard as the writer opens it and finishes it (its SHA-256 following the
 * writer, then the CRC-32s, fsync, rename), then records it in the journal, which so only ever
 * lists shards complete under their final name. Once the conversion fails, shards are dropped.
 */
static void *hasher_main(void *arg) {
    pipeline *pl = arg;
    cv_run *r = pl->r;
    pthread_mutex_lock(&pl->mu);
    cv_prof_name_thread("nvf-hash%zu", pl->n_named++);
    pthread_mutex_unlock(&pl->mu);
    for (;;) {
        uint64_t t = cv_prof_now();
        pthread_mutex_lock(&pl->mu);
        while (pl->fin_head == pl->fin_tail && !pl->fin_end)
            pthread_cond_wait(&pl->cv, &pl->mu);
        if (pl->fin_head == pl->fin_tail) {
            pthread_mutex_unlock(&pl->mu);
            cv_prof_cpu(CV_R_HASHER, cv_prof_thread_cpu());
            return NULL;
        }
        pending_shard ps = pl->fin[pl->fin_head++ % HASHERS];
        pthread_mutex_unlock(&pl->mu);
        t = cv_prof_add(CV_P_WAIT_SHARD, t);
        /* When failing, finish stops at once (hash_quit) and removes the shard. */
        int rc = cv_writer_finish(ps.w, r->p, hash_quit, pl);
        t = cv_prof_now();
        if (rc == NVF_OK) {
            pthread_mutex_lock(&pl->prog_mu);
            r->p->shards[ps.shard].written = 1;
            rc = cv_journal_add(r, ps.shard);
            r->prog.shards_done++;
            report(r, 0);
            pthread_mutex_unlock(&pl->prog_mu);
            cv_prof_add(CV_P_JOURNAL, t);
        }
        if (rc != NVF_OK && rc != NVF_E_INTERRUPTED)
            fail(pl, rc);
        pthread_mutex_lock(&pl->mu);
        pl->pending--;
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* Writer ----------------------------------------------------------------------------------- */

static void *writer_main(void *arg) {
    pipeline *pl = arg;
    cv_run *r = pl->r;
    cv_plan *p = r->p;
    cv_writer *w = NULL;
    size_t open_shard = (size_t)-1, jobs_in_shard = 0;
    int rc = NVF_OK;
    cv_prof_name_thread("nvf-writer");
    for (;;) {
        uint64_t t = cv_prof_now();
        pthread_mutex_lock(&pl->mu);
        while (pl->head == pl->tail && !pl->abort && !pl->failed)
            pthread_cond_wait(&pl->cv, &pl->mu);
        if (pl->abort || pl->failed) {
            pthread_mutex_unlock(&pl->mu);
            break;
        }
        queue_item it = pl->items[pl->head % pl->cap];
        pthread_mutex_unlock(&pl->mu);
        t = cv_prof_add(CV_P_WAIT_JOB, t);
        if (it.end)
            break;
        const cv_job *j = &p->jobs[it.job];
        if (rc == NVF_OK && j->shard != open_shard) {
            open_shard = j->shard;
            jobs_in_shard = 0;
            rc = cv_writer_open(&w, r->opt->dst, p, open_shard);
            t = cv_prof_add(CV_P_OPEN, t);
            if (rc == NVF_OK && hand_to_hashers(pl, w, open_shard)) {
                w = NULL; /* failing elsewhere: dropped */
                break;
            }
            t = cv_prof_add(CV_P_WAIT_HASHER, t);
        }
        if (rc == NVF_OK)
            rc = it.buf ? write_buffered(pl, w, j, it.buf) : write_copy(pl, w, j);
        t = cv_prof_add(it.buf ? CV_P_WRITE : CV_P_COPY, t);
        free(it.buf);
        if (rc == NVF_OK)
            rc = cv_writer_publish(w, p);
        pthread_mutex_lock(&pl->mu);
        pl->head++;
        pl->inflight -= it.cost;
        pl->queued -= it.cost;
        pthread_cond_broadcast(&pl->cv);
        pthread_mutex_unlock(&pl->mu);
        if (rc == NVF_OK && ++jobs_in_shard == p->shards[open_shard].n_jobs) {
            rc = cv_writer_close(w, p);
            w = NULL; /* the hasher's now, closed or cancelled */
        }
        if (rc != NVF_OK) {
            fail(pl, rc);
            break;
        }
        progress(pl, 0, 0, 1);
        cv_prof_add(CV_P_PUBLISH, t);
    }
    cv_writer_cancel(w); /* a shard left open: its hasher removes it */
    cv_prof_writer_done();
    cv_prof_cpu(CV_R_WRITER, cv_prof_thread_cpu());
    return NULL;
}

/* Compute --------------------------------------------------------------------------------- */

/*
 * Reserve `cost` bytes for job `i`, waiting while the buffers in flight would exceed the
 * budget. A job proceeds anyway when nothing is in flight, or when it is the job the writer
 * needs next and the writer has nothing queued: other workers' finished buffers wait for their
 * turn, so without that exception they could hold the budget that job `i` waits for.
 * @return non-zero when the conversion is failing (the caller stops).
 */
static int reserve(pipeline *pl, size_t i, uint64_t cost) {
    pthread_mutex_lock(&pl->mu);
    while (!pl->failed && !pl->compute_failed && pl->inflight > 0 &&
           pl->inflight + cost > pl->r->opt->max_host_memory &&
           !(i == pl->next_job && pl->queued == 0))
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->failed || pl->compute_failed;
    if (!failing)
        pl->inflight += cost;
    pthread_mutex_unlock(&pl->mu);
    return failing;
}

/* Whether job `q` is computed here: its shard is neither reused nor another part's. */
static int job_live(const cv_plan *p, size_t q) {
    const cv_shard *sh = &p->shards[p->jobs[q].shard];
    return !sh->reused && !sh->other;
}

/* The first job from `i` on that is computed here; n_jobs if none. */
static size_t next_live_job(const cv_plan *p, size_t i) {
    while (i < p->n_jobs && !job_live(p, i))
        i++;
    return i;
}

/* Hand job `it.job` to the writer once every earlier job has been handed over. */
static int hand_over(pipeline *pl, queue_item it) {
    pthread_mutex_lock(&pl->mu);
    while (!pl->failed && !pl->compute_failed && pl->next_job != it.job)
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->failed || pl->compute_failed;
    if (!failing) {
        pl->items[pl->tail++ % pl->cap] = it;
        pl->queued += it.cost;
        pl->next_job = next_live_job(pl->r->p, it.job + 1);
    }
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
    return failing;
}

/* One buffered job: reserve its budget, compute it into it->buf, release its source pages.
 * Adds the nanoseconds spent computing to *busy.
 * @return 0, a negative status, or 1 when the conversion is failing elsewhere (nothing done). */
static int compute_one(pipeline *pl, nvf_backend *b, queue_item *it, size_t n, uint64_t *busy) {
    cv_run *r = pl->r;
    cv_plan *p = r->p;
    const cv_job *j = &p->jobs[it->job];
    it->cost = j->bytes_out + j->bytes_in;
    uint64_t t = cv_prof_now();
    if (reserve(pl, it->job, it->cost))
        return 1;
    t = cv_prof_add(CV_P_WAIT_MEMORY, t);
    for (size_t q = it->job + 1; q < p->n_jobs && q < it->job + 2 * n; q++)
        if (p->jobs[q].kind == CV_JOB_QUANT && job_live(p, q) && (q - it->job) % n == 0)
            cv_prefetch_member(r->ck, &p->jobs[q].members[0]);
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
 * Compute worker `k` of `n` on `dev`: the live jobs numbered k, k + n, ... in order (copy jobs
 * need no computing and are only handed over in their turn).
 */
static int produce(pipeline *pl, const nvf_device *dev, int threads, size_t k, size_t n) {
    cv_plan *p = pl->r->p;
    nvf_backend *b = NULL;
    uint64_t t = cv_prof_now(), busy = 0, cpu = cv_prof_thread_cpu();
    int rc = nvf_backend_open(&b, dev, threads);
    cv_prof_add(CV_P_BACKEND_OPEN, t);
    size_t live = 0;
    for (size_t i = next_live_job(p, 0); rc == NVF_OK && i < p->n_jobs;
         i = next_live_job(p, i + 1)) {
        if (live++ % n != k)
            continue;
        if (stopped(pl)) {
            rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
            break;
        }
        queue_item it = {.job = i};
        if (p->jobs[i].kind != CV_JOB_COPY) {
            rc = compute_one(pl, b, &it, n, &busy);
            if (rc > 0) /* failing elsewhere: the failure is reported by the caller */
                rc = NVF_OK;
            if (rc != NVF_OK || !it.buf)
                break;
        }
        t = cv_prof_now();
        int failing = hand_over(pl, it);
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
    pipeline *pl;
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
    wk->rc = produce(wk->pl, &wk->device, wk->threads, wk->k, wk->n);
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
 * --devices CPU entry (sharing the CPU threads) and cuda_workers() threads per GPU. Worker k of
 * n takes the live jobs k, k + n, ...; the writer takes them in order, so the output does not
 * depend on the split. The first failure, in worker order, is the one reported.
 */
static int compute_all(pipeline *pl) {
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
        int rc = produce(pl, &devs[0], o->threads, 0, 1);
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

static int hash_quit(void *ctx) {
    pipeline *pl = ctx;
    pthread_mutex_lock(&pl->mu);
    int quit = pl->abort || pl->failed || pl->compute_failed;
    pthread_mutex_unlock(&pl->mu);
    return quit || stopped(pl);
}

/* The two long tasks of the core pool batch: 0 computes, 1 hashes the sources. A hashing
 * failure is kept aside: it is reported after the writer's. */
static int stage_task(void *ctx, size_t i) {
    pipeline *pl = ctx;
    if (i == 0)
        return compute_all(pl);
    int rc = cv_sources_hash(&pl->r->src, hash_quit, pl);
    if (rc != NVF_OK) {
        pl->hash_rc = rc;
        nvf_error_save(&pl->hash_err);
    }
    return NVF_OK;
}

static void end_queue(pipeline *pl, int ok) {
    pthread_mutex_lock(&pl->mu);
    if (ok)
        pl->items[pl->tail++ % pl->cap] = (queue_item){.end = 1};
    else
        pl->abort = 1;
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
}

int cv_pipeline_run(cv_run *r) {
    pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.r = r;
    pl.cap = r->p->n_jobs + 1;
    pl.items = calloc(pl.cap, sizeof *pl.items);
    if (!pl.items)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the job queue");
    pl.next_job = next_live_job(r->p, 0);
    pthread_mutex_init(&pl.mu, NULL);
    pthread_mutex_init(&pl.prog_mu, NULL);
    pthread_cond_init(&pl.cv, NULL);
    pthread_t writer, hashers[HASHERS];
    size_t n_hashers = 0;
    int rc = NVF_OK;
    cv_prof_pipeline(1);
    cv_prof_threads(CV_R_WRITER, 1);
    cv_prof_threads(CV_R_HASHER, HASHERS);
    int pool = nvf_pool_size(nvf_pool_global());
    cv_prof_threads(CV_R_POOL, pool);
    cv_prof_threads(CV_R_CRC, pool - 1 + HASHERS);
    for (; n_hashers < HASHERS; n_hashers++)
        if (pthread_create(&hashers[n_hashers], NULL, hasher_main, &pl) != 0) {
            rc = nvf_error_set(NVF_E_NOMEM, "cannot start the shard hashing threads");
            break;
        }
    if (rc == NVF_OK && pthread_create(&writer, NULL, writer_main, &pl) != 0) {
        rc = nvf_error_set(NVF_E_NOMEM, "cannot start the writer thread");
    } else if (rc == NVF_OK) {
        /* Computing and hashing side by side: with a pool of one thread they run one after
         * the other, which is slower but still correct (neither waits for the other). */
        rc = nvf_pool_run(nvf_pool_global(), 2, 2, stage_task, &pl);
        end_queue(&pl, rc == NVF_OK);
        pthread_join(writer, NULL);
    }
    /* The hashers finish the shards handed to them (or drop them, when failing), then leave. */
    pthread_mutex_lock(&pl.mu);
    pl.fin_end = 1;
    pthread_cond_broadcast(&pl.cv);
    pthread_mutex_unlock(&pl.mu);
    for (size_t i = 0; i < n_hashers; i++)
        pthread_join(hashers[i], NULL);
    for (size_t i = pl.head; i < pl.tail; i++) /* buffers the writer never took */
        free(pl.items[i % pl.cap].buf);
    if (rc == NVF_OK && pl.failed)
        rc = nvf_error_restore(&pl.fail);
    if (rc == NVF_OK && stopped(&pl))
        rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
    if (rc == NVF_OK && pl.hash_rc)
        rc = nvf_error_restore(&pl.hash_err);
    cv_prof_pipeline(0);
    r->prog.bytes_done = r->prog.bytes_total;
    report(r, 1);
    free(pl.items);
    pthread_mutex_destroy(&pl.mu);
    pthread_mutex_destroy(&pl.prog_mu);
    pthread_cond_destroy(&pl.cv);
    return rc;
}
