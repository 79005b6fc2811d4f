/*
 * Opening a checkpoint: config files, the index or the directory listing, the shards, and the
 * agreement between the index and the shards (SPEC sections 3 and 8).
 */
#include "ckpt_internal.h"

#include "io/json_strict.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME "model.safetensors.index.json"
/* config.json files are a few kB; this only stops a runaway read. */
#define CONFIG_MAX_BYTES ((size_t)64 << 20)

/* Read a JSON object file; a missing file leaves *out NULL. */
static int read_json_object(cJSON **out, const char *dir, const char *name) {
    *out = NULL;
    char *path = nvf_path_join(dir, name);
    char *text = NULL;
    size_t len = 0;
    int rc = NVF_OK;
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    if (!nvf_path_is_file(path))
        goto done;
    rc = nvf_file_read_all(&text, &len, path, CONFIG_MAX_BYTES);
    if (rc != NVF_OK)
        goto done;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j && nvf_json_syntax_ok(text, len, 1)) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to read '%s'", path);
        goto done;
    }
    if (!j) {
        const char *err = cJSON_GetErrorPtr();
        size_t at = err && err >= text && err <= text + len ? (size_t)(err - text) : 0;
        rc = nvf_error_set(NVF_E_FORMAT, "invalid JSON file '%s': parse error near byte %zu", path,
                           at);
        goto done;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        rc = nvf_error_set(NVF_E_FORMAT, "invalid JSON file '%s': not a JSON object", path);
        goto done;
    }
    *out = j;
done:
    free(text);
    free(path);
    return rc;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.safetensors regular files of `dir`, sorted. */
static int list_shards(char ***out, size_t *out_n, const char *dir) {
    char **names = NULL;
    size_t n = 0;
    int rc = NVF_OK;
    DIR *d = opendir(dir);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot open checkpoint directory '%s': %s", dir,
                             strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !ckpt_ends_with(e->d_name, ".safetensors"))
            continue;
        char *p = nvf_path_join(dir, e->d_name);
        int is_file = p && nvf_path_is_file(p);
        free(p);
        if (!is_file)
            continue;
        char **grown = realloc(names, (n + 1) * sizeof *grown);
        if (!grown || !(grown[n] = strdup(e->d_name))) {
            names = grown ? grown : names;
            rc = nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", dir);
            goto done;
        }
        names = grown;
        n++;
    }
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_str_ptr);
done:
    closedir(d);
    if (rc != NVF_OK) {
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return rc;
    }
    *out = names;
    *out_n = n;
    return NVF_OK;
}

static int add_file(nvf_ckpt *ck, const char *name, const char *path) {
    nvf_ckpt_file *f = &ck->files[ck->n_files];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    f->path = strdup(path);
    if (!f->name || !f->path) {
        free(f->name);
        free(f->path);
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    ck->n_files++;
    int rc = nvf_st_open(&f->st, path);
    if (rc != NVF_OK)
        return rc;
    f->bytes = f->st->file_size;
    return NVF_OK;
}

/* First tensor the index maps to `file`, for messages. */
static const char *index_first_tensor(const nvf_st_index *idx, const char *file) {
    for (size_t i = 0; i < idx->n; i++) {
        if (strcmp(idx->files[i], file) == 0)
            return idx->names[i];
    }
    return "?";
}

/* The shards of a directory: those the index names, or every *.safetensors file. The index,
 * if any, is returned in *out_idx for the cross-check once the tensors are collected. */
static int open_dir_shards(nvf_ckpt *ck, nvf_st_index **out_idx) {
    int rc = NVF_OK;
    char **listed = NULL;
    size_t n_listed = 0;
    nvf_st_index *idx = NULL;
    *out_idx = NULL;
    char *index_path = nvf_path_join(ck->dir, INDEX_NAME);
    if (!index_path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    rc = list_shards(&listed, &n_listed, ck->dir);
    if (rc != NVF_OK)
        goto done;
    if (nvf_path_is_file(index_path)) {
        rc = nvf_st_index_read(&idx, index_path);
        if (rc != NVF_OK)
            goto done;
        ck->index_name = strdup(INDEX_NAME);
        ck->index_total_size = idx->total_size;
        ck->files = calloc(idx->n_files ? idx->n_files : 1, sizeof *ck->files);
        if (!ck->index_name || !ck->files) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            goto done;
        }
        for (size_t i = 0; i < idx->n_files; i++) {
            char *p = nvf_path_join(ck->dir, idx->file_list[i]);
            if (!p) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
                goto done;
            }
            if (!nvf_path_is_file(p)) {
                rc = nvf_error_set(NVF_E_FORMAT,
                                   "index '%s' maps tensor '%s' to shard '%s', which does not "
                                   "exist",
                                   index_path, index_first_tensor(idx, idx->file_list[i]), p);
                free(p);
                goto done;
            }
            rc = add_file(ck, idx->file_list[i], p);
            free(p);
            if (rc != NVF_OK)
                goto done;
        }
        for (size_t i = 0; i < n_listed; i++) {
            if (idx->n_files == 0 ||
                !bsearch(&listed[i], idx->file_list, idx->n_files, sizeof(char *), cmp_str_ptr)) {
                rc = ckpt_warn(ck, "file '%s' is not named by the index; ignored", listed[i]);
                if (rc != NVF_OK)
                    goto done;
            }
        }
    } else {
        if (n_listed == 0) {
            rc = nvf_error_set(NVF_E_FORMAT, "checkpoint directory '%s' holds no .safetensors file",
                               ck->dir);
            goto done;
        }
        ck->files = calloc(n_listed, sizeof *ck->files);
        if (!ck->files) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            goto done;
        }
        for (size_t i = 0; i < n_listed; i++) {
            char *p = nvf_path_join(ck->dir, listed[i]);
            if (!p) {
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
                goto done;
            }
            rc = add_file(ck, listed[i], p);
            free(p);
            if (rc != NVF_OK)
                goto done;
        }
    }
    *out_idx = idx;
    idx = NULL;
