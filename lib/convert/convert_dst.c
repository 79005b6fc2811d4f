/*
 * The destination directory of a conversion:
 *   1. created when absent (and removed again when a failed run leaves it empty);
 *   2. locked for the whole run: flock on DST/.nvfp4-convert.lock, which holds the owner's pid
 *      and is removed when the run ends, so that it never reaches a manifest; a second run into
 *      the same DST stops at once naming that pid;
 *   3. checked: empty, or with --resume/--force holding only files this conversion writes
 *      (a stranger would stay beside the outputs and fail `hash --check` as EXTRA);
 *   4. cleared of what marks an output complete or half-written (manifest, index, configs,
 *      temporary files; with --force the journal too) before the pipeline starts, and again
 *      after a failure, so that nothing that looks complete is left.
 * A prepared target with --ep N writes into rank directories "rank-0000r-of-0000N/" of DST: each
 * is checked, cleared and released like DST itself (it holds shards, index, config and side
 * files; the lock, journal and manifest are DST's).
 * A part of --shard i/N shares DST with the other parts, which may run at the same time on other
 * machines of a shared filesystem: it locks only its own .nvfp4-parts/i-of-N.lock (DST and
 * .nvfp4-parts created with mkdir, EEXIST being fine), accepts what any part writes whatever the
 * flags (DST holds the others' shards), clears only its own temporary files, journal and record,
 * and never removes DST or a rank directory (another part may be about to write into it).
 */
#include "convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct cv_dst {
    char *dir;
    char *lock_path;
    int lock_fd;
    int created; /* this run created DST */
    int part;    /* a part of --shard i/N: nothing but its own files is touched */
    int index, count;
};

static const char *const k_outputs[] = {NVF_MANIFEST_NAME, "model.safetensors.index.json",
                                        "config.json", "hf_quant_config.json", CV_INVERSE_NAME};

/* Remove every entry of `dst` for which drop(name, ctx) holds. */
static int remove_where(const char *dst, int (*drop)(const char *, const void *), const void *ctx) {
    DIR *d = opendir(dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", dst, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while ((e = readdir(d)) != NULL && rc == NVF_OK) {
        if (!drop(e->d_name, ctx))
            continue;
        char *path = nvf_path_join(dst, e->d_name);
        if (!path)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        else if (unlink(path) != 0 && errno != ENOENT)
            rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
        free(path);
    }
    closedir(d);
    return rc;
}

/* What marks a finished (or half-finished) output; finished shards stay for --resume, and the
 * journal unless *journal_too. */
static int is_output(const char *name, const void *journal_too) {
    int drop = fnmatch("*.tmp", name, 0) == 0 ||
               (*(const int *)journal_too && strcmp(name, NVF_CONVERT_JOURNAL) == 0);
    for (size_t i = 0; i < sizeof k_outputs / sizeof k_outputs[0]; i++)
        drop |= strcmp(name, k_outputs[i]) == 0;
    return drop;
}

static int is_rank_dir(const char *name) {
    return fnmatch("rank-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]", name, 0) == 0;
}

