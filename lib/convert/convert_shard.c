/*
 * The shard writer of convert: the safetensors writer of lib/io in its positional mode. Jobs
 * write pieces of tensors at offsets, in any order (into NAME.tmp); every byte of every
 * tensor is counted, so a shard with a byte missing or written twice fails when it is closed.
 * Two threads share a shard: the writer (open, write_at, publish after each job, close) and a
 * hasher (finish). The file is read back once (from the page cache): the hasher's SHA-256 of
 * the file follows the written prefix (the tensors complete from the first on, published by
 * the writer) while the writer goes on, so only the last bytes are left when the shard is
 * closed; then the tensors' CRC-32s on the core pool (runs of tensors side by side), and the
 * safetensors writer's fsync + rename + directory fsync, so a shard under its final name is
 * always complete.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "nvfp4/fileio.h"
#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Bytes read back per pread (from the page cache, where the shard was just written): small
 * enough that the copy stays in the core's L2 cache for the SHA-256 or CRC-32 that reads it next,
 * large enough to amortize the call (256 KiB: a single SHA-256 stream 6-15% faster than with
 * 4 MiB on the development VM). */
#define READ_CHUNK ((size_t)256 << 10)
/* A CRC task covers consecutive tensors of at least this many bytes in all (fewer, larger tasks
 * for shards of many small tensors). */
#define CRC_TASK_MIN ((uint64_t)32 << 20)

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

/* The read-back ---------------------------------------------------------------------------- */

typedef struct hash_job {
    cv_writer *w;
    cv_plan *p;
    int (*quit)(void *);
    void *ctx;
    uint64_t file_bytes;
    size_t n_groups;
    size_t *group_first; /* n_groups + 1 bounds: CRC task g covers outputs [first[g], first[g+1]) */
    char sha[65];
} hash_job;

static int quitting(const hash_job *h) {
    return h->quit && h->quit(h->ctx)
               ? nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing '%s'", h->w->name)
               : NVF_OK;
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

/* SHA-256 of the whole file, from start to end, following the bytes the writer publishes. */
static int hash_sha(hash_job *h, uint8_t *buf) {
    nvf_sha256 *sha = nvf_sha256_new();
    int rc = sha ? NVF_OK : nvf_error_code();
    uint64_t ready = 0;
    for (uint64_t at = 0; rc == NVF_OK && at < h->file_bytes;) {
        uint64_t t = cv_prof_now();
        if (ready <= at) {
            ready = wait_ready(h, at, &rc);
            t = cv_prof_add(CV_P_WAIT_PUBLISHED, t);
        }
        if (rc != NVF_OK)
            break;
        size_t k = ready - at < READ_CHUNK ? (size_t)(ready - at) : READ_CHUNK;
        rc = quitting(h);
        if (rc == NVF_OK)
            rc = nvf_st_writer_read_at(h->w->st, at, buf, k);
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

/* CRC-32 of the outputs of group g, each from its own bytes in the file. */
static int hash_crcs(hash_job *h, size_t g, uint8_t *buf) {
    int rc = NVF_OK;
    for (size_t i = h->group_first[g]; rc == NVF_OK && i < h->group_first[g + 1]; i++) {
        cv_out *o = &h->p->outs[h->w->first_out + i];
        uint64_t base = nvf_st_writer_tensor_offset(h->w->st, i);
        uint32_t crc = 0;
        for (uint64_t at = 0; rc == NVF_OK && at < o->bytes;) {
            size_t k = o->bytes - at < READ_CHUNK ? (size_t)(o->bytes - at) : READ_CHUNK;
            rc = quitting(h);
            if (rc == NVF_OK)
                rc = nvf_st_writer_read_at(h->w->st, base + at, buf, k);
            if (rc == NVF_OK)
                crc = nvf_crc32(crc, buf, k);
            at += k;
        }
        o->crc32 = crc;
    }
    return rc;
}

/* CRC task g: the outputs of group g. */
static int crc_task(void *ctx, size_t g) {
    hash_job *h = ctx;
    uint8_t *buf = malloc(READ_CHUNK);
    if (!buf)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", h->w->name);
    uint64_t t = cv_prof_now();
    int rc = hash_crcs(h, g, buf);
    cv_prof_add(CV_P_CRC, t);
    free(buf);
    return rc;
}

int cv_writer_finish(cv_writer *w, cv_plan *p, int (*quit)(void *), void *ctx) {
    cv_shard *s = &p->shards[w->shard];
    hash_job h = {.w = w, .p = p, .quit = quit, .ctx = ctx};
    h.file_bytes = nvf_st_writer_file_size(w->st);
    /* The SHA-256 follows the writer; then, once closed, the CRCs side by side. */
    uint8_t *buf = malloc(READ_CHUNK);
    int rc =
        buf ? hash_sha(&h, buf) : nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", w->name);
    free(buf);
    uint64_t t = cv_prof_now();
    if (rc == NVF_OK) /* every byte hashed: wait for the writer's close (or cancel) */
        (void)wait_ready(&h, h.file_bytes, &rc);
    cv_prof_add(CV_P_WAIT_PUBLISHED, t);
    if (rc != NVF_OK)
        goto done;
    h.group_first = calloc(w->n_out + 1, sizeof *h.group_first);
    if (!h.group_first) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", w->name);
        goto done;
    }
    uint64_t acc = 0;
    for (size_t i = 0; i < w->n_out; i++) {
        if (acc == 0)
            h.group_first[h.n_groups++] = i;
        acc += p->outs[w->first_out + i].bytes;
        if (acc >= CRC_TASK_MIN)
            acc = 0;
    }
    h.group_first[h.n_groups] = w->n_out;
    t = cv_prof_now();
    rc = nvf_pool_run(nvf_pool_global(), h.n_groups, 0, crc_task, &h);
    t = cv_prof_add(CV_P_CRC_WALL, t);
    if (rc == NVF_OK) {
        rc = nvf_st_writer_finish(w->st);
        w->st = NULL; /* finish frees it, whatever the outcome */
        cv_prof_add(CV_P_FINALIZE, t);
    }
    if (rc == NVF_OK) {
        s->file_bytes = h.file_bytes;
        memcpy(s->sha256, h.sha, sizeof s->sha256);
    }
done:
    free(h.group_first);
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
