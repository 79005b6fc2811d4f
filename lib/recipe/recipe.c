/*
 * Recipe files (YAML, read with libyaml's document loader) and their command-line overrides.
 * See nvfp4/recipe.h for the keys; schemas/recipe.schema.json describes the same file.
 *
 * Values are typed as YAML 1.1 (and thus a JSON Schema validator fed by a YAML loader) would
 * type them: numbers must be plain (unquoted) decimal scalars, names may be quoted or not.
 */
#include "nvfp4/recipe.h"

#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_SHOWN 64 /* longest piece of a key or value quoted in a message */

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
    const char *inc = "*.mlp.experts.*";
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

/* A scalar as the setters see it. `plain` is 0 for a quoted scalar (always a string). */
typedef struct scalar {
    const char *s;
    size_t len;
    int plain;
} scalar;

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

/* A setter's result for a well-formed value that names something not built yet. */
#define NOT_YET (-2)

/* One settable key: its recipe path, its flag, what it accepts (for messages), its setter, and
 * what is built of it so far. A setter returns 0, -1 when the value is bad, or NOT_YET. */
typedef struct key_def {
    const char *section, *key, *flag, *expect;
    int (*set)(nvf_recipe *r, const scalar *v);
    const char *built; /* for NOT_YET messages */
} key_def;

static int set_version(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 1, 1, &x) < 0)
        return -1;
    r->version = (int32_t)x;
    return 0;
}

static int set_method(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "4over6"))
        r->quant.method = NVF_QUANT_METHOD_4OVER6;
    else if (scalar_is(v, "rtn"))
        r->quant.method = NVF_QUANT_METHOD_RTN;
    else
        return -1;
    if (!r->e4m3_max_set)
        r->quant.e4m3_max = r->quant.method == NVF_QUANT_METHOD_RTN ? 448 : 256;
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
 * 5), which are not built yet: only their defaults are accepted, never silently ignored. */
static int set_layout(nvf_recipe *r, const scalar *v) {
    if (scalar_is(v, "128x4"))
        r->scale_layout = NVF_SCALE_LAYOUT_128X4;
    else if (scalar_is(v, "8x4"))
        return NOT_YET;
    else
        return -1;
    return 0;
}

static int set_ep(nvf_recipe *r, const scalar *v) {
    int64_t x;
    if (scalar_int(v, 1, 4096, &x) < 0)
        return -1;
    if (x > 1)
        return NOT_YET;
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

static const key_def k_keys[] = {
    {"", "version", NULL, "1", set_version, NULL},
    {"quantization", "method", "method", "rtn or 4over6", set_method, NULL},
    {"quantization", "error", "error", "mse or mae", set_error, NULL},
    {"quantization", "error_domain", "error-domain", "scaled or original", set_domain, NULL},
    {"quantization", "e4m3_max", "e4m3-max", "256 or 448", set_e4m3_max, NULL},
    {"target", "format", "target", "modelopt, prepared-w4a16 or prepared-w4a4", set_target, NULL},
    {"target", "scale_layout", "scale-layout", "128x4 or 8x4", set_layout,
     "only 128x4 until the prepared targets are built"},
    {"target", "ep", "ep", "an integer from 1 to 4096", set_ep,
     "only 1 until the prepared targets are built"},
    {"output", "max_shard_size", "max-shard-size", "a size such as 5GB, 512MiB or 1000000",
     set_shard_size, NULL},
    {"verify", "tokens", "tokens", "an integer from 1 to 16777216", set_tokens, NULL},
    {"verify", "seed", "seed", "an integer from 0 to 2^53", set_seed, NULL},
};
#define N_KEYS (sizeof k_keys / sizeof k_keys[0])

static const char *const k_sections[] = {"quantization", "scope", "target", "output", "verify"};

static const char *const k_flags[] = {
    "method", "error",          "error-domain", "e4m3-max", "target", "scale-layout",
    "ep",     "max-shard-size", "tokens",       "seed",     NULL};

const char *const *nvf_recipe_flags(void) {
    return k_flags;
}

int nvf_recipe_set(nvf_recipe *r, const char *flag, const char *value) {
    for (size_t i = 0; i < N_KEYS; i++) {
        if (!k_keys[i].flag || strcmp(k_keys[i].flag, flag) != 0)
            continue;
        scalar v = {value, strlen(value), 1};
        int rc = k_keys[i].set(r, &v);
        if (rc == NOT_YET)
            return nvf_error_set(NVF_E_CONFIG, "--%s %.*s is not supported yet (%s)", flag,
                                 MAX_SHOWN, value, k_keys[i].built);
        if (rc < 0)
            return nvf_error_set(NVF_E_CONFIG, "--%s: bad value '%.*s' (expected %s)", flag,
                                 MAX_SHOWN, value, k_keys[i].expect);
        return 0;
    }
    return nvf_error_set(NVF_E_INVALID, "unknown recipe flag '--%s'", flag);
}

/* YAML -------------------------------------------------------------------------------------- */

typedef struct yctx {
    const char *name;
    yaml_document_t *doc;
    nvf_recipe *r;
} yctx;

static int yerr(const yctx *c, const yaml_node_t *n, const char *fmt, const char *a, const char *b,
                const char *d) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, a, b, d);
    return nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: %s", c->name, n->start_mark.line + 1,
                         n->start_mark.column + 1, msg);
}

