/*
 * model.safetensors.index.json, the map from tensor names to shard files of a Hugging Face
 * checkpoint.
 *
 * Layout (UTF-8 JSON):
 *   1. a JSON object;
 *   2. "metadata" (optional): an object whose "total_size" (optional) is the sum of all
 *      tensors' data bytes, a non-negative integer written as a number or a decimal string;
 *      other metadata keys are ignored;
 *   3. "weight_map": an object mapping each tensor name (once) to the shard's file name, which
 *      is a plain name in the index's directory (no '/', no "..");
 *   4. other top-level keys are ignored.
 * The writer produces what Hugging Face's save_pretrained does: json.dumps(index, indent=2,
 * sort_keys=True) plus a newline, with non-ASCII characters escaped as \uXXXX.
 */
#include "nvfp4/safetensors.h"

#include "io/json_strict.h"
#include "io/st_json.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Index files of the largest checkpoints are a few MB; this only bounds a broken file. */
#define INDEX_MAX_BYTES ((size_t)256 << 20)

static int index_error(const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int index_error(const char *path, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nvf_error_set(NVF_E_FORMAT, "invalid safetensors index '%s': %s", path, msg);
}

/* total_size as a number (integral, 0 <= v <= 2^53) or a string of decimal digits (< 2^64). */
static int parse_total_size(uint64_t *out, const cJSON *v) {
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= 0.0) || d > (double)NVF_ST_MAX_JSON_INT || floor(d) != d)
            return 0;
        *out = (uint64_t)d;
        return 1;
    }
    if (!cJSON_IsString(v) || v->valuestring[0] == '\0')
        return 0;
    uint64_t r = 0;
    for (const char *s = v->valuestring; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        uint64_t digit = (uint64_t)(*s - '0');
        if (r > (UINT64_MAX - digit) / 10)
            return 0;
        r = r * 10 + digit;
    }
    *out = r;
    return 1;
}

static int plain_file_name(const char *s) {
    return s[0] != '\0' && strchr(s, '/') == NULL && strstr(s, "..") == NULL;
}

/* Pairs sorted by tensor name. */
typedef struct pair {
    const char *name, *file;
} pair;

static int cmp_pair(const void *a, const void *b) {
    return strcmp(((const pair *)a)->name, ((const pair *)b)->name);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int index_fill(nvf_st_index *idx, pair *pairs, size_t n, const char *path) {
    qsort(pairs, n, sizeof *pairs, cmp_pair);
    for (size_t i = 1; i < n; i++)
        if (strcmp(pairs[i - 1].name, pairs[i].name) == 0)
            return index_error(path, "tensor '%s' appears twice in weight_map", pairs[i].name);
    idx->names = calloc(n ? n : 1, sizeof *idx->names);
    idx->files = calloc(n ? n : 1, sizeof *idx->files);
    idx->file_list = calloc(n ? n : 1, sizeof *idx->file_list);
    if (!idx->names || !idx->files || !idx->file_list)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
    for (size_t i = 0; i < n; i++) {
        idx->names[i] = strdup(pairs[i].name);
        idx->files[i] = strdup(pairs[i].file);
        idx->n++;
        if (!idx->names[i] || !idx->files[i])
            return nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
    }
    /* Distinct files: sort pointers to the copies, keep the first of each run, then copy. */
    char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
    memcpy(sorted, idx->files, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_str);
    int rc = NVF_OK;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(sorted[i - 1], sorted[i]) == 0)
            continue;
        idx->file_list[idx->n_files] = strdup(sorted[i]);
        if (!idx->file_list[idx->n_files]) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
            break;
        }
        idx->n_files++;
    }
    free(sorted);
    return rc;
}

