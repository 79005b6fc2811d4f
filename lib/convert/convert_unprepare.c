/*
 * `convert PREPARED DST --target modelopt`: the exact inverse of the prepared targets (SPEC
 * section 5). The prepared tensors hold each expert's weights and block scales exactly (the
 * w13 interleave and the scale layouts are bijections); nvfp4-inverse.json, written with them
 * (convert_prepared_record.c), holds what they do not: the source's module names, each linear's
 * weight_scale_2 and input_scale bytes and scalar shapes, and the source's quantization
 * documents. The inverse:
 *   1. refuses a prepared checkpoint without the record (written before it existed: exit 3) and
 *      one with a rank directory missing (exit 3, naming it);
 *   2. restores the source as a ModelOpt NVFP4 checkpoint in a temporary directory beside DST
 *      ("DST.unprepare.tmp", removed at the end): every expert linear and converted dense
 *      linear as its four ModelOpt tensors (convert_unprepare_tensors.c), every other tensor
 *      of rank 0 as it is, rank 0's side files, config.json with the source's
 *      quantization_config, the source's hf_quant_config.json;
 *   3. converts that directory to DST with the same options (the ordinary modelopt conversion:
 *      stored NVFP4 is copied), its jobs put into the order and shards of the direct
 *      `convert SRC --target modelopt` that the record lists ("modelopt_jobs",
 *      convert_plan_order.c), so the shard files, index and metadata are the direct ones.
 *      A record_version 1 record lists none, and a compressed-tensors source's lists null (the
 *      direct conversion keeps its tensors): the shards then follow the tensor names.
 */
#include "convert_unprepare.h"

#include "ckpt/ckpt_docs.h"
#include "io/json_strict.h"
#include "nvfp4/device.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DOC_MAX    ((size_t)64 << 20)
#define RECORD_MAX ((size_t)1 << 30)
#define TMP_SUFFIX ".unprepare.tmp"

/* quantization_config.quant_method of DIR/config.json, or the manifest's target.format. */
static int says_prepared(const char *dir, const char *file, const char *obj, const char *key,
                         const char *prefix) {
    char *path = nvf_path_join(dir, file);
    cJSON *doc = NULL;
    int yes = 0;
    if (path && nvf_path_is_file(path) &&
        nvf_json_read_strict(&doc, path, DOC_MAX, "file", NVF_E_FORMAT) == NVF_OK) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(doc, obj);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        yes = cJSON_IsString(v) && strncmp(v->valuestring, prefix, strlen(prefix)) == 0;
    }
    cJSON_Delete(doc);
    free(path);
    nvf_error_clear();
    return yes;
}

static int has_rank_dirs(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int yes = 0;
    while (!yes && (e = readdir(d)) != NULL) {
        int r, n;
        char tail;
        yes = sscanf(e->d_name, "rank-%5d-of-%5d%c", &r, &n, &tail) == 2;
    }
    closedir(d);
    return yes;
}

int cv_unprepare_is_prepared(const char *src) {
    if (!nvf_path_is_dir(src))
        return 0;
    char *rec = nvf_path_join(src, CV_INVERSE_NAME);
    int yes = rec && nvf_path_is_file(rec);
    free(rec);
    return yes ||
           says_prepared(src, "config.json", "quantization_config", "quant_method",
                         "nvfp4tool-prepared") ||
           says_prepared(src, NVF_MANIFEST_NAME, "target", "format", "prepared-") ||
           has_rank_dirs(src);
}

/* Whether `src` is a rank directory whose parent holds the record. */
static int one_rank(const char *src) {
    size_t len = strlen(src);
    while (len > 1 && src[len - 1] == '/')
        len--;
    char *dir = strndup(src, len);
    if (!dir)
        return 0;
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    int r, n, yes = 0;
    char tail;
    if (sscanf(base, "rank-%5d-of-%5d%c", &r, &n, &tail) == 2) {
        if (slash)
            *slash = '\0';
        char *rec = nvf_path_join(slash ? (slash == dir ? "/" : dir) : ".", CV_INVERSE_NAME);
        yes = rec && nvf_path_is_file(rec);
        free(rec);
    }
    free(dir);
    return yes;
}

