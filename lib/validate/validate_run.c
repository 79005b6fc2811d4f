/*
 * One validate run (nvfp4/validate.h): list the files, read them all once (validate_scan.c),
 * then the manifest, and per checkpoint (the directory, or each expert-parallel rank
 * directory) its structure, and when that holds, the rules on the checkpoint lib/ckpt opens;
 * --deep adds lib/verify. The findings are sorted at the end, so the report does not depend on
 * the thread count.
 */
#include "validate_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

vd_file *vd_find_file(const vd_ctx *c, const char *name) {
    size_t lo = 0, hi = c->n_files;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int k = strcmp(name, c->files[mid].name);
        if (k == 0)
            return &c->files[mid];
        if (k < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static void free_files(vd_file *f, size_t n) {
    for (size_t i = 0; f && i < n; i++) {
        free(f[i].name);
        free(f[i].path);
        nvf_st_close(f[i].st);
        free(f[i].st_error);
        free(f[i].crc);
        nvf_findings_free(&f[i].findings);
    }
    free(f);
}

/* The files to read: every file under a directory (the manifest aside), or the one file. */
static int list_files(vd_ctx *c, const char *path) {
    char **names = NULL;
    size_t n = 0;
    int rc = NVF_OK;
    if (c->is_file) {
        const char *base = strrchr(path, '/');
        names = malloc(sizeof *names);
        if (names && (names[0] = strdup(base ? base + 1 : path)) != NULL)
            n = 1;
        else
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    } else {
        rc = nvf_manifest_list_dir(&names, &n, path, 0);
    }
    if (rc != NVF_OK) {
        nvf_manifest_names_free(names, n);
        return rc;
    }
    c->files = calloc(n ? n : 1, sizeof *c->files);
    for (size_t i = 0; c->files && i < n && rc == NVF_OK; i++) {
        vd_file *f = &c->files[i];
        f->name = names[i];
        names[i] = NULL;
        f->path = c->is_file ? strdup(path) : nvf_path_join(path, f->name);
        f->is_st = ends_with(f->name, ".safetensors");
        struct stat st;
        if (f->path && stat(f->path, &st) == 0)
            f->size = (uint64_t)st.st_size;
        c->n_files = i + 1;
        if (!f->path)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    if (!c->files)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory");
    nvf_manifest_names_free(names, n);
    return rc;
}

/* The expert-parallel rank directories at the top (sorted), when the top has no shards and no
 * index of its own. */
static int rank_dirs(char ***out, size_t *n_out, const vd_ctx *c) {
    char **v = NULL;
    size_t n = 0;
    int own = 0;
    for (size_t i = 0; i < c->n_files; i++) {
        const char *name = c->files[i].name, *slash = strchr(name, '/');
        if (!slash) {
            own |= c->files[i].is_st || strcmp(name, "model.safetensors.index.json") == 0;
            continue;
        }
        char dir[64];
        size_t len = (size_t)(slash - name);
        int64_t r, size;
        if (len >= sizeof dir)
            continue;
        memcpy(dir, name, len);
        dir[len] = '\0';
        if (!nvf_ckpt_rank_dir_parse(dir, &r, &size) || (n > 0 && strcmp(v[n - 1], dir) == 0))
            continue;
        char **g = realloc(v, (n + 1) * sizeof *g);
        if (!g || !(g[n] = strdup(dir))) {
            free(g ? g : v);
            return nvf_error_set(NVF_E_NOMEM, "no memory");
        }
        v = g;
        n++;
    }
    if (own) {
        nvf_manifest_names_free(v, n);
        v = NULL;
        n = 0;
    }
    *out = v;
    *n_out = n;
    return NVF_OK;
}

/* lib/verify on every MoE layer of the checkpoint at `dir`; its findings as verify.<id>. */
static int deep(vd_ctx *c, const char *dir, const char *prefix) {
    nvf_verify_report vr;
    int rc = nvf_verify_run(&vr, dir, NULL, c->o->deep_opts);
    if (rc == NVF_E_NOMEM) {
        nvf_verify_report_free(&vr);
        return rc;
    }
    char where[80];
    snprintf(where, sizeof where, "%.*s", (int)(prefix[0] ? strlen(prefix) - 1 : 0), prefix);
    if (rc == NVF_E_UNSUPPORTED) {
        /* One rank of an expert-parallel split: verify reads whole layers. */
        rc = nvf_findings_add(c->out, "verify.skipped", "warning", where, "", "verify %s: %s", dir,
                              nvf_error_last());
        nvf_verify_report_free(&vr);
        return rc;
    }
    c->r->deep = 1;
    if (rc != NVF_OK) {
        rc = nvf_findings_add(c->out, "verify.error", "error", where, "", "verify %s: %s", dir,
                              nvf_error_last());
        nvf_verify_report_free(&vr);
        return rc;
    }
    c->r->layers_verified += vr.n_layers;
    for (size_t i = 0; i < vr.findings.n && rc == NVF_OK; i++) {
        nvf_finding f = vr.findings.v[i];
        snprintf(f.id, sizeof f.id, "verify.%.40s", vr.findings.v[i].id);
        snprintf(f.file, sizeof f.file, "%s", where);
        rc = nvf_findings_push(c->out, &f);
    }
    nvf_verify_report_free(&vr);
    return rc;
}

/* One checkpoint: its structure, then the rules on what lib/ckpt opens. *ck stays open for the
 * rank checks (NULL when it was not opened). */
static int check_ckpt(vd_ctx *c, const char *prefix, nvf_ckpt **ck) {
    *ck = NULL;
    int clean = 1, rc = NVF_OK;
    if (!c->is_file)
        rc = vd_check_structure(c, prefix, &clean);
    if (rc == NVF_OK && !clean)
        nvf_log(NVF_LOG_INFO,
                "%s/%s: the structure findings keep the checkpoint from being opened; its "
                "linears, scales and experts are not checked",
                c->top, prefix);
    if (rc != NVF_OK || !clean)
        return rc;
    if (c->is_file && c->files[0].st_error)
        return NVF_OK;
    char *dir = c->is_file || !prefix[0] ? strdup(c->top) : nvf_path_join(c->top, prefix);
    if (!dir)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    rc = nvf_ckpt_open(ck, dir);
    if (rc == NVF_E_NOMEM || rc == NVF_E_IO) {
        free(dir);
        return rc;
    }
    if (rc != NVF_OK) {
        /* The index, config and shards held, yet lib/ckpt refuses it: say why. */
        rc = nvf_findings_add(c->out, "checkpoint.unreadable", "error", "", "", "%s",
                              nvf_error_last());
        free(dir);
        return rc;
    }
    if (c->r->format[0] == '\0' || strcmp(c->r->format, "unknown") == 0)
        snprintf(c->r->format, sizeof c->r->format, "%s",
                 nvf_ckpt_format_name((*ck)->quant.format));
    rc = vd_check_rules(c, *ck, prefix);
    if (rc == NVF_OK)
        rc = vd_check_prepared(c, *ck, prefix);
    if (rc == NVF_OK && c->o->deep && (*ck)->moe.n_moe > 0)
        rc = deep(c, dir, prefix);
    free(dir);
    return rc;
}

/* The per-file findings of the scan, in file order. */
static int scan_findings(vd_ctx *c) {
    int rc = NVF_OK;
    for (size_t i = 0; i < c->n_files && rc == NVF_OK; i++) {
        const vd_file *f = &c->files[i];
        if (f->st_error)
            rc = nvf_findings_add(c->out, "safetensors.malformed", "error", f->name, "", "%s",
                                  f->st_error);
        for (size_t k = 0; k < f->findings.n && rc == NVF_OK; k++)
            rc = nvf_findings_push(c->out, &f->findings.v[k]);
    }
    return rc;
}

static int run(vd_ctx *c, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return nvf_error_set(NVF_E_IO, "cannot read '%s': no such file or directory", path);
    c->is_file = S_ISREG(st.st_mode);
    if (!c->is_file && !S_ISDIR(st.st_mode))
        return nvf_error_set(NVF_E_IO, "'%s' is neither a directory nor a file", path);
    int rc = list_files(c, path);
    if (rc != NVF_OK)
        return rc;
    int any = 0;
    for (size_t i = 0; i < c->n_files; i++) {
        const char *base = strrchr(c->files[i].name, '/');
        base = base ? base + 1 : c->files[i].name;
        any |= c->files[i].is_st || strcmp(base, "config.json") == 0;
    }
    if (!any)
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s' is not a checkpoint: no config.json and no .safetensors file",
                             path);
    rc = vd_scan(c);
    if (rc == NVF_OK)
        rc = scan_findings(c);
    if (rc == NVF_OK && !c->is_file)
        rc = vd_check_manifest(c);
    char **ranks = NULL;
    size_t n_ranks = 0;
    if (rc == NVF_OK && !c->is_file)
        rc = rank_dirs(&ranks, &n_ranks, c);
    if (rc != NVF_OK)
        return rc;
    c->r->n_ranks = n_ranks;
    if (n_ranks == 0) {
        nvf_ckpt *ck = NULL;
        rc = check_ckpt(c, "", &ck);
        nvf_ckpt_close(ck);
    } else {
        nvf_ckpt **cks = calloc(n_ranks, sizeof *cks);
        rc = cks ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
        for (size_t i = 0; i < n_ranks && rc == NVF_OK; i++) {
            char prefix[80];
            snprintf(prefix, sizeof prefix, "%s/", ranks[i]);
            rc = check_ckpt(c, prefix, &cks[i]);
        }
        if (rc == NVF_OK)
            rc = vd_check_ranks(c, ranks, (const nvf_ckpt *const *)cks, n_ranks);
        for (size_t i = 0; cks && i < n_ranks; i++)
            nvf_ckpt_close(cks[i]);
        free(cks);
    }
    nvf_manifest_names_free(ranks, n_ranks);
    return rc;
}

int nvf_validate_run(nvf_validate_report *out, const char *path, const nvf_validate_opts *o) {
    memset(out, 0, sizeof *out);
    double t0 = now();
    snprintf(out->format, sizeof out->format, "unknown");
    out->checkpoint = strdup(path);
    if (!out->checkpoint)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    if (o->deep && !o->deep_opts)
        return nvf_error_set(NVF_E_INVALID, "validate --deep needs verify's options");
    vd_ctx c = {path, 0, NULL, 0, o, out, &out->findings};
    int rc = run(&c, path);
    free_files(c.files, c.n_files);
    if (rc != NVF_OK)
        return rc;
    nvf_findings_sort(&out->findings);
    out->errors = nvf_findings_errors(&out->findings);
    out->warnings = out->findings.n - out->errors;
    out->pass = out->errors == 0;
    out->seconds = now() - t0;
    return NVF_OK;
}

void nvf_validate_report_free(nvf_validate_report *r) {
    if (!r)
        return;
    free(r->checkpoint);
    nvf_findings_free(&r->findings);
    memset(r, 0, sizeof *r);
}
