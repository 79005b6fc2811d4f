/*
 * nvfp4-manifest.json: the in-memory manifest, its deterministic writer and validating reader.
 *
 * Layout (UTF-8 JSON, one object; schemas/manifest.schema.json):
 *   1. "manifest_version": 1
 *   2. "tool": {"name": "nvfp4tool", "version": a non-empty string}
 *   3. "recipe": an object or null (free-form: the recipe's own schema describes it)
 *   4. "target": null or an object with "format" (a non-empty string), optional "layout"
 *      (a string or null) and any further keys
 *   5. "source": null or {"files": [file entry...]}
 *   6. "files": [file entry...]; a file entry is {"name", "bytes", "sha256"}: a relative path
 *      ('/'-separated, not starting with '/', no empty, "." or ".." component, no control
 *      character), an integer 0 <= bytes <= 2^53 and 64 lowercase hex digits; names unique
 *   7. "tensors": [{"name", "file", "dtype", "shape", "crc32"}...]: a non-empty name, the file
 *      (one of "files") holding it, a safetensors dtype name, up to 8 integers 0 <= d <= 2^53,
 *      and 8 lowercase hex digits; (name, file) pairs unique (prepared targets repeat tensor
 *      names across the rank-0000r-of-0000N/ subdirectories)
 *   8. "summary": an object or null (free-form)
 * Every key appears once, at every depth. The writer sorts files by name and tensors by name
 * then file, indents by one space, prints each file and tensor entry on one line, integers
 * in plain decimal and other numbers in their shortest round-tripping form, and ends with a
 * newline: the same manifest always serializes to the same bytes.
 */
#include "nvfp4/manifest.h"

#include "io/st_json.h"
#include "manifest_internal.h"
#include "nvfp4/dtype.h"
#include "nvfp4/fileio.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_INT ((double)NVF_ST_MAX_JSON_INT)

/* Checks shared by the writer and the reader ---------------------------------------------- */

const char *nvf_manifest_name_problem(const char *s) {
    size_t n = strlen(s);
    if (n == 0)
        return "is empty";
    if (nvf_st_utf8_check((const uint8_t *)s, n) < n)
        return "is not valid UTF-8";
    if (s[0] == '/')
        return "starts with '/'";
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "contains a control character";
    const char *c = s;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0)
            return "has an empty path component";
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return "has a '.' or '..' path component";
        if (!slash)
            return NULL;
        c = slash + 1;
    }
}

int nvf_manifest_is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[n] == '\0';
}

static int cmp_file(const void *a, const void *b) {
    return strcmp((*(const nvf_manifest_file *const *)a)->name,
                  (*(const nvf_manifest_file *const *)b)->name);
}

static int cmp_tensor(const void *a, const void *b) {
    const nvf_manifest_tensor *x = *(const nvf_manifest_tensor *const *)a;
    const nvf_manifest_tensor *y = *(const nvf_manifest_tensor *const *)b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : strcmp(x->file, y->file);
}

/* The manifest object ---------------------------------------------------------------------- */

nvf_manifest *nvf_manifest_alloc(void) {
    nvf_manifest_priv *p = calloc(1, sizeof *p);
    return p ? &p->pub : NULL;
}

nvf_manifest *nvf_manifest_new(void) {
    nvf_manifest *m = nvf_manifest_alloc();
    if (m)
        m->tool_version = strdup(nvf_version());
    if (!m || !m->tool_version) {
        free(m);
        nvf_error_set(NVF_E_NOMEM, "no memory for a manifest");
        return NULL;
    }
    return m;
}

static void free_files(nvf_manifest_file *f, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(f[i].name);
    free(f);
}

void nvf_manifest_free(nvf_manifest *m) {
    if (!m)
        return;
    nvf_manifest_priv *p = nvf_manifest_priv_of(m);
    free(m->tool_version);
    cJSON_Delete(p->recipe);
    cJSON_Delete(p->target);
    cJSON_Delete(p->summary);
    free_files(m->source, m->n_source);
    free_files(m->files, m->n_files);
    for (size_t i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free(m->tensors[i].file);
        free(m->tensors[i].dtype);
    }
    free(m->tensors);
    free(p);
}

