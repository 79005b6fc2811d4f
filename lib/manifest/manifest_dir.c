/*
 * Hashing a checkpoint directory and checking it against its manifest: a directory walk, then
 * one task per file (biggest first) on a pool of worker threads. Each task reads its file once,
 * computing the SHA-256 and, for a safetensors file, every tensor's CRC-32 from the same
 * chunks. Results land in per-file slots, so the output does not depend on the thread count.
 */
#include "manifest/manifest_internal.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Nesting deeper than this is treated as a loop that stat() could not see. */
#define MAX_DEPTH 64

/* Directory walk ---------------------------------------------------------------------------------
 */

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static int list_push(name_list *l, char *s) {
    if (!s)
        return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, c * sizeof *v);
        if (!v) {
            free(s);
            return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
        }
        l->v = v;
        l->cap = c;
    }
    l->v[l->n++] = s;
    return NVF_OK;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    if (la == 0) {
        memcpy(s, b, lb + 1);
        return s;
    }
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

typedef struct walk_ctx {
    const char *root;
    int skip_tmp;
    name_list *out;
    dev_t dev[MAX_DEPTH];
    ino_t ino[MAX_DEPTH];
} walk_ctx;

static int walk(walk_ctx *w, const char *rel, int depth) {
    char *dir_path = rel[0] ? join(w->root, rel) : strdup(w->root);
    if (!dir_path)
        return nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
    int rc = NVF_OK;
    DIR *d = opendir(dir_path);
    if (!d) {
        rc = nvf_error_set(NVF_E_IO, "cannot open directory '%s': %s", dir_path, strerror(errno));
        free(dir_path);
        return rc;
    }
    struct dirent *e;
    for (errno = 0; rc == NVF_OK && (e = readdir(d)) != NULL; errno = 0) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (depth == 0 && strcmp(e->d_name, NVF_MANIFEST_NAME) == 0)
            continue;
        char *name = join(rel, e->d_name);
        char *full = join(w->root, name ? name : "");
        struct stat st;
        if (!name || !full) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory to list a directory");
        } else if (stat(full, &st) != 0) {
            nvf_log(NVF_LOG_WARN, "skipping '%s': %s", full, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            for (int k = 0; k < depth && rc == NVF_OK; k++)
                if (w->dev[k] == st.st_dev && w->ino[k] == st.st_ino)
                    rc = nvf_error_set(NVF_E_IO, "directory loop at '%s'", full);
            if (rc == NVF_OK && depth + 1 >= MAX_DEPTH)
                rc = nvf_error_set(NVF_E_IO, "directories nested deeper than %d at '%s'", MAX_DEPTH,
                                   full);
            if (rc == NVF_OK) {
                w->dev[depth + 1] = st.st_dev;
                w->ino[depth + 1] = st.st_ino;
                rc = walk(w, name, depth + 1);
            }
        } else if (!S_ISREG(st.st_mode)) {
            nvf_log(NVF_LOG_WARN, "skipping '%s': not a regular file or directory", full);
        } else if (!(w->skip_tmp && ends_with(name, ".tmp"))) {
            const char *why = nvf_manifest_name_problem(name);
            if (why)
                rc = nvf_error_set(NVF_E_UNSUPPORTED,
                                   "file name '%s' %s: a manifest cannot record it", full, why);
            else
                rc = list_push(w->out, name);
            if (rc == NVF_OK)
                name = NULL;
        }
        free(name);
        free(full);
    }
    if (rc == NVF_OK && errno != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot read directory '%s': %s", dir_path, strerror(errno));
    closedir(d);
    free(dir_path);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int nvf_manifest_list_dir(char ***out, size_t *out_n, const char *dir, int skip_tmp) {
    *out = NULL;
    *out_n = 0;
    name_list l = {NULL, 0, 0};
    walk_ctx w;
    memset(&w, 0, sizeof w);
    w.root = dir;
    w.skip_tmp = skip_tmp;
    w.out = &l;
    struct stat st;
    if (stat(dir, &st) != 0)
        return nvf_error_set(NVF_E_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    w.dev[0] = st.st_dev;
    w.ino[0] = st.st_ino;
    int rc = walk(&w, "", 0);
    if (rc != NVF_OK) {
        nvf_manifest_names_free(l.v, l.n);
        return rc;
    }
    if (l.n > 0)
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    *out = l.v;
    *out_n = l.n;
    return NVF_OK;
}

void nvf_manifest_names_free(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* Worker pool -------------------------------------------------------------------------------------
 */

typedef struct job {
    const char *name; /* relative, owned by the caller's list */
    char *path;
    uint64_t size;    /* from stat, for scheduling and progress */
    int want_tensors; /* open as safetensors and CRC its tensors */
    /* results */
    int rc;
    char *err;
    char sha256[65];
    uint64_t bytes;
    nvf_st_file *st; /* with want_tensors, when it opened */
    int st_rc;
    char *st_err;
    uint32_t *crc; /* st->n_tensors entries, in data-offset order */
} job;

typedef struct pool {
    job *jobs;
    size_t n;
    size_t *order; /* biggest first */
    size_t next;
    uint64_t done, total;
    const nvf_hash_opts *opts;
    pthread_mutex_t lock;
} pool;

static int stopped(const pool *p) {
    return p->opts->stop && *p->opts->stop;
}

static int on_chunk(void *user, uint64_t bytes) {
    pool *p = user;
    pthread_mutex_lock(&p->lock);
    p->done += bytes;
    if (p->opts->progress)
        p->opts->progress(p->opts->user, NULL, p->done, p->total);
    pthread_mutex_unlock(&p->lock);
    return stopped(p);
}

static char *dup_error(void) {
    const char *msg = nvf_error_last();
    return strdup(msg[0] ? msg : nvf_status_str(nvf_error_code()));
}

static void run_job(pool *p, job *j) {
    nvf_hash_tensors t;
    nvf_hash_tensors *tp = NULL;
    uint64_t *offs = NULL;
    if (stopped(p)) {
        j->rc = NVF_E_INTERRUPTED;
        return;
    }
    if (j->want_tensors) {
        j->st_rc = nvf_st_open(&j->st, j->path);
        if (j->st_rc != NVF_OK) {
            j->st_err = dup_error();
        } else {
            size_t n = j->st->n_tensors;
            offs = malloc((2 * n + 1) * sizeof *offs);
            j->crc = calloc(n + 1, sizeof *j->crc);
            if (!offs || !j->crc) {
                j->rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", j->path);
                j->err = dup_error();
                free(offs);
                return;
            }
            for (size_t i = 0; i < n; i++) {
                offs[i] = j->st->tensors[i].begin;
                offs[n + i] = j->st->tensors[i].end;
            }
            t.data_start = j->st->data_start;
            t.n = n;
            t.begin = offs;
            t.end = offs + n;
            t.crc = j->crc;
            t.cursor = 0;
            tp = &t;
        }
    }
    j->rc = nvf_hash_file_ex(j->sha256, &j->bytes, j->path, tp, on_chunk, p);
    if (j->rc != NVF_OK)
        j->err = dup_error();
    free(offs);
    pthread_mutex_lock(&p->lock);
    if (j->rc == NVF_OK && p->opts->progress)
        p->opts->progress(p->opts->user, j->name, p->done, p->total);
    pthread_mutex_unlock(&p->lock);
}

static void *worker(void *arg) {
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t k = p->next < p->n ? p->order[p->next++] : SIZE_MAX;
        pthread_mutex_unlock(&p->lock);
        if (k == SIZE_MAX)
            return NULL;
        run_job(p, &p->jobs[k]);
    }
}

static const job *g_sort_jobs; /* qsort has no context argument; set under one call only */

static int cmp_order(const void *a, const void *b) {
    const job *x = &g_sort_jobs[*(const size_t *)a], *y = &g_sort_jobs[*(const size_t *)b];
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Run every job; the first failure in name order (jobs are in name order) is returned. */
static int run_pool(job *jobs, size_t n, const nvf_hash_opts *opts) {
    pool p;
    memset(&p, 0, sizeof p);
    p.jobs = jobs;
    p.n = n;
    p.opts = opts;
    int rc = NVF_OK;
    p.order = malloc((n ? n : 1) * sizeof *p.order);
    if (!p.order)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
    for (size_t i = 0; i < n; i++) {
        p.order[i] = i;
        p.total += jobs[i].size;
    }
    /* Biggest first, so that one huge shard does not start last and run alone. The sort uses
     * a file-scope pointer; hashing runs are not started concurrently from several threads. */
    g_sort_jobs = jobs;
    qsort(p.order, n, sizeof *p.order, cmp_order);
    g_sort_jobs = NULL;
    long nt = opts->threads;
    if (nt <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        nt = nc > 0 ? nc : 1;
    }
    if ((size_t)nt > n)
        nt = n > 0 ? (long)n : 1;
    pthread_mutex_init(&p.lock, NULL);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    long started = 0;
    if (th)
        for (; started < nt; started++)
            if (pthread_create(&th[started], NULL, worker, &p) != 0)
                break;
    if (started == 0)
        worker(&p); /* no thread could start: do the work here */
    for (long i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    pthread_mutex_destroy(&p.lock);
    free(p.order);
    if (stopped(&p))
        return nvf_error_set(NVF_E_INTERRUPTED, "interrupted: hashing stopped");
    for (size_t i = 0; i < n && rc == NVF_OK; i++)
        if (jobs[i].rc != NVF_OK)
            rc = nvf_error_set(jobs[i].rc, "%s", jobs[i].err ? jobs[i].err : "hashing failed");
    return rc;
}

static void free_jobs(job *jobs, size_t n) {
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].path);
        free(jobs[i].err);
        free(jobs[i].st_err);
        free(jobs[i].crc);
        nvf_st_close(jobs[i].st);
    }
    free(jobs);
}

/* A job per name; `want` (may be NULL) says which open as safetensors. */
static int make_jobs(job **out, const char *dir, char *const *names, size_t n, const int *want) {
    job *jobs = calloc(n ? n : 1, sizeof *jobs);
    if (!jobs)
        return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
    for (size_t i = 0; i < n; i++) {
        jobs[i].name = names[i];
        jobs[i].path = join(dir, names[i]);
        if (!jobs[i].path) {
            free_jobs(jobs, n);
            return nvf_error_set(NVF_E_NOMEM, "no memory to hash files");
        }
        struct stat st;
        if (stat(jobs[i].path, &st) == 0)
            jobs[i].size = (uint64_t)st.st_size;
        jobs[i].want_tensors = want ? want[i] : 0;
    }
    *out = jobs;
    return NVF_OK;
}

/* Hash (write mode) ------------------------------------------------------------------------------
 */

int nvf_manifest_hash_dir(nvf_manifest **out, const char *dir, const nvf_hash_opts *opts) {
    *out = NULL;
    char **names = NULL;
    size_t n = 0;
    job *jobs = NULL;
    int *want = NULL;
    nvf_manifest *m = NULL;
    int rc = nvf_manifest_list_dir(&names, &n, dir, 1);
    if (rc != NVF_OK)
        return rc;
    want = calloc(n ? n : 1, sizeof *want);
    if (!want) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", dir);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        want[i] = ends_with(names[i], ".safetensors");
    rc = make_jobs(&jobs, dir, names, n, want);
    if (rc == NVF_OK)
        rc = run_pool(jobs, n, opts);
    if (rc != NVF_OK)
        goto done;
    m = nvf_manifest_new();
    if (!m) {
        rc = NVF_E_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n && rc == NVF_OK; i++) {
        const job *j = &jobs[i];
        if (j->want_tensors && j->st_rc != NVF_OK) {
            rc = nvf_error_set(j->st_rc, "%s", j->st_err);
            break;
        }
        rc = nvf_manifest_add_file(m, j->name, j->bytes, j->sha256);
        for (size_t k = 0; j->st && k < j->st->n_tensors && rc == NVF_OK; k++) {
            const nvf_st_tensor *t = &j->st->tensors[k];
            rc = nvf_manifest_add_tensor(m, t->name, j->name, nvf_dtype_name(t->dtype), t->ndim,
                                         t->shape, j->crc[k]);
        }
    }
    if (rc != NVF_OK)
        goto done;
    *out = m;
    m = NULL;
done:
    nvf_manifest_free(m);
    free_jobs(jobs, n);
    free(want);
    nvf_manifest_names_free(names, n);
    return rc;
}

/* Check
 * -------------------------------------------------------------------------------------------- */

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
static int check_tensors(finding_list *l, size_t *checked, const job *j,
                         const nvf_manifest_tensor *const *mt, size_t nt) {
    char label[1024], got[16], expected[16];
    if (j->st_rc != NVF_OK)
        return add_finding(l, NVF_FINDING_CRC32, j->name, NULL, NULL, ": tensors unreadable: %s",
                           j->st_err);
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

int nvf_manifest_check_dir(nvf_manifest_report **out, const char *dir, const nvf_manifest *m,
                           const nvf_hash_opts *opts) {
    *out = NULL;
    char **present = NULL, **names = NULL, **sorted = NULL;
    size_t n_present = 0, n_jobs = 0;
    size_t *listed = NULL; /* job -> manifest file index */
    int *want = NULL;
    job *jobs = NULL;
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
    qsort(sorted, n_jobs, sizeof *sorted, cmp_str);
    for (size_t i = 0; i < n_present && rc == NVF_OK; i++)
        if (find_name(sorted, n_jobs, present[i]) < 0)
            rc = add_finding(&fl, NVF_FINDING_EXTRA, present[i], present[i], NULL, "%s", "");
    if (rc == NVF_OK)
        rc = make_jobs(&jobs, dir, names, n_jobs, want);
    if (rc == NVF_OK)
        rc = run_pool(jobs, n_jobs, opts);
    for (size_t k = 0; k < n_jobs && rc == NVF_OK; k++) {
        const job *j = &jobs[k];
        const nvf_manifest_file *f = &m->files[listed[k]];
        char got[32], expected[32];
        if (j->bytes != f->bytes) {
            snprintf(got, sizeof got, "%" PRIu64, j->bytes);
            snprintf(expected, sizeof expected, "%" PRIu64, f->bytes);
            rc = add_finding(&fl, NVF_FINDING_SIZE, f->name, got, expected, ": %s != %s", got,
                             expected);
        } else if (strcmp(j->sha256, f->sha256) != 0) {
            rc = add_finding(&fl, NVF_FINDING_SHA256, f->name, j->sha256, f->sha256,
                             ": got %s expected %s", j->sha256, f->sha256);
        } else {
            r->files_ok++;
        }
        if (rc != NVF_OK || !j->want_tensors)
            continue;
        size_t lo, hi;
        tensor_range(&lo, &hi, mt, m->n_tensors, j->name);
        rc = check_tensors(&fl, &r->tensors_checked, j, mt + lo, hi - lo);
    }
    if (rc != NVF_OK)
        goto done;
    if (fl.n > 0)
        qsort(fl.v, fl.n, sizeof *fl.v, cmp_finding);
    r->findings = fl.v;
    r->n_findings = fl.n;
    fl.v = NULL;
    fl.n = 0;
    *out = r;
    r = NULL;
done:
    free_findings(fl.v, fl.n);
    nvf_manifest_report_free(r);
    free_jobs(jobs, n_jobs);
    free(mt);
    free(want);
    free(listed);
    free(names);
    free(sorted);
    nvf_manifest_names_free(present, n_present);
    return rc;
}
