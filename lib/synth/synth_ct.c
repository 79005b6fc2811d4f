/*
 * "nvfp4-ct": a ModelOpt NVFP4 checkpoint, as the conversion wrote it, rewritten in
 * compressed-tensors "nvfp4-pack-quantized" form (SPEC section 3) with the same values.
 *
 * Per NVFP4 linear M (a weight with a weight_scale_2), in each shard, in the shard's order:
 *   1. M.weight U8 [out, in/2] -> M.weight_packed, the same bytes (both pack element 2j in the
 *      low nibble);
 *   2. M.weight_scale F8_E4M3 [out, in/16]: unchanged;
 *   3. M.weight_scale_2 F32 [] (a decode scale d) -> M.weight_global_scale F32 [1] holding the
 *      encode scale gs with RN(1 / gs) == d bit for bit, so a reader that decodes with the
 *      reciprocal gets d back;
 *   4. M.input_scale -> M.input_global_scale F32 [1] the same way.
 * Every other tensor is copied. The index is written with the new names; config.json gets
 * compressed-tensors' quantization_config (the ModelOpt "ignore" list kept); hf_quant_config.json
 * and nvfp4-manifest.json, which describe the ModelOpt files, are removed.
 */
#include "synth_internal.h"

#include "ckpt/ckpt_docs.h"
#include "io/json_build.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/fileio.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The scheme of weights and activations: 4-bit floats in groups of 16 with a tensor-wide
 * global scale ("tensor_group"), as llm-compressor's NVFP4 preset writes it. */
static cJSON *fp4_scheme(nvf_jb *b, int activations) {
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_null(b, o, "actorder");
    nvf_jb_null(b, o, "block_structure");
    if (activations)
        nvf_jb_str(b, o, "dynamic", "local");
    else
        nvf_jb_bool(b, o, "dynamic", 0);
    nvf_jb_num(b, o, "group_size", 16);
    nvf_jb_num(b, o, "num_bits", 4);
    nvf_jb_str(b, o, "observer", "minmax");
    nvf_jb_str(b, o, "strategy", "tensor_group");
    nvf_jb_bool(b, o, "symmetric", 1);
    nvf_jb_str(b, o, "type", "float");
    return o;
}

static cJSON *ct_quant_config(const cJSON *modelopt_qc) {
    nvf_jb b = {0};
    cJSON *q = nvf_jb_take(&b, cJSON_CreateObject());
    cJSON *g0 = nvf_jb_obj(&b, nvf_jb_obj(&b, q, "config_groups"), "group_0");
    nvf_jb_put(&b, g0, "input_activations", fp4_scheme(&b, 1));
    nvf_jb_null(&b, g0, "output_activations");
    nvf_jb_push(&b, nvf_jb_arr(&b, g0, "targets"), cJSON_CreateString("Linear"));
    nvf_jb_put(&b, g0, "weights", fp4_scheme(&b, 0));
    nvf_jb_str(&b, q, "format", "nvfp4-pack-quantized");
    nvf_jb_null(&b, q, "global_compression_ratio");
    const cJSON *ignore = cJSON_GetObjectItemCaseSensitive(modelopt_qc, "ignore");
    nvf_jb_put(&b, q, "ignore",
               nvf_jb_take(&b, ignore ? cJSON_Duplicate(ignore, 1) : cJSON_CreateArray()));
    nvf_jb_null(&b, q, "kv_cache_scheme");
    nvf_jb_str(&b, q, "quant_method", "compressed-tensors");
    nvf_jb_str(&b, q, "quantization_status", "compressed");
    return nvf_jb_done(&b, q);
}

/* config.json of `ck` with compressed-tensors' quantization_config, written to dst. */
static int write_config(const nvf_ckpt *ck, const char *dst) {
    const cJSON *src = nvf_ckpt_config_doc(ck);
    if (!src)
        return nvf_error_set(NVF_E_FORMAT, "'%s' has no config.json to rewrite", dst);
    cJSON *doc = cJSON_Duplicate(src, 1);
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(src, "quantization_config");
    cJSON *ct = ct_quant_config(qc);
    int ok = doc && ct && cJSON_ReplaceItemInObjectCaseSensitive(doc, "quantization_config", ct);
    if (!ok)
        cJSON_Delete(ct);
    char *text = ok ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    char *path = nvf_path_join(dst, "config.json");
    int rc = NVF_OK;
    if (!text || !path) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for '%s/config.json'", dst);
    } else {
        size_t len = strlen(text);
        text[len] = '\n'; /* end with a newline, as the conversion writes it */
        rc = nvf_file_write_atomic(path, text, len + 1);
    }
    free(text);
    free(path);
    return rc;
}

