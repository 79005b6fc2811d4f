/*
 * `inspect` of a prepared conversion with --ep N: DST holds no shards of its own, one rank
 * directory "rank-0000r-of-0000N/" per expert-parallel rank (each a checkpoint), and the manifest
 * over all of them. Prints the split and, per rank, its directory, expert range, files and
 * tensors, as each rank's config.json (read by lib/ckpt) records them.
 */
#include "cli.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The rank directories of `dir`, sorted; none when `dir` has shards or an index of its own. */
static int rank_dirs(char ***out, size_t *n, const char *dir) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NVF_OK; /* not a directory: inspect's own open reports it */
    struct dirent *e;
    size_t cap = 0;
    int own = 0, rc = NVF_OK;
    while ((e = readdir(d)) != NULL && rc == NVF_OK) {
        if (fnmatch("*.safetensors", e->d_name, 0) == 0 ||
            strcmp(e->d_name, "model.safetensors.index.json") == 0)
            own = 1;
        if (fnmatch("rank-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]", e->d_name, 0))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            char **g = realloc(*out, cap * sizeof *g);
            if (!g) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
                break;
            }
            *out = g;
        }
        if (!((*out)[*n] = strdup(e->d_name)))
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        else
            (*n)++;
    }
    closedir(d);
    if (rc == NVF_OK && own) {
        for (size_t i = 0; i < *n; i++)
            free((*out)[i]);
        *n = 0;
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_str);
    return rc;
}

int inspect_ranks(const char *dir, int json, int *handled) {
    char **names = NULL;
    size_t n = 0;
    *handled = 0;
    int st = rank_dirs(&names, &n, dir);
    if (st != NVF_OK || n == 0) {
        free(names);
        return st == NVF_OK ? EXIT_OK : cli_fail("inspect", st);
    }
    *handled = 1;
    cJSON *doc = json ? cJSON_CreateObject() : NULL, *ranks = NULL;
    if (json) {
        cJSON_AddStringToObject(doc, "checkpoint", dir);
        cJSON_AddStringToObject(doc, "format", nvf_ckpt_format_name(NVF_CKPT_FORMAT_PREPARED));
        cJSON_AddNumberToObject(doc, "ep_size", (double)n);
        ranks = cJSON_AddArrayToObject(doc, "ranks");
    } else {
        printf("Checkpoint: %s\nFormat: prepared, expert-parallel: %zu ranks\n", dir, n);
    }
    int rc = EXIT_OK;
    for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
        char *path = nvf_path_join(dir, names[i]);
        nvf_ckpt *ck = NULL;
        st = path ? nvf_ckpt_open(&ck, path) : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (st == NVF_OK && ck->quant.format != NVF_CKPT_FORMAT_PREPARED)
            st = nvf_error_set(NVF_E_FORMAT, "'%s' is not a prepared checkpoint (format %s)", path,
                               nvf_ckpt_format_name(ck->quant.format));
        if (st != NVF_OK) {
            rc = cli_fail("inspect", st);
        } else {
            const nvf_ckpt_quant *q = &ck->quant;
            if (i == 0 && !json)
                printf("Target: prepared-%s, layout %s, scale layout %s, precision %s\n",
                       q->prep_precision, q->prep_layout, q->prep_scale_layout, q->prep_precision);
            if (json) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "dir", names[i]);
                cJSON_AddNumberToObject(o, "rank", (double)q->ep_rank);
                cJSON_AddStringToObject(o, "precision", q->prep_precision);
                cJSON_AddStringToObject(o, "layout", q->prep_layout);
                cJSON_AddStringToObject(o, "scale_layout", q->prep_scale_layout);
                cJSON *r = cJSON_AddArrayToObject(o, "expert_range");
                cJSON_AddItemToArray(r, cJSON_CreateNumber((double)q->expert_first));
                cJSON_AddItemToArray(r, cJSON_CreateNumber((double)q->expert_count));
                cJSON_AddNumberToObject(o, "files", (double)ck->n_files);
                cJSON_AddNumberToObject(o, "tensors", (double)ck->n_tensors);
                cJSON_AddItemToArray(ranks, o);
            } else {
                printf("  rank %" PRId64 " of %" PRId64 ": %s/  experts %" PRId64 "..%" PRId64
                       " (%" PRId64 "), %zu files, %zu tensors, %" PRIu64 " bytes\n",
                       q->ep_rank, q->ep_size, names[i], q->expert_first,
                       q->expert_first + q->expert_count - 1, q->expert_count, ck->n_files,
                       ck->n_tensors, ck->data_bytes);
            }
        }
        nvf_ckpt_close(ck);
        free(path);
    }
    if (json && rc == EXIT_OK)
        rc = cli_print_json("inspect", doc);
    cJSON_Delete(doc);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}
