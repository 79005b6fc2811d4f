/*
 * safetensors streaming writer: the header built from the entries (spaces pad it so the data
 * area starts 8-byte aligned), then tensor bytes into NAME.tmp, which is fsynced and renamed; on
 * any failure the temporary is removed. The bytes come either in declaration order (gathered
 * into large writes) or as pieces of tensors at offsets, in any order (gathered the same way
 * while each piece continues the previous one, a seek where not); a writer uses one or the
 * other. The byte layout is described in safetensors.c.
 */
#define _GNU_SOURCE /* sync_file_range (Linux): the writer starts writeback as it goes */
#include "nvfp4/safetensors.h"

#include "io/st_json.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes are gathered into blocks of this size, so that many small chunks cost few syscalls. */
#define META_KEY "__metadata__"

#define WRITER_BUFFER (4u << 20)
/* Every writeback_step() bytes (64 MiB) the writer asks the kernel to start writing them to
 * disk (without waiting), so that the final fsync has little left: on a machine with much memory
 * the dirty pages of a 5 GB shard otherwise all wait for that fsync, and the writer with them.
 * NVFP4_WRITEBACK_STEP_MB sets the step (0: never; the fsync alone), to measure what it costs:
 * the kernel's request queue can make the call block. Read once. */
#define WRITEBACK_STEP ((uint64_t)64 << 20)

static uint64_t writeback_step(void) {
    static _Atomic uint64_t cached = 1; /* 1: not read yet (a step is a multiple of 1 MiB, or 0) */
    uint64_t step = atomic_load(&cached);
    if (step == 1) { /* writers of several threads may all read it: the same value */
        const char *e = getenv("NVFP4_WRITEBACK_STEP_MB");
        char *end = NULL;
        long long mb = e ? strtoll(e, &end, 10) : -1;
        step = e && end != e && *end == '\0' && mb >= 0 && mb <= (1LL << 20) ? (uint64_t)mb << 20
                                                                             : WRITEBACK_STEP;
        atomic_store(&cached, step);
    }
    return step;
}

struct nvf_st_writer {
    char *path, *tmp;
    int fd;
    int failed;      /* the status of the first failure; the tmp file is gone then */
    uint64_t *sizes; /* bytes of each tensor */
    uint64_t *offs;  /* data offset of each tensor */
    uint64_t *done;  /* bytes of each tensor written with nvf_st_writer_write_at */
    size_t n;
    int positional;     /* nvf_st_writer_write_at was used */
    int complete;       /* nvf_st_writer_complete succeeded: no more writes, reads allowed */
    uint64_t data_size; /* sum of sizes */
    uint64_t file_size; /* 8 + N + data_size */
    uint64_t written;   /* data bytes accepted so far */
    uint64_t file_off;  /* the descriptor's position: the end of what went to fd */
    uint64_t kicked;    /* writeback started up to here in the current run of bytes */
    uint8_t *buf;       /* pending bytes, header included */
    size_t buf_len;
    uint8_t *header; /* the 8-byte length, JSON and padding, for callers that hash the file */
    size_t header_len;
};

/* On the first failure the file is closed and removed: the destination is never touched. */
static int writer_fail(nvf_st_writer *w, int rc) {
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
        unlink(w->tmp);
    }
    if (!w->failed)
        w->failed = rc;
    return rc;
}

/* Write all of p to the file, then start the writeback of what has gathered since the last
 * start (a hint: its failure is ignored, the fsync in nvf_st_writer_finish is the guarantee). */
static int writer_put(nvf_st_writer *w, const uint8_t *p, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t k = write(w->fd, p + off, len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return writer_fail(
                w, nvf_error_set(NVF_E_IO, "cannot write '%s': %s", w->tmp, strerror(errno)));
        off += (size_t)k;
    }
    w->file_off += len;
#ifdef SYNC_FILE_RANGE_WRITE
    uint64_t step = writeback_step();
    if (step > 0 && w->file_off - w->kicked >= step) {
        (void)sync_file_range(w->fd, (off_t)w->kicked, (off_t)(w->file_off - w->kicked),
                              SYNC_FILE_RANGE_WRITE);
        w->kicked = w->file_off;
    }
#endif
    return NVF_OK;
}

