/*
 * The structure of one checkpoint (a directory, or a rank directory of an expert-parallel
 * conversion): config.json and hf_quant_config.json parse (config.*), and the index agrees with
 * the shards (index.*): every tensor of weight_map is in the shard it names, every tensor of a
 * shard is listed, no tensor is in two shards, metadata.total_size is the sum of the tensors'
 * data bytes, no shard is missing or outside the checkpoint, no shard is unreferenced. Without
 * an index a directory may hold one .safetensors file only.
 */
#include "validate_internal.h"

#include "io/json_strict.h"
#include "nvfp4/fileio.h"
#include "nvfp4/modelopt_rules.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_NAME   "model.safetensors.index.json"
#define JSON_MAX     ((size_t)256 << 20)
#define NAME_MAX_LEN 1024

/* A tensor held by a shard. */
typedef struct held {
    const char *name;
    const vd_file *file;
} held;

static int cmp_held(const void *a, const void *b) {
    const held *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : strcmp(x->file->name, y->file->name);
}

static const char *in_prefix(const char *name, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 ? name + n : NULL;
}

/* config.json / hf_quant_config.json / the index, parsed strictly; *doc NULL when absent or
 * malformed (the finding added). */
static int read_json(cJSON **doc, vd_ctx *c, const char *prefix, const char *base, const char *id,
                     int *present) {
    char rel[NAME_MAX_LEN];
    snprintf(rel, sizeof rel, "%s%s", prefix, base);
    *doc = NULL;
    vd_file *f = vd_find_file(c, rel);
    *present = f != NULL;
    if (!f)
        return NVF_OK;
    int rc = nvf_json_read_strict(doc, f->path, JSON_MAX, base, 0);
    if (rc == NVF_E_FORMAT)
        return nvf_findings_add(c->out, id, "error", rel, "", "%s", nvf_error_last());
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsObject(*doc)) {
        cJSON_Delete(*doc);
        *doc = NULL;
        return nvf_findings_add(c->out, id, "error", rel, "", "%s: not a JSON object", rel);
    }
    return NVF_OK;
}

/* Whether `rel` (a weight_map value) leads outside the checkpoint at `dir`. */
static int outside(const char *dir, const char *rel) {
    if (rel[0] == '/' || rel[0] == '\0')
        return 1;
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return 1;
        p += n + (e != NULL);
    }
    /* A symbolic link leading out. */
    char *path = nvf_path_join(dir, rel);
    char real_dir[PATH_MAX], real[PATH_MAX];
    int out = 0;
    if (path && realpath(dir, real_dir) && realpath(path, real)) {
        size_t n = strlen(real_dir);
        out = strncmp(real, real_dir, n) != 0 || (real[n] != '/' && real[n] != '\0');
    }
    free(path);
    return out;
}

/* The tensors of every well-formed shard of the checkpoint, sorted by name. */
static int gather(held **out, size_t *n_out, vd_ctx *c, const char *prefix) {
    size_t n = 0;
    for (size_t i = 0; i < c->n_files; i++) {
        const char *rest = in_prefix(c->files[i].name, prefix);
        if (rest && !strchr(rest, '/') && c->files[i].st)
            n += c->files[i].st->n_tensors;
    }
    held *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    size_t k = 0;
    for (size_t i = 0; i < c->n_files; i++) {
        const char *rest = in_prefix(c->files[i].name, prefix);
        if (!rest || strchr(rest, '/') || !c->files[i].st)
            continue;
        for (size_t j = 0; j < c->files[i].st->n_tensors; j++)
            h[k++] = (held){c->files[i].st->tensors[j].name, &c->files[i]};
    }
    qsort(h, n, sizeof *h, cmp_held);
    *out = h;
    *n_out = n;
    return NVF_OK;
}

/* metadata.total_size as an integer; 0 when absent or not one (the index reader's rule). */
static int total_size(uint64_t *out, const cJSON *index) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(index, "metadata"), "total_size");
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0 &&
        (double)(uint64_t)v->valuedouble == v->valuedouble) {
        *out = (uint64_t)v->valuedouble;
        return 1;
    }
    if (cJSON_IsString(v) && v->valuestring[0]) {
        char *end;
        unsigned long long x = strtoull(v->valuestring, &end, 10);
        if (*end == '\0' && v->valuestring[0] != '-') {
            *out = x;
            return 1;
        }
    }
    return 0;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static int cmp_value(const void *a, const void *b) {
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    int c = strcmp(x->valuestring, y->valuestring);
    return c != 0 ? c : strcmp(x->string, y->string);
}