int nvf_st_index_read(nvf_st_index **out, const char *path) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    pair *pairs = NULL;
    nvf_st_index *idx = NULL;
    char vb[64];
    int rc = nvf_file_read_all(&text, &len, path, INDEX_MAX_BYTES);
    if (rc != NVF_OK)
        return rc;

    size_t bad = nvf_st_utf8_check((const uint8_t *)text, len);
    if (bad < len) {
        rc = index_error(path, "not valid UTF-8 at byte %zu", bad);
        goto done;
    }
    nvf_st_json_scan_result scan;
    nvf_st_json_scan(&scan, (const uint8_t *)text, len);
    if (scan.problem) {
        rc = index_error(path, "not valid JSON: %s at byte %zu", scan.problem, scan.problem_at);
        goto done;
    }
    const char *end = NULL;
    root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root && nvf_json_syntax_ok(text, len, 0)) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to read the index '%s'", path);
        goto done;
    }
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        rc = index_error(path, "not valid JSON (the parser stopped at byte %zu)", at);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = index_error(path, "not a JSON object");
        goto done;
    }
    const cJSON *meta = NULL, *map = NULL;
    for (const cJSON *c = root->child; c; c = c->next) {
        const cJSON **slot = strcmp(c->string, "metadata") == 0     ? &meta
                             : strcmp(c->string, "weight_map") == 0 ? &map
                                                                    : NULL;
        if (slot && *slot) {
            rc = index_error(path, "duplicate key '%s'", c->string);
            goto done;
        }
        if (slot)
            *slot = c;
    }
    idx = calloc(1, sizeof *idx);
    if (!idx) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
        goto done;
    }
    if (meta) {
        if (!cJSON_IsObject(meta)) {
            rc = index_error(path, "metadata is not an object");
            goto done;
        }
        const cJSON *ts = NULL;
        for (const cJSON *c = meta->child; c; c = c->next) {
            if (strcmp(c->string, "total_size") != 0)
                continue;
            if (ts) {
                rc = index_error(path, "duplicate key 'metadata.total_size'");
                goto done;
            }
            ts = c;
        }
        if (ts && !parse_total_size(&idx->total_size, ts)) {
            rc = index_error(path, "metadata.total_size is %s, not a non-negative integer",
                             cJSON_IsNumber(ts)
                                 ? (snprintf(vb, sizeof vb, "%.17g", ts->valuedouble), vb)
                             : cJSON_IsString(ts) ? ts->valuestring
                                                  : "not a number");
            goto done;
        }
    }
    if (!map) {
        rc = index_error(path, "no \"weight_map\" object");
        goto done;
    }
    if (!cJSON_IsObject(map)) {
        rc = index_error(path, "weight_map is not an object");
        goto done;
    }
    size_t n = (size_t)cJSON_GetArraySize(map);
    pairs = calloc(n ? n : 1, sizeof *pairs);
    if (!pairs) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
        goto done;
    }
    size_t k = 0;
    for (const cJSON *c = map->child; c; c = c->next, k++) {
        if (!cJSON_IsString(c)) {
            rc = index_error(path, "weight_map value of tensor '%s' is not a string", c->string);
            goto done;
        }
        if (!plain_file_name(c->valuestring)) {
            rc = index_error(path,
                             "weight_map file of tensor '%s' is '%s', not a plain file name in "
                             "the index's directory",
                             c->string, c->valuestring);
            goto done;
        }
        pairs[k].name = c->string;
        pairs[k].file = c->valuestring;
    }
    rc = index_fill(idx, pairs, n, path);
    if (rc != NVF_OK)
        goto done;
    *out = idx;
    idx = NULL;
done:
    nvf_st_index_free(idx);
    free(pairs);
    cJSON_Delete(root);
    free(text);
    return rc;
}

const char *nvf_st_index_file(const nvf_st_index *idx, const char *name) {
    size_t lo = 0, hi = idx->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, idx->names[mid]);
        if (c == 0)
            return idx->files[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int nvf_st_index_write(const char *path, uint64_t total_size, const char *const *names,
                       const char *const *files, size_t n) {
    int rc = NVF_OK;
    nvf_st_buf b = {0};
    pair *pairs = calloc(n ? n : 1, sizeof *pairs);
    if (!pairs)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
    for (size_t i = 0; i < n; i++) {
        const char *s[2] = {names[i], files[i]};
        for (int j = 0; j < 2; j++) {
            size_t len = s[j] ? strlen(s[j]) : 0;
            if (!s[j] || nvf_st_utf8_check((const uint8_t *)s[j], len) != len) {
                rc = nvf_error_set(NVF_E_INVALID, "index '%s': entry %zu is missing or not UTF-8",
                                   path, i);
                goto done;
            }
        }
        if (!plain_file_name(files[i])) {
            rc = nvf_error_set(NVF_E_INVALID,
                               "index '%s': file '%s' of tensor '%s' is not a plain file name",
                               path, files[i], names[i]);
            goto done;
        }
        pairs[i].name = names[i];
        pairs[i].file = files[i];
    }
    qsort(pairs, n, sizeof *pairs, cmp_pair);
    for (size_t i = 1; i < n; i++)
        if (strcmp(pairs[i - 1].name, pairs[i].name) == 0) {
            rc = nvf_error_set(NVF_E_INVALID, "index '%s': tensor '%s' is listed twice", path,
                               pairs[i].name);
            goto done;
        }

    nvf_st_buf_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n",
                      total_size);
    nvf_st_buf_puts(&b, n ? "  \"weight_map\": {\n" : "  \"weight_map\": {}\n");
    for (size_t i = 0; i < n; i++) {
        nvf_st_buf_puts(&b, "    ");
        nvf_st_buf_json_string(&b, pairs[i].name, 1);
        nvf_st_buf_puts(&b, ": ");
        nvf_st_buf_json_string(&b, pairs[i].file, 1);
        nvf_st_buf_puts(&b, i + 1 < n ? ",\n" : "\n  }\n");
    }
    nvf_st_buf_puts(&b, "}\n");
    if (b.oom) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the index '%s'", path);
        goto done;
    }
    rc = nvf_file_write_atomic(path, b.p, b.len);
done:
    free(b.p);
    free(pairs);
    return rc;
}

void nvf_st_index_free(nvf_st_index *idx) {
    if (!idx)
        return;
    for (size_t i = 0; i < idx->n; i++) {
        free(idx->names[i]);
        free(idx->files[i]);
    }
    for (size_t i = 0; i < idx->n_files; i++)
        free(idx->file_list[i]);
    free(idx->names);
    free(idx->files);
    free(idx->file_list);
    free(idx);
}
