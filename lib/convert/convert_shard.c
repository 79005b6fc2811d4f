/*
 * The shard writer of convert: the safetensors streaming writer (lib/io), with the file's
 * SHA-256 and every tensor's CRC-32 computed on the bytes as they are written (the three on
 * pool threads side by side), so the outputs are never read back. The file layout and the NAME.tmp
 * + fsync + rename + directory fsync protocol are the safetensors writer's.
 */
#include "convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <stdlib.h>
#include <string.h>

struct cv_writer {
    nvf_st_writer *st;
    nvf_sha256 *sha;
    char *path;
};

int cv_writer_open(cv_writer **out, const char *dir, const cv_plan *p, size_t shard) {
    *out = NULL;
    const cv_shard *s = &p->shards[shard];
    int rc = NVF_OK;
    nvf_st_entry *entries = calloc(s->n_out ? s->n_out : 1, sizeof *entries);
    cv_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->path = nvf_path_join(dir, s->name);
        w->sha = nvf_sha256_new();
    }
    if (!entries || !w || !w->path || !w->sha) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard '%s'", s->name);
        goto done;
    }
    for (size_t i = 0; i < s->n_out; i++) {
        const cv_out *o = &p->outs[s->first_out + i];
        entries[i].name = o->name;
        entries[i].dtype = o->dtype;
        entries[i].ndim = o->ndim;
        memcpy(entries[i].shape, o->shape, sizeof entries[i].shape);
    }
    rc = nvf_st_writer_open(&w->st, w->path, entries, s->n_out, NULL, NULL, 0);
    if (rc != NVF_OK)
        goto done;
    size_t hlen = 0;
    const uint8_t *header = nvf_st_writer_header(w->st, &hlen);
    if (hlen - 8 > NVF_ST_MAX_HEADER) {
        rc = nvf_error_set(NVF_E_INVALID,
                           "shard '%s': the header is %zu bytes; use a smaller --max-shard-size",
                           s->name, hlen - 8);
        goto done;
    }
    rc = nvf_sha256_update(w->sha, header, hlen);
done:
    free(entries);
    if (rc != NVF_OK) {
        cv_writer_abort(w);
        return rc;
    }
    *out = w;
    return NVF_OK;
}

/* The three consumers of a chunk: the file, its SHA-256, the tensor's CRC-32. */
typedef struct write_part {
    cv_writer *w;
    cv_out *o;
    const void *data;
    size_t len;
} write_part;

static int write_task(void *ctx, size_t i) {
    write_part *p = ctx;
    if (i == 0)
        return nvf_st_writer_write(p->w->st, p->data, p->len);
    if (i == 1)
        return nvf_sha256_update(p->w->sha, p->data, p->len);
    p->o->crc32 = nvf_crc32(p->o->crc32, p->data, p->len);
    return NVF_OK;
}

/* Below this a chunk is consumed on the calling thread: a pool hand-off costs more. */
#define PARALLEL_MIN ((size_t)1 << 20)

int cv_writer_write(cv_writer *w, cv_out *o, const void *data, size_t len) {
    /* Writing, hashing and the CRC each run at 1.5-4 GB/s on one core; on three threads the
     * chunk takes as long as the slowest of them instead of their sum. */
    write_part part = {w, o, data, len};
    return nvf_pool_run(len >= PARALLEL_MIN ? nvf_pool_global() : NULL, 3, 3, write_task, &part);
}

int cv_writer_finish(cv_writer *w, cv_shard *s) {
    s->file_bytes = nvf_st_writer_file_size(w->st);
    int rc = nvf_sha256_final(w->sha, s->sha256);
    if (rc == NVF_OK) {
        rc = nvf_st_writer_finish(w->st);
        w->st = NULL; /* finish frees it, whatever the outcome */
    }
    cv_writer_abort(w);
    return rc;
}

void cv_writer_abort(cv_writer *w) {
    if (!w)
        return;
    nvf_st_writer_abort(w->st);
    nvf_sha256_free(w->sha);
    free(w->path);
    free(w);
}
