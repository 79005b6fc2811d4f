/*
 * The shard writer of convert: the safetensors writer of lib/io in its positional mode. Jobs
 * write pieces of tensors at offsets, in any order (into NAME.tmp); every byte of every
 * tensor is counted, so a shard with a byte missing or written twice fails at the finish. The
 * finish reads the file back once (it is in the page cache) for the file's SHA-256 and every
 * tensor's CRC-32, on the core pool: one task hashes the file from start to end (SHA-256 is
 * sequential), the others compute the CRCs of runs of tensors side by side. Then the safetensors
 * writer's fsync + rename + directory fsync, so a shard under its final name is always complete.
 */
#include "convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes read back per pread: a few MiB, large enough to amortize the call. */
#define READ_CHUNK ((size_t)4 << 20)
/* A CRC task covers consecutive tensors of at least this many bytes in all (fewer, larger tasks
 * for shards of many small tensors). */
#define CRC_TASK_MIN ((uint64_t)32 << 20)

struct cv_writer {
    nvf_st_writer *st;
    size_t shard;
    size_t first_out, n_out;
    uint64_t *done; /* bytes written of each output of the shard */
    char name[64];
};

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
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard '%s'", s->name);
        goto done;
    }
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

/* SHA-256 of the whole file, from start to end. */
static int hash_sha(hash_job *h, uint8_t *buf) {
    nvf_sha256 *sha = nvf_sha256_new();
    int rc = sha ? NVF_OK : nvf_error_code();
    for (uint64_t at = 0; rc == NVF_OK && at < h->file_bytes;) {
        size_t k = h->file_bytes - at < READ_CHUNK ? (size_t)(h->file_bytes - at) : READ_CHUNK;
        rc = quitting(h);
        if (rc == NVF_OK)
            rc = nvf_st_writer_read_at(h->w->st, at, buf, k);
        if (rc == NVF_OK)
            rc = nvf_sha256_update(sha, buf, k);
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

/* Task 0 hashes the file (the longest: it is started first), task g + 1 the CRCs of group g. */
static int hash_task(void *ctx, size_t t) {
    hash_job *h = ctx;
    uint8_t *buf = malloc(READ_CHUNK);
    if (!buf)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", h->w->name);
    int rc = t == 0 ? hash_sha(h, buf) : hash_crcs(h, t - 1, buf);
    free(buf);
    return rc;
}

int cv_writer_finish(cv_writer *w, cv_plan *p, int (*quit)(void *), void *ctx) {
    cv_shard *s = &p->shards[w->shard];
    hash_job h = {.w = w, .p = p, .quit = quit, .ctx = ctx};
    int rc = NVF_OK;
    for (size_t i = 0; i < w->n_out; i++)
        if (w->done[i] != p->outs[w->first_out + i].bytes) {
            rc = nvf_error_set(NVF_E_INVALID,
                               "shard '%s': %llu of the %llu bytes of tensor '%s' were written",
                               w->name, (unsigned long long)w->done[i],
                               (unsigned long long)p->outs[w->first_out + i].bytes,
                               p->outs[w->first_out + i].name);
            goto done;
        }
    rc = nvf_st_writer_complete(w->st);
    if (rc != NVF_OK)
        goto done;
    h.file_bytes = nvf_st_writer_file_size(w->st);
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
    rc = nvf_pool_run(nvf_pool_global(), 1 + h.n_groups, 0, hash_task, &h);
    if (rc == NVF_OK) {
        rc = nvf_st_writer_finish(w->st);
        w->st = NULL; /* finish frees it, whatever the outcome */
    }
    if (rc == NVF_OK) {
        s->file_bytes = h.file_bytes;
        memcpy(s->sha256, h.sha, sizeof s->sha256);
    }
done:
    free(h.group_first);
    cv_writer_abort(w);
    return rc;
}

void cv_writer_abort(cv_writer *w) {
    if (!w)
        return;
    nvf_st_writer_abort(w->st);
    free(w->done);
    free(w);
}