/* Whether an entry of `v` (sorted by key, or by value with `by_value`) has key (value) `s`. */
static int has_entry(const cJSON *const *v, size_t n, const char *s, int by_value) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(by_value ? v[mid]->valuestring : v[mid]->string, s);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The shards weight_map names (entries sorted by value): missing ones and ones outside the
 * checkpoint, once per shard. *total_known 0 when a named shard cannot be summed. */
static int check_shards(vd_ctx *c, const char *prefix, const char *dir, const char *irel,
                        const cJSON *const *by_val, size_t n, int *clean, int *total_known) {
    char rel[NAME_MAX_LEN];
    int rc = NVF_OK;
    for (size_t i = 0, j; i < n && rc == NVF_OK; i = j) {
        const char *shard = by_val[i]->valuestring, *first = by_val[i]->string;
        for (j = i + 1; j < n && strcmp(by_val[j]->valuestring, shard) == 0; j++)
            ;
        snprintf(rel, sizeof rel, "%s%s", prefix, shard);
        if (outside(dir, shard)) {
            *clean = 0;
            *total_known = 0;
            rc = nvf_findings_add(c->out, "index.path-outside", "error", irel, first,
                                  "%s: weight_map names shard '%s' (for %zu tensor(s), the "
                                  "first '%s'), a path outside the checkpoint",
                                  irel, shard, j - i, first);
            continue;
        }
        const vd_file *f = vd_find_file(c, rel);
        if (!f) {
            *clean = 0;
            *total_known = 0;
            rc = nvf_findings_add(c->out, "index.missing-shard", "error", rel, first,
                                  "%s: weight_map names shard '%s' (for %zu tensor(s), the "
                                  "first '%s'), which does not exist",
                                  irel, shard, j - i, first);
            continue;
        }
        if (!f->st) {
            *total_known = 0; /* malformed: safetensors.malformed says why */
            continue;
        }
        for (size_t k = i; k < j && rc == NVF_OK; k++) {
            const char *name = by_val[k]->string;
            if (nvf_st_find(f->st, name))
                continue;
            *clean = 0;
            rc = nvf_findings_add(c->out, "index.missing-tensor", "error", rel, name,
                                  "%s: weight_map maps tensor '%s' to '%s', which does not "
                                  "hold it",
                                  irel, name, shard);
        }
    }
    return rc;
}

/* The checks of an index against the shards. */
static int check_index(vd_ctx *c, const char *prefix, const char *dir, const cJSON *index,
                       const held *h, size_t nh, int *clean) {
    char irel[NAME_MAX_LEN];
    snprintf(irel, sizeof irel, "%s%s", prefix, INDEX_NAME);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    if (!cJSON_IsObject(wm)) {
        *clean = 0;
        return nvf_findings_add(c->out, "index.malformed", "error", irel, "",
                                "%s: no \"weight_map\" object", irel);
    }
    size_t n = (size_t)cJSON_GetArraySize(wm), k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e)) {
            *clean = 0;
            return nvf_findings_add(c->out, "index.malformed", "error", irel, e->string,
                                    "%s: weight_map['%s'] is not a string", irel, e->string);
        }
    }
    const cJSON **by_key = malloc((n ? n : 1) * sizeof *by_key);
    const cJSON **by_val = malloc((n ? n : 1) * sizeof *by_val);
    if (!by_key || !by_val) {
        free(by_key);
        free(by_val);
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    cJSON_ArrayForEach(e, wm) by_key[k] = by_val[k] = e, k++;
    qsort(by_key, n, sizeof *by_key, cmp_key);
    qsort(by_val, n, sizeof *by_val, cmp_value);
    int total_known = 1;
    uint64_t sum = 0;
    int rc = check_shards(c, prefix, dir, irel, by_val, n, clean, &total_known);
    /* Every tensor of a shard listed; the sum of data bytes. */
    for (size_t i = 0; i < nh && rc == NVF_OK; i++) {
        const nvf_st_tensor *t = nvf_st_find(h[i].file->st, h[i].name);
        sum += t->end - t->begin;
        if (has_entry(by_key, n, h[i].name, 0))
            continue;
        *clean = 0;
        rc = nvf_findings_add(c->out, "index.unlisted-tensor", "error", h[i].file->name, h[i].name,
                              "%s holds tensor '%s', which %s does not list", h[i].file->name,
                              h[i].name, irel);
    }
    /* Shards the index never names. */
    for (size_t i = 0; i < c->n_files && rc == NVF_OK; i++) {
        const char *rest = in_prefix(c->files[i].name, prefix);
        if (!rest || strchr(rest, '/') || !c->files[i].is_st || has_entry(by_val, n, rest, 1))
            continue;
        total_known = 0;
        rc = nvf_findings_add(c->out, "index.unreferenced-shard", "warning", c->files[i].name, "",
                              "%s is a shard that %s never names: loaders ignore it",
                              c->files[i].name, irel);
    }
    uint64_t want;
    if (rc == NVF_OK && total_known && total_size(&want, index) && want != sum)
        rc = nvf_findings_add(c->out, "index.total-size", "error", irel, "",
                              "%s: metadata.total_size is %" PRIu64 ", the shards' tensors hold "
                              "%" PRIu64 " data bytes",
                              irel, want, sum);
    free(by_key);
    free(by_val);
    return rc;
}

