/*
 * Tensor roles, scale companions and format detection (SPEC section 3).
 *
 * Where the format is read from, first match wins:
 *   1. config.json `quantization_config.quant_method`: "fp8" (FP8 block, `weight_block_size`
 *      default [128, 128], `scale_fmt` "ue8m0" for power-of-two scales), "modelopt"
 *      (`quant_algo` NVFP4 / FP8), "compressed-tensors" (`config_groups.*.weights`: 4-bit
 *      float = NVFP4; 8-bit float with `strategy: block` = FP8 block, `block_structure` the
 *      block and `weight_scale` the block scale; other 8-bit float = FP8 per tensor),
 *      "nvfp4tool-prepared" (this tool's prepared targets: layout, precision, scale_layout,
 *      ep_size, ep_rank, expert_range).
 *   2. hf_quant_config.json `quantization.quant_algo` (ModelOpt).
 *   3. Tensor names: `*_scale_inv` (FP8 block), `weight_packed` + `weight_global_scale`
 *      (NVFP4 compressed-tensors), `weight_scale_2` (NVFP4 ModelOpt), an F8_E4M3 weight with a
 *      scalar `weight_scale` (FP8 per tensor).
 *   4. The dtype most linear weights have: BF16, F16 or F32.
 */
#include "ckpt_internal.h"

#include "nvfp4/status.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *nvf_ckpt_format_name(nvf_ckpt_format format) {
    switch (format) {
    case NVF_CKPT_FORMAT_UNKNOWN:
        return "unknown";
    case NVF_CKPT_FORMAT_BF16:
        return "bf16";
    case NVF_CKPT_FORMAT_F16:
        return "f16";
    case NVF_CKPT_FORMAT_F32:
        return "f32";
    case NVF_CKPT_FORMAT_FP8_BLOCK:
        return "fp8-block";
    case NVF_CKPT_FORMAT_FP8_TENSOR:
        return "fp8-tensor";
    case NVF_CKPT_FORMAT_NVFP4_MODELOPT:
        return "nvfp4-modelopt";
    case NVF_CKPT_FORMAT_NVFP4_CT:
        return "nvfp4-compressed-tensors";
    case NVF_CKPT_FORMAT_PREPARED:
        return "nvfp4-prepared";
    }
    return "unknown";
}

const char *nvf_ckpt_role_name(nvf_ckpt_role role) {
    static const char *const names[NVF_ROLE_COUNT] = {
        [NVF_ROLE_OTHER] = "other",
        [NVF_ROLE_EXPERT_WEIGHT] = "expert_weight",
        [NVF_ROLE_ROUTER] = "router",
        [NVF_ROLE_ROUTER_BIAS] = "router_bias",
        [NVF_ROLE_SHARED_EXPERT] = "shared_expert",
        [NVF_ROLE_SHARED_EXPERT_GATE] = "shared_expert_gate",
        [NVF_ROLE_DENSE_MLP] = "dense_mlp",
        [NVF_ROLE_ATTENTION] = "attention",
        [NVF_ROLE_NORM] = "norm",
        [NVF_ROLE_EMBEDDING] = "embedding",
        [NVF_ROLE_LM_HEAD] = "lm_head",
        [NVF_ROLE_SCALE] = "scale",
        [NVF_ROLE_BIAS] = "bias",
    };
    if ((unsigned)role >= NVF_ROLE_COUNT)
        return "other";
    return names[role];
}

