/*
 * safetensors reader (validating, mmap) and streaming writer.
 *
 * Byte layout of a file:
 *   1. bytes [0, 8): N, the header length, an unsigned 64-bit little-endian integer,
 *      N <= 100,000,000 and 8 + N <= file size.
 *   2. bytes [8, 8 + N): the header, UTF-8 JSON text: one object, optionally surrounded by JSON
 *      whitespace (this writer pads with spaces so that 8 + N is a multiple of 8). Its key
 *      "__metadata__" maps strings to strings; every other key is a tensor name mapped to
 *      {"dtype": NAME, "shape": [d0, ...], "data_offsets": [begin, end]}, all numbers
 *      non-negative integers <= 2^53.
 *   3. bytes [8 + N, file size): the data area. Tensor t's bytes are [8 + N + begin, 8 + N + end),
 *      end - begin = prod(shape) * bits(dtype) / 8, row-major, little-endian. Sorted by offset,
 *      the tensors tile the area from 0 to its end with no gap, overlap or trailing byte.
 */
#define _GNU_SOURCE /* sync_file_range (Linux): the writer starts writeback as it goes */
#include "nvfp4/safetensors.h"

#include "io/st_json.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_KEY "__metadata__"

/* Writes are gathered into blocks of this size, so that many small chunks cost few syscalls. */
#define WRITER_BUFFER (4u << 20)
/* Every WRITEBACK_STEP bytes the writer asks the kernel to start writing them to disk (without
 * waiting), so that the final fsync has little left: on a machine with much memory the dirty
 * pages of a 5 GB shard otherwise all wait for that fsync, and the writer with them. */
#define WRITEBACK_STEP ((uint64_t)64 << 20)

/* Reader --------------------------------------------------------------------------------------- */

static int st_error(const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int st_error(const char *path, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nvf_error_set(NVF_E_FORMAT, "invalid safetensors file '%s': %s", path, msg);
}

/* "[2, 3]" into buf. */
static const char *shape_str(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* A short description of a JSON value for messages: the number itself, or its kind. */
static const char *value_str(char *buf, size_t cap, const cJSON *v) {
    if (cJSON_IsNumber(v))
        snprintf(buf, cap, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(buf, cap, "the string \"%.40s\"", v->valuestring);
    else if (cJSON_IsArray(v))
        snprintf(buf, cap, "an array");
    else if (cJSON_IsObject(v))
        snprintf(buf, cap, "an object");
    else if (cJSON_IsBool(v))
        snprintf(buf, cap, "a boolean");
    else
        snprintf(buf, cap, "null");
    return buf;
}

/* A JSON number that is a non-negative integer <= 2^53 (checked on the double cJSON holds,
 * before any conversion, so that NaN, 1e300 or -1 never reach an integer cast). */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v))
        return 0;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > (double)NVF_ST_MAX_JSON_INT || floor(d) != d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

static int parse_tensor(nvf_st_tensor *t, const cJSON *e, const char *path) {
    const char *name = e->string;
    char vb[64], sb[256];
    if (!cJSON_IsObject(e))
        return st_error(path, "entry of tensor '%s' is %s, not an object", name,
                        value_str(vb, sizeof vb, e));
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *c = e->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dtype
                             : strcmp(c->string, "shape") == 0        ? &shape
                             : strcmp(c->string, "data_offsets") == 0 ? &offsets
                                                                      : NULL;
        if (!slot)
            return st_error(path, "tensor '%s' has an unknown field '%s'", name, c->string);
        if (*slot)
            return st_error(path, "tensor '%s' has the field '%s' twice", name, c->string);
        *slot = c;
    }
    if (!dtype || !shape || !offsets)
        return st_error(path, "tensor '%s' has no '%s' field", name,
                        !dtype   ? "dtype"
                        : !shape ? "shape"
                                 : "data_offsets");

    if (!cJSON_IsString(dtype))
        return st_error(path, "dtype of tensor '%s' is %s, not a string", name,
                        value_str(vb, sizeof vb, dtype));
    t->dtype = nvf_dtype_from_name(dtype->valuestring, strlen(dtype->valuestring));
    if (t->dtype == NVF_DTYPE_INVALID)
        return st_error(path, "unknown dtype '%s' for tensor '%s'", dtype->valuestring, name);

    if (!cJSON_IsArray(shape))
        return st_error(path, "shape of tensor '%s' is %s, not an array", name,
                        value_str(vb, sizeof vb, shape));
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > NVF_ST_MAX_DIMS)
        return st_error(path, "tensor '%s' has %d dimensions, more than the %d supported", name,
                        ndim, NVF_ST_MAX_DIMS);
    t->ndim = ndim;
    t->numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return st_error(path,
                            "tensor '%s': shape dimension %d is %s, not a non-negative integer "
                            "<= 2^53",
                            name, i, value_str(vb, sizeof vb, d));
        t->shape[i] = (int64_t)v;
    }
    shape_str(sb, sizeof sb, t->shape, ndim);
    int overflow = 0;
    for (i = 0; i < ndim; i++) {
        uint64_t v = (uint64_t)t->shape[i];
        if (v != 0 && t->numel > UINT64_MAX / v)
            overflow = 1;
        else
            t->numel *= v;
    }
    /* A zero dimension makes the product 0 whatever overflowed before it. */
    for (i = 0; i < ndim; i++)
        if (t->shape[i] == 0)
            t->numel = 0, overflow = 0;
    if (overflow)
        return st_error(path, "tensor '%s': shape %s has more than 2^64 elements", name, sb);
    uint64_t nbytes;
    if (nvf_dtype_nbytes(&nbytes, t->dtype, t->numel) != NVF_OK)
        return st_error(path, "tensor '%s': shape %s of %s: %s", name, sb, nvf_dtype_name(t->dtype),
                        nvf_error_last());

    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return st_error(
            path, "data_offsets of tensor '%s' is %s, not [begin, end]", name,
            cJSON_IsArray(offsets)
                ? (snprintf(vb, sizeof vb, "an array of %d", cJSON_GetArraySize(offsets)), vb)
                : value_str(vb, sizeof vb, offsets));
    const cJSON *b = offsets->child, *en = b->next;
    if (!json_uint(b, &t->begin) || !json_uint(en, &t->end)) {
        const cJSON *bad = json_uint(b, &t->begin) ? en : b;
        return st_error(path,
                        "tensor '%s': data_offsets %s is %s, not a non-negative integer <= 2^53",
                        name, bad == b ? "begin" : "end", value_str(vb, sizeof vb, bad));
    }
    if (t->begin > t->end)
        return st_error(
            path, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] are reversed (begin > end)",
            name, t->begin, t->end);
    if (t->end - t->begin != nbytes)
        return st_error(path,
                        "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                        " bytes but shape %s of %s needs %" PRIu64,
                        name, t->begin, t->end, t->end - t->begin, sb, nvf_dtype_name(t->dtype),
                        nbytes);
    return NVF_OK;
}