/* A scalar's text, cut for messages. */
static const char *shown(const yaml_node_t *n, char *buf, size_t cap) {
    if (n->type != YAML_SCALAR_NODE)
        return n->type == YAML_MAPPING_NODE ? "{...}" : "[...]";
    size_t len = n->data.scalar.length < cap - 1 ? n->data.scalar.length : cap - 1;
    for (size_t i = 0; i < len; i++) {
        char ch = (char)n->data.scalar.value[i];
        buf[i] = (ch >= 0x20 && ch < 0x7F) ? ch : '?';
    }
    buf[len] = '\0';
    return buf;
}

static int key_is(const yaml_node_t *k, const char *word) {
    return k->type == YAML_SCALAR_NODE && strlen(word) == k->data.scalar.length &&
           memcmp(k->data.scalar.value, word, k->data.scalar.length) == 0;
}

/* Every key of a mapping must be a scalar and appear once. */
static int check_keys(const yctx *c, const yaml_node_t *map, const char *section) {
    char b1[MAX_SHOWN + 1];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return yerr(c, k, "a key in section '%s' is not a name%s%s", section, "", "");
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(c->doc, q->key);
            if (k2->type == YAML_SCALAR_NODE && k2->data.scalar.length == k->data.scalar.length &&
                memcmp(k2->data.scalar.value, k->data.scalar.value, k->data.scalar.length) == 0)
                return yerr(c, k, "duplicate key '%s' in section '%s'%s", shown(k, b1, sizeof b1),
                            section, "");
        }
    }
    return 0;
}

static int set_from_node(const yctx *c, const key_def *kd, const yaml_node_t *v) {
    char b1[MAX_SHOWN + 1], path[64];
    snprintf(path, sizeof path, "%s%s%s", kd->section, kd->section[0] ? "." : "", kd->key);
    if (v->type == YAML_SCALAR_NODE) {
        scalar s = {(const char *)v->data.scalar.value, v->data.scalar.length,
                    v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE};
        int rc = memchr(s.s, '\0', s.len) == NULL ? kd->set(c->r, &s) : -1;
        if (rc == 0)
            return 0;
        if (rc == NOT_YET)
            return yerr(c, v, "'%s: %s' is not supported yet (%s)", path, shown(v, b1, sizeof b1),
                        kd->built);
    }
    return yerr(c, v, "bad value '%s' for '%s' (expected %s)", shown(v, b1, sizeof b1), path,
                kd->expect);
}

static int read_globs(const yctx *c, const yaml_node_t *v, const char *key) {
    char b1[MAX_SHOWN + 1];
    if (v->type != YAML_SEQUENCE_NODE)
        return yerr(c, v, "bad value '%s' for 'scope.%s' (expected a list of globs)",
                    shown(v, b1, sizeof b1), key, "");
    size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
    const char **g = calloc(n ? n : 1, sizeof *g);
    if (!g)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for %zu globs", n);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *it = yaml_document_get_node(c->doc, v->data.sequence.items.start[i]);
        if (it->type != YAML_SCALAR_NODE || it->data.scalar.length == 0 ||
            memchr(it->data.scalar.value, '\0', it->data.scalar.length) != NULL) {
            rc = yerr(c, it, "bad value '%s' in 'scope.%s' (expected a non-empty glob)",
                      shown(it, b1, sizeof b1), key, "");
            goto done;
        }
        g[i] = (const char *)it->data.scalar.value;
    }
    rc = nvf_recipe_set_globs(c->r, strcmp(key, "exclude") == 0, g, n);
