/*
 * The finish of a conversion, once every shard is written (or reused): in this order,
 *   1. the side files of the source (tokenizer, generation config, ...) copied into DST;
 *   2. model.safetensors.index.json (every output tensor, sorted by name, to its shard);
 *   (with rank directories, --ep N of a prepared target: 1 and 2 in each rank directory, for
 *   its own shards, so that each rank is a checkpoint of its own;)
 *   3. the target's metadata files (modelopt: hf_quant_config.json, config.json);
 *   4. nvfp4-manifest.json last (the journal removed just before): its presence marks a complete
 *      checkpoint.
 * It reads nothing but its arguments and the side files, so `merge` can call it with the plan
 * of several partial conversions.
 */
#include "convert_internal.h"

#include "manifest/manifest_priv.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_out_name(const void *a, const void *b) {
    return strcmp((*(cv_out *const *)a)->name, (*(cv_out *const *)b)->name);
}

static const char *shard_of(const cv_plan *p, const cv_out *o) {
    return p->shards[p->jobs[o->job].shard].name;
}

static int ranks_of(const cv_plan *p) {
    return p->ep > 1 ? p->ep : 1;
}

/* The index of rank `rank`'s outputs, shard names relative to the rank's directory (`skip`
 * bytes of prefix). */
static cJSON *index_doc(const cv_plan *p, int rank, size_t skip) {
    cv_out **order = malloc((p->n_outs ? p->n_outs : 1) * sizeof *order);
    cJSON *doc = order ? cJSON_CreateObject() : NULL;
    cJSON *meta = cJSON_AddObjectToObject(doc, "metadata");
    cJSON *map = cJSON_AddObjectToObject(doc, "weight_map");
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; order && i < p->n_outs; i++) {
        if (p->shards[p->jobs[p->outs[i].job].shard].rank != rank)
            continue;
        order[n++] = &p->outs[i];
        total += p->outs[i].bytes;
    }
    int ok = meta && map && cJSON_AddNumberToObject(meta, "total_size", (double)total);
    if (ok)
        qsort(order, n, sizeof *order, cmp_out_name);
    for (size_t i = 0; ok && i < n; i++)
        ok = cJSON_AddStringToObject(map, order[i]->name, shard_of(p, order[i]) + skip) != NULL;
    free(order);
    if (!ok) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

cJSON *cv_summary_json(const nvf_convert_summary *s) {
    const struct {
        const char *key;
        uint64_t v;
    } f[] = {{"tensors_quantized", s->tensors_quantized},
             {"linears_quantized", s->linears_quantized},
             {"tensors_kept", s->tensors_kept},
             {"tensors_dequantized", s->tensors_dequantized},
             {"tensors_dropped", s->tensors_dropped},
             {"tensors_written", s->tensors_written},
             {"shards", s->shards},
             {"bytes_in", s->bytes_in},
             {"bytes_out", s->bytes_out}};
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < sizeof f / sizeof f[0]; i++)
        if (!cJSON_AddNumberToObject(o, f[i].key, (double)f[i].v)) {
            cJSON_Delete(o);
            o = NULL;
        }
    if (o && s->experts_requantized > 0 &&
        !cJSON_AddNumberToObject(o, "experts_requantized", (double)s->experts_requantized)) {
        cJSON_Delete(o);
        o = NULL;
    }
    if (!o)
        nvf_error_set(NVF_E_NOMEM, "no memory for the conversion summary");
    return o;
}

char *nvf_convert_summary_to_json(const nvf_convert_summary *s) {
    cJSON *o = cv_summary_json(s);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    if (o && !text)
        nvf_error_set(NVF_E_NOMEM, "no memory for the conversion summary");
    cJSON_Delete(o);
    return text;
}

int cv_finish_write_json(const cv_finish_args *a, nvf_manifest *m, const char *name, cJSON *doc) {
    char *path = nvf_path_join(a->dst, name);
    char sha[65];
    uint64_t bytes = 0;
    int rc = path && doc ? cv_write_json(path, doc, sha, &bytes)
                         : nvf_error_set(NVF_E_NOMEM, "no memory writing '%s'", name);
    if (rc == NVF_OK)
        rc = nvf_manifest_add_file(m, name, bytes, sha);
    free(path);
    cJSON_Delete(doc);
    return rc;
}

