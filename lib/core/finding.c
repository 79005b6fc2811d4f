/*
 * The shared findings list (nvfp4/finding.h).
 */
#include "nvfp4/finding.h"
#include "nvfp4/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nvf_finding *grow(nvf_findings *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        nvf_finding *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    return &l->v[l->n++];
}

int nvf_findings_add(nvf_findings *l, const char *id, const char *severity, const char *file,
                     const char *tensor, const char *fmt, ...) {
    nvf_finding *f = grow(l);
    if (!f)
        return nvf_error_set(NVF_E_NOMEM, "no memory for findings");
    memset(f, 0, sizeof *f);
    snprintf(f->id, sizeof f->id, "%s", id);
    snprintf(f->severity, sizeof f->severity, "%s", severity);
    snprintf(f->file, sizeof f->file, "%s", file ? file : "");
    snprintf(f->tensor, sizeof f->tensor, "%s", tensor ? tensor : "");
    f->layer = -1;
    f->expert = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return NVF_OK;
}

int nvf_findings_push(nvf_findings *l, const nvf_finding *src) {
    nvf_finding *f = grow(l);
    if (!f)
        return nvf_error_set(NVF_E_NOMEM, "no memory for findings");
    *f = *src;
    return NVF_OK;
}

static int cmp_finding(const nvf_finding *x, const nvf_finding *y) {
    int c = strcmp(x->file, y->file);
    if (c == 0)
        c = strcmp(x->tensor, y->tensor);
    if (c == 0)
        c = strcmp(x->id, y->id);
    if (c == 0)
        c = strcmp(x->message, y->message);
    return c;
}

/* A merge sort: stable, O(n log n). */
static void merge_sort(nvf_finding *v, nvf_finding *tmp, size_t n) {
    if (n < 2)
        return;
    size_t h = n / 2;
    merge_sort(v, tmp, h);
    merge_sort(v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp_finding(&v[j], &v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

void nvf_findings_sort(nvf_findings *l) {
    if (l->n < 2)
        return;
    nvf_finding *tmp = malloc(l->n * sizeof *tmp);
    if (tmp) {
        merge_sort(l->v, tmp, l->n);
        free(tmp);
        return;
    }
    /* No memory for the merge: an in-place insertion sort, stable as well. */
    for (size_t i = 1; i < l->n; i++) {
        nvf_finding f = l->v[i];
        size_t j = i;
        while (j > 0 && cmp_finding(&f, &l->v[j - 1]) < 0) {
            l->v[j] = l->v[j - 1];
            j--;
        }
        l->v[j] = f;
    }
}

size_t nvf_findings_errors(const nvf_findings *l) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += strcmp(l->v[i].severity, "error") == 0;
    return n;
}

void nvf_findings_free(nvf_findings *l) {
    if (!l)
        return;
    free(l->v);
    memset(l, 0, sizeof *l);
}
