/*
 * The verify report (nvfp4/verify.h): its checks, findings and flagged experts as the run adds
 * them, the layer list parser, and the JSON of schemas/report.schema.json:
 *   {report_version, tool {name, version}, checkpoint, reference, format,
 *    settings {tokens, seed, precision, device, method, layout_source},
 *    layers [{layer, pass, checks [{id, pass, value, threshold, message}], experts_flagged}],
 *    findings [{id, severity, layer, expert, tensor, message}],
 *    summary {layers, passed, failed, findings}, pass}
 * value and threshold are null where a check has none; layer, expert and tensor likewise.
 */
#include "verify_internal.h"

#include "io/json_build.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nvf_verify_check *vf_check(nvf_verify_layer *l, const char *id, int pass, const char *fmt, ...) {
    if (l->n_checks == NVF_VERIFY_MAX_CHECKS)
        return &l->checks[NVF_VERIFY_MAX_CHECKS - 1]; /* never: the run adds fewer */
    nvf_verify_check *c = &l->checks[l->n_checks++];
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    c->pass = pass;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    if (!pass)
        l->pass = 0;
    return c;
}

void vf_check_value(nvf_verify_check *c, double value, int has_threshold, double threshold) {
    c->has_value = 1;
    c->value = value;
    c->has_threshold = has_threshold;
    c->threshold = threshold;
}

int vf_finding(nvf_verify_report *r, const char *id, const char *severity, int64_t layer,
               int64_t expert, const char *tensor, const char *fmt, ...) {
    nvf_finding f;
    memset(&f, 0, sizeof f);
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.severity, sizeof f.severity, "%s", severity);
    f.layer = layer;
    f.expert = expert;
    snprintf(f.tensor, sizeof f.tensor, "%s", tensor ? tensor : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f.message, sizeof f.message, fmt, ap);
    va_end(ap);
    return nvf_findings_push(&r->findings, &f);
}

int vf_flag(nvf_verify_layer *l, int64_t expert) {
    size_t at = 0;
    while (at < l->n_flagged && l->flagged[at] < expert)
        at++;
    if (at < l->n_flagged && l->flagged[at] == expert)
        return NVF_OK;
    int64_t *f = realloc(l->flagged, (l->n_flagged + 1) * sizeof *f);
    if (!f)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    memmove(f + at + 1, f + at, (l->n_flagged - at) * sizeof *f);
    f[at] = expert;
    l->flagged = f;
    l->n_flagged++;
    return NVF_OK;
}

void nvf_verify_report_free(nvf_verify_report *r) {
    if (!r)
        return;
    free(r->checkpoint);
    free(r->reference);
    for (size_t i = 0; i < r->n_layers; i++)
        free(r->layers[i].flagged);
    free(r->layers);
    nvf_findings_free(&r->findings);
    memset(r, 0, sizeof *r);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One number of a layer list at *s (digits only), advancing *s. */
static int parse_num(int64_t *v, const char **s, const char *list) {
    if (!isdigit((unsigned char)**s))
        return nvf_error_set(NVF_E_INVALID,
                             "--layers '%s': expected a layer number at '%s' (a list like "
                             "\"1,3-5\")",
                             list, *s);
    *v = 0;
    while (isdigit((unsigned char)**s)) {
        if (*v > 100000000)
            return nvf_error_set(NVF_E_INVALID, "--layers '%s': layer number too large", list);
        *v = *v * 10 + (**s - '0');
        (*s)++;
    }
    return NVF_OK;
}

int nvf_verify_parse_layers(int64_t **out, size_t *n, const char *list) {
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    const char *s = list;
    int rc = NVF_OK;
    while (rc == NVF_OK) {
        int64_t a, b;
        rc = parse_num(&a, &s, list);
        b = a;
        if (rc == NVF_OK && *s == '-') {
            s++;
            rc = parse_num(&b, &s, list);
        }
        if (rc == NVF_OK && (b < a || b - a > 100000))
            rc = nvf_error_set(NVF_E_INVALID,
                               "--layers '%s': range %" PRId64 "-%" PRId64 " is empty or too long",
                               list, a, b);
        for (int64_t v = a; v <= b && rc == NVF_OK; v++) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 16;
                int64_t *p = realloc(*out, cap * sizeof *p);
                if (!p) {
                    rc = nvf_error_set(NVF_E_NOMEM, "no memory");
                    break;
                }
                *out = p;
            }
            (*out)[(*n)++] = v;
        }
        if (rc != NVF_OK || *s == '\0')
            break;
        if (*s != ',')
            rc = nvf_error_set(NVF_E_INVALID, "--layers '%s': unexpected '%c'", list, *s);
        else
            s++;
    }
    if (rc != NVF_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
        return rc;
    }
    qsort(*out, *n, sizeof **out, cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (k == 0 || (*out)[k - 1] != (*out)[i])
            (*out)[k++] = (*out)[i];
    *n = k;
    return NVF_OK;
}