/* Call fn(path, name, ctx) for every rank directory of `dst` (a missing DST has none). */
static int each_rank_dir(const char *dst, int (*fn)(const char *, const char *, const void *),
                         const void *ctx) {
    DIR *d = opendir(dst);
    if (!d)
        return errno == ENOENT
                   ? NVF_OK
                   : nvf_error_set(NVF_E_IO, "cannot list '%s': %s", dst, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while ((e = readdir(d)) != NULL && rc == NVF_OK) {
        if (!is_rank_dir(e->d_name))
            continue;
        char *path = nvf_path_join(dst, e->d_name);
        rc = path ? (nvf_path_is_dir(path) ? fn(path, e->d_name, ctx) : NVF_OK)
                  : nvf_error_set(NVF_E_NOMEM, "no memory");
        free(path);
    }
    closedir(d);
    return rc;
}

static int clear_rank(const char *path, const char *name, const void *journal_too) {
    (void)name;
    return remove_where(path, is_output, journal_too);
}

static int clear_outputs(const char *dst, int journal_too) {
    int rc = remove_where(dst, is_output, &journal_too);
    return rc == NVF_OK ? each_rank_dir(dst, clear_rank, &journal_too) : rc;
}

/* Whether DST entry `name` is something this conversion writes (or an earlier run of it). */
static int is_ours(const char *name, const cv_sources *src) {
    if (strcmp(name, CV_LOCK_NAME) == 0 || strcmp(name, NVF_CONVERT_JOURNAL) == 0 ||
        fnmatch("*.tmp", name, 0) == 0 || fnmatch("model-*-of-*.safetensors", name, 0) == 0)
        return 1;
    for (size_t i = 0; i < sizeof k_outputs / sizeof k_outputs[0]; i++)
        if (strcmp(name, k_outputs[i]) == 0)
            return 1;
    for (size_t i = 0; i < src->n; i++)
        if (strcmp(name, src->names[i]) == 0 && cv_sources_is_copied(name))
            return 1;
    return 0;
}

/* DST (top) or one of its rank directories: empty, or with --resume/--force only ours. */
static int check_contents(const nvf_convert_options *o, const cv_sources *src, const char *dir,
                          int top) {
    int part = o->shard_count > 0;
    DIR *d = opendir(dir);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", dir, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, CV_LOCK_NAME) == 0)
            continue;
        if (top && part && strcmp(e->d_name, NVF_CONVERT_PARTS_DIR) == 0)
            continue; /* the parts' records, journals and locks */
        if (!o->resume && !o->force && !part) {
            rc = nvf_error_set(NVF_E_INVALID,
                               "'%s' is not empty (holds '%s'): use --resume to continue a "
                               "conversion or --force to overwrite",
                               dir, e->d_name);
            break;
        }
        char *path = nvf_path_join(dir, e->d_name);
        struct stat sb;
        int is_dir = path && lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        if (is_dir && top && is_rank_dir(e->d_name))
            rc = check_contents(o, src, path, 0);
        else if (is_dir || !is_ours(e->d_name, src) ||
                 (!top && (strcmp(e->d_name, NVF_MANIFEST_NAME) == 0 ||
                           strcmp(e->d_name, NVF_CONVERT_JOURNAL) == 0)))
            rc = nvf_error_set(NVF_E_INVALID,
                               "'%s' holds '%s', which this conversion does not write (it would "
                               "be left beside the output, and `hash --check` would report it): "
                               "remove it or choose another DST",
                               dir, e->d_name);
        free(path);
    }
    closedir(d);
    return rc;
}

/* The pid a lock file holds, for the message ("unknown" while its owner has not written it). */
static void read_pid(char *out, size_t cap, int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long pid = 0;
    if (n > 0) {
        buf[n] = '\0';
        pid = strtol(buf, NULL, 10);
    }
    if (pid > 0)
        snprintf(out, cap, "%ld", pid);
    else
        snprintf(out, cap, "unknown");
}

