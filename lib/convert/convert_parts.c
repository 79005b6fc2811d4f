/*
 * --shard i/N (SPEC section 6): one conversion split into N parts that run as separate jobs (a
 * Slurm job array), on one machine or on several sharing DST, joined by `merge`.
 *   1. The split: nvf_convert_part_range over the plan's output shards in plan order, the cost
 *      of a shard being the source bytes its jobs read plus the tensor bytes it holds. The same
 *      rule deals the source files (by size) out for hashing, so that the manifest's source
 *      SHA-256s are computed once in all, not once per part.
 *   2. The fingerprint, which every part of one conversion shares: the tool version, the recipe
 *      (its JSON), the options that change the output bytes (or whether it is written at all),
 *      and every source file's name, size and mtime. A stat, not a hash: a part reads only its
 *      share of the source. Its SHA-256 is that of its unformatted JSON text.
 *   3. The part record DST/.nvfp4-parts/I-of-N.json, written last and atomically (schema
 *      schemas/part.schema.json):
 *        {"format": "nvfp4tool-part-v1", "part": I, "parts": N,
 *         "src": absolute SRC, "input_amax": absolute path or null,
 *         "fingerprint_sha256": hex, "fingerprint": {tool_version, recipe, options, sources},
 *         "shards": [{"name", "bytes", "sha256", "tensors": [{"name", "crc32": 8 hex digits},
 * ...]}, ...], "sources": [{"name", "bytes", "sha256"}, ...]}   (the files this part hashed) "src"
 * and "input_amax" are where merge reads the side files and the amax values; they are outside the
 * fingerprint, so parts may see SRC under different mount points.
 */
#include "convert_internal.h"

#include "io/json_strict.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <dirent.h>
#include <inttypes.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PART_FORMAT    "nvfp4tool-part-v1"
#define PART_MAX_BYTES ((size_t)256 << 20)

void nvf_convert_part_range(size_t *first, size_t *n, const uint64_t *cost, size_t n_shards,
                            int index, int count) {
    unsigned __int128 total = 0, prefix = 0;
    for (size_t s = 0; s < n_shards; s++)
        total += cost[s];
    *first = n_shards;
    *n = 0;
    for (size_t s = 0; s < n_shards; s++) {
        /* The part holding the middle of the shard's cost; all-empty costs: by count. */
        unsigned __int128 part = total ? ((2 * prefix + cost[s]) * (unsigned)count) / (2 * total)
                                       : ((unsigned __int128)s * (unsigned)count) / n_shards;
        prefix += cost[s];
        if (part != (unsigned)index)
            continue;
        if (*n == 0)
            *first = s;
        (*n)++;
    }
}

char *cv_parts_path(const char *dst, int index, int count, const char *suffix) {
    char name[128];
    snprintf(name, sizeof name, "%s/%d-of-%d%s", NVF_CONVERT_PARTS_DIR, index, count, suffix);
    return nvf_path_join(dst, name);
}

static cJSON *add_bool(cJSON *o, const char *key, int v) {
    return cJSON_AddBoolToObject(o, key, v ? 1 : 0);
}

