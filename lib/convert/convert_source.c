/*
 * The source files of a conversion: which files it reads (the shards and the side files that
 * are copied or read as configuration) and their SHA-256 for the manifest's "source" list.
 *
 * A listed file may be a symbolic link. Hugging Face caches are made of them
 * (REPO/snapshots/REV/FILE -> ../../blobs/SHA), so a link is followed silently when its target
 * (every link resolved) is inside SRC's directory or inside the cache repository REPO that holds
 * it (an ancestor REPO with REPO/snapshots/REV/... and a REPO/blobs directory). A link pointing
 * anywhere else is followed with a warning naming the link and its target, or, with
 * no_follow_outside, refused before DST is touched: its bytes would be read, hashed and copied
 * into DST as if they were part of SRC.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "io/st_file.h"
#include "manifest/hash_file.h"

#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include "nvfp4/pool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_shard_or_index(const char *name) {
    return fnmatch("*.safetensors", name, 0) == 0 ||
           fnmatch("*.safetensors.index.json", name, 0) == 0;
}

int cv_sources_is_copied(const char *name) {
    return !is_shard_or_index(name) && strcmp(name, "config.json") != 0 &&
           strcmp(name, "hf_quant_config.json") != 0 && strcmp(name, NVF_MANIFEST_NAME) != 0;
}

static int push(cv_sources *s, size_t *cap, const char *name) {
    if (s->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        char **nn = realloc(s->names, nc * sizeof *nn);
        if (!nn)
            return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", s->dir);
        s->names = nn;
        *cap = nc;
    }
    s->names[s->n] = strdup(name);
    if (!s->names[s->n])
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", s->dir);
    s->n++;
    return NVF_OK;
}

/*
 * Where SRC's links may point without a warning: the Hugging Face cache repository holding
 * `real_dir` (the innermost ancestor REPO such that real_dir is under REPO/snapshots/REV and
 * REPO/blobs is a directory), else real_dir itself. @return a new string, or NULL on no memory.
 */
static char *link_root(const char *real_dir) {
    static const char marker[] = "/snapshots/";
    const char *best = NULL;
    for (const char *s = strstr(real_dir, marker); s; s = strstr(s + 1, marker)) {
        if (s == real_dir || s[sizeof marker - 1] == '\0')
            continue; /* no REPO before it, or no REV after it */
        char *repo = strndup(real_dir, (size_t)(s - real_dir));
        char *blobs = repo ? nvf_path_join(repo, "blobs") : NULL;
        if (blobs && nvf_path_is_dir(blobs))
            best = s;
        free(blobs);
        free(repo);
    }
    return best ? strndup(real_dir, (size_t)(best - real_dir)) : strdup(real_dir);
}

static int is_under(const char *path, const char *root) {
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/')
        return 1;
    return strncmp(path, root, n) == 0 && path[n] == '/';
}

/* The link rule above for one listed file `full`. */
static int check_link(const char *full, const char *root, int no_follow_outside) {
    struct stat st;
    if (lstat(full, &st) != 0 || !S_ISLNK(st.st_mode))
        return NVF_OK;
    char *target = realpath(full, NULL);
    if (!target)
        return nvf_error_set(NVF_E_IO, "cannot resolve the link '%s': %s", full, strerror(errno));
    int rc = NVF_OK;
    if (!is_under(target, root)) {
        if (no_follow_outside)
            rc = nvf_error_set(NVF_E_FORMAT,
                               "'%s' is a link to '%s', outside '%s' (refused by "
                               "--no-follow-outside)",
                               full, target, root);
        else
            nvf_log(NVF_LOG_WARN,
                    "'%s' is a link to '%s', outside '%s': followed (its bytes are read, hashed "
                    "and, for a side file, copied); --no-follow-outside refuses it",
                    full, target, root);
    }
    free(target);
    return rc;
}