static int take_lock(cv_dst *d) {
    /* The owner removes the file before it unlocks: a file opened just before that is no
     * longer the lock, so after locking check that the path still names what is locked. */
    for (int attempt = 0; attempt < 16; attempt++) {
        int fd = open(d->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            return nvf_error_set(NVF_E_IO, "cannot open the lock file '%s': %s", d->lock_path,
                                 strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            char pid[32];
            read_pid(pid, sizeof pid, fd);
            close(fd);
            if (err == EWOULDBLOCK)
                return nvf_error_set(NVF_E_IO,
                                     "'%s' is in use by another conversion (pid %s holds '%s')",
                                     d->dir, pid, d->lock_path);
            return nvf_error_set(NVF_E_IO, "cannot lock '%s': %s", d->lock_path, strerror(err));
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(d->lock_path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            char line[32];
            int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
                int err = errno;
                close(fd);
                return nvf_error_set(NVF_E_IO, "cannot write the lock file '%s': %s", d->lock_path,
                                     strerror(err));
            }
            d->lock_fd = fd;
            return NVF_OK;
        }
        close(fd);
    }
    return nvf_error_set(NVF_E_IO, "cannot lock '%s': it keeps being replaced", d->lock_path);
}

/*
 * A part, once it holds its own lock: DST's lock must be free (no merge, no one-job conversion
 * into DST). A merge takes DST's lock and then checks the parts' locks, so of a part and a merge
 * starting together at least one sees the other's lock and stops.
 */
static int check_not_merging(const cv_dst *d) {
    char *path = nvf_path_join(d->dir, CV_LOCK_NAME);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int rc = NVF_OK;
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        char pid[32];
        read_pid(pid, sizeof pid, fd);
        rc = nvf_error_set(NVF_E_IO, "'%s' is in use by a merge or conversion (pid %s holds '%s')",
                           d->dir, pid, path);
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

static int remove_empty_rank(const char *path, const char *name, const void *ctx) {
    (void)name;
    (void)ctx;
    rmdir(path); /* only when nothing is left in it */
    return NVF_OK;
}

static void release(cv_dst *d) {
    if (d->lock_fd >= 0 && !d->part)
        each_rank_dir(d->dir, remove_empty_rank, NULL);
    if (d->lock_fd >= 0) {
        unlink(d->lock_path);
        close(d->lock_fd); /* unlocks */
    }
    if (d->created && !d->part)
        rmdir(d->dir); /* only when nothing is left in it (no finished shard to resume) */
    free(d->dir);
    free(d->lock_path);
    free(d);
}

int cv_dst_open(cv_dst **out, const nvf_convert_options *o, const cv_sources *src) {
    *out = NULL;
    cv_dst *d = calloc(1, sizeof *d);
    if (!d)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    d->lock_fd = -1;
    d->created = !nvf_path_is_dir(o->dst);
    d->dir = strdup(o->dst);
    d->part = o->shard_count > 0;
    d->index = o->shard_index;
    d->count = o->shard_count;
    d->lock_path = d->part ? cv_parts_path(o->dst, d->index, d->count, ".lock")
                           : nvf_path_join(o->dst, CV_LOCK_NAME);
    char *parts = d->part ? nvf_path_join(o->dst, NVF_CONVERT_PARTS_DIR) : NULL;
    int rc = d->dir && d->lock_path && (parts || !d->part)
                 ? nvf_mkdir_p(parts ? parts : o->dst)
                 : nvf_error_set(NVF_E_NOMEM, "no memory");
    free(parts);
    if (rc == NVF_OK)
        rc = take_lock(d);
    if (rc == NVF_OK && d->part)
        rc = check_not_merging(d);
    if (rc == NVF_OK)
        rc = check_contents(o, src, o->dst, 1);
    if (rc != NVF_OK) {
        if (d->lock_fd < 0)
            d->created = 0; /* another run owns it */
        release(d);
        return rc;
    }
    *out = d;
    return NVF_OK;
}

/* The merge's outputs (not temporary files: other parts' are being written). */
static int is_merged_output(const char *name, const void *ctx) {
    (void)ctx;
    for (size_t i = 0; i < sizeof k_outputs / sizeof k_outputs[0]; i++)
        if (strcmp(name, k_outputs[i]) == 0)
            return 1;
    return 0;
}

static int clear_rank_merged(const char *path, const char *name, const void *ctx) {
    (void)name;
    return remove_where(path, is_merged_output, ctx);
}

static int unlink_quiet(const char *path) {
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    if (unlink(path) != 0 && errno != ENOENT)
        return nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
    return NVF_OK;
}

/* A part: its record (it is written again at the end), its journal (with journal_too), the
 * temporary files of its shards, and what a merge wrote (the union changes). */
static int clear_part(const cv_dst *d, int journal_too, const cv_plan *p) {
    char *rec = cv_parts_path(d->dir, d->index, d->count, ".json");
    int rc = unlink_quiet(rec);
    free(rec);
    if (rc == NVF_OK && journal_too) {
        char *j = cv_parts_path(d->dir, d->index, d->count, ".progress.json");
        rc = unlink_quiet(j);
        free(j);
    }
    for (size_t s = 0; rc == NVF_OK && s < p->n_shards; s++) {
        if (p->shards[s].other)
            continue;
        char name[80];
        snprintf(name, sizeof name, "%s.tmp", p->shards[s].name);
        char *path = nvf_path_join(d->dir, name);
        rc = unlink_quiet(path);
        free(path);
    }
    if (rc == NVF_OK)
        rc = remove_where(d->dir, is_merged_output, NULL);
    return rc == NVF_OK ? each_rank_dir(d->dir, clear_rank_merged, NULL) : rc;
}

int cv_dst_clear(const cv_dst *d, int journal_too, const cv_plan *p) {
    if (d->part)
        return clear_part(d, journal_too, p);
    return clear_outputs(d->dir, journal_too);
}

int cv_dst_lock(cv_dst **out, const char *dst) {
    *out = NULL;
    cv_dst *d = calloc(1, sizeof *d);
    if (!d)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    d->lock_fd = -1;
    d->dir = strdup(dst);
    d->lock_path = nvf_path_join(dst, CV_LOCK_NAME);
    int rc = d->dir && d->lock_path ? take_lock(d) : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc != NVF_OK) {
        release(d);
        return rc;
    }
    *out = d;
    return NVF_OK;
}

void cv_dst_close(cv_dst *d, int failed) {
    if (!d)
        return;
    /* A part's writer removed its own temporary files; the others' are not ours to touch. */
    if (failed && !d->part) {
        /* Keep the first error's message: cleaning up may set another. */
        nvf_error_state st;
        nvf_error_save(&st);
        clear_outputs(d->dir, 0);
        nvf_error_restore(&st);
    }
    release(d);
}

typedef struct stale_ctx {
    const cv_plan *p;
    const char *prefix; /* "" or "rank-0000r-of-0000N/" */
} stale_ctx;

/* A shard name of an earlier run that the plan does not produce. */
static int is_stale(const char *name, const void *ctx) {
    const stale_ctx *c = ctx;
    size_t k = strlen(c->prefix);
    if (fnmatch("model-*-of-*.safetensors", name, 0) != 0)
        return 0;
    for (size_t s = 0; s < c->p->n_shards; s++) {
        const char *sn = c->p->shards[s].name;
        if (strncmp(sn, c->prefix, k) == 0 && strcmp(sn + k, name) == 0)
            return 0;
    }
    return 1;
}

/* Everything an earlier conversion wrote into a rank directory this plan has no shard in. */
static int is_any(const char *name, const void *ctx) {
    (void)ctx;
    return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int stale_rank(const char *path, const char *name, const void *plan) {
    char prefix[300]; /* a directory entry name (at most 255 bytes) and '/' */
    snprintf(prefix, sizeof prefix, "%s/", name);
    stale_ctx c = {plan, prefix};
    int used = 0;
    for (size_t s = 0; s < c.p->n_shards && !used; s++)
        used = strncmp(c.p->shards[s].name, prefix, strlen(prefix)) == 0;
    if (used)
        return remove_where(path, is_stale, &c);
    /* Only files check_contents accepted can be in it (ours). */
    int rc = remove_where(path, is_any, NULL);
    if (rc == NVF_OK && rmdir(path) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
    return rc;
}

int cv_dst_remove_stale(const char *dst, const cv_plan *p) {
    stale_ctx c = {p, ""};
    int rc = remove_where(dst, is_stale, &c);
    return rc == NVF_OK ? each_rank_dir(dst, stale_rank, p) : rc;
}

int cv_dst_make_ranks(const char *dst, const cv_plan *p) {
    int rc = NVF_OK;
    for (int r = 0; r < p->ep && p->ep > 1 && rc == NVF_OK; r++) {
        char name[64];
        snprintf(name, sizeof name, "rank-%05d-of-%05d", r, p->ep);
        char *path = nvf_path_join(dst, name);
        rc = path ? nvf_mkdir_p(path) : nvf_error_set(NVF_E_NOMEM, "no memory");
        free(path);
    }
    return rc;
}
