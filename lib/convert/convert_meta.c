/*
 * The ModelOpt configuration files of a converted checkpoint (SPEC section 5).
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
 */
#include "convert/convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <stdlib.h>
#include <string.h>

static cJSON *producer(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", "nvfp4tool");
    cJSON_AddStringToObject(o, "version", nvf_version());
    return o;
}

static cJSON *quantized_layers(const cv_plan *p) {
    cJSON *o = cJSON_CreateObject();
    const cJSON *it;
    cJSON_ArrayForEach(it, p->nvfp4_modules) {
        cJSON *l = cJSON_AddObjectToObject(o, it->valuestring);
        cJSON_AddStringToObject(l, "quant_algo", "NVFP4");
        cJSON_AddNumberToObject(l, "group_size", 16);
    }
    cJSON_ArrayForEach(it, p->fp8_modules) {
        cJSON *l = cJSON_AddObjectToObject(o, it->string);
        cJSON_AddStringToObject(l, "quant_algo", it->valuestring);
    }
    return o;
}

static cJSON *fp4_args(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "num_bits", 4);
    cJSON_AddStringToObject(o, "type", "float");
    cJSON_AddNumberToObject(o, "group_size", 16);
    cJSON_AddBoolToObject(o, "dynamic", 0);
    return o;
}

cJSON *cv_meta_quant_config(const cv_plan *p, int mixed) {
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "quant_method", "modelopt");
    cJSON_AddStringToObject(q, "quant_algo", mixed ? "MIXED_PRECISION" : "NVFP4");
    cJSON_AddNumberToObject(q, "group_size", 16);
    cJSON_AddNullToObject(q, "kv_cache_scheme");
    cJSON *groups = cJSON_AddObjectToObject(q, "config_groups");
    cJSON *g0 = cJSON_AddObjectToObject(groups, "group_0");
    cJSON *targets = cJSON_AddArrayToObject(g0, "targets");
    cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
    cJSON_AddItemToObject(g0, "weights", fp4_args());
    cJSON_AddItemToObject(g0, "input_activations", fp4_args());
    cJSON_AddItemToObject(q, "ignore", cJSON_Duplicate(p->exclude_modules, 1));
    if (mixed)
        cJSON_AddItemToObject(q, "quantized_layers", quantized_layers(p));
    cJSON_AddItemToObject(q, "producer", producer());
    return q;
}

cJSON *cv_meta_hf_quant_config(const cv_plan *p, int mixed) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddItemToObject(doc, "producer", producer());
    cJSON *q = cJSON_AddObjectToObject(doc, "quantization");
    cJSON_AddStringToObject(q, "quant_algo", mixed ? "MIXED_PRECISION" : "NVFP4");
    cJSON_AddNullToObject(q, "kv_cache_quant_algo");
    cJSON_AddNumberToObject(q, "group_size", 16);
    cJSON_AddItemToObject(q, "exclude_modules", cJSON_Duplicate(p->exclude_modules, 1));
    if (mixed)
        cJSON_AddItemToObject(q, "quantized_layers", quantized_layers(p));
    return doc;
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
