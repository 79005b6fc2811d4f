/*
 * The shard writer of convert: a safetensors file whose SHA-256 and per-tensor CRC-32 are
 * computed on the bytes as they are written, so the outputs are never read back.
 *
 * The byte layout written (SPEC section 3):
 *   1. 8 bytes: N, the header length, unsigned little-endian.
 *   2. N bytes: the JSON header: "__metadata__": {"format": "pt"}, then every tensor of the
 *      shard in data order with dtype, shape and data_offsets; padded with spaces so that the
 *      data area starts 8-byte aligned.
 *   3. The tensors' bytes, back to back, in header order.
 * The file is NAME.tmp until it is complete; then fsync, rename to NAME, fsync of the directory.
 */
#include "convert/convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cv_writer {
    char *path, *tmp;
    int fd;
    nvf_sha256 *sha;
    uint64_t file_bytes;
};

static int write_all(cv_writer *w, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t k = write(w->fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return nvf_error_set(NVF_E_IO, "cannot write '%s': %s", w->tmp,
                                 k < 0 ? strerror(errno) : "no progress");
        p += k;
        len -= (size_t)k;
        w->file_bytes += (uint64_t)k;
    }
    return NVF_OK;
}

static char *build_header(size_t *out_len, const cv_plan *p, const cv_shard *s) {
    cJSON *h = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(h, "__metadata__");
    char *text = NULL;
    int ok = meta && cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (size_t i = 0; ok && i < s->n_out; i++) {
        const cv_out *o = &p->outs[s->first_out + i];
        cJSON *e = cJSON_AddObjectToObject(h, o->name);
        cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = NULL;
        ok = e && cJSON_AddStringToObject(e, "dtype", nvf_dtype_name(o->dtype)) && shape;
        for (int d = 0; ok && d < o->ndim; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)o->shape[d]));
        offs = ok ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        ok = offs && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + o->bytes)));
        off += o->bytes;
    }
    char *json = ok ? cJSON_PrintUnformatted(h) : NULL;
    cJSON_Delete(h);
    if (!json)
        return NULL;
    size_t n = strlen(json), padded = n;
    while ((8 + padded) % 8 != 0)
        padded++;
    text = malloc(8 + padded);
    if (text) {
        for (int i = 0; i < 8; i++)
            text[i] = (char)((uint64_t)padded >> (8 * i));
        memcpy(text + 8, json, n);
        memset(text + 8 + n, ' ', padded - n);
        *out_len = 8 + padded;
    }
    free(json);
    return text;
}

int cv_writer_open(cv_writer **out, const char *dir, const cv_plan *p, size_t shard) {
    *out = NULL;
    size_t hlen = 0;
    char *header = NULL;
    int rc = NVF_OK;
    cv_writer *w = calloc(1, sizeof *w);
    if (!w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a shard writer");
    w->fd = -1;
    w->path = nvf_path_join(dir, p->shards[shard].name);
    w->tmp = w->path ? malloc(strlen(w->path) + 5) : NULL;
    w->sha = nvf_sha256_new();
    header = build_header(&hlen, p, &p->shards[shard]);
    if (!w->tmp || !w->sha || !header) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard '%s'", p->shards[shard].name);
        goto done;
    }
    if (hlen - 8 > NVF_ST_MAX_HEADER) {
        rc = nvf_error_set(NVF_E_INVALID,
                           "shard '%s': the header is %zu bytes; use a smaller --max-shard-size",
                           p->shards[shard].name, hlen - 8);
        goto done;
    }
    sprintf(w->tmp, "%s.tmp", w->path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot create '%s': %s", w->tmp, strerror(errno));
        goto done;
    }
    rc = write_all(w, header, hlen);
    if (rc == NVF_OK)
        rc = nvf_sha256_update(w->sha, header, hlen);
done:
    free(header);
    if (rc != NVF_OK) {
        cv_writer_abort(w);
        return rc;
    }
    *out = w;
    return NVF_OK;
}

int cv_writer_write(cv_writer *w, cv_out *o, const void *data, size_t len) {
    o->crc32 = nvf_crc32(o->crc32, data, len);
    int rc = write_all(w, data, len);
    if (rc == NVF_OK)
        rc = nvf_sha256_update(w->sha, data, len);
    return rc;
}

int cv_writer_finish(cv_writer *w, cv_shard *s) {
    int rc = NVF_OK;
    if (fsync(w->fd) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot fsync '%s': %s", w->tmp, strerror(errno));
        goto done;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot close '%s': %s", w->tmp, strerror(errno));
        unlink(w->tmp);
        goto done;
    }
    if ((rc = nvf_sha256_final(w->sha, s->sha256)) != NVF_OK) {
        unlink(w->tmp);
        goto done;
    }
    if (rename(w->tmp, w->path) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot rename '%s': %s", w->tmp, strerror(errno));
        unlink(w->tmp);
        goto done;
    }
    s->file_bytes = w->file_bytes;
    rc = nvf_fsync_parent_dir(w->path);
done:
    if (rc != NVF_OK && w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
        unlink(w->tmp);
    }
    cv_writer_abort(w);
    return rc;
}

void cv_writer_abort(cv_writer *w) {
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    nvf_sha256_free(w->sha);
    free(w->path);
    free(w->tmp);
    free(w);
}