/* The record, checked against what it must say. */
static int read_record(cJSON **out, const char *src, int *ep, nvf_layout *layout, int *w4a4) {
    char *path = nvf_path_join(src, CV_INVERSE_NAME);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = NVF_OK;
    if (!nvf_path_is_file(path) && one_rank(src))
        rc = nvf_error_set(NVF_E_INVALID,
                           "'%s' is one rank directory of a prepared checkpoint: convert its "
                           "top directory (which holds '%s' and every rank)",
                           src, CV_INVERSE_NAME);
    else if (!nvf_path_is_file(path))
        rc = nvf_error_set(NVF_E_FORMAT,
                           "'%s' is a prepared checkpoint without '%s' (written before nvfp4tool "
                           "recorded the source's tensor names and scales): it cannot be turned "
                           "back into ModelOpt exactly; convert the original source with "
                           "--target modelopt, or prepare it again with this version",
                           src, CV_INVERSE_NAME);
    if (rc == NVF_OK)
        rc = nvf_json_read_strict(out, path, RECORD_MAX, "inverse record", NVF_E_FORMAT);
    free(path);
    if (rc != NVF_OK)
        return rc;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(*out, "record_version");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(*out, "format");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(*out, "scale_layout");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(*out, "ep");
    const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(*out, "modelopt_jobs");
    if (!cJSON_IsNumber(v) || (v->valuedouble != 1 && v->valuedouble != 2))
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s/%s': record_version is not 1 or 2 (written by a newer "
                             "nvfp4tool?)",
                             src, CV_INVERSE_NAME);
    if (v->valuedouble == 2 && !cJSON_IsArray(jobs) && !cJSON_IsNull(jobs))
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s/%s': record_version 2 without a \"modelopt_jobs\" array (or "
                             "null)",
                             src, CV_INVERSE_NAME);
    if (v->valuedouble == 1)
        nvf_log(NVF_LOG_INFO,
                "'%s/%s' (record_version 1) does not record the direct modelopt conversion's "
                "order: the tensors are restored exactly, the shard files follow the tensor names",
                src, CV_INVERSE_NAME);
    if (!cJSON_IsString(f) || !cJSON_IsString(l) || !cJSON_IsNumber(n) || n->valuedouble < 1 ||
        n->valuedouble > 99999 || n->valuedouble != (double)(int)n->valuedouble ||
        (strcmp(f->valuestring, "prepared-w4a16") != 0 &&
         strcmp(f->valuestring, "prepared-w4a4") != 0) ||
        !nvf_layout_from_name(l->valuestring, layout))
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s/%s': \"format\", \"scale_layout\" or \"ep\" is missing or not "
                             "one this tool writes",
                             src, CV_INVERSE_NAME);
    *ep = (int)n->valuedouble;
    *w4a4 = strcmp(f->valuestring, "prepared-w4a4") == 0;
    return NVF_OK;
}

/* Open every rank (refusing a missing one, by name). */
static int open_ranks(un_set *s, const char *src, char **names) {
    int rc = NVF_OK;
    for (int r = 0; r < s->ep && rc == NVF_OK; r++) {
        char dir[64];
        if (s->ep > 1)
            snprintf(dir, sizeof dir, "rank-%05d-of-%05d", r, s->ep);
        else
            snprintf(dir, sizeof dir, ".");
        names[r] = nvf_path_join(src, dir);
        if (!names[r])
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        s->rank_names[r] = names[r];
        if (!nvf_path_is_dir(names[r]))
            return nvf_error_set(NVF_E_FORMAT,
                                 "'%s': rank directory '%s' is missing (the prepared checkpoint "
                                 "has %d ranks; the inverse needs every one)",
                                 src, dir, s->ep);
        rc = nvf_ckpt_open(&s->ranks[r], names[r]);
    }
    return rc;
}

/* Remove the regular files of `dir` and `dir` itself (the temporary source: files only). */
static void remove_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = nvf_path_join(dir, e->d_name);
        if (p && unlink(p) != 0)
            nvf_log(NVF_LOG_WARN, "cannot remove '%s': %s", p, strerror(errno));
        free(p);
    }
    closedir(d);
    if (rmdir(dir) != 0)
        nvf_log(NVF_LOG_WARN, "cannot remove '%s': %s", dir, strerror(errno));
}

