/*
 * The shard writer of convert: the safetensors writer of lib/io in its positional mode. Jobs
 * write pieces of tensors at offsets, in any order (into NAME.tmp); every byte of every
 * tensor is counted, so a shard with a byte missing or written twice fails when it is closed.
 * Two threads share a shard: the writer (open, write_at, publish after each job, close) and a
 * hasher (finish), which starts a CRC thread beside it. Both read the file back as it grows
 * (from the page cache): the hasher's SHA-256 of the file follows the written prefix (the
 * tensors complete from the first on, published by the writer) while the writer goes on, and
 * so does the CRC thread, each tensor's CRC-32 once it is complete; so only the last bytes are
 * left when the shard is closed. Then the safetensors writer's fsync + rename + directory
 * fsync, so a shard under its final name is always complete.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "manifest/hash_file.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bytes read back per pread (from the page cache, where the shard was just written): small
 * enough that the copy stays in the core's L2 cache for the SHA-256 or CRC-32 that reads it next,
 * large enough to amortize the call (NVF_HASH_READ, as for the source files: 256 KiB made a
 * single SHA-256 stream 6-15% faster than 4 MiB, 128 KiB another 10% on the development VM). */
#define READ_CHUNK NVF_HASH_READ

struct cv_writer {
    nvf_st_writer *st;
    size_t shard;
    size_t first_out, n_out;
    uint64_t *done;  /* bytes written of each output of the shard (the writer's) */
    size_t next_out; /* outputs [0, next_out) are complete (the writer's) */
    char name[64];
    /* Between the writer and the hasher, under mu: */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t ready; /* file bytes [0, ready) are written out */
    int state;      /* OPEN, CLOSED (every byte written), CANCELLED */
};

enum { OPEN = 0, CLOSED, CANCELLED };

