/*
 * The validating reader of nvfp4-manifest.json. The document's layout is listed at the top of
 * manifest.c; every rule there is checked here, and each rejection is NVF_E_FORMAT with a
 * message "invalid manifest 'PATH': FIELD ..." naming the field (e.g. "files[3].sha256").
 */
#include "io/json_strict.h"
#include "io/st_json.h"
#include "manifest_internal.h"
#include "nvfp4/dtype.h"
#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A manifest lists every tensor of a checkpoint, ~200 bytes each: a few million at most. */
#define MANIFEST_MAX_BYTES ((size_t)1 << 30)

static int bad(const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int bad(const char *path, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nvf_error_set(NVF_E_FORMAT, "invalid manifest '%s': %s", path, msg);
}

/* Fields --------------------------------------------------------------------------------------- */

/* Look up `keys` (n of them, all required) in object `v` and reject any other key. */
static int get_fields(const cJSON **out, const cJSON *v, const char *const *keys, size_t n,
                      const char *path, const char *where) {
    if (!cJSON_IsObject(v))
        return bad(path, "%s is not an object", where);
    for (size_t k = 0; k < n; k++)
        out[k] = NULL;
    for (const cJSON *c = v->child; c; c = c->next) {
        size_t k = 0;
        while (k < n && strcmp(c->string, keys[k]) != 0)
            k++;
        if (k == n)
            return bad(path, "%s has an unknown key '%s'", where, c->string);
        out[k] = c;
    }
    for (size_t k = 0; k < n; k++)
        if (!out[k])
            return bad(path, "%s has no \"%s\"", where, keys[k]);
    return NVF_OK;
}

/* A JSON number that is an integer in [0, 2^53]. */
static int get_uint(uint64_t *out, const cJSON *v, const char *path, const char *where,
                    const char *field) {
    if (!cJSON_IsNumber(v))
        return bad(path, "%s.%s is not a number", where, field);
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > (double)NVF_ST_MAX_JSON_INT || floor(d) != d)
        return bad(path,
                   floor(d) == d && fabs(d) < 1e30 ? "%s.%s is %.0f, not an integer in 0..2^53"
                                                   : "%s.%s is %.17g, not an integer in 0..2^53",
                   where, field, d);
    *out = (uint64_t)d;
    return NVF_OK;
}

static int get_string(const char **out, const cJSON *v, const char *path, const char *where,
                      const char *field) {
    *out = "";
    if (!cJSON_IsString(v))
        return bad(path, "%s.%s is not a string", where, field);
    *out = v->valuestring;
    return NVF_OK;
}

static int get_name(const char **out, const cJSON *v, const char *path, const char *where,
                    const char *field) {
    int rc = get_string(out, v, path, where, field);
    if (rc != NVF_OK)
        return rc;
    const char *why = nvf_manifest_name_problem(*out);
    if (why)
        return bad(path, "%s.%s '%s' %s", where, field, *out, why);
    return NVF_OK;
}

static int get_hex(const char **out, const cJSON *v, size_t digits, const char *path,
                   const char *where, const char *field) {
    int rc = get_string(out, v, path, where, field);
    if (rc == NVF_OK && !nvf_manifest_is_hex(*out, digits))
        rc =
            bad(path, "%s.%s is '%.80s', not %zu lowercase hex digits", where, field, *out, digits);
    return rc;
}

/* Entries ---------------------------------------------------------------------------------------
 */

static int cmp_file(const void *a, const void *b) {
    return strcmp(((const nvf_manifest_file *)a)->name, ((const nvf_manifest_file *)b)->name);
}

static int cmp_tensor(const void *a, const void *b) {
    const nvf_manifest_tensor *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : strcmp(x->file, y->file);
}

