/*
 * The ModelOpt NVFP4 configuration rules (nvfp4/modelopt_rules.h): what config.json
 * "quantization_config" and hf_quant_config.json must say, and that they agree with each other
 * and with the tensors. `convert` writes the same constants (lib/convert/convert_meta.c).
 */
#include "ckpt_internal.h"

#include "nvfp4/modelopt_rules.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CFG "config.json"
#define HQC NVF_MODELOPT_HF_QUANT_CONFIG

/* Whether tensor i is an NVFP4 linear weight: U8 with an F8_E4M3 block scale. */
static int is_nvfp4_weight(const nvf_ckpt *ck, size_t i) {
    const nvf_ckpt_tensor *t = &ck->tensors[i];
    return t->is_weight && t->st->dtype == NVF_DTYPE_U8 && t->scale != NVF_CKPT_NONE &&
           ck->tensors[t->scale].st->dtype == NVF_DTYPE_F8_E4M3;
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The value of `key` as text for messages ("absent", "\"x\"", "12"). */
static void value_text(char *buf, size_t cap, const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, cap, "%s", v ? (s ? s : "?") : "absent");
    free(s);
}

/* One configuration's view: its quantization object and file name. */
typedef struct qview {
    const cJSON *q;      /* config.json quantization_config, hf_quant_config.json quantization */
    const char *file;    /* "config.json" or "hf_quant_config.json" */
    const char *prefix;  /* field path prefix for messages */
    const char *exclude; /* "ignore" or "exclude_modules" */
} qview;

static int check_algo(nvf_findings *out, const qview *v, int *nvfp4) {
    const char *algo = str_of(v->q, "quant_algo");
    int mixed = algo && strcmp(algo, NVF_MODELOPT_QUANT_ALGO_MIXED) == 0;
    *nvfp4 = algo && (strcmp(algo, NVF_MODELOPT_QUANT_ALGO) == 0 || mixed);
    if (mixed && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(v->q, "quantized_layers")))
        return nvf_findings_add(out, "modelopt.quant-algo", "error", v->file, "",
                                "%s: %squant_algo \"%s\" without a \"quantized_layers\" object",
                                v->file, v->prefix, algo);
    if (*nvfp4)
        return NVF_OK;
    char got[128];
    value_text(got, sizeof got, v->q, "quant_algo");
    return nvf_findings_add(out, "modelopt.quant-algo", "error", v->file, "",
                            "%s: %squant_algo is %s, expected \"" NVF_MODELOPT_QUANT_ALGO
                            "\" or \"" NVF_MODELOPT_QUANT_ALGO_MIXED "\"",
                            v->file, v->prefix, got);
}

static int check_group_size(nvf_findings *out, const qview *v, int required) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(v->q, "group_size");
    if (!g && !required)
        return NVF_OK;
    if (cJSON_IsNumber(g) && g->valuedouble == NVF_MODELOPT_GROUP_SIZE)
        return NVF_OK;
    char got[128];
    value_text(got, sizeof got, v->q, "group_size");
    return nvf_findings_add(out, "modelopt.group-size", "error", v->file, "",
                            "%s: %sgroup_size is %s, expected %d", v->file, v->prefix, got,
                            NVF_MODELOPT_GROUP_SIZE);
}

static int check_exclude(nvf_findings *out, const qview *v) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(v->q, v->exclude);
    if (cJSON_IsArray(e) && cJSON_GetArraySize(e) > 0)
        return NVF_OK;
    char got[128];
    value_text(got, sizeof got, v->q, v->exclude);
    return nvf_findings_add(out, "modelopt.exclude-modules-empty", "error", v->file, "",
                            "%s: %s%s is %s: loaders would quantize every linear, the router "
                            "gates, lm_head and embeddings included",
                            v->file, v->prefix, v->exclude, got);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The string members of array `a`, sorted (NULL entries for non-strings are left out). */
static size_t sorted_strings(const char ***out, const cJSON *a) {
    size_t n = 0, cap = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
    *out = malloc((cap ? cap : 1) * sizeof **out);
    if (!*out)
        return 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        if (cJSON_IsString(it) && n < cap)
            (*out)[n++] = it->valuestring;
    }
    qsort(*out, n, sizeof **out, cmp_str);
    return n;
}