static int writer_flush(nvf_st_writer *w) {
    int rc = writer_put(w, w->buf, w->buf_len);
    if (rc == NVF_OK)
        w->buf_len = 0;
    return rc;
}

/* Move the file position to `at` (a piece that does not continue the previous one): what is
 * buffered goes first, and the run written so far gets its writeback started. */
static int writer_seek(nvf_st_writer *w, uint64_t at) {
    int rc = writer_flush(w);
    if (rc != NVF_OK)
        return rc;
#ifdef SYNC_FILE_RANGE_WRITE
    if (w->file_off > w->kicked)
        (void)sync_file_range(w->fd, (off_t)w->kicked, (off_t)(w->file_off - w->kicked),
                              SYNC_FILE_RANGE_WRITE);
#endif
    if (lseek(w->fd, (off_t)at, SEEK_SET) < 0)
        return writer_fail(
            w, nvf_error_set(NVF_E_IO, "cannot seek in '%s': %s", w->tmp, strerror(errno)));
    w->file_off = w->kicked = at;
    return NVF_OK;
}

/* Append bytes at the file position through the buffer (large chunks skip the copy). */
static int writer_append(nvf_st_writer *w, const uint8_t *p, size_t len) {
    while (len > 0) {
        if (w->buf_len == 0 && len >= WRITER_BUFFER)
            return writer_put(w, p, len);
        size_t k = len < WRITER_BUFFER - w->buf_len ? len : WRITER_BUFFER - w->buf_len;
        memcpy(w->buf + w->buf_len, p, k);
        w->buf_len += k;
        p += k;
        len -= k;
        if (w->buf_len == WRITER_BUFFER) {
            int rc = writer_flush(w);
            if (rc != NVF_OK)
                return rc;
        }
    }
    return NVF_OK;
}

static int entry_bytes(uint64_t *out, const nvf_st_entry *e) {
    if (!e->name)
        return nvf_error_set(NVF_E_INVALID, "safetensors writer: a tensor without a name");
    size_t len = strlen(e->name);
    if (nvf_st_utf8_check((const uint8_t *)e->name, len) != len)
        return nvf_error_set(NVF_E_INVALID, "safetensors writer: tensor name '%s' is not UTF-8",
                             e->name);
    if (strcmp(e->name, META_KEY) == 0)
        return nvf_error_set(NVF_E_INVALID, "safetensors writer: '%s' is not a tensor name",
                             e->name);
    if (e->dtype <= NVF_DTYPE_INVALID || e->dtype >= NVF_DTYPE_COUNT)
        return nvf_error_set(NVF_E_INVALID, "safetensors writer: tensor '%s' has dtype %d", e->name,
                             (int)e->dtype);
    if (e->ndim < 0 || e->ndim > NVF_ST_MAX_DIMS)
        return nvf_error_set(NVF_E_INVALID, "safetensors writer: tensor '%s' has %d dimensions",
                             e->name, (int)e->ndim);
    uint64_t numel = 1;
    int overflow = 0;
    for (int i = 0; i < e->ndim; i++) {
        if (e->shape[i] < 0 || (uint64_t)e->shape[i] > NVF_ST_MAX_JSON_INT)
            return nvf_error_set(NVF_E_INVALID,
                                 "safetensors writer: tensor '%s' dimension %d is %" PRId64,
                                 e->name, i, e->shape[i]);
        uint64_t d = (uint64_t)e->shape[i];
        if (d != 0 && numel > UINT64_MAX / d)
            overflow = 1;
        numel *= d;
    }
    if (overflow && numel != 0)
        return nvf_error_set(NVF_E_SHAPE, "safetensors writer: tensor '%s' is too large", e->name);
    if (nvf_dtype_nbytes(out, e->dtype, numel) != NVF_OK)
        return nvf_error_prefix("safetensors writer: tensor '%s'", e->name);
    return NVF_OK;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names (tensor names, or metadata keys with "format") must be unique. */
static int check_unique(const char **names, size_t n, const char *what) {
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            return nvf_error_set(NVF_E_INVALID, "safetensors writer: duplicate %s '%s'", what,
                                 names[i]);
    return NVF_OK;
}

static int build_header(nvf_st_buf *hb, const nvf_st_entry *entries, const uint64_t *sizes,
                        size_t n, const char *const *meta_keys, const char *const *meta_values,
                        size_t n_meta) {
    nvf_st_buf_append(hb, "\0\0\0\0\0\0\0\0", 8);
    nvf_st_buf_puts(hb, "{\"__metadata__\":{\"format\":\"pt\"");
    for (size_t i = 0; i < n_meta; i++) {
        nvf_st_buf_puts(hb, ",");
        nvf_st_buf_json_string(hb, meta_keys[i], 0);
        nvf_st_buf_puts(hb, ":");
        nvf_st_buf_json_string(hb, meta_values[i], 0);
    }
    nvf_st_buf_puts(hb, "}");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const nvf_st_entry *e = &entries[i];
        nvf_st_buf_puts(hb, ",");
        nvf_st_buf_json_string(hb, e->name, 0);
        nvf_st_buf_printf(hb, ":{\"dtype\":\"%s\",\"shape\":[", nvf_dtype_name(e->dtype));
        for (int d = 0; d < e->ndim; d++)
            nvf_st_buf_printf(hb, "%s%" PRId64, d ? "," : "", e->shape[d]);
        nvf_st_buf_printf(hb, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + sizes[i]);
        off += sizes[i];
    }
    nvf_st_buf_puts(hb, "}");
    while (hb->len % 8 != 0)
        nvf_st_buf_puts(hb, " ");
    if (hb->oom)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a safetensors header");
    uint64_t hn = hb->len - 8;
    if (hn > NVF_ST_MAX_HEADER)
        return nvf_error_set(NVF_E_INVALID,
                             "safetensors writer: the header is %" PRIu64
                             " bytes, more than the %llu limit",
                             hn, NVF_ST_MAX_HEADER);
    for (int i = 0; i < 8; i++)
        hb->p[i] = (char)(hn >> (8 * i));
    return NVF_OK;
}