done:
    for (size_t i = 0; i < n_listed; i++)
        free(listed[i]);
    free(listed);
    free(index_path);
    nvf_st_index_free(idx);
    return rc;
}

static int cmp_tensor_name(const void *a, const void *b) {
    const nvf_ckpt_tensor *x = a, *y = b;
    return strcmp(x->st->name, y->st->name);
}

static int collect_tensors(nvf_ckpt *ck) {
    size_t total = 0;
    for (size_t i = 0; i < ck->n_files; i++)
        total += ck->files[i].st->n_tensors;
    ck->tensors = calloc(total ? total : 1, sizeof *ck->tensors);
    if (!ck->tensors)
        return nvf_error_set(NVF_E_NOMEM, "no memory for %zu tensors", total);
    for (size_t i = 0; i < ck->n_files; i++) {
        const nvf_st_file *st = ck->files[i].st;
        for (size_t k = 0; k < st->n_tensors; k++) {
            nvf_ckpt_tensor *t = &ck->tensors[ck->n_tensors++];
            t->st = &st->tensors[k];
            t->file = i;
            t->scale = t->scale_2 = t->input_scale = t->owner = NVF_CKPT_NONE;
            ck->data_bytes += st->tensors[k].end - st->tensors[k].begin;
        }
    }
    if (ck->n_tensors > 1)
        qsort(ck->tensors, ck->n_tensors, sizeof *ck->tensors, cmp_tensor_name);
    for (size_t i = 1; i < ck->n_tensors; i++) {
        if (strcmp(ck->tensors[i - 1].st->name, ck->tensors[i].st->name) == 0)
            return nvf_error_set(NVF_E_FORMAT, "tensor '%s' is in both '%s' and '%s'",
                                 ck->tensors[i].st->name, ck->files[ck->tensors[i - 1].file].path,
                                 ck->files[ck->tensors[i].file].path);
    }
    return NVF_OK;
}

/* Every index entry is in the shard it names, every shard tensor is in the index. */
static int check_index(nvf_ckpt *ck, const nvf_st_index *idx) {
    char *index_path = nvf_path_join(ck->dir, ck->index_name);
    if (!index_path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = NVF_OK;
    for (size_t i = 0; i < idx->n; i++) {
        const nvf_ckpt_tensor *t = nvf_ckpt_find(ck, idx->names[i]);
        if (!t) {
            rc = nvf_error_set(NVF_E_FORMAT,
                               "index '%s' maps tensor '%s' to '%s', which does not hold it",
                               index_path, idx->names[i], idx->files[i]);
            goto done;
        }
        if (strcmp(ck->files[t->file].name, idx->files[i]) != 0) {
            rc =
                nvf_error_set(NVF_E_FORMAT, "index '%s' maps tensor '%s' to '%s' but it is in '%s'",
                              index_path, idx->names[i], idx->files[i], ck->files[t->file].name);
            goto done;
        }
    }
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const char *name = ck->tensors[i].st->name;
        if (!nvf_st_index_file(idx, name)) {
            rc = nvf_error_set(NVF_E_FORMAT, "tensor '%s' of shard '%s' is not in the index '%s'",
                               name, ck->files[ck->tensors[i].file].path, index_path);
            goto done;
        }
    }
    if (idx->total_size != 0 && idx->total_size != ck->data_bytes)
        rc = ckpt_warn(
            ck, "index metadata.total_size is %" PRIu64 " but the tensors hold %" PRIu64 " bytes",
            idx->total_size, ck->data_bytes);
done:
    free(index_path);
    return rc;
}

