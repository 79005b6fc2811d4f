/*
 * The ModelOpt configuration files of a converted checkpoint (SPEC section 5). The values
 * (quant_method, quant_algo, group_size) are nvfp4/modelopt_rules.h's, whose check validate runs.
 *
 * hf_quant_config.json (read by vLLM, SGLang and TensorRT-LLM to pick their ModelOpt path):
 *   1. "producer": {"name": "nvfp4tool", "version"}
 *   2. "quantization": {"quant_algo": "NVFP4" (or "MIXED_PRECISION"), "kv_cache_quant_algo":
 *      null, "group_size": 16, "exclude_modules": [module, ...]} with every linear module left
 *      unquantized named exactly (no wildcards, so that every loader's matching agrees);
 *      MIXED_PRECISION adds "quantized_layers": {module: {"quant_algo": "NVFP4",
 *      "group_size": 16} | {"quant_algo": "FP8_PB_WO" (FP8 blocks) | "FP8" (per tensor)}}.
 * config.json "quantization_config" (what ModelOpt's exporter writes next to it):
 *   1. "quant_method": "modelopt", "quant_algo", "group_size": 16, "kv_cache_scheme": null
 *   2. "config_groups": {"group_0": {"targets": ["Linear"], "weights" and
 *      "input_activations": {"num_bits": 4, "type": "float", "group_size": 16,
 *      "dynamic": false}}}
 *   3. "ignore": the exclude_modules list; "producer"; "quantized_layers" when mixed.
 * config.json is the source's, with that "quantization_config", and with the entries of its
 * parallelism plans (base_model_tp_plan, base_model_ep_plan) that name FP8 scale parameters
 * ("..._scale_inv") removed unless FP8 tensors are kept (MIXED_PRECISION).
 */
#include "convert_internal.h"

#include "io/json_build.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/modelopt_rules.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <stdlib.h>
#include <string.h>

/* Every cJSON allocation is checked (io/json_build.h): a failure is NULL, NVF_E_NOMEM. */

static cJSON *producer(nvf_jb *b) {
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_str(b, o, "name", "nvfp4tool");
    nvf_jb_str(b, o, "version", nvf_version());
    return o;
}

static cJSON *quantized_layers(nvf_jb *b, const cv_plan *p) {
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    const cJSON *it;
    cJSON_ArrayForEach(it, p->nvfp4_modules) {
        cJSON *l = nvf_jb_obj(b, o, it->valuestring);
        nvf_jb_str(b, l, "quant_algo", NVF_MODELOPT_QUANT_ALGO);
        nvf_jb_num(b, l, "group_size", NVF_MODELOPT_GROUP_SIZE);
    }
    cJSON_ArrayForEach(it, p->fp8_modules) {
        cJSON *l = nvf_jb_obj(b, o, it->string);
        nvf_jb_str(b, l, "quant_algo", it->valuestring);
    }
    return o;
}

static cJSON *fp4_args(nvf_jb *b) {
    cJSON *o = nvf_jb_take(b, cJSON_CreateObject());
    nvf_jb_num(b, o, "num_bits", 4);
    nvf_jb_str(b, o, "type", "float");
    nvf_jb_num(b, o, "group_size", NVF_MODELOPT_GROUP_SIZE);
    nvf_jb_bool(b, o, "dynamic", 0);
    return o;
}

cJSON *cv_meta_quant_config(const cv_plan *p, int mixed) {
    nvf_jb b = {0};
    cJSON *q = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_str(&b, q, "quant_method", NVF_MODELOPT_QUANT_METHOD);
    nvf_jb_str(&b, q, "quant_algo",
               mixed ? NVF_MODELOPT_QUANT_ALGO_MIXED : NVF_MODELOPT_QUANT_ALGO);
    nvf_jb_num(&b, q, "group_size", NVF_MODELOPT_GROUP_SIZE);
    nvf_jb_null(&b, q, "kv_cache_scheme");
    cJSON *g0 = nvf_jb_obj(&b, nvf_jb_obj(&b, q, "config_groups"), "group_0");
    nvf_jb_push(&b, nvf_jb_arr(&b, g0, "targets"), cJSON_CreateString("Linear"));
    nvf_jb_put(&b, g0, "weights", fp4_args(&b));
    nvf_jb_put(&b, g0, "input_activations", fp4_args(&b));
    nvf_jb_put(&b, q, "ignore", nvf_jb_take(&b, cJSON_Duplicate(p->exclude_modules, 1)));
    if (mixed)
        nvf_jb_put(&b, q, "quantized_layers", quantized_layers(&b, p));
    nvf_jb_put(&b, q, "producer", producer(&b));
    return nvf_jb_done(&b, q);
}

