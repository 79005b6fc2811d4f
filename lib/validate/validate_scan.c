/*
 * Reading every file of a checkpoint once (SPEC section 8): one task per file on the core pool
 * (biggest first, at most opts->threads at once). A safetensors file is validated and mapped
 * (nvf_st_open); then, tensor by tensor in data-offset order and in chunks, the same bytes feed
 * the file's SHA-256 (header first: the tensors tile the rest of the file exactly), the tensor's
 * CRC-32 and the value checks:
 *   1. a block scale (F8_E4M3 "weight_scale"): E4M3 NaN (0x7F/0xFF) is scale.nonfinite, a set
 *      sign bit scale.negative (a zero byte is an all-zero block: legal);
 *   2. a decode or input scale (weight_scale_2, input_scale, their compressed-tensors names):
 *      NaN/Inf scale.nonfinite, < 0 scale.negative, 0 scale.zero (loaders divide by them);
 *   3. any other BF16/F16/F32/F64 tensor: NaN/Inf is tensor.nonfinite.
 * Which tensor is a scale of which kind is lib/ckpt's answer (nvf_ckpt_companion). Any other file
 * is hashed as it is. Results land in per-file slots: nothing depends on the thread count.
 */
#include "validate_internal.h"

#include "io/st_file.h"
#include "manifest/hash_file.h"
#include "nvfp4/manifest.h"
#include "nvfp4/pool.h"

#include <inttypes.h>
#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VD_CHUNK ((size_t)4 << 20)

typedef enum value_rule {
    RULE_NONE = 0,
    RULE_BLOCK_SCALE, /* 1 above */
    RULE_SCALAR,      /* 2 */
    RULE_FLOAT_SCALE, /* an F32 block scale (FP8 W_scale_inv): finiteness only */
    RULE_FINITE,      /* 3 */
} value_rule;

/* What one tensor's values broke: a count, the first element and its value per kind. */
typedef struct value_tally {
    uint64_t n[3];     /* nonfinite, negative, zero */
    uint64_t first[3]; /* element index */
    double value[3];
} value_tally;

static void tally(value_tally *t, int kind, uint64_t at, double v) {
    if (t->n[kind]++ == 0) {
        t->first[kind] = at;
        t->value[kind] = v;
    }
}

static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Element i of `p` (dtype d) as a double. */
static double elem(const uint8_t *p, nvf_dtype d, uint64_t i) {
    switch (d) {
    case NVF_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case NVF_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return f16_value(h);
    }
    case NVF_DTYPE_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case NVF_DTYPE_F64: {
        double f;
        memcpy(&f, p + 8 * i, 8);
        return f;
    }
    default:
        return 0.0;
    }
}

/* NaN/Inf test on the bits alone (fast path of rule 3). */
static int nonfinite_bits(const uint8_t *p, nvf_dtype d, uint64_t i) {
    switch (d) {
    case NVF_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return (h & 0x7F80u) == 0x7F80u;
    }
    case NVF_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return (h & 0x7C00u) == 0x7C00u;
    }
    case NVF_DTYPE_F32: {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        return (u & 0x7F800000u) == 0x7F800000u;
    }
    case NVF_DTYPE_F64: {
        uint64_t u;
        memcpy(&u, p + 8 * i, 8);
        return (u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull;
    }
    default:
        return 0;
    }
}

static int is_float(nvf_dtype d) {
    return d == NVF_DTYPE_BF16 || d == NVF_DTYPE_F16 || d == NVF_DTYPE_F32 || d == NVF_DTYPE_F64;
}

static value_rule rule_of(const nvf_st_tensor *t) {
    char weight[512];
    nvf_companion slot = nvf_ckpt_companion(weight, sizeof weight, t->name, 0);
    if (t->dtype == NVF_DTYPE_F8_E4M3)
        return slot == NVF_COMPANION_SCALE ? RULE_BLOCK_SCALE : RULE_NONE;
    if (!is_float(t->dtype))
        return RULE_NONE;
    if (slot == NVF_COMPANION_SCALE_2 || slot == NVF_COMPANION_INPUT)
        return RULE_SCALAR;
    return slot == NVF_COMPANION_SCALE ? RULE_FLOAT_SCALE : RULE_FINITE;
}

/* Rule 3 on n elements of one width: a loop per dtype, so that the common case (all finite)
 * costs a mask and a compare per element. */