/* The restored tensors into DIR/model.safetensors, one entry after the other. */
static int write_tensors(un_set *s, const char *dir, const nvf_convert_options *opt) {
    nvf_st_entry *decl = malloc((s->n ? s->n : 1) * sizeof *decl);
    char *path = nvf_path_join(dir, "model.safetensors");
    uint64_t largest = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (decl)
            decl[i] = s->ents[i].decl;
        largest = un_bytes(&s->ents[i]) > largest ? un_bytes(&s->ents[i]) : largest;
    }
    uint8_t *buf = malloc((size_t)largest + 1);
    nvf_st_writer *w = NULL;
    int rc = decl && path && buf ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK)
        rc = nvf_st_writer_open(&w, path, decl, s->n, NULL, NULL, 0);
    for (size_t i = 0; i < s->n && rc == NVF_OK; i++) {
        if (opt->stop && *opt->stop)
            rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while restoring '%s'",
                               s->ents[i].decl.name);
        if (rc == NVF_OK)
            rc = un_produce(buf, s, &s->ents[i]);
        if (rc == NVF_OK)
            rc = nvf_st_writer_write(w, buf, (size_t)un_bytes(&s->ents[i]));
    }
    if (rc == NVF_OK)
        rc = nvf_st_writer_finish(w);
    else
        nvf_st_writer_abort(w);
    free(buf);
    free(path);
    free(decl);
    return rc;
}

static int write_doc(const char *dir, const char *name, const cJSON *doc) {
    char *path = nvf_path_join(dir, name);
    char sha[65];
    uint64_t bytes;
    int rc = path ? cv_write_json(path, doc, sha, &bytes) : nvf_error_set(NVF_E_NOMEM, "no memory");
    free(path);
    return rc;
}

/*
 * config.json (rank 0's, with the source's quantization_config where the source was ModelOpt
 * NVFP4) and hf_quant_config.json (the source's; for another source a ModelOpt NVFP4 one with
 * the prepared ignore list, so that the restored directory reads as ModelOpt).
 */
static int write_configs(const un_set *s, const cJSON *record, const char *dir) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(record, "source_format");
    int modelopt =
        cJSON_IsString(fmt) &&
        strcmp(fmt->valuestring, nvf_ckpt_format_name(NVF_CKPT_FORMAT_NVFP4_MODELOPT)) == 0;
    const cJSON *sqc = cJSON_GetObjectItemCaseSensitive(record, "source_quantization_config");
    const cJSON *shq = cJSON_GetObjectItemCaseSensitive(record, "source_hf_quant_config");
    const cJSON *base = nvf_ckpt_config_doc(s->ranks[0]);
    cJSON *cfg = base ? cJSON_Duplicate(base, 1) : cJSON_CreateObject();
    cJSON *hq = NULL;
    int rc = cfg ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    cJSON *pqc = cfg ? cJSON_DetachItemFromObjectCaseSensitive(cfg, "quantization_config") : NULL;
    if (rc == NVF_OK && modelopt && cJSON_IsObject(sqc) &&
        !cJSON_AddItemToObject(cfg, "quantization_config", cJSON_Duplicate(sqc, 1)))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK && modelopt && cJSON_IsObject(shq))
        hq = cJSON_Duplicate(shq, 1);
    else if (rc == NVF_OK && (!modelopt || !cJSON_IsObject(sqc))) {
        hq = cJSON_CreateObject();
        cJSON *q = hq ? cJSON_AddObjectToObject(hq, "quantization") : NULL;
        const cJSON *ign = cJSON_GetObjectItemCaseSensitive(pqc, "ignore");
        if (!q || !cJSON_AddStringToObject(q, "quant_algo", "NVFP4") ||
            !cJSON_AddNumberToObject(q, "group_size", 16) ||
            !cJSON_AddItemToObject(q, "exclude_modules",
                                   cJSON_IsArray(ign) ? cJSON_Duplicate(ign, 1)
                                                      : cJSON_CreateArray()))
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    if (rc == NVF_OK)
        rc = write_doc(dir, "config.json", cfg);
    if (rc == NVF_OK && hq)
        rc = write_doc(dir, "hf_quant_config.json", hq);
    cJSON_Delete(pqc);
    cJSON_Delete(cfg);
    cJSON_Delete(hq);
    return rc;
}

