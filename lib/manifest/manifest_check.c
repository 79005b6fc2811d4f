/*
 * Checking a checkpoint directory against its manifest (hash --check): missing, extra,
 * resized and changed files, and with --tensors each listed tensor's dtype, shape and CRC-32,
 * as a sorted list of findings.
 */
#include "manifest_internal.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

const char *nvf_finding_kind_name(nvf_finding_kind kind) {
    switch (kind) {
    case NVF_FINDING_MISSING:
        return "MISSING";
    case NVF_FINDING_SIZE:
        return "SIZE";
    case NVF_FINDING_SHA256:
        return "SHA256";
    case NVF_FINDING_EXTRA:
        return "EXTRA";
    case NVF_FINDING_CRC32:
        return "CRC32";
    case NVF_FINDING_TENSOR:
        return "TENSOR";
    }
    return "?";
}

typedef struct finding_list {
    nvf_manifest_finding *v;
    size_t n, cap;
} finding_list;

static int add_finding(finding_list *l, nvf_finding_kind kind, const char *name, const char *got,
                       const char *expected, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* `fmt` formats the text after "KIND name". */
static int add_finding(finding_list *l, nvf_finding_kind kind, const char *name, const char *got,
                       const char *expected, const char *fmt, ...) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        nvf_manifest_finding *v = realloc(l->v, c * sizeof *v);
        if (!v)
            return nvf_error_set(NVF_E_NOMEM, "no memory for findings");
        l->v = v;
        l->cap = c;
    }
    char tail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    nvf_manifest_finding *f = &l->v[l->n];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->name = strdup(name);
    f->got = got ? strdup(got) : NULL;
    f->expected = expected ? strdup(expected) : NULL;
    size_t len = strlen(name) + strlen(tail) + 16;
    f->line = malloc(len);
    l->n++;
    if (!f->name || (got && !f->got) || (expected && !f->expected) || !f->line)
        return nvf_error_set(NVF_E_NOMEM, "no memory for findings");
    snprintf(f->line, len, "%s %s%s", nvf_finding_kind_name(kind), name, tail);
    return NVF_OK;
}

static void free_findings(nvf_manifest_finding *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].got);
        free(v[i].expected);
        free(v[i].line);
    }
    free(v);
}

void nvf_manifest_report_free(nvf_manifest_report *r) {
    if (!r)
        return;
    free_findings(r->findings, r->n_findings);
    free(r);
}

static int cmp_finding(const void *a, const void *b) {
    const nvf_manifest_finding *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (int)x->kind - (int)y->kind;
}

static ssize_t find_name(char *const *sorted, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, sorted[mid]);
        if (c == 0)
            return (ssize_t)mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

/* "BF16 [1024, 320]" into buf (cut at cap). */
static void describe_tensor(char *buf, size_t cap, const char *dtype, int32_t ndim,
                            const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, cap, "%s [", dtype);
    for (int32_t d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
}

/* 1 when the file's tensor has the dtype and shape the manifest lists. */
static int tensor_matches(const nvf_st_tensor *t, const nvf_manifest_tensor *mt) {
    if (strcmp(nvf_dtype_name(t->dtype), mt->dtype) != 0 || t->ndim != mt->ndim)
        return 0;
    for (int32_t d = 0; d < t->ndim; d++)
        if (t->shape[d] != mt->shape[d])
            return 0;
    return 1;
}

/* The tensor findings of one checked file: the manifest's `nt` tensors of that file (sorted by
 * name) against what the file holds: dtype and shape, then CRC-32. */
