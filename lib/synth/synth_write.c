/*
 * Writing a synthetic checkpoint: the destination, the shards (streamed tensor by tensor through
 * the safetensors writer, values generated on worker threads), then the side files
 * (synth_files.c), the index, and config.json last.
 */
#include "synth_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/pool.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Elements generated per task of a BF16/F32 tensor: 256 KiB of f32. */
#define SYNTH_CHUNK 65536
/* Most generator threads. */
#define SYNTH_MAX_THREADS 64

/* The destination ---------------------------------------------------------------------------- */

/* Whether `name` is a shard name model-NNNNN-of-NNNNN.safetensors. */
static int is_shard_name(const char *name) {
    static const char pattern[] = "model-#####-of-#####.safetensors";
    if (strlen(name) != sizeof pattern - 1)
        return 0;
    for (size_t i = 0; pattern[i]; i++) {
        if (pattern[i] == '#' ? (name[i] < '0' || name[i] > '9') : name[i] != pattern[i])
            return 0;
    }
    return 1;
}

static int remove_file(const char *dst, const char *name) {
    char *path = nvf_path_join(dst, name);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = NVF_OK;
    if (unlink(path) != 0 && errno != ENOENT)
        rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
    free(path);
    return rc;
}

/* Create `dst`, or check it may be written into. With force, config.json goes first so the
 * directory never looks complete while it is rewritten. */
static int prepare_dir(const char *dst, int force) {
    if (access(dst, F_OK) != 0)
        return nvf_mkdir_p(dst);
    if (!nvf_path_is_dir(dst))
        return nvf_error_set(NVF_E_INVALID, "'%s' exists and is not a directory", dst);
    DIR *d = opendir(dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot read directory '%s': %s", dst, strerror(errno));
    int rc = NVF_OK, empty = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    if (empty)
        return NVF_OK;
    if (!force)
        return nvf_error_set(NVF_E_INVALID, "'%s' is not empty (--force writes into it)", dst);
    if ((rc = remove_file(dst, "config.json")) != NVF_OK ||
        (rc = remove_file(dst, "model.safetensors.index.json")) != NVF_OK)
        return rc;
    d = opendir(dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot read directory '%s': %s", dst, strerror(errno));
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        if (is_shard_name(e->d_name))
            rc = remove_file(dst, e->d_name);
    }
    closedir(d);
    return rc;
}

/* Tensor data -------------------------------------------------------------------------------- */

/* Tensors are generated in rounds of up to `threads` independent tasks (a chunk of elements,
 * or 128 rows of an FP8 weight), each into its own slot of the buffers; the round's bytes are
 * then written in order. Values depend only on the element index, so the bytes do not depend
 * on the thread count. */
typedef struct stream {
    nvf_st_writer *w;
    int threads;
    float *f32; /* per slot: SYNTH_CHUNK values, or a 128 x 128 FP8 tile */
    size_t f32_cap;
    uint8_t *out; /* the round's stored bytes */
    size_t out_cap;
    float *scales; /* the FP8 weight's scale_inv, written as the next tensor */
    size_t n_scales;
    nvf_synth_scale_fmt scale_fmt;
    volatile sig_atomic_t *stop;
} stream;

static int grow(void **buf, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap)
        return NVF_OK;
    free(*buf);
    *buf = malloc(n * elem);
    *cap = *buf ? n : 0;
    if (!*buf)
        return nvf_error_set(NVF_E_NOMEM, "no memory for %zu generated values", n);
    return NVF_OK;
}

typedef struct round {
    stream *s;
    const nvf_synth_tensor *t;
    const synth_make *m;
    uint64_t first; /* flat index of the round's first element */
    size_t n_tasks;
    /* plain tensors */
    uint64_t numel;
    /* FP8 weights */
    int64_t rows, cols, rb, cb;
    size_t k0; /* the round's first row-block */
} round;

typedef struct round_batch {
    round *r;
    void (*fn)(round *r, size_t slot);
} round_batch;

static int round_task(void *arg, size_t slot) {
    round_batch *b = arg;
    b->fn(b->r, slot);
    return NVF_OK;
}

/* Run fn(r, slot) for every slot on the core pool, at most s->threads at once (each slot
 * writes its own range of the round's buffers, so the bytes do not depend on the threads). */
static void run_round(round *r, void (*fn)(round *r, size_t slot)) {
    round_batch b = {r, fn};
    (void)nvf_pool_run(nvf_pool_global(), r->n_tasks, r->s->threads, round_task, &b);
}