done:
    free(g);
    return rc;
}

static int read_section(const yctx *c, const char *section, const yaml_node_t *map) {
    char b1[MAX_SHOWN + 1];
    if (map->type != YAML_MAPPING_NODE)
        return yerr(c, map, "section '%s' must be a mapping, not '%s'%s", section,
                    shown(map, b1, sizeof b1), "");
    int rc = check_keys(c, map, section);
    if (rc < 0)
        return rc;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (strcmp(section, "scope") == 0 && (key_is(k, "include") || key_is(k, "exclude"))) {
            rc = read_globs(c, v, key_is(k, "include") ? "include" : "exclude");
            if (rc < 0)
                return rc;
            continue;
        }
        const key_def *kd = NULL;
        for (size_t i = 0; i < N_KEYS && !kd; i++) {
            if (strcmp(k_keys[i].section, section) == 0 && key_is(k, k_keys[i].key))
                kd = &k_keys[i];
        }
        if (!kd)
            return yerr(c, k, "unknown key '%s' in section '%s'%s", shown(k, b1, sizeof b1),
                        section, "");
        rc = set_from_node(c, kd, v);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int read_root(const yctx *c, const yaml_node_t *root) {
    char b1[MAX_SHOWN + 1];
    if (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0 &&
        root->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return 0; /* an empty document: all defaults */
    if (root->type != YAML_MAPPING_NODE)
        return yerr(c, root, "a recipe is a mapping of sections, not '%s'%s%s",
                    shown(root, b1, sizeof b1), "", "");
    int rc = check_keys(c, root, "(top level)");
    if (rc < 0)
        return rc;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (key_is(k, "version")) {
            rc = set_from_node(c, &k_keys[0], v);
        } else {
            const char *section = NULL;
            for (size_t i = 0; i < sizeof k_sections / sizeof k_sections[0]; i++) {
                if (key_is(k, k_sections[i]))
                    section = k_sections[i];
            }
            if (!section)
                return yerr(c, k,
                            "unknown section '%s' (expected version, quantization, scope, "
                            "target, output or verify)%s%s",
                            shown(k, b1, sizeof b1), "", "");
            rc = read_section(c, section, v);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int nvf_recipe_parse(nvf_recipe *r, const char *text, size_t len, const char *name) {
    yaml_parser_t parser;
    yaml_document_t doc;
    int have_doc = 0, rc = 0;
    if (!yaml_parser_initialize(&parser))
        return nvf_error_set(NVF_E_NOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: YAML syntax error: %s%s%s", name,
                           parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                           parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                           parser.context ? parser.context : "");
        goto done;
    }
    have_doc = 1;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {
        yctx c = {name, &doc, r};
        rc = read_root(&c, root);
        if (rc < 0)
            goto done;
        /* One document only. */
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            rc = nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: YAML syntax error: %s", name,
                               parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                               parser.problem ? parser.problem : "unknown");
            goto done;
        }
        yaml_node_t *extra = yaml_document_get_root_node(&next);
        if (extra)
            rc = nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: a recipe holds one YAML document", name,
                               extra->start_mark.line + 1, extra->start_mark.column + 1);
        yaml_document_delete(&next);
    }
done:
    if (have_doc)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int nvf_recipe_load(nvf_recipe *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return nvf_error_set(NVF_E_IO, "cannot open recipe '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= (16u << 20)) {
                rc = nvf_error_set(NVF_E_CONFIG, "recipe '%s' is larger than 16 MiB", path);
                goto done;
            }
            cap = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = nvf_error_set(NVF_E_NOMEM, "out of memory reading '%s'", path);
                goto done;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        rc = nvf_error_set(NVF_E_IO, "cannot read recipe '%s'", path);
        goto done;
    }
    rc = nvf_recipe_parse(r, buf ? buf : "", len, path);
done:
    free(buf);
    fclose(f);
    return rc;
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
    static const char *const methods[] = {"rtn", "4over6"}, *const errors[] = {"mse", "mae"},
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