/* Link each scale to its weight: W_scale_inv -> W; P.weight_scale -> P.weight, ... */
static int link_companions(nvf_ckpt *ck) {
    char buf[1024];
    for (size_t i = 0; i < ck->n_tensors; i++) {
        nvf_ckpt_tensor *t = &ck->tensors[i];
        if (t->role != NVF_ROLE_SCALE)
            continue;
        const char *name = t->st->name;
        size_t w = NVF_CKPT_NONE;
        nvf_companion slot = NVF_COMPANION_NONE;
        for (int alt = 0; w == NVF_CKPT_NONE; alt++) {
            slot = nvf_ckpt_companion(buf, sizeof buf, name, alt);
            if (buf[0] == '\0')
                break;
            w = nvf_ckpt_find_index(ck, buf);
        }
        if (w == NVF_CKPT_NONE) {
            /* A block scale must have its weight; a ModelOpt-style one may name a module. */
            int rc = NVF_OK;
            if (nvf_ckpt_is_scale_inv(name))
                rc = ckpt_warn(ck, "scale tensor '%s' has no weight '%.*s'", name,
                               (int)(strlen(name) - strlen("_scale_inv")), name);
            if (rc != NVF_OK)
                return rc;
            continue;
        }
        t->owner = w;
        if (slot == NVF_COMPANION_SCALE)
            ck->tensors[w].scale = i;
        else if (slot == NVF_COMPANION_SCALE_2)
            ck->tensors[w].scale_2 = i;
        else if (slot == NVF_COMPANION_INPUT)
            ck->tensors[w].input_scale = i;
    }
    return NVF_OK;
}

static char *dup_string(const cJSON *v) {
    return cJSON_IsString(v) && v->valuestring ? strdup(v->valuestring) : NULL;
}

static int add_ignore(nvf_ckpt_quant *q, const cJSON *list) {
    if (!cJSON_IsArray(list))
        return NVF_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (!cJSON_IsString(e))
            continue;
        char **grown = realloc(q->ignore, (q->n_ignore + 1) * sizeof *grown);
        if (!grown)
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        q->ignore = grown;
        if (!(grown[q->n_ignore] = strdup(e->valuestring)))
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        q->n_ignore++;
    }
    return NVF_OK;
}

static int add_ignore_lists(nvf_ckpt_quant *q, const cJSON *obj) {
    static const char *const keys[] = {"modules_to_not_convert", "ignored_layers", "ignore",
                                       "exclude_modules"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int rc = add_ignore(q, cJSON_GetObjectItemCaseSensitive(obj, keys[i]));
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

static int json_pos_int(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9 ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return 0;
    *out = (int64_t)v->valuedouble;
    return 1;
}

static nvf_ckpt_format modelopt_algo(const char *algo) {
    if (!algo)
        return NVF_CKPT_FORMAT_UNKNOWN;
    if (strcmp(algo, "NVFP4") == 0 || strcmp(algo, "MIXED_PRECISION") == 0)
        return NVF_CKPT_FORMAT_NVFP4_MODELOPT;
    if (strcmp(algo, "FP8") == 0)
        return NVF_CKPT_FORMAT_FP8_TENSOR;
    return NVF_CKPT_FORMAT_UNKNOWN;
}

/* compressed-tensors: the weights scheme of the first config group with float weights. 8-bit
 * weights with `strategy: "block"` are FP8 block (the block from `block_structure`, default
 * [128, 128]; `weight_scale` is then the block scale), other 8-bit ones FP8 per tensor. */
static nvf_ckpt_format ct_format(nvf_ckpt_quant *q, const cJSON *qc) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(qc, "format");
    const cJSON *ga;
    cJSON_ArrayForEach(ga, cJSON_GetObjectItemCaseSensitive(qc, "config_groups")) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(ga, "input_activations");
        const cJSON *ib = cJSON_GetObjectItemCaseSensitive(in, "num_bits");
        if (cJSON_IsNumber(ib) && ib->valuedouble == 4)
            q->ct_input_activations = 1;
    }
    if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, "nvfp4-pack-quantized") == 0)
        return NVF_CKPT_FORMAT_NVFP4_CT;
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(qc, "config_groups");
    const cJSON *g;
    cJSON_ArrayForEach(g, groups) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "weights");
        const cJSON *bits = cJSON_GetObjectItemCaseSensitive(w, "num_bits");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(w, "type");
        if (!cJSON_IsNumber(bits) || !cJSON_IsString(type) || strcmp(type->valuestring, "float"))
            continue;
        if (bits->valuedouble == 4)
            return NVF_CKPT_FORMAT_NVFP4_CT;
        if (bits->valuedouble != 8)
            continue;
        const cJSON *strategy = cJSON_GetObjectItemCaseSensitive(w, "strategy");
        if (!cJSON_IsString(strategy) || strcmp(strategy->valuestring, "block") != 0)
            return NVF_CKPT_FORMAT_FP8_TENSOR;
        const cJSON *bs = cJSON_GetObjectItemCaseSensitive(w, "block_structure");
        int64_t b0 = 128, b1 = 128;
        if (cJSON_GetArraySize(bs) != 2 || !json_pos_int(cJSON_GetArrayItem(bs, 0), &b0) ||
            !json_pos_int(cJSON_GetArrayItem(bs, 1), &b1))
            b0 = b1 = 128;
        q->block[0] = b0;
        q->block[1] = b1;
        return NVF_CKPT_FORMAT_FP8_BLOCK;
    }
    return NVF_CKPT_FORMAT_UNKNOWN;
}

