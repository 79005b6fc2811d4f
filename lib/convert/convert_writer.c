/*
 * The writer and hasher threads of the pipeline (convert_pipeline.h):
 *   - writer thread k takes the positions of the processing order dealt to its slot, in order
 *     (so the jobs of each of its shards in plan order), and writes each job's pieces of output
 *     tensors at their offsets (copied tensors are streamed from the source mapping in chunks);
 *     a shard goes to a hasher as it is opened (at most CV_HASHERS pending: a writer waits
 *     beyond that), is published after every job and closed after its last. The writers write
 *     different files side by side (buffered writes to one file would be serialized by the
 *     kernel's inode lock);
 *   - the hasher threads read each shard back from the page cache as it grows: its SHA-256
 *     follows the published bytes, and so do its tensor CRC-32s on a thread beside it; then
 *     it is renamed into place and recorded in the journal (under a mutex), several side by
 *     side.
 */
#include "convert_pipeline.h"
#include "convert_profile.h"

#include "nvfp4/status.h"

#include <pthread.h>
#include <stdlib.h>

#define COPY_CHUNK ((size_t)64 << 20)

int cv_pipeline_stopped(const cv_pipeline *pl) {
    return pl->r->opt->stop && *pl->r->opt->stop;
}

void cv_pipeline_report(cv_run *r, int final) {
    if (r->opt->progress)
        r->opt->progress(&r->prog, final, r->opt->progress_user);
}

/* Add to the progress counters and report (the hashers count shards beside the writers). */
static void progress(cv_pipeline *pl, uint64_t bytes, size_t tensors, int tell) {
    pthread_mutex_lock(&pl->prog_mu);
    pl->r->prog.bytes_done += bytes;
    pl->r->prog.tensors_done += tensors;
    if (tell)
        cv_pipeline_report(pl->r, 0);
    pthread_mutex_unlock(&pl->prog_mu);
}

/* 1 when piece `pc` reaches the end of its tensor: the tensor then counts as written. */
static size_t piece_ends(const cv_run *r, const cv_piece *pc) {
    return pc->off + pc->len == r->p->outs[pc->out].bytes;
}