int cv_writer_open(cv_writer **out, const char *dir, const cv_plan *p, size_t shard) {
    *out = NULL;
    const cv_shard *s = &p->shards[shard];
    int rc = NVF_OK;
    nvf_st_entry *entries = calloc(s->n_out ? s->n_out : 1, sizeof *entries);
    cv_writer *w = calloc(1, sizeof *w);
    char *path = nvf_path_join(dir, s->name);
    if (w)
        w->done = calloc(s->n_out ? s->n_out : 1, sizeof *w->done);
    if (!entries || !w || !w->done || !path) {
        free(w ? w->done : NULL);
        free(w);
        w = NULL;
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard '%s'", s->name);
        goto done;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->shard = shard;
    w->first_out = s->first_out;
    w->n_out = s->n_out;
    snprintf(w->name, sizeof w->name, "%s", s->name);
    for (size_t i = 0; i < s->n_out; i++) {
        const cv_out *o = &p->outs[s->first_out + i];
        entries[i].name = o->name;
        entries[i].dtype = o->dtype;
        entries[i].ndim = o->ndim;
        memcpy(entries[i].shape, o->shape, sizeof entries[i].shape);
    }
    rc = nvf_st_writer_open(&w->st, path, entries, s->n_out, NULL, NULL, 0);
    if (rc != NVF_OK)
        goto done;
    size_t hlen = 0;
    (void)nvf_st_writer_header(w->st, &hlen);
    if (hlen - 8 > NVF_ST_MAX_HEADER)
        rc = nvf_error_set(NVF_E_INVALID,
                           "shard '%s': the header is %zu bytes; use a smaller --max-shard-size",
                           s->name, hlen - 8);
done:
    free(entries);
    free(path);
    if (rc != NVF_OK) {
        cv_writer_abort(w);
        return rc;
    }
    *out = w;
    return NVF_OK;
}

int cv_writer_write_at(cv_writer *w, size_t out, uint64_t off, const void *data, size_t len) {
    if (out < w->first_out || out - w->first_out >= w->n_out)
        return nvf_error_set(NVF_E_INVALID, "shard '%s': output %zu is not one of its tensors",
                             w->name, out);
    size_t i = out - w->first_out;
    int rc = nvf_st_writer_write_at(w->st, i, off, data, len);
    if (rc == NVF_OK)
        w->done[i] += len;
    return rc;
}

/* Raise what the hasher may read to `ready` and set the shard's state (OPEN: unchanged). */
static void set_ready(cv_writer *w, uint64_t ready, int state) {
    pthread_mutex_lock(&w->mu);
    if (ready > w->ready)
        w->ready = ready;
    if (state != OPEN)
        w->state = state;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int cv_writer_publish(cv_writer *w, const cv_plan *p) {
    size_t k = w->next_out;
    while (k < w->n_out && w->done[k] == p->outs[w->first_out + k].bytes)
        k++;
    if (k == w->next_out)
        return NVF_OK;
    int rc = nvf_st_writer_flush(w->st);
    if (rc != NVF_OK)
        return rc;
    w->next_out = k;
    set_ready(w,
              k < w->n_out ? nvf_st_writer_tensor_offset(w->st, k) : nvf_st_writer_file_size(w->st),
              OPEN);
    return NVF_OK;
}

int cv_writer_close(cv_writer *w, const cv_plan *p) {
    int rc = NVF_OK;
    for (size_t i = 0; rc == NVF_OK && i < w->n_out; i++)
        if (w->done[i] != p->outs[w->first_out + i].bytes)
            rc = nvf_error_set(NVF_E_INVALID,
                               "shard '%s': %llu of the %llu bytes of tensor '%s' were written",
                               w->name, (unsigned long long)w->done[i],
                               (unsigned long long)p->outs[w->first_out + i].bytes,
                               p->outs[w->first_out + i].name);
    if (rc == NVF_OK)
        rc = nvf_st_writer_complete(w->st);
    set_ready(w, rc == NVF_OK ? nvf_st_writer_file_size(w->st) : 0,
              rc == NVF_OK ? CLOSED : CANCELLED);
    return rc;
}

void cv_writer_cancel(cv_writer *w) {
    if (w)
        set_ready(w, 0, CANCELLED);
}

/* The hashing ------------------------------------------------------------------------------ */

typedef struct hash_job {
    cv_writer *w;
    cv_plan *p;
    int (*quit)(void *);
    void *ctx;
    uint64_t file_bytes;
    atomic_int stop; /* the other of the SHA-256 and the CRC thread failed */
    char sha[65];
    int crc_rc;
    nvf_error_state crc_err;
} hash_job;

static int quitting(hash_job *h) {
    if (atomic_load(&h->stop))
        return nvf_error_set(NVF_E_INTERRUPTED, "stopped while hashing '%s'", h->w->name);
    return h->quit && h->quit(h->ctx)
               ? nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing '%s'", h->w->name)
               : NVF_OK;
}

/* Stop the other thread of the two (it wakes within 50 ms). */
static void stop_other(hash_job *h) {
    atomic_store(&h->stop, 1);
    pthread_mutex_lock(&h->w->mu);
    pthread_cond_broadcast(&h->w->cv);
    pthread_mutex_unlock(&h->w->mu);
}

/* Wait until the writer has written out bytes past `at` (or closed or cancelled the shard),
 * waking now and then to check quit. @return the bytes ready, or 0 when cancelled. */
static uint64_t wait_ready(hash_job *h, uint64_t at, int *rc) {
    cv_writer *w = h->w;
    pthread_mutex_lock(&w->mu);
    while (w->ready <= at && w->state == OPEN && (*rc = quitting(h)) == NVF_OK) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    uint64_t ready = w->state == CANCELLED ? 0 : w->ready;
    pthread_mutex_unlock(&w->mu);
    if (*rc == NVF_OK && ready == 0)
        *rc = nvf_error_set(NVF_E_INTERRUPTED, "shard '%s' was not finished", w->name);
    return ready;
}

/* The next piece of [at, end) to read back: once the writer has published bytes past `at`, *k
 * of them (at most READ_CHUNK). `*ready` carries the published extent between calls. */
static int next_piece(hash_job *h, uint64_t at, uint64_t end, uint64_t *ready, size_t *k) {
    int rc = NVF_OK;
    if (*ready <= at)
        *ready = wait_ready(h, at, &rc);
    if (rc != NVF_OK)
        return rc;
    uint64_t upto = *ready < end ? *ready : end;
    *k = upto - at < READ_CHUNK ? (size_t)(upto - at) : READ_CHUNK;
    return NVF_OK;
}

/* Read that piece back into buf (unless quitting). */
static int read_piece(hash_job *h, uint64_t at, uint8_t *buf, size_t k) {
    int rc = quitting(h);
    return rc == NVF_OK ? nvf_st_writer_read_at(h->w->st, at, buf, k) : rc;
}

/* SHA-256 of the whole file, from start to end, following the bytes the writer publishes. */
static int hash_sha(hash_job *h, uint8_t *buf) {
    nvf_sha256 *sha = nvf_sha256_new();
    int rc = sha ? NVF_OK : nvf_error_code();
    uint64_t ready = 0;
    for (uint64_t at = 0; rc == NVF_OK && at < h->file_bytes;) {
        uint64_t t = cv_prof_now();
        size_t k = 0;
        rc = next_piece(h, at, h->file_bytes, &ready, &k);
        t = cv_prof_add(CV_P_WAIT_PUBLISHED, t);
        if (rc == NVF_OK)
            rc = read_piece(h, at, buf, k);
        t = cv_prof_add(CV_P_SHA_READ, t);
        if (rc == NVF_OK)
            rc = nvf_sha256_update(sha, buf, k);
        cv_prof_add(CV_P_SHA, t);
        at += k;
    }
    if (rc == NVF_OK)
        rc = nvf_sha256_final(sha, h->sha);
    nvf_sha256_free(sha);
    return rc;
}

/* The CRC thread: each tensor's CRC-32, read back as the writer publishes it. */
static int hash_crcs(hash_job *h, uint8_t *buf) {
    cv_writer *w = h->w;
    int rc = NVF_OK;
    uint64_t ready = 0;
    for (size_t i = 0; rc == NVF_OK && i < w->n_out; i++) {
        cv_out *o = &h->p->outs[w->first_out + i];
        uint64_t base = nvf_st_writer_tensor_offset(w->st, i), end = base + o->bytes;
        uint32_t crc = 0;
        for (uint64_t at = base; rc == NVF_OK && at < end;) {
            size_t k = 0;
            rc = next_piece(h, at, end, &ready, &k);
            uint64_t t = cv_prof_now();
            if (rc == NVF_OK)
                rc = read_piece(h, at, buf, k);
            if (rc == NVF_OK)
                crc = nvf_crc32(crc, buf, k);
            cv_prof_add(CV_P_CRC, t);
            at += k;
        }
        o->crc32 = crc;
    }
    return rc;
}

static void crc_run(hash_job *h) {
    uint8_t *buf = malloc(READ_CHUNK);
    int rc =
        buf ? hash_crcs(h, buf) : nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", h->w->name);
    free(buf);
    h->crc_rc = rc;
    if (rc != NVF_OK) {
        nvf_error_save(&h->crc_err);
        stop_other(h);
    }
}

static void *crc_main(void *arg) {
    cv_prof_name_thread("nvf-crc");
    crc_run(arg);
    cv_prof_cpu(CV_R_CRC, cv_prof_thread_cpu());
    return NULL;
}

int cv_writer_finish(cv_writer *w, cv_plan *p, int (*quit)(void *), void *ctx) {
    cv_shard *s = &p->shards[w->shard];
    hash_job h = {.w = w, .p = p, .quit = quit, .ctx = ctx};
    atomic_init(&h.stop, 0);
    h.file_bytes = nvf_st_writer_file_size(w->st);
    /* The CRCs on a thread of their own beside the SHA-256 (on this one when it cannot start). */
    pthread_t crc_thread;
    int crc_apart = pthread_create(&crc_thread, NULL, crc_main, &h) == 0;
    uint8_t *buf = malloc(READ_CHUNK);
    int rc =
        buf ? hash_sha(&h, buf) : nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", w->name);
    free(buf);
    uint64_t t = cv_prof_now();
    if (rc != NVF_OK && crc_apart)
        stop_other(&h);
    if (crc_apart)
        pthread_join(crc_thread, NULL);
    else if (rc == NVF_OK)
        crc_run(&h);
    t = cv_prof_add(CV_P_CRC_WALL, t);
    /* The CRC thread's failure, unless the SHA-256 failed first (the CRC thread then only
     * stopped): a read error of the CRC thread stops the SHA-256 too, and is the one told. */
    if (h.crc_rc != NVF_OK &&
        (rc == NVF_OK || (rc == NVF_E_INTERRUPTED && h.crc_rc != NVF_E_INTERRUPTED)))
        rc = nvf_error_restore(&h.crc_err);
    if (rc == NVF_OK) /* every byte hashed: wait for the writer's close (or cancel) */
        (void)wait_ready(&h, h.file_bytes, &rc);
    t = cv_prof_add(CV_P_WAIT_PUBLISHED, t);
    if (rc == NVF_OK) {
        rc = nvf_st_writer_finish(w->st);
        w->st = NULL; /* finish frees it, whatever the outcome */
        cv_prof_add(CV_P_FINALIZE, t);
    }
    if (rc == NVF_OK) {
        s->file_bytes = h.file_bytes;
        memcpy(s->sha256, h.sha, sizeof s->sha256);
    }
    /* The writer may still be writing a shard that fails here: it is freed only once the
     * writer has let go of it (closed or cancelled; a failing conversion cancels it). */
    pthread_mutex_lock(&w->mu);
    while (w->state == OPEN)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    cv_writer_abort(w);
    return rc;
}

void cv_writer_abort(cv_writer *w) {
    if (!w)
        return;
    nvf_st_writer_abort(w->st);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->done);
    free(w);
}