static void copy_string(char *dst, size_t cap, const cJSON *v) {
    if (cJSON_IsString(v))
        snprintf(dst, cap, "%s", v->valuestring);
}

static int64_t int_or(const cJSON *v, int64_t dflt) {
    int64_t x;
    return json_pos_int(v, &x) ? x : cJSON_IsNumber(v) && v->valuedouble == 0 ? 0 : dflt;
}

/* A prepared checkpoint's layout, precision and expert-parallel rank. */
static void prepared_info(nvf_ckpt_quant *q, const cJSON *qc) {
    copy_string(q->prep_layout, sizeof q->prep_layout,
                cJSON_GetObjectItemCaseSensitive(qc, "layout"));
    copy_string(q->prep_precision, sizeof q->prep_precision,
                cJSON_GetObjectItemCaseSensitive(qc, "precision"));
    copy_string(q->prep_scale_layout, sizeof q->prep_scale_layout,
                cJSON_GetObjectItemCaseSensitive(qc, "scale_layout"));
    q->ep_size = int_or(cJSON_GetObjectItemCaseSensitive(qc, "ep_size"), -1);
    q->ep_rank = int_or(cJSON_GetObjectItemCaseSensitive(qc, "ep_rank"), -1);
    q->expert_first = q->expert_count = -1;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(qc, "expert_range");
    if (cJSON_IsArray(r) && cJSON_GetArraySize(r) == 2) {
        q->expert_first = int_or(cJSON_GetArrayItem(r, 0), -1);
        q->expert_count = int_or(cJSON_GetArrayItem(r, 1), -1);
    }
}