static void plain_task(round *r, size_t slot) {
    uint64_t first = r->first + (uint64_t)slot * SYNTH_CHUNK;
    size_t n = r->numel - first < SYNTH_CHUNK ? (size_t)(r->numel - first) : SYNTH_CHUNK;
    if (r->t->dtype == NVF_DTYPE_F32) {
        synth_fill_f32((float *)r->s->out + slot * SYNTH_CHUNK, r->m, first, n);
        return;
    }
    float *f = r->s->f32 + slot * SYNTH_CHUNK;
    uint16_t *h = (uint16_t *)r->s->out + slot * SYNTH_CHUNK;
    synth_fill_f32(f, r->m, first, n);
    for (size_t k = 0; k < n; k++)
        h[k] = nvf_f32_to_bf16_rn(f[k]);
}

static int write_plain(stream *s, const nvf_synth_tensor *t, const synth_make *m) {
    size_t esize = nvf_dtype_bits(t->dtype) / 8;
    size_t slots = (size_t)s->threads;
    int rc;
    if ((rc = grow((void **)&s->f32, &s->f32_cap, slots * SYNTH_CHUNK, sizeof(float))) != NVF_OK ||
        (rc = grow((void **)&s->out, &s->out_cap, slots * SYNTH_CHUNK * sizeof(float), 1)) !=
            NVF_OK)
        return rc;
    round r = {.s = s, .t = t, .m = m, .numel = m->n_parts * m->part_numel};
    uint64_t per_round = (uint64_t)slots * SYNTH_CHUNK;
    for (r.first = 0; rc == NVF_OK && r.first < r.numel; r.first += per_round) {
        uint64_t n = r.numel - r.first < per_round ? r.numel - r.first : per_round;
        r.n_tasks = (size_t)((n + SYNTH_CHUNK - 1) / SYNTH_CHUNK);
        run_round(&r, plain_task);
        rc = nvf_st_writer_write(s->w, s->out, (size_t)n * esize);
    }
    return rc;
}

/* The block's scale_inv: amax / 448 in binary32, or (ue8m0) the next power of two >= it. */
static float block_scale(float amax, nvf_synth_scale_fmt fmt) {
    if (amax == 0.0f)
        return 1.0f;
    float q = amax / SYNTH_FP8_MAX;
    if (fmt != NVF_SYNTH_SCALE_UE8M0)
        return q;
    uint32_t u = nvf_f32_bits(q);
    if ((u & 0x7F800000u) == 0) /* subnormal quotient: 2^-126 is the smallest normal */
        return nvf_f32_from_bits(0x00800000u);
    if (u & 0x007FFFFFu)
        u = (u & 0x7F800000u) + 0x00800000u;
    return nvf_f32_from_bits(u);
}

/* Flat index of the first element of row-block k (k = batch * rb + row block). */
static uint64_t block_flat(const round *r, size_t k) {
    int64_t b = (int64_t)k / r->rb, r0 = ((int64_t)k % r->rb) * SYNTH_FP8_BLOCK;
    return (uint64_t)((b * r->rows + r0) * r->cols);
}

/* Row-block k0 + slot of an FP8 weight, one 128 x 128 tile at a time (so the values stay in
 * cache): BF16 values, block amax, scale_inv, E4M3 bytes. */
static void fp8_task(round *r, size_t slot) {
    size_t k = r->k0 + slot;
    int64_t r0 = ((int64_t)k % r->rb) * SYNTH_FP8_BLOCK;
    int64_t nr = r->rows - r0 < SYNTH_FP8_BLOCK ? r->rows - r0 : SYNTH_FP8_BLOCK;
    int64_t cols = r->cols;
    uint64_t flat = block_flat(r, k);
    float *w = r->s->f32 + slot * (size_t)(SYNTH_FP8_BLOCK * SYNTH_FP8_BLOCK);
    uint8_t *q = r->s->out + (flat - r->first);
    float *sc = r->s->scales + k * (size_t)r->cb;
    for (int64_t j = 0; j < r->cb; j++) {
        int64_t c0 = j * SYNTH_FP8_BLOCK;
        int64_t nc = cols - c0 < SYNTH_FP8_BLOCK ? cols - c0 : SYNTH_FP8_BLOCK;
        /* Magnitudes compared as bits: the order of non-negative finite binary32 values. */
        uint32_t amax = 0;
        for (int64_t i = 0; i < nr; i++) {
            float *v = w + i * nc;
            synth_fill_f32(v, r->m, flat + (uint64_t)(i * cols + c0), (size_t)nc);
            for (int64_t c = 0; c < nc; c++) {
                uint16_t h = nvf_f32_to_bf16_rn(v[c]);
                uint32_t a = ((uint32_t)h << 16) & 0x7FFFFFFFu;
                v[c] = nvf_bf16_to_f32(h);
                amax = a > amax ? a : amax;
            }
        }
        float s = block_scale(nvf_f32_from_bits(amax), r->s->scale_fmt);
        sc[j] = s;
        for (int64_t i = 0; i < nr; i++) {
            const float *v = w + i * nc;
            uint8_t *o = q + i * cols + c0;
            for (int64_t c = 0; c < nc; c++)
                o[c] = nvf_f32_to_e4m3_sat(v[c] / s);
        }
    }
}