int cv_parts_fingerprint(cJSON **out, char sha[65], const nvf_convert_options *o,
                         const cv_sources *src) {
    *out = NULL;
    char *rj = nvf_recipe_to_json(o->recipe);
    cJSON *fp = cJSON_CreateObject();
    cJSON *recipe = rj ? cJSON_Parse(rj) : NULL; /* our own text: NULL is out of memory */
    free(rj);
    cJSON *opts = cJSON_CreateObject();
    cJSON *files = cJSON_CreateArray();
    int rc = fp && recipe && opts && files ? NVF_OK : NVF_E_NOMEM;
    if (rc == NVF_OK) {
        cJSON_AddStringToObject(fp, "tool_version", nvf_version());
        cJSON_AddItemToObject(fp, "recipe", recipe);
        cJSON_AddItemToObject(fp, "options", opts);
        cJSON_AddItemToObject(fp, "sources", files);
        recipe = opts = files = NULL;
    }
    cJSON *op = cJSON_GetObjectItem(fp, "options");
    if (rc == NVF_OK && !(add_bool(op, "keep_source_precision", o->keep_source_precision) &&
                          add_bool(op, "strict", o->strict) &&
                          add_bool(op, "allow_nonfinite", o->allow_nonfinite) &&
                          add_bool(op, "allow_empty", o->allow_empty) &&
                          add_bool(op, "no_follow_outside", o->no_follow_outside)))
        rc = NVF_E_NOMEM;
    if (rc == NVF_OK && o->input_amax_path) {
        char sum[65];
        uint64_t n;
        rc = nvf_sha256_file(sum, &n, o->input_amax_path);
        if (rc == NVF_OK && !cJSON_AddStringToObject(op, "input_amax_sha256", sum))
            rc = NVF_E_NOMEM;
    } else if (rc == NVF_OK && !cJSON_AddNullToObject(op, "input_amax_sha256")) {
        rc = NVF_E_NOMEM;
    }
    cJSON *fl = cJSON_GetObjectItem(fp, "sources");
    for (size_t i = 0; rc == NVF_OK && i < src->n; i++) {
        char *path = cv_sources_path(src, i);
        struct stat sb;
        char mtime[48];
        if (!path || stat(path, &sb) != 0) {
            rc = path ? nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path, strerror(errno))
                      : NVF_E_NOMEM;
            free(path);
            break;
        }
        free(path);
        snprintf(mtime, sizeof mtime, "%lld.%09ld", (long long)sb.st_mtim.tv_sec,
                 sb.st_mtim.tv_nsec);
        cJSON *e = cJSON_CreateObject();
        if (!e || !cJSON_AddItemToArray(fl, e) ||
            !cJSON_AddStringToObject(e, "name", src->names[i]) ||
            !cJSON_AddNumberToObject(e, "bytes", (double)sb.st_size) ||
            !cJSON_AddStringToObject(e, "mtime", mtime))
            rc = NVF_E_NOMEM;
    }
    char *text = rc == NVF_OK ? cJSON_PrintUnformatted(fp) : NULL;
    if (rc == NVF_OK && !text)
        rc = NVF_E_NOMEM;
    if (rc == NVF_OK) {
        nvf_sha256 *h = nvf_sha256_new();
        rc = h ? nvf_sha256_update(h, text, strlen(text)) : NVF_E_NOMEM;
        if (rc == NVF_OK)
            rc = nvf_sha256_final(h, sha);
        nvf_sha256_free(h);
    }
    free(text);
    cJSON_Delete(recipe);
    cJSON_Delete(opts);
    cJSON_Delete(files);
    if (rc == NVF_E_NOMEM)
        nvf_error_set(NVF_E_NOMEM, "no memory for the part fingerprint");
    if (rc != NVF_OK) {
        cJSON_Delete(fp);
        return rc;
    }
    *out = fp;
    return NVF_OK;
}

int cv_parts_select(cv_run *r) {
    const nvf_convert_options *o = r->opt;
    cv_plan *p = r->p;
    size_t n = p->n_shards > r->src.n ? p->n_shards : r->src.n;
    uint64_t *cost = calloc(n + 1, sizeof *cost);
    r->src.only = calloc(r->src.n + 1, 1);
    if (!cost || !r->src.only) {
        free(cost);
        return nvf_error_set(NVF_E_NOMEM, "no memory for the part's plan");
    }
    for (size_t s = 0; s < p->n_shards; s++) {
        const cv_shard *sh = &p->shards[s];
        cost[s] = sh->tensor_bytes;
        for (size_t j = sh->first_job; j < sh->first_job + sh->n_jobs; j++)
            cost[s] += p->jobs[j].bytes_in;
    }
    size_t first, count;
    nvf_convert_part_range(&first, &count, cost, p->n_shards, o->shard_index, o->shard_count);
    for (size_t s = 0; s < p->n_shards; s++)
        p->shards[s].other = s < first || s >= first + count;
    int rc = cv_parts_fingerprint(&r->part_fp, r->part_fp_sha, o, &r->src);
    /* The fingerprint lists the sizes just read: the same ones split the source hashing. */
    const cJSON *e;
    size_t i = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(r->part_fp, "sources")) {
        cost[i++] = (uint64_t)cJSON_GetObjectItem(e, "bytes")->valuedouble;
    }
    if (rc == NVF_OK) {
        nvf_convert_part_range(&first, &count, cost, r->src.n, o->shard_index, o->shard_count);
        for (i = first; i < first + count; i++)
            r->src.only[i] = 1;
    }
    free(cost);
    return rc;
}