char *nvf_manifest_recipe_json(const nvf_manifest *m) {
    const nvf_manifest_priv *p = nvf_manifest_priv_of_const(m);
    return p->recipe ? cJSON_PrintUnformatted(p->recipe) : NULL;
}

void nvf_manifest_move_provenance(nvf_manifest *m, nvf_manifest *from) {
    nvf_manifest_priv *p = nvf_manifest_priv_of(m), *f = nvf_manifest_priv_of(from);
    cJSON_Delete(p->recipe);
    cJSON_Delete(p->target);
    cJSON_Delete(p->summary);
    p->recipe = f->recipe;
    p->target = f->target;
    p->summary = f->summary;
    f->recipe = f->target = f->summary = NULL;
    free_files(m->source, m->n_source);
    m->source = from->source;
    m->n_source = from->n_source;
    p->cap_source = f->cap_source;
    m->has_source = from->has_source;
    from->source = NULL;
    from->n_source = f->cap_source = 0;
    from->has_source = 0;
}

/* Make room for one more element in *arr (n used, *cap allocated). */
static int grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap)
        return NVF_OK;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / elem)
        return nvf_error_set(NVF_E_NOMEM, "manifest too large");
    void *p = realloc(*arr, c * elem);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a manifest entry");
    *arr = p;
    *cap = c;
    return NVF_OK;
}

static int add_file_to(nvf_manifest_file **arr, size_t *n, size_t *cap, const char *name,
                       uint64_t bytes, const char sha256[65]) {
    int rc = grow((void **)arr, cap, *n, sizeof **arr);
    if (rc != NVF_OK)
        return rc;
    nvf_manifest_file *f = &(*arr)[*n];
    f->name = strdup(name);
    if (!f->name)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a manifest entry");
    f->bytes = bytes;
    memcpy(f->sha256, sha256, 64);
    f->sha256[64] = '\0';
    (*n)++;
    return NVF_OK;
}

int nvf_manifest_add_file(nvf_manifest *m, const char *name, uint64_t bytes,
                          const char sha256[65]) {
    return add_file_to(&m->files, &m->n_files, &nvf_manifest_priv_of(m)->cap_files, name, bytes,
                       sha256);
}

int nvf_manifest_add_source(nvf_manifest *m, const char *name, uint64_t bytes,
                            const char sha256[65]) {
    m->has_source = 1;
    return add_file_to(&m->source, &m->n_source, &nvf_manifest_priv_of(m)->cap_source, name, bytes,
                       sha256);
}