/* A file list: an array of {"name", "bytes", "sha256"}, sorted on return, names unique. */
static int read_files(nvf_manifest_file **out, size_t *out_n, const cJSON *arr, const char *path,
                      const char *what) {
    static const char *const keys[] = {"name", "bytes", "sha256"};
    char where[96];
    if (!cJSON_IsArray(arr))
        return bad(path, "%s is not an array", what);
    size_t n = (size_t)cJSON_GetArraySize(arr);
    nvf_manifest_file *f = calloc(n ? n : 1, sizeof *f);
    if (!f)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
    *out = f;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        const cJSON *v[3];
        const char *name = NULL, *sha = NULL;
        snprintf(where, sizeof where, "%s[%zu]", what, i);
        int rc = get_fields(v, e, keys, 3, path, where);
        if (rc == NVF_OK)
            rc = get_name(&name, v[0], path, where, "name");
        if (rc == NVF_OK)
            rc = get_uint(&f[i].bytes, v[1], path, where, "bytes");
        if (rc == NVF_OK)
            rc = get_hex(&sha, v[2], 64, path, where, "sha256");
        if (rc != NVF_OK)
            return rc;
        f[i].name = strdup(name);
        if (!f[i].name)
            return nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
        memcpy(f[i].sha256, sha, 65);
        *out_n = i + 1;
    }
    qsort(f, n, sizeof *f, cmp_file);
    for (i = 1; i < n; i++)
        if (strcmp(f[i - 1].name, f[i].name) == 0)
            return bad(path, "%s lists '%s' twice", what, f[i].name);
    return NVF_OK;
}

static int read_shape(nvf_manifest_tensor *t, const cJSON *v, const char *path, const char *where) {
    if (!cJSON_IsArray(v))
        return bad(path, "%s.shape is not an array", where);
    int n = cJSON_GetArraySize(v);
    if (n > 8)
        return bad(path, "%s.shape has %d dimensions, more than 8", where, n);
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next, d++) {
        uint64_t x;
        char field[32];
        snprintf(field, sizeof field, "shape[%d]", d);
        int rc = get_uint(&x, c, path, where, field);
        if (rc != NVF_OK)
            return rc;
        t->shape[d] = (int64_t)x;
    }
    t->ndim = n;
    return NVF_OK;
}

static int file_listed(const nvf_manifest *m, const char *name) {
    size_t lo = 0, hi = m->n_files;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, m->files[mid].name);
        if (c == 0)
            return 1;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return 0;
}

static int read_tensors(nvf_manifest *m, const cJSON *arr, const char *path) {
    static const char *const keys[] = {"name", "file", "dtype", "shape", "crc32"};
    char where[64];
    if (!cJSON_IsArray(arr))
        return bad(path, "tensors is not an array");
    size_t n = (size_t)cJSON_GetArraySize(arr);
    m->tensors = calloc(n ? n : 1, sizeof *m->tensors);
    if (!m->tensors)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
    nvf_manifest_priv_of(m)->cap_tensors = n;
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        const cJSON *v[5];
        const char *name = NULL, *file = NULL, *dtype = NULL, *crc = NULL;
        nvf_manifest_tensor *t = &m->tensors[i];
        snprintf(where, sizeof where, "tensors[%zu]", i);
        int rc = get_fields(v, e, keys, 5, path, where);
        if (rc == NVF_OK)
            rc = get_string(&name, v[0], path, where, "name");
        if (rc == NVF_OK && name[0] == '\0')
            rc = bad(path, "%s.name is empty", where);
        if (rc == NVF_OK)
            rc = get_name(&file, v[1], path, where, "file");
        if (rc == NVF_OK && !file_listed(m, file))
            rc = bad(path, "%s.file '%s' is not in files", where, file);
        if (rc == NVF_OK)
            rc = get_string(&dtype, v[2], path, where, "dtype");
        if (rc == NVF_OK && nvf_dtype_from_name(dtype, strlen(dtype)) == NVF_DTYPE_INVALID)
            rc = bad(path, "%s.dtype '%.40s' is not a safetensors dtype", where, dtype);
        if (rc == NVF_OK)
            rc = read_shape(t, v[3], path, where);
        if (rc == NVF_OK)
            rc = get_hex(&crc, v[4], 8, path, where, "crc32");
        if (rc != NVF_OK)
            return rc;
        t->crc32 = (uint32_t)strtoul(crc, NULL, 16);
        t->name = strdup(name);
        t->file = strdup(file);
        t->dtype = strdup(dtype);
        m->n_tensors = i + 1;
        if (!t->name || !t->file || !t->dtype)
            return nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
    }
    qsort(m->tensors, n, sizeof *m->tensors, cmp_tensor);
    for (i = 1; i < n; i++)
        if (cmp_tensor(&m->tensors[i - 1], &m->tensors[i]) == 0)
            return bad(path, "tensors lists '%s' of file '%s' twice", m->tensors[i].name,
                       m->tensors[i].file);
    return NVF_OK;
}