/* The record's "shards" entry of shard `sh`; NULL on no memory. */
static cJSON *shard_entry(const cv_plan *p, const cv_shard *sh) {
    cJSON *e = cJSON_CreateObject();
    cJSON *ts = NULL;
    int ok = e && cJSON_AddStringToObject(e, "name", sh->name) &&
             cJSON_AddNumberToObject(e, "bytes", (double)sh->file_bytes) &&
             cJSON_AddStringToObject(e, "sha256", sh->sha256) &&
             (ts = cJSON_AddArrayToObject(e, "tensors")) != NULL;
    /* prepared targets: the jobs' weight_scale_2, for the inverse record that merge writes */
    ok = ok && cv_job_scales_put(e, p, sh);
    for (size_t i = 0; ok && i < sh->n_out; i++) {
        const cv_out *t = &p->outs[sh->first_out + i];
        cJSON *te = cJSON_CreateObject();
        char hex[9];
        snprintf(hex, sizeof hex, "%08" PRIx32, t->crc32);
        ok = te && cJSON_AddItemToArray(ts, te) && cJSON_AddStringToObject(te, "name", t->name) &&
             cJSON_AddStringToObject(te, "crc32", hex);
    }
    if (!ok) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

int cv_parts_write(const cv_run *r) {
    const nvf_convert_options *o = r->opt;
    const cv_plan *p = r->p;
    char *src_abs = realpath(o->src, NULL);
    char *amax_abs = o->input_amax_path ? realpath(o->input_amax_path, NULL) : NULL;
    char *path = cv_parts_path(o->dst, o->shard_index, o->shard_count, ".json");
    cJSON *doc = cJSON_CreateObject(), *shards = NULL, *srcs = NULL, *fp = NULL;
    if (!src_abs || (o->input_amax_path && !amax_abs)) {
        int rc = nvf_error_set(NVF_E_IO, "cannot resolve '%s': %s",
                               !src_abs ? o->src : o->input_amax_path, strerror(errno));
        free(src_abs);
        free(amax_abs);
        free(path);
        cJSON_Delete(doc);
        return rc;
    }
    int ok = doc && path && (fp = cJSON_Duplicate(r->part_fp, 1)) != NULL &&
             cJSON_AddStringToObject(doc, "format", PART_FORMAT) &&
             cJSON_AddNumberToObject(doc, "part", o->shard_index) &&
             cJSON_AddNumberToObject(doc, "parts", o->shard_count) &&
             cJSON_AddStringToObject(doc, "src", src_abs) &&
             (amax_abs ? cJSON_AddStringToObject(doc, "input_amax", amax_abs)
                       : cJSON_AddNullToObject(doc, "input_amax")) &&
             cJSON_AddStringToObject(doc, "fingerprint_sha256", r->part_fp_sha) &&
             cJSON_AddItemToObject(doc, "fingerprint", fp) &&
             (shards = cJSON_AddArrayToObject(doc, "shards")) != NULL &&
             (srcs = cJSON_AddArrayToObject(doc, "sources")) != NULL;
    if (!ok && fp && !cJSON_GetObjectItem(doc, "fingerprint"))
        cJSON_Delete(fp);
    for (size_t s = 0; ok && s < p->n_shards; s++) {
        if (p->shards[s].other)
            continue;
        cJSON *e = shard_entry(p, &p->shards[s]);
        ok = e && cJSON_AddItemToArray(shards, e);
    }
    for (size_t i = 0; ok && i < r->src.n; i++) {
        if (!r->src.only[i])
            continue;
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(srcs, e) &&
             cJSON_AddStringToObject(e, "name", r->src.names[i]) &&
             cJSON_AddNumberToObject(e, "bytes", (double)r->src.bytes[i]) &&
             cJSON_AddStringToObject(e, "sha256", r->src.sha[i]);
    }
    int rc = ok ? cv_write_json(path, doc, NULL, NULL)
                : nvf_error_set(NVF_E_NOMEM, "no memory for the part record");
    free(src_abs);
    free(amax_abs);
    free(path);
    cJSON_Delete(doc);
    return rc;
}

/* Reading ---------------------------------------------------------------------------------- */

static int is_count(const cJSON *v, double max) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= max &&
           floor(v->valuedouble) == v->valuedouble;
}

/* Lower-case hex of `len` digits: a SHA-256 (64) or a CRC-32 (8). */
static int is_hex(const cJSON *v, size_t len) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) != len)
        return 0;
    for (const char *c = v->valuestring; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return 0;
    return 1;
}

static int is_sha(const cJSON *v) {
    return is_hex(v, 64);
}

static const cJSON *field(const cJSON *o, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Check the entries of a "shards" (with_tensors) or "sources" array; the fault in `why`. */
static int check_files(const cJSON *a, int with_tensors, char *why, size_t cap) {
    const char *key = with_tensors ? "shards" : "sources";
    if (!cJSON_IsArray(a)) {
        snprintf(why, cap, "'%s' is not an array", key);
        return 0;
    }
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        const cJSON *ts = field(e, "tensors");
        if (!cJSON_IsString(field(e, "name")) || !is_count(field(e, "bytes"), 9007199254740992.0) ||
            !is_sha(field(e, "sha256")) || (with_tensors && !cJSON_IsArray(ts))) {
            snprintf(why, cap, "%s[%d] lacks a name, bytes, sha256%s", key, k,
                     with_tensors ? " or tensors" : "");
            return 0;
        }
        int t = 0;
        const cJSON *te;
        const cJSON *walk = with_tensors ? ts : (const cJSON *)NULL;
        cJSON_ArrayForEach(te, walk) {
            if (!cJSON_IsString(field(te, "name")) || !is_hex(field(te, "crc32"), 8)) {
                snprintf(why, cap, "%s[%d].tensors[%d] lacks a name or a crc32", key, k, t);
                return 0;
            }
            t++;
        }
        const cJSON *ws2 = with_tensors ? field(e, "job_scale_2") : NULL;
        if (ws2 && !cJSON_IsArray(ws2)) {
            snprintf(why, cap, "%s[%d].job_scale_2 is not an array", key, k);
            return 0;
        }
        const cJSON *v;
        cJSON_ArrayForEach(v, ws2) {
            if (!cJSON_IsString(v) || (v->valuestring[0] && !is_hex(v, 8))) {
                snprintf(why, cap, "%s[%d].job_scale_2 holds a value that is not 8 hex digits", key,
                         k);
                return 0;
            }
        }
        k++;
    }
    return 1;
}