static int check_tensors(finding_list *l, size_t *checked, const nvf_hash_job *j,
                         const nvf_manifest_tensor *const *mt, size_t nt) {
    char label[1024], got[16], expected[16];
    if (j->st_rc != NVF_OK)
        return add_finding(l, NVF_FINDING_CRC32, j->name, NULL, NULL, ": tensors unreadable: %s",
                           j->st_err.msg);
    int rc = NVF_OK;
    for (size_t i = 0; i < nt && rc == NVF_OK; i++) {
        snprintf(label, sizeof label, "%s:%s", j->name, mt[i]->name);
        snprintf(expected, sizeof expected, "%08" PRIx32, mt[i]->crc32);
        const nvf_st_tensor *t = nvf_st_find(j->st, mt[i]->name);
        (*checked)++;
        if (!t) {
            rc = add_finding(l, NVF_FINDING_CRC32, label, NULL, expected, ": not in the file");
            continue;
        }
        if (!tensor_matches(t, mt[i])) {
            char g[160], e[160];
            describe_tensor(g, sizeof g, nvf_dtype_name(t->dtype), t->ndim, t->shape);
            describe_tensor(e, sizeof e, mt[i]->dtype, mt[i]->ndim, mt[i]->shape);
            rc = add_finding(l, NVF_FINDING_TENSOR, label, g, e, ": got %s expected %s", g, e);
            if (rc != NVF_OK)
                break;
        }
        uint32_t crc = j->crc[t - j->st->tensors];
        if (crc != mt[i]->crc32) {
            snprintf(got, sizeof got, "%08" PRIx32, crc);
            rc = add_finding(l, NVF_FINDING_CRC32, label, got, expected, ": got %s expected %s",
                             got, expected);
        }
    }
    /* Tensors the file holds and the manifest does not list. */
    for (size_t k = 0; k < j->st->n_tensors && rc == NVF_OK; k++) {
        const char *name = j->st->tensors[k].name;
        size_t lo = 0, hi = nt;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(mt[mid]->name, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nt && strcmp(mt[lo]->name, name) == 0)
            continue;
        snprintf(label, sizeof label, "%s:%s", j->name, name);
        snprintf(got, sizeof got, "%08" PRIx32, j->crc[k]);
        rc = add_finding(l, NVF_FINDING_CRC32, label, got, NULL, ": not in the manifest");
    }
    return rc;
}

static int cmp_tensor_by_file(const void *a, const void *b) {
    const nvf_manifest_tensor *x = *(const nvf_manifest_tensor *const *)a;
    const nvf_manifest_tensor *y = *(const nvf_manifest_tensor *const *)b;
    int c = strcmp(x->file, y->file);
    return c != 0 ? c : strcmp(x->name, y->name);
}

/* [*lo, *hi): the tensors of `file` in mt (sorted by file, then name). */
static void tensor_range(size_t *lo, size_t *hi, const nvf_manifest_tensor *const *mt, size_t n,
                         const char *file) {
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (strcmp(mt[mid]->file, file) < 0)
            a = mid + 1;
        else
            b = mid;
    }
    *lo = a;
    while (b < n && strcmp(mt[b]->file, file) == 0)
        b++;
    *hi = b;
}

/* A present listed file's size, then SHA-256, against the manifest's entry `f`. */
static int check_file(finding_list *l, nvf_manifest_report *r, const nvf_manifest_file *f,
                      uint64_t bytes, const char *sha256) {
    char got[32], expected[32];
    if (bytes != f->bytes) {
        snprintf(got, sizeof got, "%" PRIu64, bytes);
        snprintf(expected, sizeof expected, "%" PRIu64, f->bytes);
        return add_finding(l, NVF_FINDING_SIZE, f->name, got, expected, ": %s != %s", got,
                           expected);
    }
    if (strcmp(sha256, f->sha256) != 0)
        return add_finding(l, NVF_FINDING_SHA256, f->name, sha256, f->sha256,
                           ": got %s expected %s", sha256, f->sha256);
    r->files_ok++;
    return NVF_OK;
}

/* Sort the findings into `r` and hand it to *out. */
static void finish_report(nvf_manifest_report **out, nvf_manifest_report **r, finding_list *fl) {
    if (fl->n > 0)
        qsort(fl->v, fl->n, sizeof *fl->v, cmp_finding);
    (*r)->findings = fl->v;
    (*r)->n_findings = fl->n;
    fl->v = NULL;
    fl->n = 0;
    *out = *r;
    *r = NULL;
}

