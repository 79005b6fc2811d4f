/*
 * Recipe files: YAML read with libyaml's document loader after a bounds check (size, nesting),
 * every key set through the key table of recipe.c.
 *
 * Values are typed as YAML 1.1 (and thus a JSON Schema validator fed by a YAML loader) would
 * type them: numbers must be plain (unquoted) decimal scalars, names may be quoted or not.
 */
#include "nvfp4/recipe.h"
#include "recipe_internal.h"

#include "nvfp4/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* A recipe is a few hundred bytes, three levels deep. libyaml's scanner takes time quadratic in
 * the flow nesting depth (400 KB of '[' took minutes, issue #11 item 14), and its document loader
 * looks every anchor and alias up in a list of the anchors so far (20,000 anchors took 3 s, a
 * 1 MiB file of them would take a minute), so size, depth, anchors and aliases are capped before
 * the document is loaded. Aliases are never expanded: the loader makes an alias a reference to
 * the anchored node, and the reader visits each key and value of the three levels it reads once,
 * so a "billion laughs" costs no more than its text. */
#define MAX_RECIPE_BYTES   ((size_t)1 << 20)
#define MAX_RECIPE_DEPTH   64
#define MAX_RECIPE_ANCHORS 64
#define MAX_RECIPE_ALIASES 256

static const char *const k_sections[] = {"quantization", "scope", "target", "output", "verify"};

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
        for (size_t i = 0; i < nvf_recipe_n_keys && !kd; i++) {
            if (strcmp(nvf_recipe_keys[i].section, section) == 0 &&
                key_is(k, nvf_recipe_keys[i].key))
                kd = &nvf_recipe_keys[i];
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
            rc = set_from_node(c, &nvf_recipe_keys[0], v);
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

/* Refuse a text over MAX_RECIPE_BYTES, nested deeper than MAX_RECIPE_DEPTH or with more than
 * MAX_RECIPE_ANCHORS anchors or MAX_RECIPE_ALIASES aliases, reading events only up to the first
 * one too many. A syntax error is left to the loader to report. */
static int check_bounds(const char *text, size_t len, const char *name) {
    if (len > MAX_RECIPE_BYTES)
        return nvf_error_set(NVF_E_CONFIG, "%s: %zu bytes; a recipe is at most %zu bytes (1 MiB)",
                             name, len, MAX_RECIPE_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return nvf_error_set(NVF_E_NOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int depth = 0, anchors = 0, aliases = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev))
            break;
        yaml_event_type_t type = ev.type;
        yaml_mark_t at = ev.start_mark;
        int anchored = (type == YAML_SCALAR_EVENT && ev.data.scalar.anchor) ||
                       (type == YAML_SEQUENCE_START_EVENT && ev.data.sequence_start.anchor) ||
                       (type == YAML_MAPPING_START_EVENT && ev.data.mapping_start.anchor);
        yaml_event_delete(&ev);
        if (anchored && ++anchors > MAX_RECIPE_ANCHORS) {
            rc = nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: more than %d anchors (&name)", name,
                               at.line + 1, at.column + 1, MAX_RECIPE_ANCHORS);
            break;
        }
        if (type == YAML_ALIAS_EVENT && ++aliases > MAX_RECIPE_ALIASES) {
            rc = nvf_error_set(NVF_E_CONFIG, "%s:%zu:%zu: more than %d aliases (*name)", name,
                               at.line + 1, at.column + 1, MAX_RECIPE_ALIASES);
            break;
        }
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_RECIPE_DEPTH) {
                rc = nvf_error_set(NVF_E_CONFIG,
                                   "%s:%zu:%zu: nested deeper than %d levels (a recipe needs 3)",
                                   name, at.line + 1, at.column + 1, MAX_RECIPE_DEPTH);
                break;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (type == YAML_STREAM_END_EVENT) {
            break;
        }
    }
    yaml_parser_delete(&parser);
    return rc;
}

int nvf_recipe_parse(nvf_recipe *r, const char *text, size_t len, const char *name) {
    yaml_parser_t parser;
    yaml_document_t doc;
    int have_doc = 0, rc = check_bounds(text, len, name);
    if (rc != 0)
        return rc;
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
            if (cap > MAX_RECIPE_BYTES) {
                rc = nvf_error_set(NVF_E_CONFIG,
                                   "%s: more than %zu bytes; a recipe is at most 1 MiB", path,
                                   MAX_RECIPE_BYTES);
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