/* Check the shape of part record `p` (read from p->path). */
static int check_record(cv_part *p) {
    const cJSON *d = p->doc;
    const cJSON *part = field(d, "part"), *parts = field(d, "parts");
    const cJSON *amax = field(d, "input_amax");
    char why[160] = "";
    const cJSON *fmt = field(d, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, PART_FORMAT) != 0)
        snprintf(why, sizeof why, "'format' is not \"%s\"", PART_FORMAT);
    else if (!is_count(part, NVF_CONVERT_MAX_PARTS) || !is_count(parts, NVF_CONVERT_MAX_PARTS) ||
             (int)part->valuedouble != p->index || (int)parts->valuedouble != p->count)
        snprintf(why, sizeof why, "'part' and 'parts' are not %d and %d, as its name says",
                 p->index, p->count);
    else if (!cJSON_IsString(field(d, "src")) || !(cJSON_IsNull(amax) || cJSON_IsString(amax)))
        snprintf(why, sizeof why, "'src' is not a string or 'input_amax' not a string or null");
    else if (!is_sha(field(d, "fingerprint_sha256")) || !cJSON_IsObject(field(d, "fingerprint")))
        snprintf(why, sizeof why, "no 'fingerprint' object and 'fingerprint_sha256'");
    else if (check_files(field(d, "shards"), 1, why, sizeof why))
        check_files(field(d, "sources"), 0, why, sizeof why);
    if (why[0])
        return nvf_error_set(NVF_E_FORMAT, "invalid part record '%s': %s", p->path, why);
    p->fp = field(d, "fingerprint");
    p->fp_sha = field(d, "fingerprint_sha256")->valuestring;
    p->shards = field(d, "shards");
    p->sources = field(d, "sources");
    return NVF_OK;
}

static int cmp_part(const void *a, const void *b) {
    const cv_part *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Whether `name` is a record's name "I-of-N.json" (no other spelling of I and N). */
static int record_name(const char *name, int *index, int *count) {
    char again[128];
    int n = 0;
    if (sscanf(name, "%d-of-%d.json%n", index, count, &n) != 2 || n == 0 || name[n] != '\0' ||
        *index < 0 || *count < 1 || *count > NVF_CONVERT_MAX_PARTS)
        return 0;
    snprintf(again, sizeof again, "%d-of-%d.json", *index, *count);
    return strcmp(again, name) == 0;
}

int cv_parts_read(cv_part **out, size_t *n, const char *dst) {
    *out = NULL;
    *n = 0;
    char *dir = nvf_path_join(dst, NVF_CONVERT_PARTS_DIR);
    if (!dir)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    DIR *d = opendir(dir);
    if (!d) {
        int rc = errno == ENOENT
                     ? NVF_OK
                     : nvf_error_set(NVF_E_IO, "cannot list '%s': %s", dir, strerror(errno));
        free(dir);
        return rc;
    }
    size_t cap = 0;
    int rc = NVF_OK;
    struct dirent *e;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        int index, count;
        if (!record_name(e->d_name, &index, &count))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            cv_part *grown = realloc(*out, cap * sizeof *grown);
            if (!grown) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
                break;
            }
            *out = grown;
        }
        cv_part *p = &(*out)[(*n)++];
        memset(p, 0, sizeof *p);
        p->index = index;
        p->count = count;
        p->path = nvf_path_join(dir, e->d_name);
        rc = p->path ? nvf_json_read_strict(&p->doc, p->path, PART_MAX_BYTES, "part record", 0)
                     : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (rc == NVF_OK)
            rc = check_record(p);
    }
    closedir(d);
    free(dir);
    if (rc == NVF_OK && *n > 1)
        qsort(*out, *n, sizeof **out, cmp_part);
    return rc;
}

void cv_parts_free(cv_part *parts, size_t n) {
    for (size_t i = 0; parts && i < n; i++) {
        free(parts[i].path);
        cJSON_Delete(parts[i].doc);
    }
    free(parts);
}