/* An F8_E4M3 weight; its scales are kept for the weight_scale_inv tensor that follows. */
static int write_fp8(stream *s, const nvf_synth_tensor *t, const synth_make *m) {
    round r = {.s = s, .t = t, .m = m};
    int64_t batch = t->ndim == 3 ? t->shape[0] : 1;
    r.rows = t->shape[t->ndim - 2];
    r.cols = t->shape[t->ndim - 1];
    r.rb = (r.rows + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
    r.cb = (r.cols + SYNTH_FP8_BLOCK - 1) / SYNTH_FP8_BLOCK;
    size_t slots = (size_t)s->threads, block = (size_t)(SYNTH_FP8_BLOCK * r.cols);
    free(s->scales);
    s->n_scales = (size_t)(batch * r.rb * r.cb);
    s->scales = malloc(s->n_scales * sizeof *s->scales);
    if (!s->scales)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the scales of '%s'", t->name);
    int rc;
    if ((rc = grow((void **)&s->f32, &s->f32_cap, slots * SYNTH_FP8_BLOCK * SYNTH_FP8_BLOCK,
                   sizeof(float))) != NVF_OK ||
        (rc = grow((void **)&s->out, &s->out_cap, slots * block, 1)) != NVF_OK)
        return rc;
    size_t n_blocks = (size_t)(batch * r.rb);
    for (r.k0 = 0; rc == NVF_OK && r.k0 < n_blocks; r.k0 += slots) {
        r.n_tasks = n_blocks - r.k0 < slots ? n_blocks - r.k0 : slots;
        r.first = block_flat(&r, r.k0);
        uint64_t end = block_flat(&r, r.k0 + r.n_tasks);
        run_round(&r, fp8_task);
        rc = nvf_st_writer_write(s->w, s->out, (size_t)(end - r.first));
    }
    return rc;
}

static int write_tensor(stream *s, const nvf_synth_tensor *t, const synth_make *m) {
    switch (m->role) {
    case SYNTH_ROLE_FP8:
        return write_fp8(s, t, m);
    case SYNTH_ROLE_SCALE:
        if (!s->scales || s->n_scales * sizeof(float) != t->nbytes)
            return nvf_error_set(NVF_E_INVALID, "synth: '%s' does not follow its FP8 weight",
                                 t->name);
        return nvf_st_writer_write(s->w, s->scales, t->nbytes);
    default:
        return write_plain(s, t, m);
    }
}

static int write_shard(nvf_synth_summary *sum, stream *s, const nvf_synth_plan *p, size_t first,
                       size_t n, const char *dst, const char *file) {
    nvf_st_entry *e = calloc(n, sizeof *e);
    char *path = nvf_path_join(dst, file);
    int rc = NVF_OK;
    if (!e || !path) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for shard '%s'", file);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const nvf_synth_tensor *t = &p->tensors[first + i];
        e[i].name = t->name;
        e[i].dtype = t->dtype;
        e[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++)
            e[i].shape[d] = t->shape[d];
    }
    if ((rc = nvf_st_writer_open(&s->w, path, e, n, NULL, NULL, 0)) != NVF_OK)
        goto done;
    uint64_t size = nvf_st_writer_file_size(s->w);
    for (size_t i = 0; rc == NVF_OK && i < n; i++) {
        if (s->stop && *s->stop)
            rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while writing '%s'", path);
        else
            rc = write_tensor(s, &p->tensors[first + i], synth_make_of(p, first + i));
    }
    if (rc == NVF_OK) {
        rc = nvf_st_writer_finish(s->w);
        s->w = NULL;
    }
    if (rc == NVF_OK) {
        nvf_log(NVF_LOG_INFO, "synth: wrote %s (%zu tensors, %llu bytes)", path, n,
                (unsigned long long)size);
        rc = synth_summary_add(sum, file, size);
    }
done:
    nvf_st_writer_abort(s->w);
    s->w = NULL;
    free(e);
    free(path);
    return rc;
}

