/*
 * Recipes: defaults, the keys and their setters (shared by the YAML reader, recipe_yaml.c,
 * and the command-line overrides), and the effective recipe as JSON. See nvfp4/recipe.h for
 * the keys; schemas/recipe.schema.json describes the same file.
 *
 * Values are typed as YAML 1.1 (and thus a JSON Schema validator fed by a YAML loader) would
 * type them: numbers must be plain (unquoted) decimal scalars, names may be quoted or not.
 */
#include "nvfp4/recipe.h"
#include "recipe_internal.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nvf_recipe_init(nvf_recipe *out) {
    memset(out, 0, sizeof *out);
    out->version = 1;
    out->quant = nvf_quant_params_default();
    out->target = NVF_TARGET_FORMAT_MODELOPT;
    out->scale_layout = NVF_SCALE_LAYOUT_128X4;
    out->ep = 1;
    out->max_shard_size = 5000000000ull;
    snprintf(out->max_shard_size_text, sizeof out->max_shard_size_text, "5GB");
    out->verify_tokens = 64;
    out->verify_seed = 0;
    const char *inc = NVF_CKPT_DEFAULT_SCOPE;
    return nvf_recipe_set_globs(out, 0, &inc, 1);
}

static void globs_free(char **g, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(g[i]);
    free(g);
}

void nvf_recipe_free(nvf_recipe *r) {
    if (!r)
        return;
    globs_free(r->include, r->n_include);
    globs_free(r->exclude, r->n_exclude);
    r->include = r->exclude = NULL;
    r->n_include = r->n_exclude = 0;
}

int nvf_recipe_set_globs(nvf_recipe *r, int exclude, const char *const *globs, size_t n) {
    char **g = calloc(n ? n : 1, sizeof *g);
    if (!g)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for %zu globs", n);
    for (size_t i = 0; i < n; i++) {
        if (globs[i][0] == '\0') {
            globs_free(g, i);
            return nvf_error_set(NVF_E_CONFIG, "--%s: an empty glob matches nothing",
                                 exclude ? "exclude" : "include");
        }
        g[i] = strdup(globs[i]);
        if (!g[i]) {
            globs_free(g, i);
            return nvf_error_set(NVF_E_NOMEM, "out of memory for a glob");
        }
    }
    char ***dst = exclude ? &r->exclude : &r->include;
    size_t *dn = exclude ? &r->n_exclude : &r->n_include;
    globs_free(*dst, *dn);
    *dst = g;
    *dn = n;
    return 0;
}

/* Values ------------------------------------------------------------------------------------ */

static int scalar_is(const scalar *v, const char *word) {
    return strlen(word) == v->len && memcmp(v->s, word, v->len) == 0;
}

/* A plain decimal integer in [lo, hi]. */
static int scalar_int(const scalar *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v->plain || v->len == 0 || v->len > 20)
        return -1;
    char buf[24];
    memcpy(buf, v->s, v->len);
    buf[v->len] = '\0';
    size_t i = (buf[0] == '-' || buf[0] == '+') ? 1 : 0;
    if (buf[i] == '\0')
        return -1;
    for (; buf[i]; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return -1;
    }
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno != 0 || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

/* "5GB", "512MiB", "1.5 TB", "1000" (bytes): decimal and binary units, result >= 1 byte. */
int nvf_size_parse(uint64_t *out, const char *text, size_t len) {
    const scalar whole_text = {text, len, 1};
    const scalar *v = &whole_text;
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KB", 1e3},
                 {"MB", 1e6},
                 {"GB", 1e9},
                 {"TB", 1e12},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0}};
    size_t i = 0, n = v->len;
    double whole = 0, frac = 0, scale = 1;
    int digits = 0;
    for (; i < n && v->s[i] >= '0' && v->s[i] <= '9'; i++, digits++)
        whole = whole * 10 + (v->s[i] - '0');
    if (i < n && v->s[i] == '.') {
        i++;
        int fd = 0;
        for (; i < n && v->s[i] >= '0' && v->s[i] <= '9'; i++, fd++) {
            scale /= 10;
            frac += (v->s[i] - '0') * scale;
        }
        if (fd == 0)
            return -1;
    }
    if (digits == 0 || digits > 15)
        return -1;
    while (i < n && v->s[i] == ' ')
        i++;
    scalar unit = {v->s + i, n - i, 1};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        if (scalar_is(&unit, units[u].unit)) {
            double bytes = (whole + frac) * units[u].mult;
            if (bytes < 1 || bytes > 9.0e18)
                return -1;
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -1;
}

static int set_version(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 1, 1, &x) < 0)
        return -1;
    r->version = (int32_t)x;
    return 0;
}

/* quant.method from the method asked for and the arithmetic: RTN in ModelOpt's arithmetic is a
 * method of its own (nvfp4/quant_types.h); 4over6 stays 4over6, which nvf_recipe_check refuses
 * with modelopt. E follows the method unless set. */