#define FINITE_LOOP(type, mask)                                                                    \
    for (uint64_t i = 0; i < n; i++) {                                                             \
        type u;                                                                                    \
        memcpy(&u, p + i * sizeof u, sizeof u);                                                    \
        if ((u & (mask)) == (mask))                                                                \
            tally(v, 0, e0 + i, elem(p, t->dtype, i));                                             \
    }

static void check_finite(value_tally *v, const nvf_st_tensor *t, const uint8_t *p, uint64_t e0,
                         uint64_t n) {
    switch (t->dtype) {
    case NVF_DTYPE_BF16:
        FINITE_LOOP(uint16_t, 0x7F80u)
        break;
    case NVF_DTYPE_F16:
        FINITE_LOOP(uint16_t, 0x7C00u)
        break;
    case NVF_DTYPE_F32:
        FINITE_LOOP(uint32_t, 0x7F800000u)
        break;
    case NVF_DTYPE_F64:
        FINITE_LOOP(uint64_t, 0x7FF0000000000000ull)
        break;
    default:
        break;
    }
}

/* Elements [e0, e0 + n) of tensor t at p. */
static void check_values(value_tally *v, value_rule rule, const nvf_st_tensor *t, const uint8_t *p,
                         uint64_t e0, uint64_t n) {
    if (rule == RULE_FINITE) {
        check_finite(v, t, p, e0, n);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (rule == RULE_BLOCK_SCALE) {
            uint8_t b = p[i];
            if ((b & 0x7F) == 0x7F)
                tally(v, 0, e0 + i, NAN);
            else if (b & 0x80)
                tally(v, 1, e0 + i, -(double)(b & 0x7F));
            continue;
        }
        if (!nonfinite_bits(p, t->dtype, i) && rule != RULE_SCALAR)
            continue;
        double x = elem(p, t->dtype, i);
        if (!isfinite(x))
            tally(v, 0, e0 + i, x);
        else if (x < 0)
            tally(v, 1, e0 + i, x);
        else if (x == 0)
            tally(v, 2, e0 + i, x);
    }
}

static const char *const k_ids[RULE_FINITE + 1][3] = {
    [RULE_BLOCK_SCALE] = {"scale.nonfinite", "scale.negative", NULL},
    [RULE_SCALAR] = {"scale.nonfinite", "scale.negative", "scale.zero"},
    [RULE_FLOAT_SCALE] = {"scale.nonfinite", NULL, NULL},
    [RULE_FINITE] = {"tensor.nonfinite", NULL, NULL},
};

static int report_values(vd_file *f, const nvf_st_tensor *t, value_rule rule,
                         const value_tally *v) {
    static const char *const what[3] = {"NaN/Inf", "negative", "zero"};
    int rc = NVF_OK;
    for (int k = 0; k < 3 && rc == NVF_OK; k++) {
        const char *id = k_ids[rule][k];
        if (!id || v->n[k] == 0)
            continue;
        char val[48];
        if (rule == RULE_BLOCK_SCALE)
            snprintf(val, sizeof val, "E4M3 byte 0x%02x",
                     k == 0 ? 0x7F : (unsigned)(0x80 | (unsigned)-v->value[k]));
        else
            snprintf(val, sizeof val, "%g", v->value[k]);
        rc = nvf_findings_add(&f->findings, id, "error", f->name, t->name,
                              "%s: tensor '%s' (%s) holds %" PRIu64 " %s value(s); the first is "
                              "element %" PRIu64 ": %s",
                              f->name, t->name, nvf_dtype_name(t->dtype), v->n[k], what[k],
                              v->first[k], val);
    }
    return rc;
}

typedef struct scan_pool {
    vd_ctx *c;
    size_t *order; /* biggest first */
} scan_pool;

static int stopped(const vd_ctx *c) {
    return c->o->stop && *c->o->stop;
}