static int cmp_offset(const void *a, const void *b) {
    const nvf_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* qsort has no context argument: the index sort reads the array through this. */
static _Thread_local const nvf_st_tensor *g_sort_tensors;
static _Thread_local char *const *g_sort_keys;

static int cmp_name_idx(const void *a, const void *b) {
    return strcmp(g_sort_tensors[*(const size_t *)a].name, g_sort_tensors[*(const size_t *)b].name);
}

static int cmp_key_idx(const void *a, const void *b) {
    return strcmp(g_sort_keys[*(const size_t *)a], g_sort_keys[*(const size_t *)b]);
}

static int parse_metadata(nvf_st_file *f, const cJSON *m, const char *path) {
    char vb[64];
    if (!cJSON_IsObject(m))
        return st_error(path, "__metadata__ is %s, not an object", value_str(vb, sizeof vb, m));
    size_t n = (size_t)cJSON_GetArraySize(m);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    int rc = NVF_OK;
    if (!f->meta_keys || !f->meta_values || !order) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the metadata of '%s'", path);
        goto done;
    }
    for (const cJSON *c = m->child; c; c = c->next) {
        if (!cJSON_IsString(c)) {
            rc = st_error(path, "__metadata__ value of '%s' is not a string (it is %s)", c->string,
                          value_str(vb, sizeof vb, c));
            goto done;
        }
        size_t k = f->n_meta;
        f->meta_keys[k] = strdup(c->string);
        f->meta_values[k] = strdup(c->valuestring);
        f->n_meta++;
        if (!f->meta_keys[k] || !f->meta_values[k]) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the metadata of '%s'", path);
            goto done;
        }
        order[k] = k;
    }
    g_sort_keys = f->meta_keys;
    qsort(order, n, sizeof *order, cmp_key_idx);
    for (size_t i = 1; i < n; i++)
        if (strcmp(f->meta_keys[order[i - 1]], f->meta_keys[order[i]]) == 0) {
            rc = st_error(path, "duplicate __metadata__ key '%s'", f->meta_keys[order[i]]);
            goto done;
        }
done:
    free(order);
    return rc;
}