static void writer_free(nvf_st_writer *w);

int nvf_st_writer_open(nvf_st_writer **out, const char *path, const nvf_st_entry *entries, size_t n,
                       const char *const *meta_keys, const char *const *meta_values,
                       size_t n_meta) {
    *out = NULL;
    int rc = NVF_OK;
    nvf_st_buf hb = {0};
    const char **names = NULL;
    nvf_st_writer *w = calloc(1, sizeof *w);
    if (!w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a safetensors writer");
    w->fd = -1;
    w->n = n;
    size_t plen = strlen(path);
    w->path = strdup(path);
    w->tmp = malloc(plen + 5);
    w->sizes = calloc(n ? n : 1, sizeof *w->sizes);
    w->offs = calloc(n ? n : 1, sizeof *w->offs);
    w->done = calloc(n ? n : 1, sizeof *w->done);
    names = calloc((n > n_meta ? n : n_meta) + 1, sizeof *names);
    w->buf = malloc(WRITER_BUFFER);
    if (!w->path || !w->tmp || !w->sizes || !w->offs || !w->done || !names || !w->buf) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for a safetensors writer");
        goto done;
    }
    snprintf(w->tmp, plen + 5, "%s.tmp", path);

    for (size_t i = 0; i < n; i++) {
        rc = entry_bytes(&w->sizes[i], &entries[i]);
        if (rc != NVF_OK)
            goto done;
        if (w->sizes[i] > NVF_ST_MAX_JSON_INT - w->data_size) {
            rc = nvf_error_set(NVF_E_INVALID, "safetensors writer: '%s' would exceed 2^53 bytes",
                               path);
            goto done;
        }
        w->offs[i] = w->data_size;
        w->data_size += w->sizes[i];
        names[i] = entries[i].name;
    }
    rc = check_unique(names, n, "tensor name");
    if (rc != NVF_OK)
        goto done;
    for (size_t i = 0; i < n_meta; i++) {
        const char *kv[2] = {meta_keys[i], meta_values[i]};
        for (int j = 0; j < 2; j++) {
            size_t len = kv[j] ? strlen(kv[j]) : 0;
            if (!kv[j] || nvf_st_utf8_check((const uint8_t *)kv[j], len) != len) {
                rc = nvf_error_set(NVF_E_INVALID,
                                   "safetensors writer: metadata entry %zu is missing or not "
                                   "UTF-8",
                                   i);
                goto done;
            }
        }
        names[i] = meta_keys[i];
    }
    names[n_meta] = "format";
    rc = check_unique(names, n_meta + 1, "metadata key");
    if (rc != NVF_OK)
        goto done;

    rc = build_header(&hb, entries, w->sizes, n, meta_keys, meta_values, n_meta);
    if (rc != NVF_OK)
        goto done;
    w->file_size = hb.len + w->data_size;
    w->header = (uint8_t *)hb.p;
    w->header_len = hb.len;
    hb.p = NULL;

    w->fd = nvf_file_create_tmp(w->tmp);
    if (w->fd < 0) {
        rc = nvf_error_code();
        goto done;
    }
    /* The header goes through the same buffer as the data; a large header is written now. */
    for (size_t off = 0; off < hb.len;) {
        size_t k =
            hb.len - off < WRITER_BUFFER - w->buf_len ? hb.len - off : WRITER_BUFFER - w->buf_len;
        memcpy(w->buf + w->buf_len, w->header + off, k);
        w->buf_len += k;
        off += k;
        if (w->buf_len == WRITER_BUFFER && (rc = writer_flush(w)) != NVF_OK)
            goto done;
    }
    *out = w;
    w = NULL;
done:
    free(hb.p);
    free(names);
    if (w) {
        writer_fail(w, rc);
        writer_free(w);
    }
    return rc;
}

