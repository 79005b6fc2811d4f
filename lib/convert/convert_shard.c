/*
 * The shard writer of convert: the safetensors streaming writer (lib/io), with the file's
 * SHA-256 and every tensor's CRC-32 computed on the bytes as they are written, so the outputs
 * are never read back. The file layout and the NAME.tmp + fsync + rename + directory fsync
 * protocol are the safetensors writer's.
 */
#include "convert/convert_internal.h"

#include "nvfp4/fileio.h"
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

int cv_writer_write(cv_writer *w, cv_out *o, const void *data, size_t len) {
    o->crc32 = nvf_crc32(o->crc32, data, len);
    int rc = nvf_st_writer_write(w->st, data, len);
    if (rc == NVF_OK)
        rc = nvf_sha256_update(w->sha, data, len);
    return rc;
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