int vd_check_structure(vd_ctx *c, const char *prefix, int *clean) {
    *clean = 1;
    char *dir = nvf_path_join(c->top, prefix);
    cJSON *cfg = NULL, *hqc = NULL, *index = NULL;
    held *h = NULL;
    size_t nh = 0;
    int present = 0, has_index = 0, rc = dir ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    char rel[NAME_MAX_LEN];
    if (rc == NVF_OK)
        rc = read_json(&cfg, c, prefix, "config.json", "config.malformed", &present);
    if (rc == NVF_OK && !present) {
        snprintf(rel, sizeof rel, "%sconfig.json", prefix);
        rc = nvf_findings_add(c->out, "config.missing", "error", rel, "",
                              "%s has no config.json: loaders cannot build the model",
                              prefix[0] ? prefix : c->top);
    }
    if (rc == NVF_OK && present && !cfg)
        *clean = 0;
    if (rc == NVF_OK)
        rc = read_json(&hqc, c, prefix, NVF_MODELOPT_HF_QUANT_CONFIG, "config.malformed", &present);
    if (rc == NVF_OK && present && !hqc)
        *clean = 0;
    if (rc == NVF_OK)
        rc = read_json(&index, c, prefix, INDEX_NAME, "index.malformed", &has_index);
    if (rc == NVF_OK && has_index && !index)
        *clean = 0;
    if (rc == NVF_OK)
        rc = gather(&h, &nh, c, prefix);
    /* Malformed shards (safetensors.malformed) keep lib/ckpt from opening the checkpoint. */
    size_t n_st = 0;
    for (size_t i = 0; i < c->n_files && rc == NVF_OK; i++) {
        const char *rest = in_prefix(c->files[i].name, prefix);
        if (!rest || strchr(rest, '/') || !c->files[i].is_st)
            continue;
        n_st++;
        if (!c->files[i].st)
            *clean = 0;
    }
    /* A tensor in two shards. */
    for (size_t i = 1; i < nh && rc == NVF_OK; i++) {
        if (strcmp(h[i].name, h[i - 1].name) != 0)
            continue;
        *clean = 0;
        rc = nvf_findings_add(c->out, "index.duplicate-tensor", "error", h[i].file->name, h[i].name,
                              "tensor '%s' is in both '%s' and '%s'", h[i].name,
                              h[i - 1].file->name, h[i].file->name);
    }
    if (rc == NVF_OK && index)
        rc = check_index(c, prefix, dir, index, h, nh, clean);
    if (rc == NVF_OK && !has_index && n_st > 1) {
        *clean = 0;
        snprintf(rel, sizeof rel, "%s%s", prefix, INDEX_NAME);
        rc = nvf_findings_add(c->out, "index.missing", "error", rel, "",
                              "%s holds %zu .safetensors shards but no %s",
                              prefix[0] ? prefix : c->top, n_st, INDEX_NAME);
    }
    free(h);
    cJSON_Delete(cfg);
    cJSON_Delete(hqc);
    cJSON_Delete(index);
    free(dir);
    return rc;
}