static int from_config(nvf_ckpt *ck) {
    nvf_ckpt_quant *q = &ck->quant;
    const cJSON *cfg = nvf_ckpt_config_doc(ck);
    const cJSON *qc = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config") : NULL;
    int rc = NVF_OK;
    if (cJSON_IsObject(qc)) {
        q->source = "config.json";
        q->quant_method = dup_string(cJSON_GetObjectItemCaseSensitive(qc, "quant_method"));
        q->quant_algo = dup_string(cJSON_GetObjectItemCaseSensitive(qc, "quant_algo"));
        rc = add_ignore_lists(q, qc);
        if (rc != NVF_OK)
            return rc;
        const char *m = q->quant_method ? q->quant_method : "";
        if (strcmp(m, "fp8") == 0) {
            q->format = NVF_CKPT_FORMAT_FP8_BLOCK;
            q->block[0] = q->block[1] = 128;
            const cJSON *bs = cJSON_GetObjectItemCaseSensitive(qc, "weight_block_size");
            if (cJSON_IsArray(bs)) {
                int64_t b0, b1;
                if (cJSON_GetArraySize(bs) == 2 && json_pos_int(cJSON_GetArrayItem(bs, 0), &b0) &&
                    json_pos_int(cJSON_GetArrayItem(bs, 1), &b1)) {
                    q->block[0] = b0;
                    q->block[1] = b1;
                } else {
                    return nvf_error_set(NVF_E_FORMAT,
                                         "invalid config '%s/config.json': "
                                         "quantization_config.weight_block_size is not two "
                                         "positive integers",
                                         ck->dir);
                }
            }
            const cJSON *sf = cJSON_GetObjectItemCaseSensitive(qc, "scale_fmt");
            q->scale_ue8m0 = cJSON_IsString(sf) && strcmp(sf->valuestring, "ue8m0") == 0;
            const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(qc, "fmt");
            if (cJSON_IsString(fmt) && strcmp(fmt->valuestring, "e4m3") != 0)
                rc = ckpt_warn(ck, "quantization_config.fmt '%s' is not supported (e4m3 is)",
                               fmt->valuestring);
        } else if (strcmp(m, "modelopt") == 0) {
            const char *algo = q->quant_algo;
            const cJSON *inner = cJSON_GetObjectItemCaseSensitive(qc, "quantization");
            if (!algo && cJSON_IsObject(inner)) {
                q->quant_algo = dup_string(cJSON_GetObjectItemCaseSensitive(inner, "quant_algo"));
                algo = q->quant_algo;
                rc = add_ignore_lists(q, inner);
            }
            q->format = modelopt_algo(algo);
        } else if (strcmp(m, "compressed-tensors") == 0) {
            q->format = ct_format(q, qc);
        } else if (strcmp(m, "nvfp4tool-prepared") == 0) {
            q->format = NVF_CKPT_FORMAT_PREPARED;
            prepared_info(q, qc);
        }
        if (rc == NVF_OK && q->format == NVF_CKPT_FORMAT_UNKNOWN)
            rc = ckpt_warn(ck,
                           "quantization_config (quant_method '%s', quant_algo '%s') is not "
                           "a format this tool reads",
                           m, q->quant_algo ? q->quant_algo : "");
        return rc;
    }
    /* Not an object (an array, a string): no quantization is read from it, said once. */
    if (qc && !cJSON_IsNull(qc) &&
        (rc = ckpt_config_warn_type(ck, "quantization_config", qc, "an object")) != NVF_OK)
        return rc;
    const cJSON *hqc = nvf_ckpt_hf_quant_config_doc(ck);
    const cJSON *hq = hqc ? cJSON_GetObjectItemCaseSensitive(hqc, "quantization") : NULL;
    if (cJSON_IsObject(hq)) {
        q->source = "hf_quant_config.json";
        q->quant_method = strdup("modelopt");
        q->quant_algo = dup_string(cJSON_GetObjectItemCaseSensitive(hq, "quant_algo"));
        if (!q->quant_method)
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        rc = add_ignore_lists(q, hq);
        q->format = modelopt_algo(q->quant_algo);
        if (rc == NVF_OK && q->format == NVF_CKPT_FORMAT_UNKNOWN)
            rc = ckpt_warn(ck,
                           "hf_quant_config.json quant_algo '%s' is not a format this tool "
                           "reads",
                           q->quant_algo ? q->quant_algo : "");
    }
    return rc;
}

typedef struct name_evidence {
    size_t scale_inv, scale_2, packed_global, fp8_scalar_scale, fp8_weights;
    size_t n_bf16, n_f16, n_f32;
} name_evidence;

static void gather_evidence(const nvf_ckpt *ck, name_evidence *ev) {
    memset(ev, 0, sizeof *ev);
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        const char *name = t->st->name;
        char weight[8];
        nvf_companion slot = nvf_ckpt_companion(weight, sizeof weight, name, 0);
        if (nvf_ckpt_is_scale_inv(name))
            ev->scale_inv++;
        else if (slot == NVF_COMPANION_SCALE_2 && ckpt_ends_with(name, "weight_scale_2"))
            ev->scale_2++;
        else if (slot == NVF_COMPANION_SCALE_2)
            ev->packed_global++;
        if (!t->is_weight)
            continue;
        if (t->st->dtype == NVF_DTYPE_F8_E4M3) {
            ev->fp8_weights++;
            if (t->scale != NVF_CKPT_NONE && ck->tensors[t->scale].st->numel == 1 &&
                !nvf_ckpt_is_scale_inv(ck->tensors[t->scale].st->name))
                ev->fp8_scalar_scale++;
        }
        ev->n_bf16 += t->st->dtype == NVF_DTYPE_BF16;
        ev->n_f16 += t->st->dtype == NVF_DTYPE_F16;
        ev->n_f32 += t->st->dtype == NVF_DTYPE_F32;
    }
}

