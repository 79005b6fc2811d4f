/* Strict JSON reading (io/json_strict.h). */
#include "io/json_strict.h"

#include "io/st_json.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Objects with more keys than this are checked for duplicates by sorting, not pairwise. */
#define DUP_PAIRWISE_MAX 16

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that appears twice in object `v` (not its children), or NULL. *oom on no
 * memory. */
static const char *dup_in_object(const cJSON *v, int *oom) {
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        n++;
    if (n <= DUP_PAIRWISE_MAX) {
        for (const cJSON *c = v->child; c; c = c->next)
            for (const cJSON *d = c->next; d; d = d->next)
                if (strcmp(c->string, d->string) == 0)
                    return c->string;
        return NULL;
    }
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) {
        *oom = 1;
        return NULL;
    }
    size_t k = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        keys[k++] = c->string;
    qsort(keys, n, sizeof *keys, cmp_key);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            dup = keys[i];
    free(keys);
    return dup;
}

/* Find a duplicate key or a number beyond the range of a double anywhere under `v`. `where`
 * (of size `cap`) holds the JSON path of `v` on entry and that of the offending value on
 * return 1; *key is the duplicate key, NULL for a number. */
static int find_fault(const cJSON *v, char *where, size_t cap, const char **key, int *oom) {
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
        *key = NULL;
        return 1;
    }
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return 0;
    if (cJSON_IsObject(v)) {
        *key = dup_in_object(v, oom);
        if (*key || *oom)
            return 1;
    }
    size_t len = strlen(where);
    size_t i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (cJSON_IsObject(v))
            snprintf(where + len, cap - len, "%s%s", len ? "." : "", c->string);
        else
            snprintf(where + len, cap - len, "[%zu]", i);
        if (find_fault(c, where, cap, key, oom))
            return 1;
    }
    where[len] = '\0';
    return 0;
}

static int bad(int code, const char *what, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(int code, const char *what, const char *path, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nvf_error_set(code ? code : NVF_E_FORMAT, "invalid %s '%s': %s", what, path, msg);
}

int nvf_json_parse_strict(cJSON **out, const char *text, size_t len, const char *what,
                          const char *path, int code) {
    *out = NULL;
    size_t at = nvf_st_utf8_check((const uint8_t *)text, len);
    if (at < len)
        return bad(code, what, path, "not valid UTF-8 at byte %zu", at);
    nvf_st_json_scan_result scan;
    nvf_st_json_scan(&scan, (const uint8_t *)text, len);
    if (scan.problem)
        return bad(code, what, path, "not valid JSON: %s at byte %zu", scan.problem,
                   scan.problem_at);
    /* cJSON needs a NUL-terminated string; the scan above rejected NUL bytes inside. */
    char *copy = malloc(len + 1);
    if (!copy)
        return nvf_error_set(NVF_E_NOMEM, "no memory to read the %s '%s'", what, path);
    memcpy(copy, text, len);
    copy[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(copy, &end, 1);
    int rc = NVF_OK;
    if (!root && nvf_json_syntax_ok(copy, len, 0)) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to read the %s '%s'", what, path);
        goto done;
    }
    if (!root) {
        size_t stop = end && end >= copy && end <= copy + len ? (size_t)(end - copy) : len;
        rc = bad(code, what, path, "not valid JSON (the parser stopped at byte %zu)", stop);
        goto done;
    }
    char where[256] = "";
    const char *key = NULL;
    int oom = 0;
    if (find_fault(root, where, sizeof where, &key, &oom)) {
        if (oom)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory to read the %s '%s'", what, path);
        else if (key)
            rc = bad(code, what, path, "duplicate key '%.80s' in %s", key,
                     where[0] ? where : "the document");
        else
            rc = bad(code, what, path, "%s is a number beyond the range of a double", where);
        goto done;
    }
    *out = root;
    root = NULL;
done:
    cJSON_Delete(root);
    free(copy);
    return rc;
}

int nvf_json_read_strict(cJSON **out, const char *path, size_t max_bytes, const char *what,
                         int code) {
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = nvf_file_read_all(&text, &len, path, max_bytes);
    if (rc == NVF_OK)
        rc = nvf_json_parse_strict(out, text, len, what, path, code);
    free(text);
    return rc;
}