static int set_dir_of_file(nvf_ckpt *ck, const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        ck->dir = strdup(".");
    else if (slash == path)
        ck->dir = strdup("/");
    else
        ck->dir = strndup(path, (size_t)(slash - path));
    return ck->dir ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
}

int nvf_ckpt_open(nvf_ckpt **out, const char *path) {
    return nvf_ckpt_open_fp8_block(out, path, NULL);
}

int nvf_ckpt_open_fp8_block(nvf_ckpt **out, const char *path, const int64_t *block) {
    *out = NULL;
    nvf_ckpt_priv *priv = calloc(1, sizeof *priv);
    if (!priv)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    nvf_ckpt *ck = &priv->pub;
    if (block && block[0] > 0 && block[1] > 0) {
        ck->quant.block[0] = block[0];
        ck->quant.block[1] = block[1];
    }
    int rc = NVF_OK;
    nvf_st_index *idx = NULL;
    struct stat st;
    ck->path = strdup(path);
    if (!ck->path) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        goto done;
    }
    if (stat(path, &st) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot open checkpoint '%s': %s", path, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        ck->dir = strdup(path);
        if (!ck->dir) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            goto done;
        }
        rc = read_json_object(&priv->config, ck->dir, "config.json");
        if (rc == NVF_OK)
            rc = read_json_object(&priv->hf_quant_config, ck->dir, "hf_quant_config.json");
        if (rc == NVF_OK)
            rc = open_dir_shards(ck, &idx);
    } else if (S_ISREG(st.st_mode)) {
        ck->is_file = 1;
        rc = set_dir_of_file(ck, path);
        if (rc == NVF_OK) {
            ck->files = calloc(1, sizeof *ck->files);
            if (!ck->files)
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        }
        if (rc == NVF_OK) {
            const char *slash = strrchr(path, '/');
            rc = add_file(ck, slash ? slash + 1 : path, path);
        }
    } else {
        rc = nvf_error_set(NVF_E_IO, "checkpoint '%s' is neither a directory nor a file", path);
    }
    if (rc == NVF_OK)
        rc = collect_tensors(ck);
    if (rc == NVF_OK && idx)
        rc = check_index(ck, idx);
    if (rc == NVF_OK)
        rc = ckpt_detect_format(ck);
    if (rc == NVF_OK)
        rc = ckpt_discover_moe(ck);
done:
    nvf_st_index_free(idx);
    if (rc != NVF_OK) {
        nvf_ckpt_close(ck);
        return rc;
    }
    *out = ck;
    return NVF_OK;
}

void nvf_ckpt_close(nvf_ckpt *ck) {
    if (!ck)
        return;
    for (size_t i = 0; i < ck->n_files; i++) {
        nvf_st_close(ck->files[i].st);
        free(ck->files[i].name);
        free(ck->files[i].path);
    }
    free(ck->files);
    free(ck->tensors);
    nvf_ckpt_priv *priv = (nvf_ckpt_priv *)ck;
    cJSON_Delete(priv->config);
    cJSON_Delete(priv->hf_quant_config);
    ckpt_quant_free(&ck->quant);
    ckpt_moe_free(&ck->moe);
    for (size_t i = 0; i < ck->n_warnings; i++)
        free(ck->warnings[i]);
    free(ck->warnings);
    free(ck->index_name);
    free(ck->dir);
    free(ck->path);
    free(priv);
}

int nvf_ckpt_config_json(char **out, const nvf_ckpt *ck, const char *key) {
    *out = NULL;
    const cJSON *cfg = nvf_ckpt_config_doc(ck);
    const cJSON *v = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, key) : NULL;
    if (!v)
        return NVF_OK;
    *out = cJSON_PrintUnformatted(v);
    return *out ? NVF_OK
                : nvf_error_set(NVF_E_NOMEM, "no memory to print '%s' of '%s/config.json'", key,
                                ck->dir);
}
