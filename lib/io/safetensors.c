/*
 * safetensors reader: every rule of the format checked before use, the file memory-mapped.
 * The streaming writer is st_write.c.
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
#include "nvfp4/safetensors.h"

#include "io/json_strict.h"
#include "io/st_file.h"
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

/* Reader --------------------------------------------------------------------------------------- */

typedef nvf_st_file_priv st_file;

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

static int parse_header(st_file *sf, const uint8_t *hdr, size_t n, const char *path) {
    nvf_st_file *f = &sf->pub;
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
    if (!root && nvf_json_syntax_ok(text, n, 0)) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the header of '%s'", path);
        goto done;
    }
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
    sf->by_name = calloc(n_children ? n_children : 1, sizeof *sf->by_name);
    if (!f->tensors || !sf->by_name) {
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
        sf->by_name[i] = i;
    g_sort_tensors = f->tensors;
    qsort(sf->by_name, f->n_tensors, sizeof *sf->by_name, cmp_name_idx);
    for (size_t i = 1; i < f->n_tensors; i++) {
        const char *a = f->tensors[sf->by_name[i - 1]].name, *b = f->tensors[sf->by_name[i]].name;
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

    st_file *sf = calloc(1, sizeof *sf);
    nvf_st_file *f = sf ? &sf->pub : NULL;
    if (!f || !(f->path = strdup(path))) {
        free(sf);
        return nvf_error_set(NVF_E_NOMEM, "no memory for '%s'", path);
    }
    f->file_size = file_size;
    f->header_len = n;
    f->data_start = 8 + n;
    int rc = parse_header(sf, buf + 8, (size_t)n, path);
    if (rc != NVF_OK) {
        nvf_st_close(f);
        return rc;
    }
    *out = f;
    return NVF_OK;
}

int nvf_st_open(nvf_st_file **out, const char *path) {
    *out = NULL;
    int fd;
    struct stat st;
    int rc = nvf_file_open_regular(&fd, &st, path);
    if (rc != NVF_OK)
        return rc;
    void *map = NULL;
    size_t map_len = 0;
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
    ((st_file *)f)->map = map;
    ((st_file *)f)->map_len = map_len;
    ((st_file *)f)->dev = (uint64_t)st.st_dev;
    ((st_file *)f)->ino = (uint64_t)st.st_ino;
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
    st_file *sf = (st_file *)f;
    if (sf->map)
        munmap(sf->map, sf->map_len);
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
    free(sf->by_name);
    free(f->path);
    free(sf);
}

const nvf_st_tensor *nvf_st_find(const nvf_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const nvf_st_tensor *t = &f->tensors[nvf_st_priv_of(f)->by_name[mid]];
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
