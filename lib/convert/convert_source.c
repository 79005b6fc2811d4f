/*
 * The source files of a conversion: which files it reads (the shards and the side files that
 * are copied or read as configuration) and their SHA-256 for the manifest's "source" list.
 */
#include "convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_shard_or_index(const char *name) {
    return fnmatch("*.safetensors", name, 0) == 0 ||
           fnmatch("*.safetensors.index.json", name, 0) == 0;
}

int cv_sources_is_copied(const char *name) {
    return !is_shard_or_index(name) && strcmp(name, "config.json") != 0 &&
           strcmp(name, "hf_quant_config.json") != 0 && strcmp(name, NVF_MANIFEST_NAME) != 0;
}

static int push(cv_sources *s, size_t *cap, const char *name) {
    if (s->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        char **nn = realloc(s->names, nc * sizeof *nn);
        if (!nn)
            return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", s->dir);
        s->names = nn;
        *cap = nc;
    }
    s->names[s->n] = strdup(name);
    if (!s->names[s->n])
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", s->dir);
    s->n++;
    return NVF_OK;
}

int cv_sources_list(cv_sources *out, const nvf_ckpt *ck) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    const char *file = NULL;
    if (ck->is_file) {
        const char *slash = strrchr(ck->path, '/');
        file = slash ? slash + 1 : ck->path;
    }
    out->dir = strdup(ck->dir);
    if (!out->dir)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->path);
    int rc = file ? push(out, &cap, file) : NVF_OK;
    DIR *d = rc == NVF_OK ? opendir(ck->dir) : NULL;
    if (rc == NVF_OK && !d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", ck->dir, strerror(errno));
    struct dirent *e;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        /* A single file's directory may hold the other shards of its checkpoint: not read. */
        if (e->d_name[0] == '.' || (file && is_shard_or_index(e->d_name)))
            continue;
        char *full = nvf_path_join(ck->dir, e->d_name);
        int is_file = full && nvf_path_is_file(full);
        free(full);
        if (is_file)
            rc = push(out, &cap, e->d_name);
    }
    if (d)
        closedir(d);
    if (rc != NVF_OK)
        return rc;
    qsort(out->names, out->n, sizeof *out->names, cmp_str);
    out->bytes = calloc(out->n + 1, sizeof *out->bytes);
    out->sha = calloc(out->n + 1, sizeof *out->sha);
    if (!out->bytes || !out->sha)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
    return NVF_OK;
}

void cv_sources_free(cv_sources *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s->bytes);
    free(s->sha);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

char *cv_sources_path(const cv_sources *s, size_t i) {
    return nvf_path_join(s->dir, s->names[i]);
}

int cv_sources_hash(cv_sources *s, int (*quit)(void *), void *ctx) {
    for (size_t i = 0; i < s->n; i++) {
        if (quit && quit(ctx))
            return NVF_OK;
        char *path = cv_sources_path(s, i);
        int rc = path ? nvf_sha256_file(s->sha[i], &s->bytes[i], path)
                      : nvf_error_set(NVF_E_NOMEM, "no memory");
        free(path);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}