int cv_sources_list(cv_sources *out, const nvf_ckpt *ck, int no_follow_outside) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    const char *file = NULL;
    if (ck->is_file) {
        const char *slash = strrchr(ck->path, '/');
        file = slash ? slash + 1 : ck->path;
    }
    out->dir = strdup(ck->dir);
    if (!out->dir)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->path);
    char *real_dir = realpath(ck->dir, NULL);
    if (!real_dir)
        return nvf_error_set(NVF_E_IO, "cannot resolve '%s': %s", ck->dir, strerror(errno));
    char *root = link_root(real_dir);
    free(real_dir);
    if (!root)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
    int rc = file ? push(out, &cap, file) : NVF_OK;
    DIR *d = rc == NVF_OK ? opendir(ck->dir) : NULL;
    if (rc == NVF_OK && !d) {
        free(root);
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", ck->dir, strerror(errno));
    }
    struct dirent *e;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        /* A single file's directory may hold the other shards of its checkpoint: not read. */
        if (e->d_name[0] == '.' || (file && is_shard_or_index(e->d_name)))
            continue;
        char *full = nvf_path_join(ck->dir, e->d_name);
        int is_file = full && nvf_path_is_file(full);
        free(full);
        if (is_file)
            rc = push(out, &cap, e->d_name);
    }
    if (d)
        closedir(d);
    if (rc == NVF_OK)
        qsort(out->names, out->n, sizeof *out->names, cmp_str);
    for (size_t i = 0; rc == NVF_OK && i < out->n; i++) {
        char *full = cv_sources_path(out, i);
        rc = full ? check_link(full, root, no_follow_outside)
                  : nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
        free(full);
    }
    free(root);
    if (rc != NVF_OK)
        return rc;
    out->bytes = calloc(out->n + 1, sizeof *out->bytes);
    out->sha = calloc(out->n + 1, sizeof *out->sha);
    out->st = calloc(out->n + 1, sizeof *out->st);
    if (!out->bytes || !out->sha || !out->st)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
    /* The shards the conversion reads: the files it opened and checked, by name. */
    for (size_t k = 0; k < ck->n_files; k++) {
        const char *slash = strrchr(ck->files[k].st->path, '/');
        const char *name = slash ? slash + 1 : ck->files[k].st->path;
        char **hit = bsearch(&name, out->names, out->n, sizeof *out->names, cmp_str);
        if (hit)
            out->st[hit - out->names] = ck->files[k].st;
    }
    return NVF_OK;
}

void cv_sources_free(cv_sources *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s->bytes);
    free(s->sha);
    free(s->st);
    free(s->only);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

char *cv_sources_path(const cv_sources *s, size_t i) {
    return nvf_path_join(s->dir, s->names[i]);
}

int cv_source_reopen(const nvf_st_file *f, int *fd, const char *doing) {
    const nvf_st_file_priv *p = nvf_st_priv_of(f);
    struct stat st;
    *fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return nvf_error_set(NVF_E_IO, "cannot open '%s' (%s): %s", f->path, doing,
                             strerror(errno));
    if (fstat(*fd, &st) != 0 || (uint64_t)st.st_dev != p->dev || (uint64_t)st.st_ino != p->ino) {
        close(*fd);
        *fd = -1;
        return nvf_error_set(NVF_E_IO,
                             "'%s' was replaced during the conversion (%s): convert it again",
                             f->path, doing);
    }
    return NVF_OK;
}

/* File i's SHA-256 and size. A shard must still be the file the conversion opened and checked:
 * else the manifest would name bytes that were not converted. */
static int hash_one(cv_sources *s, size_t i) {
    char *path = cv_sources_path(s, i);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int fd;
    struct stat st;
    int rc = s->st[i] ? cv_source_reopen(s->st[i], &fd, "hashing it for the manifest")
                      : nvf_file_open_regular(&fd, &st, path);
    if (rc == NVF_OK) {
        rc = nvf_hash_fd_ex(s->sha[i], &s->bytes[i], fd, path, NULL, NULL, NULL);
        close(fd);
    }
    free(path);
    return rc;
}

/* Whether every page of the file is in the page cache (mincore over a read-only mapping);
 * 0 when in doubt (cannot open or map, empty file). */
static int is_resident(const cv_sources *s, size_t i) {
    char *path = cv_sources_path(s, i);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    free(path);
    if (fd < 0)
        return 0;
    int all = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        size_t len = (size_t)st.st_size, page = (size_t)sysconf(_SC_PAGESIZE);
        void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = malloc((len + page - 1) / page);
        if (map != MAP_FAILED && vec && mincore(map, len, vec) == 0) {
            all = 1;
            for (size_t k = 0; k < (len + page - 1) / page && all; k++)
                all = vec[k] & 1;
        }
        free(vec);
        if (map != MAP_FAILED)
            munmap(map, len);
    }
    close(fd);
    return all;
}