static void from_evidence(nvf_ckpt_quant *q, const name_evidence *ev) {
    if (ev->scale_inv > 0) {
        q->format = NVF_CKPT_FORMAT_FP8_BLOCK;
        if (q->block[0] <= 0) /* not given to nvf_ckpt_open_fp8_block */
            q->block[0] = q->block[1] = 128;
        q->source = "tensor names";
    } else if (ev->packed_global > 0) {
        q->format = NVF_CKPT_FORMAT_NVFP4_CT;
        q->source = "tensor names";
    } else if (ev->scale_2 > 0) {
        q->format = NVF_CKPT_FORMAT_NVFP4_MODELOPT;
        q->source = "tensor names";
    } else if (ev->fp8_scalar_scale > 0) {
        q->format = NVF_CKPT_FORMAT_FP8_TENSOR;
        q->source = "tensor names";
    } else if (ev->n_bf16 + ev->n_f16 + ev->n_f32 > 0) {
        q->source = "tensor dtypes";
        if (ev->n_bf16 >= ev->n_f16 && ev->n_bf16 >= ev->n_f32)
            q->format = NVF_CKPT_FORMAT_BF16;
        else if (ev->n_f16 >= ev->n_f32)
            q->format = NVF_CKPT_FORMAT_F16;
        else
            q->format = NVF_CKPT_FORMAT_F32;
    }
}

static uint64_t ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

int nvf_ckpt_check_fp8_scale(const char *file, const nvf_st_tensor *weight,
                             const nvf_st_tensor *scale, int64_t b0, int64_t b1) {
    const char *name = weight->name;
    if (!scale)
        return nvf_error_set(NVF_E_FORMAT,
                             "FP8 weight '%s' in '%s' has no scale tensor "
                             "'%s_scale_inv'",
                             name, file, name);
    char wshape[160], sshape[160];
    ckpt_shape_str(wshape, sizeof wshape, weight->shape, weight->ndim);
    ckpt_shape_str(sshape, sizeof sshape, scale->shape, scale->ndim);
    if (weight->ndim < 2)
        return nvf_error_set(NVF_E_SHAPE,
                             "FP8 weight '%s' in '%s' has shape %s; block scaling needs "
                             "at least 2 dimensions",
                             name, file, wshape);
    if (scale->dtype != NVF_DTYPE_F32 && scale->dtype != NVF_DTYPE_BF16 &&
        scale->dtype != NVF_DTYPE_F16 && scale->dtype != NVF_DTYPE_F8_E8M0)
        return nvf_error_set(NVF_E_FORMAT,
                             "scale tensor '%s' of FP8 weight '%s' in '%s' has dtype %s; "
                             "expected F32",
                             scale->name, name, file, nvf_dtype_name(scale->dtype));
    if (b0 <= 0 || b1 <= 0)
        return nvf_error_set(NVF_E_INVALID, "FP8 block size %" PRId64 "x%" PRId64 " for '%s'", b0,
                             b1, name);
    uint64_t rows = (uint64_t)weight->shape[weight->ndim - 2];
    uint64_t cols = (uint64_t)weight->shape[weight->ndim - 1];
    uint64_t per = ceil_div(rows, (uint64_t)b0) * ceil_div(cols, (uint64_t)b1);
    /* The leading dimensions' product, without dividing by a zero-sized matrix; numel fits 64
     * bits (the reader checked), so lead * per does too. */
    uint64_t lead = 1;
    for (int32_t d = 0; d + 2 < weight->ndim; d++)
        lead *= (uint64_t)weight->shape[d];
    uint64_t want = rows && cols ? lead * per : 0;
    if (scale->numel != want)
        return nvf_error_set(NVF_E_SHAPE,
                             "scale tensor '%s' has shape %s (%" PRIu64
                             " elements) but weight '%s' of shape %s with %" PRId64 "x%" PRId64
                             " blocks needs %" PRIu64 " (ceil(%" PRIu64 "/%" PRId64
                             ")*ceil(%" PRIu64 "/%" PRId64 ")%s), in '%s'",
                             scale->name, sshape, scale->numel, name, wshape, b0, b1, want, rows,
                             b0, cols, b1, lead > 1 ? " per matrix" : "", file);
    return NVF_OK;
}

/* Every FP8 weight of an FP8-block checkpoint has a W_scale_inv that passes
 * nvf_ckpt_check_fp8_scale(). */