/* A copy job: its one piece streamed from the source mapping in chunks at increasing offsets. */
static int write_copy(cv_pipeline *pl, cv_writer *w, const cv_job *j) {
    cv_run *r = pl->r;
    size_t ti = j->members[0].tensor;
    const nvf_st_tensor *st = r->ck->tensors[ti].st;
    const cv_piece *pc = &r->p->pieces[j->first_piece];
    uint64_t len = st->end - st->begin;
    for (uint64_t off = 0; off < len;) {
        if (cv_pipeline_stopped(pl))
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
static int write_buffered(cv_pipeline *pl, cv_writer *w, const cv_job *j, const uint8_t *buf) {
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

/* Record the first failure of a writer or a hasher; everyone stops. */
static void fail(cv_pipeline *pl, int rc) {
    pthread_mutex_lock(&pl->mu);
    if (!pl->failed) {
        pl->failed = rc;
        nvf_error_save(&pl->fail);
    }
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->mu);
}

/* Hashers ---------------------------------------------------------------------------------- */

/* Hand the shard just opened to the hashers, waiting while CV_HASHERS are pending. When failing,
 * the shard is dropped here (its temporary file removed). @return non-zero when failing.
 * A writer waits here with no shard open, and every pending shard is closed or open in another
 * writer (at most CV_HASHERS - 1 of them), so a pending shard is always closed and finishing. */
static int hand_to_hashers(cv_pipeline *pl, cv_writer *w, size_t si) {
    pthread_mutex_lock(&pl->mu);
    while (pl->pending >= CV_HASHERS && !pl->failed && !pl->abort)
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->failed || pl->abort;
    if (!failing) {
        pl->fin[pl->fin_tail++ % CV_HASHERS] = (cv_pending_shard){w, si};
        pl->pending++;
        pthread_cond_broadcast(&pl->cv);
    }
    pthread_mutex_unlock(&pl->mu);
    if (failing)
        cv_writer_abort(w);
    return failing;
}

/*
 * A hasher: takes a shard as a writer opens it and finishes it (its SHA-256 following the
 * writer, then the CRC-32s, fsync, rename), then records it in the journal, which so only ever
 * lists shards complete under their final name. Once the conversion fails, shards are dropped.
 */
void *cv_hasher_main(void *arg) {
    cv_pipeline *pl = arg;
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
        cv_pending_shard ps = pl->fin[pl->fin_head++ % CV_HASHERS];
        pthread_mutex_unlock(&pl->mu);
        t = cv_prof_add(CV_P_WAIT_SHARD, t);
        /* When failing, finish stops at once (cv_pipeline_quit) and removes the shard. */
        int rc = cv_writer_finish(ps.w, r->p, cv_pipeline_quit, pl);
        t = cv_prof_now();
        if (rc == NVF_OK) {
            pthread_mutex_lock(&pl->prog_mu);
            r->p->shards[ps.shard].written = 1;
            rc = cv_journal_add(r, ps.shard);
            r->prog.shards_done++;
            cv_pipeline_report(r, 0);
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

/* Writers ---------------------------------------------------------------------------------- */

/* Take the job at position `pos` once it is handed over (its buffer is then the writer's).
 * @return 0, or non-zero when the conversion fails or stops (nothing taken). */
static int take(cv_pipeline *pl, size_t pos, cv_item *it) {
    pthread_mutex_lock(&pl->mu);
    while (pl->handed <= pos && !pl->abort && !pl->failed)
        pthread_cond_wait(&pl->cv, &pl->mu);
    int failing = pl->abort || pl->failed;
    if (!failing) {
        *it = pl->items[pos];
        pl->items[pos].buf = NULL;
    }
    pthread_mutex_unlock(&pl->mu);
    return failing;
}

/* Writer `me`: the positions of slot `me` (order and slot do not change while it runs). */
static void write_slot(cv_pipeline *pl, size_t me) {
    cv_run *r = pl->r;
    cv_plan *p = r->p;
    cv_writer *w = NULL;
    size_t open_shard = (size_t)-1, jobs_in_shard = 0;
    uint64_t busy = 0;
    for (size_t pos = 0;; pos++) {
        while (pos < pl->n_order && pl->slot[pos] != me)
            pos++;
        if (pos == pl->n_order)
            break;
        uint64_t t = cv_prof_now();
        cv_item it;
        if (take(pl, pos, &it))
            break;
        uint64_t t0 = t = cv_prof_add(CV_P_WAIT_JOB, t), waited = 0;
        const cv_job *j = &p->jobs[pl->order[pos]];
        int rc = NVF_OK;
        if (j->shard != open_shard) {
            open_shard = j->shard;
            jobs_in_shard = 0;
            rc = cv_writer_open(&w, r->opt->dst, p, open_shard);
            t = cv_prof_add(CV_P_OPEN, t);
            if (rc == NVF_OK && hand_to_hashers(pl, w, open_shard)) {
                w = NULL; /* failing elsewhere: dropped */
                free(it.buf);
                break;
            }
            uint64_t t1 = cv_prof_add(CV_P_WAIT_HASHER, t);
            waited = t1 - t;
            t = t1;
        }
        if (rc == NVF_OK)
            rc = it.buf ? write_buffered(pl, w, j, it.buf) : write_copy(pl, w, j);
        t = cv_prof_add(it.buf ? CV_P_WRITE : CV_P_COPY, t);
        free(it.buf);
        if (rc == NVF_OK)
            rc = cv_writer_publish(w, p);
        pthread_mutex_lock(&pl->mu);
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
        busy += cv_prof_add(CV_P_PUBLISH, t) - t0 - waited;
    }
    cv_writer_cancel(w); /* a shard left open: its hasher removes it */
    cv_prof_writer_busy(busy);
}

void *cv_writer_main(void *arg) {
    cv_pipeline *pl = arg;
    pthread_mutex_lock(&pl->mu);
    size_t me = pl->n_writers_named++;
    pthread_mutex_unlock(&pl->mu);
    cv_prof_name_thread("nvf-writer%zu", me);
    write_slot(pl, me);
    cv_prof_writer_done();
    cv_prof_cpu(CV_R_WRITER, cv_prof_thread_cpu());
    return NULL;
}