/* Rank 0's side files (tokenizer, generation config, ...): what a conversion copies. */
static int copy_side_files(const un_set *s, const char *dir) {
    const char *from_dir = s->ranks[0]->dir;
    DIR *d = opendir(from_dir);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", from_dir, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !cv_sources_is_copied(e->d_name) ||
            strcmp(e->d_name, CV_INVERSE_NAME) == 0)
            continue;
        char *from = nvf_path_join(from_dir, e->d_name), *to = nvf_path_join(dir, e->d_name);
        if (!from || !to)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        else if (nvf_path_is_file(from))
            rc = nvf_file_copy(to, from);
        free(from);
        free(to);
    }
    closedir(d);
    return rc;
}

/* DST without trailing slashes, + TMP_SUFFIX. */
static char *tmp_dir_of(const char *dst) {
    size_t len = strlen(dst);
    while (len > 1 && dst[len - 1] == '/')
        len--;
    char *t = malloc(len + sizeof TMP_SUFFIX);
    if (t) {
        memcpy(t, dst, len);
        memcpy(t + len, TMP_SUFFIX, sizeof TMP_SUFFIX);
    }
    return t;
}

int cv_unprepare_run(nvf_convert_summary *out, const nvf_convert_options *opt) {
    un_set s;
    memset(&s, 0, sizeof s);
    cJSON *record = NULL;
    char **names = NULL, *tmp = NULL;
    int rc = NVF_OK;
    if (opt->input_amax_path)
        return nvf_error_set(NVF_E_INVALID,
                             "--input-amax: '%s' is a prepared checkpoint; the inverse restores "
                             "its recorded input scales",
                             opt->src);
    char *rs = realpath(opt->src, NULL), *rd = realpath(opt->dst, NULL);
    int same = rs && rd && strcmp(rs, rd) == 0;
    free(rs);
    free(rd);
    if (same)
        return nvf_error_set(NVF_E_INVALID, "DST '%s' is the source directory", opt->dst);
    if ((rc = read_record(&record, opt->src, &s.ep, &s.layout, &s.w4a4)) != NVF_OK)
        goto done;
    s.ranks = calloc((size_t)s.ep, sizeof *s.ranks);
    s.rank_names = calloc((size_t)s.ep, sizeof *s.rank_names);
    names = calloc((size_t)s.ep, sizeof *names);
    tmp = tmp_dir_of(opt->dst);
    if (!s.ranks || !s.rank_names || !names || !tmp) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        goto done;
    }
    /* The scales are laid out back to linear on --device (--devices: its first entry). */
    const nvf_device *dev = opt->n_devices > 0 && opt->devices ? &opt->devices[0] : &opt->device;
    if ((rc = open_ranks(&s, opt->src, names)) != NVF_OK ||
        (rc = nvf_backend_open(&s.backend, dev, opt->threads)) != NVF_OK ||
        (rc = un_plan(&s, record)) != NVF_OK)
        goto done;
    if (nvf_path_is_dir(tmp))
        remove_tmp(tmp); /* left by an earlier run that was killed */
    if ((rc = nvf_mkdir_p(tmp)) != NVF_OK)
        goto done;
    nvf_log(NVF_LOG_INFO, "restoring the ModelOpt source of '%s' (%zu tensors, %d ranks) in '%s'",
            opt->src, s.n, s.ep, tmp);
    if ((rc = write_tensors(&s, tmp, opt)) != NVF_OK ||
        (rc = write_configs(&s, record, tmp)) != NVF_OK ||
        (rc = copy_side_files(&s, tmp)) != NVF_OK)
        goto done;
    /* The shards are no longer needed: release them before the conversion maps the copy. */
    un_free(&s);
    for (int r = 0; r < s.ep; r++) {
        nvf_ckpt_close(s.ranks[r]);
        s.ranks[r] = NULL;
    }
    nvf_convert_options o = *opt;
    o.src = tmp;
    o.allow_empty = 1; /* stored NVFP4 is copied: nothing is left to quantize */
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(record, "modelopt_jobs");
    rc = cv_convert_run_ordered(out, &o, cJSON_IsArray(order) ? order : NULL);
done:
    if (tmp && nvf_path_is_dir(tmp))
        remove_tmp(tmp);
    un_free(&s);
    nvf_backend_close(s.backend);
    for (int r = 0; s.ranks && r < s.ep; r++)
        nvf_ckpt_close(s.ranks[r]);
    for (int r = 0; names && r < s.ep; r++)
        free(names[r]);
    free(names);
    free(s.ranks);
    free((void *)s.rank_names);
    free(tmp);
    cJSON_Delete(record);
    return rc;
}