int nvf_manifest_check_dir(nvf_manifest_report **out, const char *dir, const nvf_manifest *m,
                           const nvf_hash_opts *opts) {
    *out = NULL;
    char **present = NULL, **names = NULL, **sorted = NULL;
    size_t n_present = 0, n_jobs = 0;
    size_t *listed = NULL; /* nvf_hash_job -> manifest file index */
    int *want = NULL;
    nvf_hash_job *jobs = NULL;
    const nvf_manifest_tensor **mt = NULL;
    finding_list fl = {NULL, 0, 0};
    nvf_manifest_report *r = calloc(1, sizeof *r);
    int rc = r ? nvf_manifest_list_dir(&present, &n_present, dir, 0)
               : nvf_error_set(NVF_E_NOMEM, "no memory for a report");
    if (rc != NVF_OK)
        goto done;
    names = malloc((m->n_files ? m->n_files : 1) * sizeof *names);
    sorted = malloc((m->n_files ? m->n_files : 1) * sizeof *sorted);
    listed = malloc((m->n_files ? m->n_files : 1) * sizeof *listed);
    want = calloc(m->n_files ? m->n_files : 1, sizeof *want);
    mt = malloc((m->n_tensors ? m->n_tensors : 1) * sizeof *mt);
    if (!names || !sorted || !listed || !want || !mt) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to check '%s'", dir);
        goto done;
    }
    for (size_t i = 0; i < m->n_tensors; i++)
        mt[i] = &m->tensors[i];
    qsort(mt, m->n_tensors, sizeof *mt, cmp_tensor_by_file);

    /* Listed files: present ones become jobs (in name order), absent ones findings. */
    r->files_listed = m->n_files;
    for (size_t i = 0; i < m->n_files && rc == NVF_OK; i++) {
        const nvf_manifest_file *f = &m->files[i];
        if (find_name(present, n_present, f->name) < 0) {
            rc = add_finding(&fl, NVF_FINDING_MISSING, f->name, NULL, f->sha256, "%s", "");
            continue;
        }
        names[n_jobs] = f->name;
        listed[n_jobs] = i;
        n_jobs++;
    }
    if (rc != NVF_OK)
        goto done;
    for (size_t k = 0; opts->tensors && k < n_jobs; k++) {
        size_t lo, hi;
        tensor_range(&lo, &hi, mt, m->n_tensors, names[k]);
        want[k] = hi > lo;
    }
    /* A manifest from nvf_manifest_read lists files sorted; one built in memory may not. */
    memcpy(sorted, names, n_jobs * sizeof *names);
    qsort(sorted, n_jobs, sizeof *sorted, nvf_manifest_cmp_name);
    for (size_t i = 0; i < n_present && rc == NVF_OK; i++)
        if (find_name(sorted, n_jobs, present[i]) < 0)
            rc = add_finding(&fl, NVF_FINDING_EXTRA, present[i], present[i], NULL, "%s", "");
    if (rc == NVF_OK)
        rc = nvf_hash_jobs_make(&jobs, dir, names, n_jobs, want);
    if (rc == NVF_OK)
        rc = nvf_hash_jobs_run(jobs, n_jobs, opts);
    for (size_t k = 0; k < n_jobs && rc == NVF_OK; k++) {
        const nvf_hash_job *j = &jobs[k];
        rc = check_file(&fl, r, &m->files[listed[k]], j->bytes, j->sha256);
        if (rc != NVF_OK || !j->want_tensors)
            continue;
        size_t lo, hi;
        tensor_range(&lo, &hi, mt, m->n_tensors, j->name);
        rc = check_tensors(&fl, &r->tensors_checked, j, mt + lo, hi - lo);
    }
    if (rc == NVF_OK)
        finish_report(out, &r, &fl);
done:
    free_findings(fl.v, fl.n);
    nvf_manifest_report_free(r);
    nvf_hash_jobs_free(jobs, n_jobs);
    free(mt);
    free(want);
    free(listed);
    free(names);
    free(sorted);
    nvf_manifest_names_free(present, n_present);
    return rc;
}

static int cmp_file_ptr(const void *a, const void *b) {
    const nvf_manifest_file *x = *(const nvf_manifest_file *const *)a;
    const nvf_manifest_file *y = *(const nvf_manifest_file *const *)b;
    return strcmp(x->name, y->name);
}