/* The whole checkpoint ----------------------------------------------------------------------- */

int nvf_synth_write(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt) {
    if (opt->dtype == NVF_SYNTH_DTYPE_NVFP4 || opt->dtype == NVF_SYNTH_DTYPE_NVFP4_CT)
        return synth_write_nvfp4(out, dst, opt);
    return synth_write_plain(out, dst, opt, opt->dtype);
}

int synth_write_plain(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt,
                      nvf_synth_dtype shown) {
    nvf_synth_plan *p = NULL;
    nvf_synth_summary sum = {0};
    stream s = {0};
    char **shard_names = NULL;
    const char **files = NULL, **names = NULL;
    char *index_path = NULL;
    int rc = nvf_synth_plan_build(&p, opt);
    if (rc != NVF_OK)
        goto done;
    if ((rc = prepare_dir(dst, opt->force)) != NVF_OK)
        goto done;
    s.scale_fmt = p->opt.scale_fmt;
    s.stop = opt->stop;
    s.threads = opt->threads > 0 ? opt->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s.threads < 1)
        s.threads = 1;
    if (s.threads > SYNTH_MAX_THREADS)
        s.threads = SYNTH_MAX_THREADS;
    shard_names = calloc(p->n_shards, sizeof *shard_names);
    files = calloc(p->n_tensors, sizeof *files);
    names = calloc(p->n_tensors, sizeof *names);
    index_path = nvf_path_join(dst, "model.safetensors.index.json");
    if (!shard_names || !files || !names || !index_path) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard list");
        goto done;
    }
    nvf_log(NVF_LOG_INFO, "synth: %s %s into '%s': %zu tensors, %llu bytes in %u shards",
            nvf_synth_preset_name(p->opt.preset), nvf_synth_dtype_name(p->opt.dtype), dst,
            p->n_tensors, (unsigned long long)p->total_size, p->n_shards);
    for (size_t first = 0; first < p->n_tensors;) {
        uint32_t k = p->tensors[first].shard;
        size_t n = 0;
        while (first + n < p->n_tensors && p->tensors[first + n].shard == k)
            n++;
        char file[64];
        snprintf(file, sizeof file, "model-%05u-of-%05u.safetensors", k + 1, p->n_shards);
        if (!(shard_names[k] = strdup(file))) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory for the shard list");
            goto done;
        }
        if ((rc = write_shard(&sum, &s, p, first, n, dst, file)) != NVF_OK)
            goto done;
        for (size_t i = first; i < first + n; i++) {
            names[i] = p->tensors[i].name;
            files[i] = shard_names[k];
        }
        first += n;
    }
    if ((rc = synth_write_side_files(&sum, p, dst, shown)) != NVF_OK)
        goto done;
    if ((rc = nvf_st_index_write(index_path, p->total_size, names, files, p->n_tensors)) != NVF_OK)
        goto done;
    struct stat st;
    if (stat(index_path, &st) != 0) {
        rc = nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", index_path, strerror(errno));
        goto done;
    }
    if ((rc = synth_summary_add(&sum, "model.safetensors.index.json", (uint64_t)st.st_size)) !=
        NVF_OK)
        goto done;
    char *config = nvf_synth_config_json(p);
    char *line = config ? malloc(strlen(config) + 2) : NULL;
    if (line)
        sprintf(line, "%s\n", config);
    free(config);
    rc = synth_write_text(&sum, dst, "config.json", line);
    free(line);
    if (rc != NVF_OK)
        goto done;
    sum.n_tensors = p->n_tensors;
    sum.n_shards = p->n_shards;
    sum.tensor_bytes = p->total_size;
    if (out) {
        *out = sum;
        memset(&sum, 0, sizeof sum);
    }
done:
    nvf_synth_summary_free(&sum);
    free(s.f32);
    free(s.out);
    free(s.scales);
    if (shard_names)
        for (uint32_t i = 0; i < p->n_shards; i++)
            free(shard_names[i]);
    free(shard_names);
    free(files);
    free(names);
    free(index_path);
    nvf_synth_plan_free(p);
    return rc;
}