static void set_quant_method(nvf_recipe *r, nvf_quant_method m) {
    if (m == NVF_QUANT_METHOD_RTN && r->arith == NVF_QUANT_ARITH_MODELOPT)
        m = NVF_QUANT_METHOD_RTN_MODELOPT;
    r->quant.method = m;
    if (!r->e4m3_max_set)
        r->quant.e4m3_max = m == NVF_QUANT_METHOD_4OVER6 ? 256 : 448;
}

static int set_method(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "4over6"))
        set_quant_method(r, NVF_QUANT_METHOD_4OVER6);
    else if (scalar_is(v, "rtn"))
        set_quant_method(r, NVF_QUANT_METHOD_RTN);
    else
        return -1;
    r->method_set = 1;
    return 0;
}

/* arithmetic: modelopt makes the default method rtn (ModelOpt exports RTN only); a method set
 * explicitly stays as it is. */
static int set_arith(nvf_recipe *r, const scalar *v) {
    nvf_quant_method m =
        r->quant.method == NVF_QUANT_METHOD_4OVER6 ? NVF_QUANT_METHOD_4OVER6 : NVF_QUANT_METHOD_RTN;
    if (scalar_is(v, "flashinfer")) {
        r->arith = NVF_QUANT_ARITH_FLASHINFER;
    } else if (scalar_is(v, "modelopt")) {
        r->arith = NVF_QUANT_ARITH_MODELOPT;
        if (!r->method_set)
            m = NVF_QUANT_METHOD_RTN;
    } else {
        return -1;
    }
    set_quant_method(r, m);
    return 0;
}

static int set_error(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "mse"))
        r->quant.error = NVF_QUANT_ERROR_MSE;
    else if (scalar_is(v, "mae"))
        r->quant.error = NVF_QUANT_ERROR_MAE;
    else
        return -1;
    return 0;
}

static int set_domain(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "scaled"))
        r->quant.domain = NVF_QUANT_DOMAIN_SCALED;
    else if (scalar_is(v, "original"))
        r->quant.domain = NVF_QUANT_DOMAIN_ORIGINAL;
    else
        return -1;
    return 0;
}

static int set_e4m3_max(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 0, 1000, &x) < 0 || (x != 256 && x != 448))
        return -1;
    r->quant.e4m3_max = (int32_t)x;
    r->e4m3_max_set = 1;
    return 0;
}

static int set_target(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "modelopt"))
        r->target = NVF_TARGET_FORMAT_MODELOPT;
    else if (scalar_is(v, "prepared-w4a16"))
        r->target = NVF_TARGET_FORMAT_PREPARED_W4A16;
    else if (scalar_is(v, "prepared-w4a4"))
        r->target = NVF_TARGET_FORMAT_PREPARED_W4A4;
    else
        return -1;
    return 0;
}

/* The scale layout and the expert-parallel split belong to the prepared targets (SPEC section
 * 5); a modelopt conversion refuses values other than their defaults (convert_run.c). */
static int set_layout(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "128x4"))
        r->scale_layout = NVF_SCALE_LAYOUT_128X4;
    else if (scalar_is(v, "8x4"))
        r->scale_layout = NVF_SCALE_LAYOUT_8X4;
    else
        return -1;
    return 0;
}

static int set_ep(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 1, 4096, &x) < 0)
        return -1;
    r->ep = (int32_t)x;
    return 0;
}

static int set_shard_size(nvf_recipe *r, const scalar *v) {
    uint64_t x;
    if (v->len >= sizeof r->max_shard_size_text || nvf_size_parse(&x, v->s, v->len) < 0)
        return -1;
    r->max_shard_size = x;
    memcpy(r->max_shard_size_text, v->s, v->len);
    r->max_shard_size_text[v->len] = '\0';
    return 0;
}

static int set_tokens(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 1, 1 << 24, &x) < 0)
        return -1;
    r->verify_tokens = x;
    return 0;
}

static int set_seed(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 0, 9007199254740992ll, &x) < 0)
        return -1;
    r->verify_seed = (uint64_t)x;
    return 0;
}

const key_def nvf_recipe_keys[] = {
    {"", "version", NULL, "1", set_version, NULL},
    {"quantization", "method", "method", "rtn or 4over6", set_method, NULL},
    {"quantization", "error", "error", "mse or mae", set_error, NULL},
    {"quantization", "error_domain", "error-domain", "scaled or original", set_domain, NULL},
    {"quantization", "e4m3_max", "e4m3-max", "256 or 448", set_e4m3_max, NULL},
    {"quantization", "arithmetic", "arithmetic", "flashinfer or modelopt", set_arith, NULL},
    {"target", "format", "target", "modelopt, prepared-w4a16 or prepared-w4a4", set_target, NULL},
    {"target", "scale_layout", "scale-layout", "128x4 or 8x4", set_layout, NULL},
    {"target", "ep", "ep", "an integer from 1 to 4096", set_ep, NULL},
    {"output", "max_shard_size", "max-shard-size", "a size such as 5GB, 512MiB or 1000000",
     set_shard_size, NULL},
    {"verify", "tokens", "tokens", "an integer from 1 to 16777216", set_tokens, NULL},
    {"verify", "seed", "seed", "an integer from 0 to 2^53", set_seed, NULL},
};
const size_t nvf_recipe_n_keys = sizeof nvf_recipe_keys / sizeof nvf_recipe_keys[0];