/* The manifest's header: recipe, target, the source files. */
static int describe(nvf_manifest *m, const cv_finish_args *a) {
    nvf_manifest_priv *pm = nvf_manifest_priv_of(m);
    char *rj = nvf_recipe_to_json(a->recipe);
    int rc = NVF_OK;
    /* Our own text: a failed parse is out of memory. */
    pm->recipe = rj ? cJSON_Parse(rj) : NULL;
    pm->target = a->target->manifest_target(a->plan, a->recipe);
    m->has_source = 1;
    if (!pm->recipe || !pm->target)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the manifest");
    free(rj);
    const cv_sources *s = a->sources;
    for (size_t i = 0; rc == NVF_OK && i < s->n; i++)
        rc = nvf_manifest_add_source(m, s->names[i], s->bytes[i], s->sha[i]);
    return rc;
}

/* `prefix` + `name` as a new string. */
static char *prefixed(const char *prefix, const char *name) {
    size_t a = strlen(prefix), b = strlen(name);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, prefix, a);
        memcpy(s + a, name, b + 1);
    }
    return s;
}

/* The side files into DST/prefix ("" or a rank directory "rank-.../"). */
static int copy_side_files(nvf_manifest *m, const cv_finish_args *a, const char *prefix) {
    const cv_sources *s = a->sources;
    int rc = NVF_OK;
    for (size_t i = 0; rc == NVF_OK && i < s->n; i++) {
        if (!cv_sources_is_copied(s->names[i]))
            continue;
        /* The copy has the bytes, and so the hash, of the source. */
        char *rel = prefixed(prefix, s->names[i]);
        char *from = cv_sources_path(s, i), *to = rel ? nvf_path_join(a->dst, rel) : NULL;
        rc = from && to ? nvf_file_copy(to, from) : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (rc == NVF_OK)
            rc = nvf_manifest_add_file(m, rel, s->bytes[i], s->sha[i]);
        free(rel);
        free(from);
        free(to);
    }
    return rc;
}

int cv_finish_outputs(nvf_convert_summary *out, const cv_finish_args *a) {
    const cv_plan *p = a->plan;
    *out = p->counts;
    out->shards = p->n_shards;
    out->bytes_out = 0;
    nvf_manifest *m = nvf_manifest_new();
    int rc = m ? describe(m, a) : nvf_error_set(NVF_E_NOMEM, "no memory for the manifest");
    for (size_t s = 0; rc == NVF_OK && s < p->n_shards; s++) {
        const cv_shard *sh = &p->shards[s];
        out->bytes_out += sh->file_bytes;
        rc = nvf_manifest_add_file(m, sh->name, sh->file_bytes, sh->sha256);
    }
    for (size_t i = 0; rc == NVF_OK && i < p->n_outs; i++) {
        const cv_out *t = &p->outs[i];
        rc = nvf_manifest_add_tensor(m, t->name, shard_of(p, t), nvf_dtype_name(t->dtype), t->ndim,
                                     t->shape, t->crc32);
    }
    for (int k = 0; k < ranks_of(p) && rc == NVF_OK; k++) {
        char prefix[64] = "";
        if (ranks_of(p) > 1)
            snprintf(prefix, sizeof prefix, "rank-%05d-of-%05d/", k, p->ep);
        char *index = prefixed(prefix, "model.safetensors.index.json");
        rc = index ? copy_side_files(m, a, prefix) : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (rc == NVF_OK)
            rc = cv_finish_write_json(a, m, index, index_doc(p, k, strlen(prefix)));
        free(index);
    }
    if (rc == NVF_OK)
        rc = a->target->write_metadata(a, m);
    if (rc == NVF_OK) {
        nvf_convert_summary c = *out;
        c.bytes_out = out->bytes_out;
        cJSON *sj = nvf_manifest_priv_of(m)->summary = cv_summary_json(&c);
        if (!sj || !cJSON_AddStringToObject(sj, "source_format", a->source_format))
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the manifest");
    }
    char *jpath = nvf_path_join(a->dst, NVF_CONVERT_JOURNAL);
    char *mpath = nvf_path_join(a->dst, NVF_MANIFEST_NAME);
    if (rc == NVF_OK && (!jpath || !mpath))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK && unlink(jpath) != 0 && errno != ENOENT)
        rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", jpath, strerror(errno));
    if (rc == NVF_OK)
        rc = nvf_manifest_write(mpath, m);
    free(jpath);
    free(mpath);
    nvf_manifest_free(m);
    return rc;
}