int nvf_st_writer_write_at(nvf_st_writer *w, size_t tensor, uint64_t off, const void *data,
                           size_t len) {
    if (w->failed)
        return nvf_error_set(w->failed, "cannot write '%s': an earlier write failed", w->tmp);
    if (w->written > 0 || w->complete)
        return writer_fail(
            w, nvf_error_set(NVF_E_INVALID, "safetensors writer: a write_at to '%s' after %s",
                             w->path, w->complete ? "completion" : "an in-order write"));
    if (tensor >= w->n || off > w->sizes[tensor] || len > w->sizes[tensor] - off ||
        len > w->sizes[tensor] - w->done[tensor])
        return writer_fail(
            w, nvf_error_set(NVF_E_INVALID,
                             "safetensors writer: bytes [%" PRIu64 ", %" PRIu64 ") of tensor %zu "
                             "of '%s' are outside it or written twice (%" PRIu64 " of %" PRIu64
                             " bytes written)",
                             off, off + len, tensor, w->path, tensor < w->n ? w->done[tensor] : 0,
                             tensor < w->n ? w->sizes[tensor] : 0));
    /* Pieces that continue one another (the usual case) are gathered like in-order writes;
     * write() at the descriptor's position, not pwrite, so both modes go through one call. */
    w->positional = 1;
    uint64_t at = w->header_len + w->offs[tensor] + off;
    if (at != w->file_off + w->buf_len) {
        int rc = writer_seek(w, at);
        if (rc != NVF_OK)
            return rc;
    }
    w->done[tensor] += len;
    return writer_append(w, data, len);
}

int nvf_st_writer_complete(nvf_st_writer *w) {
    if (w->failed)
        return nvf_error_set(w->failed, "cannot finish '%s': an earlier write failed", w->path);
    if (w->complete)
        return NVF_OK;
    for (size_t i = 0; w->positional && i < w->n; i++)
        if (w->done[i] != w->sizes[i])
            return writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                                "safetensors writer: only %" PRIu64
                                                " of the %" PRIu64 " bytes of tensor %zu of '%s' "
                                                "were written",
                                                w->done[i], w->sizes[i], i, w->path));
    if (!w->positional && w->written != w->data_size)
        return writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                            "safetensors writer: only %" PRIu64 " of the %" PRIu64
                                            " data bytes of '%s' were written",
                                            w->written, w->data_size, w->path));
    int rc = writer_flush(w);
    if (rc == NVF_OK)
        w->complete = 1;
    return rc;
}

