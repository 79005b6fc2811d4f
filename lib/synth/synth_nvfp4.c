/*
 * Synthetic NVFP4 checkpoints (nvfp4/synth.h "NVFP4"): the bf16 checkpoint of the same options,
 * written into a temporary sibling directory and converted into DST by the library's own
 * conversion with the default recipe, so DST is byte for byte what `convert --target modelopt`
 * writes from it. "nvfp4-ct" then rewrites DST in compressed-tensors form (synth_ct.c).
 *
 *   1. DST.synth-bf16.tmp: removed if left over, written (bf16, same options), converted, removed
 *      again whatever happens.
 *   2. DST: the conversion's output; then, for nvfp4-ct, the rewrite.
 *   3. The summary: DST's files in name order, its tensors and shards as a checkpoint reads them.
 */
#define _XOPEN_SOURCE 700 /* nftw with FTW_DEPTH and FTW_PHYS */
#include "synth_internal.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/convert.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX ".synth-bf16.tmp"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Remove the temporary directory `dir` and everything in it (links are removed, not followed). */
static int remove_tree(const char *dir) {
    if (access(dir, F_OK) != 0)
        return NVF_OK;
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return nvf_error_set(NVF_E_IO, "cannot remove the temporary directory '%s': %s", dir,
                             strerror(errno));
    return NVF_OK;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The summary of DST: its regular files in name order, its tensors and shards. */
static int summarize(nvf_synth_summary *out, const char *dst) {
    nvf_synth_summary sum = {0};
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = NVF_OK;
    DIR *d = opendir(dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot read directory '%s': %s", dst, strerror(errno));
    struct dirent *e;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory for the file list");
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name)))
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the file list");
        else
            n++;
    }
    closedir(d);
    if (rc == NVF_OK)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; rc == NVF_OK && i < n; i++) {
        char *path = nvf_path_join(dst, names[i]);
        struct stat st;
        if (!path)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        else if (stat(path, &st) != 0)
            rc = nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path, strerror(errno));
        else if (S_ISREG(st.st_mode))
            rc = synth_summary_add(&sum, names[i], (uint64_t)st.st_size);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    nvf_ckpt *ck = NULL;
    if (rc == NVF_OK && (rc = nvf_ckpt_open(&ck, dst)) == NVF_OK) {
        sum.n_tensors = ck->n_tensors;
        sum.n_shards = (uint32_t)ck->n_files;
        sum.tensor_bytes = ck->data_bytes;
    }
    nvf_ckpt_close(ck);
    if (rc == NVF_OK && out)
        *out = sum;
    else
        nvf_synth_summary_free(&sum);
    return rc;
}

/* Convert the bf16 checkpoint `src` into `dst` with the default recipe on the CPU. */
static int convert_into(const char *src, const char *dst, const nvf_synth_options *opt) {
    nvf_recipe r;
    int rc = nvf_recipe_init(&r);
    if (rc != NVF_OK)
        return rc;
    nvf_convert_options o;
    nvf_convert_options_init(&o, src, dst, &r);
    o.threads = opt->threads;
    o.force = opt->force;
    o.stop = opt->stop;
    nvf_convert_summary s;
    rc = nvf_convert_run(&s, &o);
    nvf_recipe_free(&r);
    return rc;
}

/* Whether directory `dst` exists and holds anything. */
static int non_empty(const char *dst) {
    DIR *d = opendir(dst);
    if (!d)
        return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)) != NULL)
        found = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return found;
}

int synth_write_nvfp4(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt) {
    if (!opt->force && non_empty(dst))
        return nvf_error_set(NVF_E_INVALID, "'%s' is not empty (--force writes into it)", dst);
    /* The options are checked (and the bf16 plan made) before anything is written. */
    nvf_synth_plan *p = NULL;
    int rc = nvf_synth_plan_build(&p, opt);
    nvf_synth_plan_free(p);
    if (rc != NVF_OK)
        return rc;
    size_t len = strlen(dst);
    while (len > 1 && dst[len - 1] == '/')
        len--;
    char *tmp = malloc(len + sizeof TMP_SUFFIX);
    if (!tmp)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    memcpy(tmp, dst, len);
    memcpy(tmp + len, TMP_SUFFIX, sizeof TMP_SUFFIX);
    nvf_synth_options bf16 = *opt;
    bf16.dtype = NVF_SYNTH_DTYPE_BF16;
    bf16.force = 0;
    if ((rc = remove_tree(tmp)) == NVF_OK &&
        (rc = synth_write_plain(NULL, tmp, &bf16, opt->dtype)) == NVF_OK) {
        nvf_log(NVF_LOG_INFO, "synth: converting '%s' into '%s' (default recipe)", tmp, dst);
        rc = convert_into(tmp, dst, opt);
    }
    int rc_rm = remove_tree(tmp);
    free(tmp);
    if (rc == NVF_OK)
        rc = rc_rm;
    if (rc == NVF_OK && opt->dtype == NVF_SYNTH_DTYPE_NVFP4_CT)
        rc = synth_rewrite_ct(dst);
    if (rc == NVF_OK)
        rc = summarize(out, dst);
    return rc;
}