/* Sorted by offset, the tensors must cover [0, data_len) exactly. */
static int check_tiling(const nvf_st_file *f, const char *path) {
    uint64_t data_len = f->file_size - f->data_start;
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const nvf_st_tensor *t = &f->tensors[i];
        if (t->begin < pos)
            return st_error(path, "tensors '%s' and '%s' overlap at offset %" PRIu64,
                            f->tensors[i - 1].name, t->name, t->begin);
        if (t->begin > pos)
            return st_error(path,
                            "gap in the data area between offset %" PRIu64 " and %" PRIu64
                            " (before tensor '%s')",
                            pos, t->begin, t->name);
        pos = t->end;
    }
    if (pos > data_len)
        return st_error(path, "data area is %" PRIu64 " bytes but tensors need %" PRIu64, data_len,
                        pos);
    if (pos < data_len && f->n_tensors == 0)
        return st_error(path,
                        "%" PRIu64 " trailing bytes in the data area of a file without tensors",
                        data_len);
    if (pos < data_len)
        return st_error(path,
                        "%" PRIu64 " trailing bytes after the last tensor (data ends at %" PRIu64
                        ", the file at %" PRIu64 ")",
                        data_len - pos, f->data_start + pos, f->file_size);
    return NVF_OK;
}

static int parse_header(nvf_st_file *f, const uint8_t *hdr, size_t n, const char *path) {
    int rc = NVF_OK;
    char *text = NULL;
    cJSON *root = NULL;

    size_t bad = nvf_st_utf8_check(hdr, n);
    if (bad < n)
        return st_error(path, "header is not valid UTF-8 at byte %zu (0x%02x)", bad, hdr[bad]);
    nvf_st_json_scan_result scan;
    nvf_st_json_scan(&scan, hdr, n);
    if (scan.problem)
        return st_error(path, "header is not valid JSON: %s at byte %zu", scan.problem,
                        scan.problem_at);

    /* cJSON wants a NUL-terminated string; the header has no NUL (checked above). */
    text = malloc(n + 1);
    if (!text)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the %zu-byte header of '%s'", n, path);
    memcpy(text, hdr, n);
    text[n] = '\0';
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(text, n + 1, &end, 1);
    if (!root) {
        size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : n;
        rc = st_error(path, "header is not valid JSON (the parser stopped at byte %zu)", at);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = st_error(path, "header is not a JSON object");
        goto done;
    }

    size_t n_children = (size_t)cJSON_GetArraySize(root);
    f->tensors = calloc(n_children ? n_children : 1, sizeof *f->tensors);
    f->by_name = calloc(n_children ? n_children : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the tensors of '%s'", path);
        goto done;
    }
    const cJSON *meta = NULL;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, META_KEY) == 0) {
            if (meta) {
                rc = st_error(path, "duplicate key '__metadata__'");
                goto done;
            }
            meta = c;
            rc = parse_metadata(f, c, path);
            if (rc != NVF_OK)
                goto done;
            continue;
        }
        nvf_st_tensor *t = &f->tensors[f->n_tensors];
        rc = parse_tensor(t, c, path);
        if (rc != NVF_OK)
            goto done;
        t->name = strdup(c->string);
        if (!t->name) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the tensors of '%s'", path);
            goto done;
        }
        f->n_tensors++;
    }

    /* After the checks that name a tensor, the numbers whose text a double cannot judge ("1.0",
     * "9007199254740993"). */
    if (scan.number_len > 0) {
        rc = st_error(path,
                      "header number '%.*s' at byte %zu is not a plain non-negative integer "
                      "<= 2^53",
                      (int)(scan.number_len < 40 ? scan.number_len : 40),
                      (const char *)hdr + scan.number_at, scan.number_at);
        goto done;
    }
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_offset);
    for (size_t i = 0; i < f->n_tensors; i++)
        f->by_name[i] = i;
    g_sort_tensors = f->tensors;
    qsort(f->by_name, f->n_tensors, sizeof *f->by_name, cmp_name_idx);
    for (size_t i = 1; i < f->n_tensors; i++) {
        const char *a = f->tensors[f->by_name[i - 1]].name, *b = f->tensors[f->by_name[i]].name;
        if (strcmp(a, b) == 0) {
            rc = st_error(path, "duplicate tensor name '%s'", b);
            goto done;
        }
    }
    rc = check_tiling(f, path);
    if (rc != NVF_OK)
        goto done;
done:
    cJSON_Delete(root);
    free(text);
    return rc;
}