static int check_fp8_block(nvf_ckpt *ck) {
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        if (!t->is_weight || t->st->dtype != NVF_DTYPE_F8_E4M3)
            continue;
        const nvf_st_tensor *s = t->scale != NVF_CKPT_NONE ? ck->tensors[t->scale].st : NULL;
        int rc = nvf_ckpt_check_fp8_scale(ck->files[t->file].path, t->st, s, ck->quant.block[0],
                                          ck->quant.block[1]);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

int ckpt_detect_format(nvf_ckpt *ck) {
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        nvf_ckpt_tensor *t = &ck->tensors[i];
        t->role = nvf_ckpt_role_of(t->st->name, &t->is_weight);
    }
    if (rc == NVF_OK)
        rc = link_companions(ck);
    if (rc != NVF_OK)
        return rc;
    rc = from_config(ck);
    /* A prepared checkpoint's experts are stacked 3-D tensors (P.experts.w13_weight, ...) by
     * design; in any other, an unknown 3-D expert tensor is worth a warning. */
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        const nvf_st_tensor *st = ck->tensors[i].st;
        nvf_ckpt_name n;
        nvf_ckpt_name_parse(&n, st->name, st->ndim);
        if (n.kind == NVF_NAME_EXPERT_UNKNOWN && ck->quant.format != NVF_CKPT_FORMAT_PREPARED) {
            char shape[160];
            ckpt_shape_str(shape, sizeof shape, st->shape, st->ndim);
            rc = ckpt_warn(ck,
                           "unknown 3-D tensor '%s' %s: fused experts are named "
                           "experts.gate_up_proj and experts.down_proj; kept as it is",
                           st->name, shape);
        }
    }
    if (rc != NVF_OK)
        return rc;
    name_evidence ev;
    gather_evidence(ck, &ev);
    nvf_ckpt_quant *q = &ck->quant;
    if (!q->source) {
        from_evidence(q, &ev);
    } else if (q->format == NVF_CKPT_FORMAT_FP8_BLOCK && ev.scale_inv == 0 &&
               !(q->quant_method && strcmp(q->quant_method, "compressed-tensors") == 0)) {
        if (ev.fp8_scalar_scale > 0) {
            q->format = NVF_CKPT_FORMAT_FP8_TENSOR;
            q->block[0] = q->block[1] = 0;
        } else {
            rc = ckpt_warn(ck, "config.json says quant_method fp8 but no tensor has a "
                               "'_scale_inv' block scale");
        }
    } else if (q->format == NVF_CKPT_FORMAT_NVFP4_MODELOPT && ev.scale_2 == 0) {
        rc = ckpt_warn(ck, "%s says NVFP4 but no tensor has a 'weight_scale_2'", q->source);
    }
    if (rc == NVF_OK && q->format == NVF_CKPT_FORMAT_FP8_BLOCK)
        rc = check_fp8_block(ck);
    return rc;
}

void ckpt_quant_free(nvf_ckpt_quant *q) {
    free(q->quant_method);
    free(q->quant_algo);
    for (size_t i = 0; i < q->n_ignore; i++)
        free(q->ignore[i]);
    free(q->ignore);
    memset(q, 0, sizeof *q);
}

static int ignore_matches(const char *pattern, const char *module) {
    size_t n = strlen(pattern);
    if (strncmp(pattern, "re:", 3) == 0) {
        regex_t re;
        if (regcomp(&re, pattern + 3, REG_EXTENDED | REG_NOSUB) != 0)
            return 0;
        int hit = regexec(&re, module, 0, NULL, 0) == 0;
        regfree(&re);
        return hit;
    }
    if (strncmp(module, pattern, n) == 0 && (module[n] == '\0' || module[n] == '.'))
        return 1;
    return fnmatch(pattern, module, 0) == 0;
}

int nvf_ckpt_is_ignored(const nvf_ckpt *ck, const char *name) {
    char module[1024];
    const char *dot = strrchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    if (len >= sizeof module)
        return 0;
    memcpy(module, name, len);
    module[len] = '\0';
    for (size_t i = 0; i < ck->quant.n_ignore; i++) {
        if (ignore_matches(ck->quant.ignore[i], module))
            return 1;
    }
    return 0;
}