/* The file called `name` in `f` (sorted by name), or NULL. */
static const nvf_manifest_file *find_file(const nvf_manifest_file *const *f, size_t n,
                                          const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f[mid]->name);
        if (c == 0)
            return f[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* The tensor findings of one file: the manifest's `nm` tensors against the `na` hashed ones
 * (both sorted by name), as check_tensors() words them. */
static int compare_tensors(finding_list *l, size_t *checked, const char *file,
                           const nvf_manifest_tensor *const *mt, size_t nm,
                           const nvf_manifest_tensor *const *at, size_t na) {
    char label[1024], got[16], expected[16];
    size_t i = 0, j = 0;
    int rc = NVF_OK;
    while (rc == NVF_OK && (i < nm || j < na)) {
        int c = i == nm ? 1 : j == na ? -1 : strcmp(mt[i]->name, at[j]->name);
        const nvf_manifest_tensor *t = c <= 0 ? mt[i] : at[j];
        snprintf(label, sizeof label, "%s:%s", file, t->name);
        if (c < 0) {
            (*checked)++;
            snprintf(expected, sizeof expected, "%08" PRIx32, mt[i]->crc32);
            rc = add_finding(l, NVF_FINDING_CRC32, label, NULL, expected, ": not in the file");
            i++;
            continue;
        }
        if (c > 0) {
            snprintf(got, sizeof got, "%08" PRIx32, at[j]->crc32);
            rc = add_finding(l, NVF_FINDING_CRC32, label, got, NULL, ": not in the manifest");
            j++;
            continue;
        }
        (*checked)++;
        const nvf_manifest_tensor *m = mt[i++], *a = at[j++];
        int same = strcmp(m->dtype, a->dtype) == 0 && m->ndim == a->ndim;
        for (int32_t d = 0; same && d < m->ndim; d++)
            same = m->shape[d] == a->shape[d];
        if (!same) {
            char g[160], e[160];
            describe_tensor(g, sizeof g, a->dtype, a->ndim, a->shape);
            describe_tensor(e, sizeof e, m->dtype, m->ndim, m->shape);
            rc = add_finding(l, NVF_FINDING_TENSOR, label, g, e, ": got %s expected %s", g, e);
        }
        if (rc == NVF_OK && a->crc32 != m->crc32) {
            snprintf(got, sizeof got, "%08" PRIx32, a->crc32);
            snprintf(expected, sizeof expected, "%08" PRIx32, m->crc32);
            rc = add_finding(l, NVF_FINDING_CRC32, label, got, expected, ": got %s expected %s",
                             got, expected);
        }
    }
    return rc;
}

int nvf_manifest_compare(nvf_manifest_report **out, const nvf_manifest *m,
                         const nvf_manifest *actual, int tensors) {
    *out = NULL;
    finding_list fl = {NULL, 0, 0};
    size_t nf = actual->n_files, nmt = m->n_tensors, nat = actual->n_tensors;
    const nvf_manifest_file **af = malloc((nf ? nf : 1) * sizeof *af);
    const nvf_manifest_file **mf = malloc((m->n_files ? m->n_files : 1) * sizeof *mf);
    const nvf_manifest_tensor **mt = malloc((nmt ? nmt : 1) * sizeof *mt);
    const nvf_manifest_tensor **at = malloc((nat ? nat : 1) * sizeof *at);
    nvf_manifest_report *r = calloc(1, sizeof *r);
    int rc = NVF_OK;
    if (!af || !mf || !mt || !at || !r) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to compare with the manifest");
        goto done;
    }
    for (size_t i = 0; i < nf; i++)
        af[i] = &actual->files[i];
    for (size_t i = 0; i < m->n_files; i++)
        mf[i] = &m->files[i];
    for (size_t i = 0; i < nmt; i++)
        mt[i] = &m->tensors[i];
    for (size_t i = 0; i < nat; i++)
        at[i] = &actual->tensors[i];
    qsort(af, nf, sizeof *af, cmp_file_ptr);
    qsort(mf, m->n_files, sizeof *mf, cmp_file_ptr);
    qsort(mt, nmt, sizeof *mt, cmp_tensor_by_file);
    qsort(at, nat, sizeof *at, cmp_tensor_by_file);
    r->files_listed = m->n_files;
    for (size_t i = 0; i < m->n_files && rc == NVF_OK; i++) {
        const nvf_manifest_file *f = mf[i], *a = find_file(af, nf, f->name);
        if (!a) {
            rc = add_finding(&fl, NVF_FINDING_MISSING, f->name, NULL, f->sha256, "%s", "");
            continue;
        }
        rc = check_file(&fl, r, f, a->bytes, a->sha256);
        if (rc != NVF_OK || !tensors)
            continue;
        size_t lo, hi, alo, ahi;
        tensor_range(&lo, &hi, mt, nmt, f->name);
        tensor_range(&alo, &ahi, at, nat, f->name);
        if (hi > lo)
            rc = compare_tensors(&fl, &r->tensors_checked, f->name, mt + lo, hi - lo, at + alo,
                                 ahi - alo);
    }
    for (size_t i = 0; i < nf && rc == NVF_OK; i++)
        if (!find_file(mf, m->n_files, af[i]->name))
            rc = add_finding(&fl, NVF_FINDING_EXTRA, af[i]->name, af[i]->name, NULL, "%s", "");
    if (rc == NVF_OK)
        finish_report(out, &r, &fl);
done:
    free_findings(fl.v, fl.n);
    nvf_manifest_report_free(r);
    free(af);
    free(mf);
    free(mt);
    free(at);
    return rc;
}