/* Hash and check a well-formed safetensors file from its mapping. */
static int scan_mapped(vd_ctx *c, vd_file *f) {
    const nvf_st_file *st = f->st;
    const uint8_t *map = nvf_st_priv_of(st)->map;
    f->crc = calloc(st->n_tensors + 1, sizeof *f->crc);
    nvf_sha256 *h = nvf_sha256_new();
    int rc = f->crc && h ? nvf_sha256_update(h, map, (size_t)st->data_start)
                         : nvf_error_set(NVF_E_NOMEM, "no memory to read '%s'", f->path);
    for (size_t i = 0; i < st->n_tensors && rc == NVF_OK; i++) {
        const nvf_st_tensor *t = &st->tensors[i];
        uint64_t len = t->end - t->begin, esize = nvf_dtype_bits(t->dtype) / 8;
        value_rule rule = rule_of(t);
        value_tally v;
        memset(&v, 0, sizeof v);
        for (uint64_t off = 0; off < len && rc == NVF_OK; off += VD_CHUNK) {
            size_t n = (size_t)(len - off < VD_CHUNK ? len - off : VD_CHUNK);
            const uint8_t *p = map + st->data_start + t->begin + off;
            rc = nvf_sha256_update(h, p, n);
            f->crc[i] = nvf_crc32(f->crc[i], p, n);
            if (rule != RULE_NONE && esize > 0) /* VD_CHUNK is a multiple of every size */
                check_values(&v, rule, t, p, off / esize, n / esize);
            if (rc == NVF_OK && stopped(c))
                rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while reading '%s'", f->path);
        }
        if (rc == NVF_OK && rule != RULE_NONE)
            rc = report_values(f, t, rule, &v);
    }
    if (rc == NVF_OK)
        rc = nvf_sha256_final(h, f->sha256);
    nvf_sha256_free(h);
    f->bytes = st->file_size;
    return rc;
}

/* nvf_hash_file_ex's chunk callback: non-zero stops the hashing. */
static int on_chunk(void *user, uint64_t bytes) {
    (void)bytes;
    return stopped(user);
}

/* A file hashed as it is (not safetensors, or malformed), stoppable between chunks. */
static int hash_plain(vd_ctx *c, vd_file *f) {
    return nvf_hash_file_ex(f->sha256, &f->bytes, f->path, NULL, on_chunk, c);
}

static void scan_file(vd_ctx *c, vd_file *f) {
    int rc = NVF_OK;
    if (stopped(c)) {
        rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted before reading '%s'", f->path);
    } else if (f->is_st) {
        rc = nvf_st_open(&f->st, f->path);
        if (rc == NVF_E_FORMAT) {
            /* Malformed: reported as safetensors.malformed; its bytes still count for the
             * manifest. */
            f->st_error = strdup(nvf_error_last());
            rc = f->st_error ? hash_plain(c, f) : nvf_error_set(NVF_E_NOMEM, "no memory");
        } else if (rc == NVF_OK) {
            rc = scan_mapped(c, f);
        }
    } else {
        rc = hash_plain(c, f);
    }
    if (rc != NVF_OK) {
        f->rc = rc;
        nvf_error_save(&f->err);
    }
    /* The pool's threads outlive the call: give back OpenSSL's per-thread state now. */
    OPENSSL_thread_stop();
}

static int scan_task(void *ctx, size_t k) {
    scan_pool *p = ctx;
    scan_file(p->c, &p->c->files[p->order[k]]);
    return NVF_OK;
}

static const vd_file *g_sort_files; /* qsort has no context; one scan at a time sorts */
static pthread_mutex_t g_sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp_size(const void *a, const void *b) {
    const vd_file *x = &g_sort_files[*(const size_t *)a], *y = &g_sort_files[*(const size_t *)b];
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return strcmp(x->name, y->name);
}

int vd_scan(vd_ctx *c) {
    scan_pool p = {c, malloc((c->n_files ? c->n_files : 1) * sizeof(size_t))};
    if (!p.order)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; i < c->n_files; i++)
        p.order[i] = i;
    /* Biggest first, so that one huge shard does not start last and run alone. */
    pthread_mutex_lock(&g_sort_lock);
    g_sort_files = c->files;
    qsort(p.order, c->n_files, sizeof *p.order, cmp_size);
    g_sort_files = NULL;
    pthread_mutex_unlock(&g_sort_lock);
    (void)nvf_pool_run(nvf_pool_global(), c->n_files, c->o->threads, scan_task, &p);
    free(p.order);
    const vd_file *failed = NULL;
    for (size_t i = 0; i < c->n_files; i++) {
        const vd_file *f = &c->files[i];
        c->r->bytes_read += f->bytes;
        if (f->st)
            c->r->tensors += f->st->n_tensors;
        if (f->rc == NVF_E_INTERRUPTED || stopped(c))
            return nvf_error_set(NVF_E_INTERRUPTED, "interrupted: validation stopped");
        if (f->rc != NVF_OK && !failed)
            failed = f;
    }
    c->r->files = c->n_files;
    /* A file that cannot be read (not one that reads as malformed) stops the run: exit 1. */
    return failed ? nvf_error_restore(&failed->err) : NVF_OK;
}
