/*
 * The files of a checkpoint directory: a recursive walk (symbolic links followed, loops and
 * runaway nesting refused) giving the sorted relative names that hashing and checking cover.
 */
#include "manifest_internal.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Nesting deeper than this is treated as a loop that stat() could not see. */
#define MAX_DEPTH 64

/* Directory walk ---------------------------------------------------------------------------------
 */

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static int list_push(name_list *l, char *s) {
    if (!s)
        return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, c * sizeof *v);
        if (!v) {
            free(s);
            return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
        }
        l->v = v;
        l->cap = c;
    }
    l->v[l->n++] = s;
    return NVF_OK;
}

typedef struct walk_ctx {
    const char *root;
    int skip_tmp;
    name_list *out;
    dev_t dev[MAX_DEPTH];
    ino_t ino[MAX_DEPTH];
} walk_ctx;

static int walk(walk_ctx *w, const char *rel, int depth) {
    char *dir_path = rel[0] ? nvf_path_join(w->root, rel) : strdup(w->root);
    if (!dir_path)
        return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
    int rc = NVF_OK;
    DIR *d = opendir(dir_path);
    if (!d) {
        rc = nvf_error_set(NVF_E_IO, "cannot open directory '%s': %s", dir_path, strerror(errno));
        free(dir_path);
        return rc;
    }
    struct dirent *e;
    for (errno = 0; rc == NVF_OK && (e = readdir(d)) != NULL; errno = 0) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (depth == 0 && strcmp(e->d_name, NVF_MANIFEST_NAME) == 0)
            continue;
        char *name = nvf_path_join(rel, e->d_name);
        char *full = nvf_path_join(w->root, name ? name : "");
        struct stat st;
        if (!name || !full) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
        } else if (stat(full, &st) != 0) {
            nvf_log(NVF_LOG_WARN, "skipping '%s': %s", full, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            for (int k = 0; k < depth && rc == NVF_OK; k++)
                if (w->dev[k] == st.st_dev && w->ino[k] == st.st_ino)
                    rc = nvf_error_set(NVF_E_IO, "directory loop at '%s'", full);
            if (rc == NVF_OK && depth + 1 >= MAX_DEPTH)
                rc = nvf_error_set(NVF_E_IO, "directories nested deeper than %d at '%s'", MAX_DEPTH,
                                   full);
            if (rc == NVF_OK) {
                w->dev[depth + 1] = st.st_dev;
                w->ino[depth + 1] = st.st_ino;
                rc = walk(w, name, depth + 1);
            }
        } else if (!S_ISREG(st.st_mode)) {
            nvf_log(NVF_LOG_WARN, "skipping '%s': not a regular file or directory", full);
        } else if (!(w->skip_tmp && nvf_manifest_ends_with(name, ".tmp"))) {
            const char *why = nvf_manifest_name_problem(name);
            if (why)
                rc = nvf_error_set(NVF_E_UNSUPPORTED,
                                   "file name '%s' %s: a manifest cannot record it", full, why);
            else
                rc = list_push(w->out, name);
            if (rc == NVF_OK)
                name = NULL;
        }
        free(name);
        free(full);
    }
    if (rc == NVF_OK && errno != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot read directory '%s': %s", dir_path, strerror(errno));
    closedir(d);
    free(dir_path);
    return rc;
}

int nvf_manifest_cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int nvf_manifest_list_dir(char ***out, size_t *out_n, const char *dir, int skip_tmp) {
    *out = NULL;
    *out_n = 0;
    name_list l = {NULL, 0, 0};
    walk_ctx w;
    memset(&w, 0, sizeof w);
    w.root = dir;
    w.skip_tmp = skip_tmp;
    w.out = &l;
    struct stat st;
    if (stat(dir, &st) != 0)
        return nvf_error_set(NVF_E_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    w.dev[0] = st.st_dev;
    w.ino[0] = st.st_ino;
    int rc = walk(&w, "", 0);
    if (rc != NVF_OK) {
        nvf_manifest_names_free(l.v, l.n);
        return rc;
    }
    if (l.n > 0)
        qsort(l.v, l.n, sizeof *l.v, nvf_manifest_cmp_name);
    *out = l.v;
    *out_n = l.n;
    return NVF_OK;
}

void nvf_manifest_names_free(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}