/* Rule 5: the two files agree. */
static int check_agree(nvf_findings *out, const qview *c, const qview *h) {
    const char *a = str_of(c->q, "quant_algo"), *b = str_of(h->q, "quant_algo");
    int rc = NVF_OK;
    if (a && b && strcmp(a, b) != 0)
        rc = nvf_findings_add(out, "modelopt.config-mismatch", "error", CFG, "",
                              CFG ": quantization_config.quant_algo \"%s\" but " HQC
                                  " quantization.quant_algo \"%s\"",
                              a, b);
    const cJSON *ga = cJSON_GetObjectItemCaseSensitive(c->q, "group_size");
    const cJSON *gb = cJSON_GetObjectItemCaseSensitive(h->q, "group_size");
    if (rc == NVF_OK && cJSON_IsNumber(ga) && cJSON_IsNumber(gb) &&
        ga->valuedouble != gb->valuedouble)
        rc = nvf_findings_add(out, "modelopt.config-mismatch", "error", CFG, "",
                              CFG ": quantization_config.group_size %g but " HQC
                                  " quantization.group_size %g",
                              ga->valuedouble, gb->valuedouble);
    const char **x = NULL, **y = NULL;
    size_t nx = sorted_strings(&x, cJSON_GetObjectItemCaseSensitive(c->q, c->exclude));
    size_t ny = sorted_strings(&y, cJSON_GetObjectItemCaseSensitive(h->q, h->exclude));
    if (!x || !y) {
        free(x);
        free(y);
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    /* Both lists empty is rule 4's finding; here the first entry that one list lacks. */
    size_t i = 0, j = 0;
    while (rc == NVF_OK && (i < nx || j < ny)) {
        int k = i == nx ? 1 : j == ny ? -1 : strcmp(x[i], y[j]);
        if (k == 0) {
            i++;
            j++;
            continue;
        }
        const char *only = k < 0 ? x[i] : y[j];
        rc = nvf_findings_add(
            out, "modelopt.config-mismatch", "error", CFG, "",
            "module '%s' is excluded in %s but not in %s", only,
            k < 0 ? CFG " quantization_config.ignore" : HQC " quantization.exclude_modules",
            k < 0 ? HQC " quantization.exclude_modules" : CFG " quantization_config.ignore");
        break;
    }
    free(x);
    free(y);
    return rc;
}

/* Rule 6: the tensors agree with what the configs say. */
static int check_tensors(nvf_findings *out, const nvf_ckpt *ck, const qview *says, size_t n4) {
    const char *file = says->file;
    if (n4 == 0)
        return nvf_findings_add(out, "modelopt.config-contradicts-tensors", "error", file, "",
                                "%s says %squant_algo \"%s\" but no linear holds NVFP4 tensors "
                                "(U8 weight with an F8_E4M3 weight_scale)",
                                file, says->prefix, str_of(says->q, "quant_algo"));
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(says->q, "quantized_layers");
    const char *algo = str_of(says->q, "quant_algo");
    int mixed = algo && strcmp(algo, NVF_MODELOPT_QUANT_ALGO_MIXED) == 0;
    int rc = NVF_OK;
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        if (!is_nvfp4_weight(ck, i))
            continue;
        const char *name = ck->tensors[i].st->name;
        const char *shard = ck->files[ck->tensors[i].file].name;
        if (nvf_ckpt_is_ignored(ck, name)) {
            rc = nvf_findings_add(out, "modelopt.config-contradicts-tensors", "error", shard, name,
                                  "%s: '%s' is NVFP4 but its module is excluded by the "
                                  "quantization config (%s)",
                                  shard, name, ck->quant.source ? ck->quant.source : file);
            continue;
        }
        if (!mixed || !cJSON_IsObject(layers))
            continue;
        char *module = nvf_ckpt_module_of(name);
        if (!module)
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(layers, module);
        const char *la = l ? str_of(l, "quant_algo") : NULL;
        if (!la || strcmp(la, NVF_MODELOPT_QUANT_ALGO) != 0)
            rc = nvf_findings_add(out, "modelopt.config-contradicts-tensors", "error", shard, name,
                                  "%s: '%s' is NVFP4 but %s quantized_layers gives module "
                                  "'%s' quant_algo %s%s%s",
                                  shard, name, file, module, la ? "\"" : "",
                                  la ? la : "(not listed)", la ? "\"" : "");
        free(module);
    }
    return rc;
}