typedef struct hash_batch {
    cv_sources *s;
    const size_t *files;
    int (*quit)(void *);
    void *ctx;
} hash_batch;

/* hash_one, timed for the profile. */
static int hash_timed(cv_sources *s, size_t i) {
    uint64_t t = cv_prof_now();
    int rc = hash_one(s, i);
    cv_prof_add(CV_P_SOURCE_HASH, t);
    cv_prof_source_done();
    return rc;
}

static int hash_task(void *arg, size_t k) {
    hash_batch *b = arg;
    return b->quit && b->quit(b->ctx) ? NVF_OK : hash_timed(b->s, b->files[k]);
}

/* Source files not in the page cache hashed at once (NVFP4_SOURCE_HASH_COLD=N, 1 to 64, sets
 * it): one SHA-256 stream (about 1.3 GB/s a core) is slower than a disk that reads 1.7 GB/s, and
 * one stream at a time left the last files' hashing 5-10 s behind the rest of a cold conversion
 * (bench/results/convert-h200-dc6d167/). */
#define COLD_WIDTH 4

static int cold_width(void) {
    const char *e = getenv("NVFP4_SOURCE_HASH_COLD");
    int w = e && *e ? atoi(e) : COLD_WIDTH;
    return w < 1 ? 1 : w > 64 ? 64 : w;
}

/*
 * SHA-256 is one stream per file, so the files already in the page cache are hashed side by
 * side on the pool; the others in name order (the order the compute reads them) with at most
 * cold_width() at once, each read sequentially, so that a cold disk sees a few sequential
 * readers besides the compute's and the hashing stays within a few files of the compute (the
 * pages it brings in are the compute's too).
 */
int cv_sources_hash(cv_sources *s, int (*quit)(void *), void *ctx) {
    size_t *files = malloc((s->n + 1) * sizeof *files), n_warm = 0, n_cold = 0;
    size_t *cold = malloc((s->n + 1) * sizeof *cold);
    int rc = files && cold ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; rc == NVF_OK && i < s->n; i++) {
        if (s->only && !s->only[i])
            continue; /* not this part's: skipped */
        if (is_resident(s, i))
            files[n_warm++] = i;
        else
            cold[n_cold++] = i;
    }
    hash_batch warm = {s, files, quit, ctx}, later = {s, cold, quit, ctx};
    if (rc == NVF_OK)
        rc = nvf_pool_run(nvf_pool_global(), n_warm, 0, hash_task, &warm);
    if (rc == NVF_OK)
        rc = nvf_pool_run(nvf_pool_global(), n_cold, cold_width(), hash_task, &later);
    free(files);
    free(cold);
    return rc;
}

/* Source pages of the pipeline
 * ---------------------------------------------------------------------------- */

/* Drop the resident pages of a source range (file-backed: they are read again if needed). */
void cv_release_range(const nvf_ckpt *ck, size_t ti, const void *data, uint64_t len) {
    const nvf_st_file_priv *f = nvf_st_priv_of(ck->files[ck->tensors[ti].file].st);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)f->map, lim = base + f->map_len;
    uintptr_t a = (uintptr_t)data & ~(page - 1),
              z = ((uintptr_t)data + len + page - 1) & ~(page - 1);
    if (!f->map || len == 0)
        return;
    if (a < base)
        a = base;
    if (z > lim)
        z = lim;
    if (z > a)
        madvise((void *)a, z - a, MADV_DONTNEED);
}

uint64_t cv_member_bytes(const cv_member *m) {
    return (uint64_t)m->src.rows * (uint64_t)m->src.cols * (nvf_dtype_bits(m->src.dtype) / 8);
}

void cv_prefetch_member(const nvf_ckpt *ck, const cv_member *m) {
    const nvf_quant_source *s = &m->src;
    const nvf_st_file_priv *f = nvf_st_priv_of(ck->files[ck->tensors[m->tensor].file].st);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)s->data & ~(page - 1);
    uint64_t len = cv_member_bytes(m);
    if (f->map && len > 0 && a >= (uintptr_t)f->map)
        madvise((void *)a, (size_t)((uintptr_t)s->data + len - a), MADV_WILLNEED);
}