/* The F32 scalar of tensor `i` as the encode scale whose reciprocal it is, into *out. */
static int global_scale_of(float *out, const nvf_ckpt *ck, size_t i) {
    const nvf_st_tensor *s = ck->tensors[i].st;
    const uint8_t *p = s->data;
    if (s->dtype != NVF_DTYPE_F32 || s->numel != 1 || !p)
        return nvf_error_set(NVF_E_FORMAT, "'%s' is not an F32 scalar", s->name);
    float d = nvf_f32_from_bits((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                                ((uint32_t)p[3] << 24));
    int rc = nvf_quant_global_scale_for_decode(out, d);
    return rc == NVF_OK ? rc : nvf_error_prefix("tensor '%s'", s->name);
}

/* Whether tensor `i` is the weight_scale_2 or input_scale of an NVFP4 linear. */
static int is_ct_scalar(const nvf_ckpt *ck, size_t i) {
    size_t w = ck->tensors[i].owner;
    if (ck->tensors[i].role != NVF_ROLE_SCALE || w == NVF_CKPT_NONE ||
        ck->tensors[w].scale_2 == NVF_CKPT_NONE)
        return 0;
    return ck->tensors[w].scale_2 == i || ck->tensors[w].input_scale == i;
}

/* Shard `f` rewritten; its tensors' new names go to names[k..] / files[k..] (advancing *k). */
static int rewrite_shard(const nvf_ckpt *ck, size_t f, char (*names)[SYNTH_NAME_MAX],
                         const char **files, size_t *k) {
    const nvf_st_file *st = ck->files[f].st;
    size_t n = st->n_tensors;
    nvf_st_entry *e = calloc(n ? n : 1, sizeof *e);
    const void **data = calloc(n ? n : 1, sizeof *data);
    float *scalars = calloc(n ? n : 1, sizeof *scalars);
    int rc = e && data && scalars ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t j = 0; rc == NVF_OK && j < n; j++) {
        const nvf_st_tensor *t = &st->tensors[j];
        size_t i = nvf_ckpt_find_index(ck, t->name);
        char *name = names[*k + j];
        int nvfp4 = ck->tensors[i].scale_2 != NVF_CKPT_NONE || is_ct_scalar(ck, i);
        if (strlen(t->name) >= SYNTH_NAME_MAX) {
            rc = nvf_error_set(NVF_E_INVALID, "tensor name '%.64s...' is too long", t->name);
            break;
        }
        if (!nvfp4)
            memcpy(name, t->name, strlen(t->name) + 1);
        else if ((rc = nvf_ckpt_ct_name(name, SYNTH_NAME_MAX, t->name)) < 0)
            break;
        rc = NVF_OK;
        e[j] = (nvf_st_entry){.name = name, .dtype = t->dtype, .ndim = t->ndim};
        memcpy(e[j].shape, t->shape, sizeof e[j].shape);
        data[j] = t->data;
        if (nvfp4 && is_ct_scalar(ck, i)) {
            rc = global_scale_of(&scalars[j], ck, i);
            e[j].ndim = 1;
            e[j].shape[0] = 1;
            data[j] = &scalars[j];
        }
        files[*k + j] = ck->files[f].name;
    }
    /* A new file renamed over the old one: the old mapping stays readable until closed. */
    if (rc == NVF_OK)
        rc = nvf_st_write_file(ck->files[f].path, e, data, n);
    if (rc == NVF_OK)
        *k += n;
    free(e);
    free(data);
    free(scalars);
    return rc;
}

static int remove_in(const char *dst, const char *name) {
    char *path = nvf_path_join(dst, name);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = NVF_OK;
    if (unlink(path) != 0 && errno != ENOENT)
        rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
    free(path);
    return rc;
}

int synth_rewrite_ct(const char *dst) {
    nvf_ckpt *ck = NULL;
    int rc = nvf_ckpt_open(&ck, dst);
    if (rc != NVF_OK)
        return rc;
    size_t n = ck->n_tensors, k = 0;
    char(*names)[SYNTH_NAME_MAX] = calloc(n ? n : 1, sizeof *names);
    const char **files = calloc(n ? n : 1, sizeof *files);
    const char **name_ptrs = calloc(n ? n : 1, sizeof *name_ptrs);
    if (!names || !files || !name_ptrs)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the tensor list");
    for (size_t f = 0; rc == NVF_OK && f < ck->n_files; f++)
        rc = rewrite_shard(ck, f, names, files, &k);
    char *index = rc == NVF_OK ? nvf_path_join(dst, "model.safetensors.index.json") : NULL;
    if (rc == NVF_OK && !index)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; rc == NVF_OK && i < k; i++)
        name_ptrs[i] = names[i];
    /* [] and [1] scalars hold the same 4 bytes: the data size does not change. */
    if (rc == NVF_OK)
        rc = nvf_st_index_write(index, ck->data_bytes, name_ptrs, files, k);
    if (rc == NVF_OK)
        rc = write_config(ck, dst);
    free(index);
    free(names);
    free(files);
    free(name_ptrs);
    nvf_ckpt_close(ck);
    if (rc == NVF_OK)
        rc = remove_in(dst, "hf_quant_config.json");
    if (rc == NVF_OK)
        rc = remove_in(dst, "nvfp4-manifest.json");
    return rc;
}