int nvf_manifest_add_tensor(nvf_manifest *m, const char *name, const char *file, const char *dtype,
                            int32_t ndim, const int64_t *shape, uint32_t crc32) {
    if (ndim < 0 || ndim > 8)
        return nvf_error_set(NVF_E_INVALID, "tensor '%s' has %d dimensions (0..8 allowed)", name,
                             (int)ndim);
    int rc = grow((void **)&m->tensors, &nvf_manifest_priv_of(m)->cap_tensors, m->n_tensors,
                  sizeof *m->tensors);
    if (rc != NVF_OK)
        return rc;
    nvf_manifest_tensor *t = &m->tensors[m->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->file = strdup(file);
    t->dtype = strdup(dtype);
    if (!t->name || !t->file || !t->dtype) {
        free(t->name);
        free(t->file);
        free(t->dtype);
        return nvf_error_set(NVF_E_NOMEM, "no memory for a manifest entry");
    }
    t->ndim = ndim;
    for (int32_t d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    t->crc32 = crc32;
    m->n_tensors++;
    return NVF_OK;
}

int nvf_manifest_add_st_tensors(nvf_manifest *m, const char *name, const char *path) {
    nvf_st_file *f = NULL;
    int rc = nvf_st_open(&f, path);
    for (size_t i = 0; rc == NVF_OK && i < f->n_tensors; i++) {
        const nvf_st_tensor *t = &f->tensors[i];
        uint32_t crc = nvf_crc32(0, t->data, (size_t)(t->end - t->begin));
        rc = nvf_manifest_add_tensor(m, t->name, name, nvf_dtype_name(t->dtype), t->ndim, t->shape,
                                     crc);
    }
    nvf_st_close(f);
    return rc;
}

/* Writer -------------------------------------------------------------------------------------- */

typedef struct writer {
    nvf_st_buf b;
    int bad; /* a NaN/Inf number or a raw value: NVF_E_INVALID */
} writer;

static void put_indent(writer *w, int indent) {
    nvf_st_buf_puts(&w->b, "\n");
    for (int i = 0; i < indent; i++)
        nvf_st_buf_puts(&w->b, " ");
}

/* Integers up to 2^53 in plain decimal; other finite numbers in the fewest digits that read
 * back to the same double. */
static void put_number(writer *w, double d) {
    if (!isfinite(d)) {
        w->bad = 1;
        return;
    }
    if (floor(d) == d && fabs(d) <= MAX_JSON_INT) {
        nvf_st_buf_printf(&w->b, "%" PRId64, (int64_t)d);
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, d);
        if (strtod(s, NULL) == d)
            break;
    }
    nvf_st_buf_puts(&w->b, s);
}

static int all_scalars(const cJSON *item) {
    for (const cJSON *c = item->child; c; c = c->next)
        if (cJSON_IsArray(c) || cJSON_IsObject(c))
            return 0;
    return 1;
}

/* A value; `compact` puts a container on one line. Arrays of scalars always are. */
static void put_value(writer *w, const cJSON *v, int indent, int compact) {
    if (!v || cJSON_IsNull(v)) {
        nvf_st_buf_puts(&w->b, "null");
    } else if (cJSON_IsTrue(v)) {
        nvf_st_buf_puts(&w->b, "true");
    } else if (cJSON_IsFalse(v)) {
        nvf_st_buf_puts(&w->b, "false");
    } else if (cJSON_IsNumber(v)) {
        put_number(w, v->valuedouble);
    } else if (cJSON_IsString(v)) {
        nvf_st_buf_json_string(&w->b, v->valuestring, 0);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        int obj = cJSON_IsObject(v);
        int one_line = compact || (!obj && all_scalars(v));
        nvf_st_buf_puts(&w->b, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (one_line && c != v->child)
                nvf_st_buf_puts(&w->b, ", ");
            else if (!one_line)
                put_indent(w, indent + 1);
            if (obj) {
                nvf_st_buf_json_string(&w->b, c->string, 0);
                nvf_st_buf_puts(&w->b, ": ");
            }
            put_value(w, c, indent + 1, one_line);
            if (!one_line && c->next)
                nvf_st_buf_puts(&w->b, ",");
        }
        if (!one_line && v->child)
            put_indent(w, indent);
        nvf_st_buf_puts(&w->b, obj ? "}" : "]");
    } else {
        w->bad = 1;
    }
}

static void put_key(writer *w, const char *key, int indent) {
    put_indent(w, indent);
    nvf_st_buf_json_string(&w->b, key, 0);
    nvf_st_buf_puts(&w->b, ": ");
}

static void put_files(writer *w, nvf_manifest_file *const *f, size_t n, int indent) {
    nvf_st_buf_puts(&w->b, "[");
    for (size_t i = 0; i < n; i++) {
        put_indent(w, indent + 1);
        nvf_st_buf_puts(&w->b, "{\"name\": ");
        nvf_st_buf_json_string(&w->b, f[i]->name, 0);
        nvf_st_buf_printf(&w->b, ", \"bytes\": %" PRIu64 ", \"sha256\": \"%s\"}%s", f[i]->bytes,
                          f[i]->sha256, i + 1 < n ? "," : "");
    }
    if (n > 0)
        put_indent(w, indent);
    nvf_st_buf_puts(&w->b, "]");
}

static void put_tensors(writer *w, nvf_manifest_tensor *const *t, size_t n) {
    nvf_st_buf_puts(&w->b, "[");
    for (size_t i = 0; i < n; i++) {
        put_indent(w, 2);
        nvf_st_buf_puts(&w->b, "{\"name\": ");
        nvf_st_buf_json_string(&w->b, t[i]->name, 0);
        nvf_st_buf_puts(&w->b, ", \"file\": ");
        nvf_st_buf_json_string(&w->b, t[i]->file, 0);
        nvf_st_buf_puts(&w->b, ", \"dtype\": ");
        nvf_st_buf_json_string(&w->b, t[i]->dtype, 0);
        nvf_st_buf_puts(&w->b, ", \"shape\": [");
        for (int32_t d = 0; d < t[i]->ndim; d++)
            nvf_st_buf_printf(&w->b, "%s%" PRId64, d ? ", " : "", t[i]->shape[d]);
        nvf_st_buf_printf(&w->b, "], \"crc32\": \"%08" PRIx32 "\"}%s", t[i]->crc32,
                          i + 1 < n ? "," : "");
    }
    if (n > 0)
        put_indent(w, 1);
    nvf_st_buf_puts(&w->b, "]");
}

/* Sorted pointers to the entries, checked as the reader checks them (NVF_E_INVALID). */
static int sorted_files(nvf_manifest_file ***out, nvf_manifest_file *f, size_t n,
                        const char *what) {
    nvf_manifest_file **p = malloc((n ? n : 1) * sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory to write a manifest");
    int rc = NVF_OK;
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const char *why = nvf_manifest_name_problem(f[i].name);
        p[i] = &f[i];
        if (why)
            rc = nvf_error_set(NVF_E_INVALID, "manifest %s name '%s' %s", what, f[i].name, why);
        else if (f[i].bytes > NVF_ST_MAX_JSON_INT)
            rc = nvf_error_set(NVF_E_INVALID,
                               "manifest %s '%s' has %" PRIu64 " bytes, more than 2^53", what,
                               f[i].name, f[i].bytes);
        else if (!nvf_manifest_is_hex(f[i].sha256, 64))
            rc = nvf_error_set(NVF_E_INVALID,
                               "manifest %s '%s' has a SHA-256 that is not 64 lowercase hex "
                               "digits",
                               what, f[i].name);
    }
    if (rc == NVF_OK) {
        qsort(p, n, sizeof *p, cmp_file);
        for (size_t i = 1; i < n && rc == NVF_OK; i++)
            if (strcmp(p[i - 1]->name, p[i]->name) == 0)
                rc = nvf_error_set(NVF_E_INVALID, "manifest %s '%s' is listed twice", what,
                                   p[i]->name);
    }
    if (rc != NVF_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return NVF_OK;
}

static int file_listed(nvf_manifest_file *const *sorted, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, sorted[mid]->name);
        if (c == 0)
            return 1;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return 0;
}

static int sorted_tensors(nvf_manifest_tensor ***out, const nvf_manifest *m,
                          nvf_manifest_file *const *files) {
    size_t n = m->n_tensors;
    nvf_manifest_tensor **p = malloc((n ? n : 1) * sizeof *p);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory to write a manifest");
    int rc = NVF_OK;
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const nvf_manifest_tensor *t = &m->tensors[i];
        p[i] = &m->tensors[i];
        if (t->name[0] == '\0' ||
            nvf_st_utf8_check((const uint8_t *)t->name, strlen(t->name)) < strlen(t->name))
            rc = nvf_error_set(NVF_E_INVALID, "manifest tensor name '%s' is empty or not UTF-8",
                               t->name);
        else if (!file_listed(files, m->n_files, t->file))
            rc = nvf_error_set(NVF_E_INVALID,
                               "manifest tensor '%s' is in file '%s', which is not in files",
                               t->name, t->file);
        else if (nvf_dtype_from_name(t->dtype, strlen(t->dtype)) == NVF_DTYPE_INVALID)
            rc = nvf_error_set(NVF_E_INVALID, "manifest tensor '%s' has unknown dtype '%s'",
                               t->name, t->dtype);
        for (int32_t d = 0; d < t->ndim && rc == NVF_OK; d++)
            if (t->shape[d] < 0 || (uint64_t)t->shape[d] > NVF_ST_MAX_JSON_INT)
                rc = nvf_error_set(NVF_E_INVALID,
                                   "manifest tensor '%s' has dimension %" PRId64
                                   " (0..2^53 allowed)",
                                   t->name, t->shape[d]);
    }
    if (rc == NVF_OK) {
        qsort(p, n, sizeof *p, cmp_tensor);
        for (size_t i = 1; i < n && rc == NVF_OK; i++)
            if (cmp_tensor(&p[i - 1], &p[i]) == 0)
                rc = nvf_error_set(NVF_E_INVALID, "manifest tensor '%s' of '%s' is listed twice",
                                   p[i]->name, p[i]->file);
    }
    if (rc != NVF_OK) {
        free(p);
        return rc;
    }
    *out = p;
    return NVF_OK;
}