int nvf_st_parse(nvf_st_file **out, const char *path, const uint8_t *buf, size_t len,
                 uint64_t file_size) {
    *out = NULL;
    if (file_size < 8)
        return st_error(path, "file is %" PRIu64 " bytes, shorter than the 8-byte header length",
                        file_size);
    if (len < 8 || len > file_size)
        return nvf_error_set(NVF_E_INVALID, "'%s': %zu bytes given of a %" PRIu64 "-byte file",
                             path, len, file_size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | buf[i];
    if (n > NVF_ST_MAX_HEADER)
        return st_error(path, "header length %" PRIu64 " exceeds the %llu limit", n,
                        NVF_ST_MAX_HEADER);
    if (n > file_size - 8)
        return st_error(path,
                        "header length %" PRIu64 " runs past the end of the %" PRIu64 "-byte file",
                        n, file_size);
    if (len - 8 < n)
        return nvf_error_set(NVF_E_INVALID, "'%s': %zu bytes given, the header needs %" PRIu64,
                             path, len, 8 + n);

    nvf_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return nvf_error_set(NVF_E_NOMEM, "no memory for '%s'", path);
    }
    f->file_size = file_size;
    f->header_len = n;
    f->data_start = 8 + n;
    int rc = parse_header(f, buf + 8, (size_t)n, path);
    if (rc != NVF_OK) {
        nvf_st_close(f);
        return rc;
    }
    *out = f;
    return NVF_OK;
}

int nvf_st_open(nvf_st_file **out, const char *path) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nvf_error_set(NVF_E_IO, "cannot open '%s': %s", path, strerror(errno));
    int rc = NVF_OK;
    void *map = NULL;
    size_t map_len = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = nvf_error_set(NVF_E_IO, "'%s' is not a regular file", path);
        goto done;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) {
        rc = st_error(path, "file is %" PRIu64 " bytes, shorter than the 8-byte header length",
                      size);
        goto done;
    }
    if (size > SIZE_MAX) {
        rc = nvf_error_set(NVF_E_IO, "'%s' (%" PRIu64 " bytes) is too large to map", path, size);
        goto done;
    }
    map_len = (size_t)size;
    map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        rc = nvf_error_set(NVF_E_IO, "cannot map '%s': %s", path, strerror(errno));
        goto done;
    }
    nvf_st_file *f;
    rc = nvf_st_parse(&f, path, map, map_len, size);
    if (rc != NVF_OK)
        goto done;
    f->map = map;
    f->map_len = map_len;
    for (size_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].data = (const uint8_t *)map + f->data_start + f->tensors[i].begin;
    map = NULL;
    *out = f;
done:
    if (map)
        munmap(map, map_len);
    close(fd);
    return rc;
}

void nvf_st_close(nvf_st_file *f) {
    if (!f)
        return;
    if (f->map)
        munmap(f->map, f->map_len);
    if (f->tensors)
        for (size_t i = 0; i < f->n_tensors; i++)
            free(f->tensors[i].name);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->tensors);
    free(f->by_name);
    free(f->path);
    free(f);
}

const nvf_st_tensor *nvf_st_find(const nvf_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const nvf_st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *nvf_st_meta(const nvf_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0)
            return f->meta_values[i];
    return NULL;
}

/* Writer --------------------------------------------------------------------------------------- */

struct nvf_st_writer {
    char *path, *tmp;
    int fd;
    int failed;      /* the status of the first failure; the tmp file is gone then */
    uint64_t *sizes; /* bytes of each tensor */
    size_t n;
    uint64_t data_size; /* sum of sizes */
    uint64_t file_size; /* 8 + N + data_size */
    uint64_t written;   /* data bytes accepted so far */
    uint64_t file_off;  /* bytes written to fd */
    uint64_t kicked;    /* writeback started for [0, kicked) */
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
    if (w->file_off - w->kicked >= WRITEBACK_STEP) {
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
    names = calloc((n > n_meta ? n : n_meta) + 1, sizeof *names);
    w->buf = malloc(WRITER_BUFFER);
    if (!w->path || !w->tmp || !w->sizes || !names || !w->buf) {
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

int nvf_st_writer_write(nvf_st_writer *w, const void *data, size_t len) {
    if (w->failed)
        return nvf_error_set(w->failed, "cannot write '%s': an earlier write failed", w->tmp);
    if (len > w->data_size - w->written)
        return writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                            "safetensors writer: %zu more bytes for '%s' exceed "
                                            "the declared %" PRIu64 " (%" PRIu64 " written)",
                                            len, w->path, w->data_size, w->written));
    const uint8_t *p = data;
    w->written += len;
    while (len > 0) {
        if (w->buf_len == 0 && len >= WRITER_BUFFER)
            return writer_put(w, p, len); /* large chunks skip the copy */
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
    free(w->buf);
    free(w);
}

int nvf_st_writer_finish(nvf_st_writer *w) {
    int rc = NVF_OK;
    if (w->failed) {
        rc = nvf_error_set(w->failed, "cannot finish '%s': an earlier write failed", w->path);
        goto done;
    }
    if (w->written != w->data_size) {
        rc = writer_fail(w, nvf_error_set(NVF_E_INVALID,
                                          "safetensors writer: only %" PRIu64 " of the %" PRIu64
                                          " data bytes of '%s' were written",
                                          w->written, w->data_size, w->path));
        goto done;
    }
    if ((rc = writer_flush(w)) != NVF_OK)
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