int nvf_st_writer_flush(nvf_st_writer *w) {
    if (w->failed)
        return nvf_error_set(w->failed, "cannot write '%s': an earlier write failed", w->tmp);
    return writer_flush(w);
}

int nvf_st_writer_read_at(const nvf_st_writer *w, uint64_t off, void *buf, size_t len) {
    if (off > w->file_size || len > w->file_size - off)
        return nvf_error_set(NVF_E_INVALID,
                             "safetensors writer: cannot read bytes [%" PRIu64 ", %" PRIu64
                             ") of '%s' (%" PRIu64 " bytes)",
                             off, off + len, w->tmp, w->file_size);
    uint8_t *p = buf;
    for (size_t k = 0; k < len;) {
        ssize_t r = pread(w->fd, p + k, len - k, (off_t)(off + k));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return nvf_error_set(NVF_E_IO, "cannot read back '%s': %s", w->tmp,
                                 r < 0 ? strerror(errno) : "unexpected end of file");
        k += (size_t)r;
    }
    return NVF_OK;
}

uint64_t nvf_st_writer_tensor_offset(const nvf_st_writer *w, size_t tensor) {
    return w->header_len + w->offs[tensor];
}

int nvf_st_writer_write(nvf_st_writer *w, const void *data, size_t len) {
    if (w->failed)
        return nvf_error_set(w->failed, "cannot write '%s': an earlier write failed", w->tmp);
    if (w->positional || w->complete)
        return writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                            "safetensors writer: an in-order write to '%s' after "
                                            "%s",
                                            w->path, w->complete ? "completion" : "a write_at"));
    if (len > w->data_size - w->written)
        return writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                            "safetensors writer: %zu more bytes for '%s' exceed "
                                            "the declared %" PRIu64 " (%" PRIu64 " written)",
                                            len, w->path, w->data_size, w->written));
    w->written += len;
    return writer_append(w, data, len);
}

uint64_t nvf_st_writer_data_size(const nvf_st_writer *w) {
    return w->data_size;
}

uint64_t nvf_st_writer_file_size(const nvf_st_writer *w) {
    return w->file_size;
}

static void writer_free(nvf_st_writer *w) {
    free(w->header);
    free(w->path);
    free(w->tmp);
    free(w->sizes);
    free(w->offs);
    free(w->done);
    free(w->buf);
    free(w);
}

int nvf_st_writer_finish(nvf_st_writer *w) {
    int rc = w->complete ? NVF_OK : nvf_st_writer_complete(w);
    if (rc != NVF_OK)
        goto done;
    if (fsync(w->fd) != 0) {
        rc = writer_fail(w,
                         nvf_error_set(NVF_E_IO, "cannot fsync '%s': %s", w->tmp, strerror(errno)));
        goto done;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot close '%s': %s", w->tmp, strerror(errno));
        unlink(w->tmp);
        goto done;
    }
    if (rename(w->tmp, w->path) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot rename '%s' to '%s': %s", w->tmp, w->path,
                           strerror(errno));
        unlink(w->tmp);
        goto done;
    }
    rc = nvf_fsync_parent_dir(w->path);
done:
    writer_free(w);
    return rc;
}

const uint8_t *nvf_st_writer_header(const nvf_st_writer *w, size_t *len) {
    *len = w->header_len;
    return w->header;
}

void nvf_st_writer_abort(nvf_st_writer *w) {
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp);
    }
    writer_free(w);
}

int nvf_st_write_file(const char *path, const nvf_st_entry *entries, const void *const *data,
                      size_t n) {
    nvf_st_writer *w;
    int rc = nvf_st_writer_open(&w, path, entries, n, NULL, NULL, 0);
    if (rc != NVF_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (w->sizes[i] == 0)
            continue;
        rc = nvf_st_writer_write(w, data[i], (size_t)w->sizes[i]);
        if (rc != NVF_OK) {
            nvf_st_writer_abort(w);
            return rc;
        }
    }
    return nvf_st_writer_finish(w);
}