static void num_or_null(nvf_jb *b, cJSON *o, const char *key, int has, double v) {
    if (has)
        nvf_jb_num(b, o, key, v);
    else
        nvf_jb_null(b, o, key);
}

static void layer_json(nvf_jb *b, cJSON *arr, const nvf_verify_layer *l) {
    cJSON *o = cJSON_CreateObject();
    nvf_jb_push(b, arr, o);
    if (!o)
        return;
    nvf_jb_num(b, o, "layer", (double)l->layer);
    nvf_jb_bool(b, o, "pass", l->pass);
    cJSON *checks = nvf_jb_arr(b, o, "checks");
    for (size_t i = 0; checks && i < l->n_checks; i++) {
        const nvf_verify_check *c = &l->checks[i];
        cJSON *co = cJSON_CreateObject();
        nvf_jb_push(b, checks, co);
        if (!co)
            continue;
        nvf_jb_str(b, co, "id", c->id);
        nvf_jb_bool(b, co, "pass", c->pass);
        num_or_null(b, co, "value", c->has_value, c->value);
        num_or_null(b, co, "threshold", c->has_threshold, c->threshold);
        nvf_jb_str(b, co, "message", c->message);
    }
    cJSON *fl = nvf_jb_arr(b, o, "experts_flagged");
    for (size_t i = 0; fl && i < l->n_flagged; i++)
        nvf_jb_push(b, fl, cJSON_CreateNumber((double)l->flagged[i]));
}

static void finding_json(nvf_jb *b, cJSON *arr, const nvf_verify_finding *f) {
    cJSON *o = cJSON_CreateObject();
    nvf_jb_push(b, arr, o);
    if (!o)
        return;
    nvf_jb_str(b, o, "id", f->id);
    nvf_jb_str(b, o, "severity", f->severity);
    num_or_null(b, o, "layer", f->layer >= 0, (double)f->layer);
    num_or_null(b, o, "expert", f->expert >= 0, (double)f->expert);
    if (f->tensor[0])
        nvf_jb_str(b, o, "tensor", f->tensor);
    else
        nvf_jb_null(b, o, "tensor");
    nvf_jb_str(b, o, "message", f->message);
}

int nvf_verify_report_json(char **out, const nvf_verify_report *r) {
    nvf_jb b = {0};
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the verify report");
    nvf_jb_num(&b, doc, "report_version", 1);
    cJSON *tool = nvf_jb_obj(&b, doc, "tool");
    nvf_jb_str(&b, tool, "name", "nvfp4tool");
    nvf_jb_str(&b, tool, "version", nvf_version());
    nvf_jb_str(&b, doc, "checkpoint", r->checkpoint ? r->checkpoint : "");
    if (r->reference)
        nvf_jb_str(&b, doc, "reference", r->reference);
    else
        nvf_jb_null(&b, doc, "reference");
    nvf_jb_str(&b, doc, "format", r->format);
    cJSON *s = nvf_jb_obj(&b, doc, "settings");
    nvf_jb_num(&b, s, "tokens", (double)r->tokens);
    nvf_jb_num(&b, s, "seed", (double)r->seed);
    nvf_jb_str(&b, s, "precision", nvf_moe_precision_name(r->precision));
    nvf_jb_str(&b, s, "device", r->device);
    nvf_jb_str(&b, s, "method", r->method ? r->method : "cpu-reference");
    if (r->layout_source)
        nvf_jb_str(&b, s, "layout_source", r->layout_source);
    else
        nvf_jb_null(&b, s, "layout_source");
    cJSON *layers = nvf_jb_arr(&b, doc, "layers");
    for (size_t i = 0; layers && i < r->n_layers; i++)
        layer_json(&b, layers, &r->layers[i]);
    cJSON *findings = nvf_jb_arr(&b, doc, "findings");
    for (size_t i = 0; findings && i < r->findings.n; i++)
        finding_json(&b, findings, &r->findings.v[i]);
    cJSON *sum = nvf_jb_obj(&b, doc, "summary");
    nvf_jb_num(&b, sum, "layers", (double)r->n_layers);
    nvf_jb_num(&b, sum, "passed", (double)r->passed);
    nvf_jb_num(&b, sum, "failed", (double)r->failed);
    nvf_jb_num(&b, sum, "findings", (double)r->findings.n);
    nvf_jb_bool(&b, doc, "pass", r->pass);
    doc = nvf_jb_done(&b, doc);
    if (!doc)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the verify report");
    *out = cJSON_Print(doc);
    cJSON_Delete(doc);
    return *out ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the verify report");
}