/* Detach an object-or-null member into *out (NULL for null). */
static int take_object(cJSON **out, cJSON *root, cJSON *v, const char *path, const char *field) {
    if (cJSON_IsNull(v))
        return NVF_OK;
    if (!cJSON_IsObject(v))
        return bad(path, "%s is neither an object nor null", field);
    *out = cJSON_DetachItemViaPointer(root, v);
    return NVF_OK;
}

static int read_target(nvf_manifest_priv *m, cJSON *root, cJSON *v, const char *path) {
    int rc = take_object(&m->target, root, v, path, "target");
    if (rc != NVF_OK || !m->target)
        return rc;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m->target, "format");
    const cJSON *layout = cJSON_GetObjectItemCaseSensitive(m->target, "layout");
    if (!cJSON_IsString(fmt) || fmt->valuestring[0] == '\0')
        return bad(path, "target.format is missing or not a non-empty string");
    if (layout && !cJSON_IsNull(layout) && !cJSON_IsString(layout))
        return bad(path, "target.layout is neither a string nor null");
    return NVF_OK;
}

static int read_document(nvf_manifest *m, cJSON *root, const char *path) {
    static const char *const keys[] = {"manifest_version", "tool",  "recipe",  "target",
                                       "source",           "files", "tensors", "summary"};
    static const char *const tool_keys[] = {"name", "version"};
    static const char *const source_keys[] = {"files"};
    const cJSON *v[8] = {0}, *tv[2] = {0}, *sv[1] = {0};
    nvf_manifest_priv *p = nvf_manifest_priv_of(m);
    int rc = get_fields(v, root, keys, 8, path, "the document");
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsNumber(v[0]) || v[0]->valuedouble != 1.0)
        return bad(path, "manifest_version is not 1");
    rc = get_fields(tv, v[1], tool_keys, 2, path, "tool");
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsString(tv[0]) || strcmp(tv[0]->valuestring, "nvfp4tool") != 0)
        return bad(path, "tool.name is not \"nvfp4tool\"");
    if (!cJSON_IsString(tv[1]) || tv[1]->valuestring[0] == '\0')
        return bad(path, "tool.version is not a non-empty string");
    free(m->tool_version);
    m->tool_version = strdup(tv[1]->valuestring);
    if (!m->tool_version)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
    if (!cJSON_IsNull(v[4])) {
        rc = get_fields(sv, v[4], source_keys, 1, path, "source");
        if (rc == NVF_OK)
            rc = read_files(&m->source, &m->n_source, sv[0], path, "source.files");
        if (rc != NVF_OK)
            return rc;
        m->has_source = 1;
        p->cap_source = m->n_source;
    }
    rc = read_files(&m->files, &m->n_files, v[5], path, "files");
    if (rc != NVF_OK)
        return rc;
    p->cap_files = m->n_files;
    rc = read_tensors(m, v[6], path);
    if (rc == NVF_OK)
        rc = take_object(&p->recipe, root, (cJSON *)v[2], path, "recipe");
    if (rc == NVF_OK)
        rc = read_target(p, root, (cJSON *)v[3], path);
    if (rc == NVF_OK)
        rc = take_object(&p->summary, root, (cJSON *)v[7], path, "summary");
    return rc;
}

int nvf_manifest_parse(nvf_manifest **out, const char *path, const char *text, size_t len) {
    *out = NULL;
    cJSON *root = NULL;
    nvf_manifest *m = NULL;
    /* the one strict reader: UTF-8, one value, no duplicate key, no number beyond a double */
    int rc = nvf_json_parse_strict(&root, text, len, "manifest", path, NVF_E_FORMAT);
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsObject(root)) {
        rc = bad(path, "not a JSON object");
        goto done;
    }
    m = nvf_manifest_alloc();
    if (!m) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the manifest '%s'", path);
        goto done;
    }
    rc = read_document(m, root, path);
    if (rc != NVF_OK)
        goto done;
    *out = m;
    m = NULL;
done:
    nvf_manifest_free(m);
    cJSON_Delete(root);
    return rc;
}

int nvf_manifest_read(nvf_manifest **out, const char *path) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = nvf_file_read_all(&text, &len, path, MANIFEST_MAX_BYTES);
    if (rc == NVF_OK)
        rc = nvf_manifest_parse(out, path, text, len);
    free(text);
    return rc;
}