static const char *const k_flags[] = {"method",         "error",  "error-domain", "e4m3-max",
                                      "arithmetic",     "target", "scale-layout", "ep",
                                      "max-shard-size", "tokens", "seed",         NULL};

const char *const *nvf_recipe_flags(void) {
    return k_flags;
}

int nvf_recipe_set(nvf_recipe *r, const char *flag, const char *value) {
    for (size_t i = 0; i < nvf_recipe_n_keys; i++) {
        if (!nvf_recipe_keys[i].flag || strcmp(nvf_recipe_keys[i].flag, flag) != 0)
            continue;
        scalar v = {value, strlen(value), 1};
        int rc = nvf_recipe_keys[i].set(r, &v);
        if (rc == NOT_YET)
            return nvf_error_set(NVF_E_CONFIG, "--%s %.*s is not supported yet (%s)", flag,
                                 MAX_SHOWN, value, nvf_recipe_keys[i].built);
        if (rc < 0)
            return nvf_error_set(NVF_E_CONFIG, "--%s: bad value '%.*s' (expected %s)", flag,
                                 MAX_SHOWN, value, nvf_recipe_keys[i].expect);
        return 0;
    }
    return nvf_error_set(NVF_E_INVALID, "unknown recipe flag '--%s'", flag);
}

int nvf_recipe_check(const nvf_recipe *r) {
    if (r->arith != NVF_QUANT_ARITH_MODELOPT)
        return 0;
    if (r->quant.method == NVF_QUANT_METHOD_4OVER6)
        return nvf_error_set(NVF_E_CONFIG,
                             "arithmetic modelopt takes method rtn, not 4over6 (ModelOpt's 4over6 "
                             "export depends on calibration state a converter does not have)");
    if (r->quant.e4m3_max != NVF_QUANT_E4M3_MAX_448)
        return nvf_error_set(NVF_E_CONFIG,
                             "arithmetic modelopt takes e4m3_max 448, not %d (ModelOpt's global "
                             "scale is amax / (6 * 448))",
                             (int)r->quant.e4m3_max);
    return 0;
}

/* JSON -------------------------------------------------------------------------------------- */

static int add_globs(cJSON *obj, const char *key, char **g, size_t n) {
    cJSON *a = cJSON_AddArrayToObject(obj, key);
    if (!a)
        return -1;
    for (size_t i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateString(g[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            return -1;
        }
    }
    return 0;
}

char *nvf_recipe_to_json(const nvf_recipe *r) {
    static const char *const methods[] = {"rtn", "4over6", "rtn"},
                             *const ariths[] = {"flashinfer", "modelopt"},
                             *const errors[] = {"mse", "mae"},
                             *const domains[] = {"scaled", "original"},
                             *const targets[] = {"modelopt", "prepared-w4a16", "prepared-w4a4"},
                             *const layouts[] = {"128x4", "8x4"};
    char *out = NULL;
    cJSON *root = cJSON_CreateObject(), *q, *s, *t, *o, *v;
    if (!root || !cJSON_AddNumberToObject(root, "version", r->version) ||
        !(q = cJSON_AddObjectToObject(root, "quantization")) ||
        !cJSON_AddStringToObject(q, "method", methods[r->quant.method]) ||
        !cJSON_AddStringToObject(q, "error", errors[r->quant.error]) ||
        !cJSON_AddStringToObject(q, "error_domain", domains[r->quant.domain]) ||
        !cJSON_AddNumberToObject(q, "e4m3_max", r->quant.e4m3_max) ||
        !cJSON_AddStringToObject(q, "arithmetic", ariths[r->arith]) ||
        !(s = cJSON_AddObjectToObject(root, "scope")) ||
        add_globs(s, "include", r->include, r->n_include) < 0 ||
        add_globs(s, "exclude", r->exclude, r->n_exclude) < 0 ||
        !(t = cJSON_AddObjectToObject(root, "target")) ||
        !cJSON_AddStringToObject(t, "format", targets[r->target]) ||
        !cJSON_AddStringToObject(t, "scale_layout", layouts[r->scale_layout]) ||
        !cJSON_AddNumberToObject(t, "ep", r->ep) ||
        !(o = cJSON_AddObjectToObject(root, "output")) ||
        !cJSON_AddStringToObject(o, "max_shard_size", r->max_shard_size_text) ||
        !(v = cJSON_AddObjectToObject(root, "verify")) ||
        !cJSON_AddNumberToObject(v, "tokens", (double)r->verify_tokens) ||
        !cJSON_AddNumberToObject(v, "seed", (double)r->verify_seed))
        goto done;
    out = cJSON_PrintUnformatted(root);
done:
    if (!out)
        nvf_error_set(NVF_E_NOMEM, "out of memory writing the recipe as JSON");
    cJSON_Delete(root);
    return out;
}