int nvf_modelopt_check_config(nvf_findings *out, const nvf_ckpt *ck) {
    if (ck->is_file || ck->quant.format == NVF_CKPT_FORMAT_NVFP4_CT ||
        ck->quant.format == NVF_CKPT_FORMAT_PREPARED)
        return NVF_OK;
    size_t n4 = 0;
    for (size_t i = 0; i < ck->n_tensors; i++)
        n4 += (size_t)is_nvfp4_weight(ck, i);
    const cJSON *cfg = nvf_ckpt_config_doc(ck), *hqc = nvf_ckpt_hf_quant_config_doc(ck);
    const cJSON *cq = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config") : NULL;
    const cJSON *hq = hqc ? cJSON_GetObjectItemCaseSensitive(hqc, "quantization") : NULL;
    const char *method = cJSON_IsObject(cq) ? str_of(cq, "quant_method") : NULL;
    /* A config.json quantization_config of another method (fp8, compressed-tensors) without
     * NVFP4 tensors and without hf_quant_config.json is not ModelOpt's business. */
    int claims = hqc || (method && strcmp(method, NVF_MODELOPT_QUANT_METHOD) == 0);
    if (!claims && n4 == 0)
        return NVF_OK;
    qview c = {cJSON_IsObject(cq) ? cq : NULL, CFG, "quantization_config.", "ignore"};
    qview h = {cJSON_IsObject(hq) ? hq : NULL, HQC, "quantization.", "exclude_modules"};
    int rc = NVF_OK, c4 = 0, h4 = 0;
    if (hqc && !h.q)
        rc = nvf_findings_add(out, "modelopt.quant-config-missing", "error", HQC, "",
                              HQC " has no \"quantization\" object");
    if (h.q && rc == NVF_OK)
        rc = check_algo(out, &h, &h4);
    if (h.q && rc == NVF_OK)
        rc = check_group_size(out, &h, 1);
    if (h.q && rc == NVF_OK)
        rc = check_exclude(out, &h);
    if (c.q && rc == NVF_OK && (!method || strcmp(method, NVF_MODELOPT_QUANT_METHOD) != 0)) {
        char got[128];
        value_text(got, sizeof got, c.q, "quant_method");
        rc = nvf_findings_add(out, "modelopt.quant-method", "error", CFG, "",
                              CFG ": quantization_config.quant_method is %s, expected "
                                  "\"" NVF_MODELOPT_QUANT_METHOD "\"%s",
                              got, n4 ? " (the checkpoint holds NVFP4 ModelOpt tensors)" : "");
        c.q = NULL; /* another method's config: its other fields follow other rules */
    }
    if (c.q && rc == NVF_OK)
        rc = check_algo(out, &c, &c4);
    if (c.q && rc == NVF_OK)
        rc = check_group_size(out, &c, 0);
    if (c.q && rc == NVF_OK)
        rc = check_exclude(out, &c);
    if (c.q && h.q && rc == NVF_OK)
        rc = check_agree(out, &c, &h);
    if (rc != NVF_OK)
        return rc;
    if (!c4 && !h4) {
        if (n4 > 0 && !(c.q && str_of(c.q, "quant_algo")) && !(h.q && str_of(h.q, "quant_algo")))
            return nvf_findings_add(out, "modelopt.quant-config-missing", "error", CFG, "",
                                    "%zu linear(s) hold NVFP4 tensors but neither " HQC " nor " CFG
                                    " quantization_config says NVFP4",
                                    n4);
        return NVF_OK;
    }
    return check_tensors(out, ck, h4 ? &h : &c, n4);
}