int nvf_manifest_to_string(char **out, size_t *out_len, const nvf_manifest *m) {
    nvf_manifest_file **src = NULL, **files = NULL;
    nvf_manifest_tensor **tensors = NULL;
    writer w = {{0}, 0};
    int rc = sorted_files(&src, m->source, m->n_source, "source file");
    if (rc == NVF_OK)
        rc = sorted_files(&files, m->files, m->n_files, "file");
    if (rc == NVF_OK)
        rc = sorted_tensors(&tensors, m, files);
    if (rc != NVF_OK)
        goto done;
    const nvf_manifest_priv *pm = nvf_manifest_priv_of_const(m);
    if (pm->target && !cJSON_IsObject(pm->target)) {
        rc = nvf_error_set(NVF_E_INVALID, "manifest target is not an object");
        goto done;
    }
    if (pm->target) {
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(pm->target, "format");
        if (!cJSON_IsString(fmt) || fmt->valuestring[0] == '\0') {
            rc = nvf_error_set(NVF_E_INVALID, "manifest target has no \"format\" string");
            goto done;
        }
    }
    if ((pm->recipe && !cJSON_IsObject(pm->recipe)) ||
        (pm->summary && !cJSON_IsObject(pm->summary))) {
        rc = nvf_error_set(NVF_E_INVALID, "manifest recipe and summary must be objects");
        goto done;
    }

    nvf_st_buf_puts(&w.b, "{");
    put_key(&w, "manifest_version", 1);
    nvf_st_buf_puts(&w.b, "1,");
    put_key(&w, "tool", 1);
    nvf_st_buf_puts(&w.b, "{");
    put_key(&w, "name", 2);
    nvf_st_buf_puts(&w.b, "\"nvfp4tool\",");
    put_key(&w, "version", 2);
    nvf_st_buf_json_string(&w.b, m->tool_version ? m->tool_version : nvf_version(), 0);
    put_indent(&w, 1);
    nvf_st_buf_puts(&w.b, "},");
    put_key(&w, "recipe", 1);
    put_value(&w, pm->recipe, 1, 0);
    nvf_st_buf_puts(&w.b, ",");
    put_key(&w, "target", 1);
    put_value(&w, pm->target, 1, 0);
    nvf_st_buf_puts(&w.b, ",");
    put_key(&w, "source", 1);
    if (m->has_source) {
        nvf_st_buf_puts(&w.b, "{");
        put_key(&w, "files", 2);
        put_files(&w, src, m->n_source, 2);
        put_indent(&w, 1);
        nvf_st_buf_puts(&w.b, "}");
    } else {
        nvf_st_buf_puts(&w.b, "null");
    }
    nvf_st_buf_puts(&w.b, ",");
    put_key(&w, "files", 1);
    put_files(&w, files, m->n_files, 1);
    nvf_st_buf_puts(&w.b, ",");
    put_key(&w, "tensors", 1);
    put_tensors(&w, tensors, m->n_tensors);
    nvf_st_buf_puts(&w.b, ",");
    put_key(&w, "summary", 1);
    put_value(&w, pm->summary, 1, 0);
    nvf_st_buf_puts(&w.b, "\n}\n");
    nvf_st_buf_append(&w.b, "", 1);
    if (w.b.oom) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to serialize a manifest");
        goto done;
    }
    size_t len = w.b.len - 1;
    if (w.bad || nvf_st_utf8_check((const uint8_t *)w.b.p, len) < len) {
        rc = nvf_error_set(NVF_E_INVALID, "manifest recipe, target or summary holds a NaN/Inf "
                                          "number, a raw value or a string that is not UTF-8");
        goto done;
    }
    *out = w.b.p;
    *out_len = len;
    w.b.p = NULL;
done:
    free(w.b.p);
    free(src);
    free(files);
    free(tensors);
    return rc;
}

int nvf_manifest_write(const char *path, const nvf_manifest *m) {
    char *text = NULL;
    size_t len = 0;
    int rc = nvf_manifest_to_string(&text, &len, m);
    if (rc == NVF_OK)
        rc = nvf_file_write_atomic(path, text, len);
    free(text);
    return rc;
}