cJSON *cv_meta_hf_quant_config(const cv_plan *p, int mixed) {
    nvf_jb b = {0};
    cJSON *doc = nvf_jb_take(&b, cJSON_CreateObject());
    nvf_jb_put(&b, doc, "producer", producer(&b));
    cJSON *q = nvf_jb_obj(&b, doc, "quantization");
    nvf_jb_str(&b, q, "quant_algo",
               mixed ? NVF_MODELOPT_QUANT_ALGO_MIXED : NVF_MODELOPT_QUANT_ALGO);
    nvf_jb_null(&b, q, "kv_cache_quant_algo");
    nvf_jb_num(&b, q, "group_size", NVF_MODELOPT_GROUP_SIZE);
    nvf_jb_put(&b, q, "exclude_modules", nvf_jb_take(&b, cJSON_Duplicate(p->exclude_modules, 1)));
    if (mixed)
        nvf_jb_put(&b, q, "quantized_layers", quantized_layers(&b, p));
    return nvf_jb_done(&b, doc);
}

/*
 * Transformers' tensor-parallel / expert-parallel plans (base_model_tp_plan,
 * base_model_ep_plan, in the config or its text_config) name the runtime parameters of the
 * source's quantization, such as FP8's "..._scale_inv". A checkpoint that keeps no FP8 tensor
 * has no such parameter: drop those entries and keep every other one. A MIXED_PRECISION output
 * (FP8 tensors kept) keeps them all.
 */
static void prune_plans(cJSON *cfg) {
    cJSON *it;
    cJSON_ArrayForEach(it, cfg) {
        size_t n = it->string ? strlen(it->string) : 0;
        if (cJSON_IsObject(it) && it->string && strcmp(it->string, "text_config") == 0) {
            prune_plans(it);
            continue;
        }
        if (!cJSON_IsObject(it) || n < 5 || strcmp(it->string + n - 5, "_plan") != 0)
            continue;
        cJSON *e = it->child;
        while (e) {
            cJSON *next = e->next;
            size_t k = e->string ? strlen(e->string) : 0;
            if (k >= 10 && strcmp(e->string + k - 10, "_scale_inv") == 0) {
                nvf_log(NVF_LOG_DEBUG, "config.json: %s: dropping '%s' (no FP8 tensor kept)",
                        it->string, e->string);
                cJSON_Delete(cJSON_DetachItemViaPointer(it, e));
            }
            e = next;
        }
    }
}

cJSON *cv_meta_config(const cv_plan *p, const cJSON *source_config, int mixed) {
    return cv_meta_config_with(source_config, mixed, cv_meta_quant_config(p, mixed));
}

cJSON *cv_meta_config_with(const cJSON *source_config, int mixed, cJSON *quant_config) {
    nvf_jb b = {0};
    cJSON *cfg =
        nvf_jb_take(&b, source_config ? cJSON_Duplicate(source_config, 1) : cJSON_CreateObject());
    if (cfg) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "quantization_config");
        if (!mixed)
            prune_plans(cfg);
    }
    nvf_jb_put(&b, cfg, "quantization_config", quant_config);
    return nvf_jb_done(&b, cfg);
}

int cv_write_json(const char *path, const cJSON *doc, char sha256[65], uint64_t *bytes) {
    char *text = doc ? cJSON_Print(doc) : NULL;
    if (!text)
        return nvf_error_set(NVF_E_NOMEM, "no memory writing '%s'", path);
    size_t len = strlen(text);
    text[len] = '\n'; /* end with a newline: replace the NUL, write len + 1 bytes */
    int rc = NVF_OK;
    if (sha256) {
        nvf_sha256 *h = nvf_sha256_new();
        rc = h ? nvf_sha256_update(h, text, len + 1) : nvf_error_code();
        if (rc == NVF_OK)
            rc = nvf_sha256_final(h, sha256);
        nvf_sha256_free(h);
    }
    if (rc == NVF_OK)
        rc = nvf_file_write_atomic(path, text, len + 1);
    if (bytes)
        *bytes = len + 1;
    free(text);
    return rc;
}
