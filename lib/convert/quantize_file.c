/*
 * `quantize`: one safetensors file to NVFP4 (nvfp4/convert.h), as a single-file conversion:
 * the file is opened as a checkpoint, so what a tensor is (a scale, an FP8 weight and its
 * scale) comes from lib/ckpt; the arithmetic runs on the compute backend; the output goes
 * through the safetensors writer (OUT.tmp, fsync, rename).
 *
 * Steps, each linear or n log n in the tensor count:
 *   1. OUT is checked against IN (device + inode) and against an existing file;
 *   2. the plan: which tensors are quantized, which FP8 scales they consume;
 *   3. amax of every quantized tensor, then one global scale per group (sorted group keys);
 *   4. the output declared in input order and written, quantized tensors in row chunks.
 */
#include "nvfp4/convert.h"

#include "nvfp4/backend.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Rows of a quantized tensor per backend call, and bytes of a copied tensor per write: bounds
 * the memory used and how long a stop request waits. */
#define QF_CHUNK_BYTES ((int64_t)64 << 20)

/* One input tensor being planned (parallel to the summary's tensors, input order). */
typedef struct qf_item {
    const nvf_st_tensor *t;
    size_t ck;            /* index into ck->tensors */
    nvf_quant_source src; /* NVF_QUANTIZE_QUANT */
    char *name_scale, *name_scale_2;
} qf_item;

typedef struct qf_run {
    const nvf_quantize_file_options *opt;
    nvf_ckpt *ck;
    const nvf_st_file *f;
    size_t n;
    qf_item *items;
    nvf_quantize_file_summary *sum;
    nvf_backend *backend;
} qf_run;

void nvf_quantize_file_options_init(nvf_quantize_file_options *o, const char *in, const char *out,
                                    const nvf_recipe *recipe) {
    memset(o, 0, sizeof *o);
    o->in = in;
    o->out = out;
    o->recipe = recipe;
    o->device.kind = NVF_DEVICE_CPU;
}

void nvf_quantize_file_summary_free(nvf_quantize_file_summary *s) {
    if (!s)
        return;
    for (size_t i = 0; s->tensors && i < s->n_tensors; i++) {
        free(s->tensors[i].name);
        free(s->tensors[i].group);
    }
    free(s->tensors);
    memset(s, 0, sizeof *s);
}

static int stopped(const qf_run *r) {
    if (r->opt->stop && *r->opt->stop)
        return nvf_error_set(NVF_E_INTERRUPTED, "interrupted; '%s' was not written", r->opt->out);
    return NVF_OK;
}

/* OUT must not be IN (by device and inode, so links count) and must not exist unless forced. */
static int check_output(const nvf_quantize_file_options *opt) {
    struct stat so, si;
    if (stat(opt->out, &so) != 0)
        return NVF_OK;
    if (stat(opt->in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return nvf_error_set(NVF_E_INVALID,
                             "output '%s' is the input file '%s'; write the quantized file "
                             "elsewhere",
                             opt->out, opt->in);
    if (!opt->force)
        return nvf_error_set(NVF_E_INVALID, "output '%s' exists; use --force to replace it",
                             opt->out);
    return NVF_OK;
}

/* The last error's message again, after `what`, with status `code`. */
static int error_as(int code, const char *what) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nvf_error_last());
    return nvf_error_set(code, "%s%s", what, msg);
}

/*
 * What the quantizer itself needs of a source that carries its scale (a dtype it decodes, a
 * per-tensor scale of one element), after the checkpoint's FP8-block rule: a scale that does
 * not fit is bad input (exit 3).
 */
static int check_fp8_scale(const nvf_quant_source *s, const char *name) {
    int rc = nvf_quant_source_check(s, name);
    return rc == NVF_E_UNSUPPORTED || rc == NVF_E_SHAPE ? error_as(NVF_E_SHAPE, "") : rc;
}

/* The global-scale group of a tensor name (a copy the caller frees; sized for any name). */
static int group_key(char **out, const char *name) {
    size_t cap = strlen(name) + 16;
    *out = malloc(cap);
    if (!*out)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the group of '%.200s'", name);
    int rc = nvf_ckpt_group_key(*out, cap, name);
    return rc < 0 ? rc : NVF_OK;
}

static int is_value_dtype(nvf_dtype d) {
    return d == NVF_DTYPE_F32 || d == NVF_DTYPE_F16 || d == NVF_DTYPE_BF16 ||
           d == NVF_DTYPE_F8_E4M3 || d == NVF_DTYPE_F8_E5M2;
}

/* The 2-D view of an F8_E4M3 tensor with its FP8 scale companion. */
static void fp8_view(nvf_quant_source *s, const qf_run *r, const nvf_st_tensor *sc) {
    s->scale = sc->data;
    s->scale_dtype = sc->dtype;
    s->scale_numel = sc->numel;
    if (nvf_ckpt_is_scale_inv(sc->name)) {
        /* the size asked for, else the checkpoint's: the one its scales were checked with */
        const int64_t *b = r->ck->quant.block;
        s->block_rows = b[0] > 0 ? b[0] : 128;
        s->block_cols = b[1] > 0 ? b[1] : 128;
    } else {
        /* per tensor: one block the size of the matrix */
        s->block_rows = s->rows > 0 ? s->rows : 1;
        s->block_cols = s->cols;
    }
}

/*
 * Make item `i` a quantization source: 0; NVF_E_SHAPE or NVF_E_UNSUPPORTED (message set) when
 * the tensor cannot be quantized (dtype, dimensions, last dimension, empty, a scale itself); or,
 * with *bad set, the error of an FP8 scale that does not fit its tensor: bad input whatever was
 * asked.
 */
static int make_source(qf_run *r, size_t i, int *bad) {
    qf_item *it = &r->items[i];
    const nvf_ckpt_tensor *ct = &r->ck->tensors[it->ck];
    const nvf_st_tensor *t = it->t;
    *bad = 0;
    if (ct->role == NVF_ROLE_SCALE)
        return nvf_error_set(NVF_E_UNSUPPORTED, "tensor '%s' is a quantization scale", t->name);
    if (!is_value_dtype(t->dtype))
        return nvf_error_set(NVF_E_UNSUPPORTED, "tensor '%s': dtype %s cannot be quantized",
                             t->name, nvf_dtype_name(t->dtype));
    if (t->ndim != 2)
        return nvf_error_set(NVF_E_SHAPE, "tensor '%s': %d-D, only 2-D tensors are quantized",
                             t->name, (int)t->ndim);
    memset(&it->src, 0, sizeof it->src);
    it->src.dtype = t->dtype;
    it->src.data = t->data;
    it->src.rows = t->shape[0];
    it->src.cols = t->shape[1];
    int rc = nvf_quant_source_check(&it->src, t->name);
    if (rc == NVF_OK && t->numel == 0) /* never sized by its other dimension */
        rc = nvf_error_set(NVF_E_SHAPE, "tensor '%s': empty, copied as it is", t->name);
    if (rc != NVF_OK || t->dtype != NVF_DTYPE_F8_E4M3 || ct->scale == NVF_CKPT_NONE)
        return rc;
    const nvf_st_tensor *sc = r->ck->tensors[ct->scale].st;
    fp8_view(&it->src, r, sc);
    if (nvf_ckpt_is_scale_inv(sc->name)) {
        /* the checkpoint's one FP8-block rule (inspect and convert ask it too) */
        rc = nvf_ckpt_check_fp8_scale(r->opt->in, t, sc, it->src.block_rows, it->src.block_cols);
        if (rc != NVF_OK) {
            *bad = 1;
            return rc;
        }
    }
    rc = check_fp8_scale(&it->src, t->name);
    *bad = rc != NVF_OK;
    return rc;
}

/* --tensor NAME...: each must exist and be quantizable (a usage error otherwise). */
static int plan_named(qf_run *r, const size_t *item_of_ck) {
    for (size_t k = 0; k < r->opt->n_tensors; k++) {
        const char *want = r->opt->tensors[k];
        size_t ci = nvf_ckpt_find_index(r->ck, want);
        if (ci == NVF_CKPT_NONE)
            return nvf_error_set(NVF_E_INVALID, "--tensor '%s': no such tensor in '%s'", want,
                                 r->opt->in);
        size_t i = item_of_ck[ci];
        int bad, rc = make_source(r, i, &bad);
        if (bad)
            return rc;
        if (rc != NVF_OK) {
            char what[300];
            snprintf(what, sizeof what, "--tensor '%.200s' cannot be quantized: ", want);
            return error_as(NVF_E_INVALID, what);
        }
        r->sum->tensors[i].action = NVF_QUANTIZE_QUANT;
    }
    return NVF_OK;
}

/* Every floating 2-D tensor that is not a scale and can be quantized. */
static int plan_all(qf_run *r) {
    for (size_t i = 0; i < r->n; i++) {
        const qf_item *it = &r->items[i];
        if (!is_value_dtype(it->t->dtype) || it->t->ndim != 2 ||
            r->ck->tensors[it->ck].role == NVF_ROLE_SCALE)
            continue;
        int bad, rc = make_source(r, i, &bad);
        if (rc == NVF_OK) {
            r->sum->tensors[i].action = NVF_QUANTIZE_QUANT;
            continue;
        }
        if (bad || (rc != NVF_E_SHAPE && rc != NVF_E_UNSUPPORTED))
            return rc;
        nvf_log(NVF_LOG_INFO, "keeping %s", nvf_error_last());
        nvf_error_clear();
    }
    return NVF_OK;
}

/* Drop the FP8 scales the quantized tensors consume; name the outputs and check that no kept
 * input tensor has an output's name. */
static int plan_outputs(qf_run *r, const size_t *item_of_ck) {
    nvf_quantize_file_tensor *ts = r->sum->tensors;
    for (size_t i = 0; i < r->n; i++) {
        if (ts[i].action != NVF_QUANTIZE_QUANT)
            continue;
        ts[i].source = "plain";
        if (!r->items[i].src.scale)
            continue;
        size_t sc = r->ck->tensors[r->items[i].ck].scale;
        ts[i].source =
            nvf_ckpt_is_scale_inv(r->ck->tensors[sc].st->name) ? "fp8-block" : "fp8-tensor";
        ts[item_of_ck[sc]].action = NVF_QUANTIZE_DROP;
    }
    for (size_t i = 0; i < r->n; i++) {
        qf_item *it = &r->items[i];
        if (ts[i].action != NVF_QUANTIZE_QUANT)
            continue;
        size_t len = strlen(it->t->name);
        it->name_scale = malloc(len + 9);
        it->name_scale_2 = malloc(len + 9);
        if (!it->name_scale || !it->name_scale_2)
            return nvf_error_set(NVF_E_NOMEM, "no memory to plan '%s'", r->opt->in);
        memcpy(it->name_scale, it->t->name, len);
        memcpy(it->name_scale + len, "_scale", 7);
        memcpy(it->name_scale_2, it->t->name, len);
        memcpy(it->name_scale_2 + len, "_scale_2", 9);
        const char *outs[2] = {it->name_scale, it->name_scale_2};
        for (int k = 0; k < 2; k++) {
            size_t clash = nvf_ckpt_find_index(r->ck, outs[k]);
            if (clash != NVF_CKPT_NONE && ts[item_of_ck[clash]].action != NVF_QUANTIZE_DROP)
                return nvf_error_set(NVF_E_SHAPE,
                                     "'%s': output tensor '%s' would collide with the input "
                                     "tensor of that name",
                                     r->opt->in, outs[k]);
        }
        int rc = group_key(&ts[i].group, it->t->name);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

static int plan(qf_run *r) {
    size_t *item_of_ck = malloc((r->n ? r->n : 1) * sizeof *item_of_ck);
    if (!item_of_ck)
        return nvf_error_set(NVF_E_NOMEM, "no memory to plan '%s'", r->opt->in);
    for (size_t ci = 0; ci < r->n; ci++) {
        size_t i = (size_t)(r->ck->tensors[ci].st - r->f->tensors);
        item_of_ck[ci] = i;
        r->items[i].ck = ci;
    }
    int rc = r->opt->n_tensors > 0 ? plan_named(r, item_of_ck) : plan_all(r);
    if (rc == NVF_OK)
        rc = plan_outputs(r, item_of_ck);
    free(item_of_ck);
    return rc;
}

typedef struct qf_group_ref {
    const char *key;
    size_t item;
} qf_group_ref;

static int cmp_group_ref(const void *a, const void *b) {
    const qf_group_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->item > y->item) - (x->item < y->item);
}

/* amax of every quantized tensor, then the group scale (nvf_quant_group_scale) from the largest
 * amax of each group. */
static int global_scales(qf_run *r) {
    nvf_quantize_file_tensor *ts = r->sum->tensors;
    size_t nq = 0;
    qf_group_ref *refs = malloc((r->n ? r->n : 1) * sizeof *refs);
    int rc = NVF_OK;
    if (!refs)
        return nvf_error_set(NVF_E_NOMEM, "no memory to quantize '%s'", r->opt->in);
    for (size_t i = 0; i < r->n && rc == NVF_OK; i++) {
        if (ts[i].action != NVF_QUANTIZE_QUANT)
            continue;
        if ((rc = stopped(r)) != NVF_OK)
            break;
        rc = nvf_backend_amax(r->backend, &ts[i].amax, &r->items[i].src, r->opt->allow_nonfinite,
                              ts[i].name);
        if (rc != NVF_OK) {
            nvf_error_prefix("'%s'", r->opt->in);
            break;
        }
        refs[nq].key = ts[i].group;
        refs[nq++].item = i;
        r->sum->bytes_quantized += r->items[i].t->end - r->items[i].t->begin;
    }
    if (rc == NVF_OK) {
        qsort(refs, nq, sizeof *refs, cmp_group_ref);
        for (size_t a = 0, z; a < nq; a = z) {
            float amax = 0.0f;
            for (z = a; z < nq && strcmp(refs[z].key, refs[a].key) == 0; z++) {
                if (ts[refs[z].item].amax > amax)
                    amax = ts[refs[z].item].amax;
            }
            const nvf_quant_params *qp = &r->opt->recipe->quant;
            float gs = nvf_quant_group_scale(amax, qp);
            if (nvf_quant_group_fallback(gs, qp))
                nvf_log(NVF_LOG_WARN,
                        "'%s': group '%s' is all zero (amax %g): ModelOpt's arithmetic would write "
                        "NaN scales, written as the default arithmetic writes it",
                        r->opt->in, refs[a].key, (double)amax);
            for (size_t k = a; k < z; k++)
                ts[refs[k].item].gs = gs;
        }
    }
    free(refs);
    return rc;
}

/* Output tensors in input order: each quantized X as X, X_scale, X_scale_2. */
static int open_writer(nvf_st_writer **w, const qf_run *r) {
    nvf_st_entry *entries = calloc(3 * r->n + 1, sizeof *entries);
    size_t ne = 0;
    if (!entries)
        return nvf_error_set(NVF_E_NOMEM, "no memory to write '%s'", r->opt->out);
    for (size_t i = 0; i < r->n; i++) {
        const nvf_st_tensor *t = r->items[i].t;
        nvf_quantize_action a = r->sum->tensors[i].action;
        if (a == NVF_QUANTIZE_DROP)
            continue;
        nvf_st_entry *e = &entries[ne++];
        e->name = t->name;
        if (a == NVF_QUANTIZE_KEEP) {
            e->dtype = t->dtype;
            e->ndim = t->ndim;
            memcpy(e->shape, t->shape, sizeof e->shape);
            continue;
        }
        e->dtype = NVF_DTYPE_U8;
        e->ndim = 2;
        e->shape[0] = t->shape[0];
        e->shape[1] = t->shape[1] / 2;
        e = &entries[ne++];
        e->name = r->items[i].name_scale;
        e->dtype = NVF_DTYPE_F8_E4M3;
        e->ndim = 2;
        e->shape[0] = t->shape[0];
        e->shape[1] = t->shape[1] / NVF_BLOCK;
        e = &entries[ne++];
        e->name = r->items[i].name_scale_2;
        e->dtype = NVF_DTYPE_F32;
        e->ndim = 0;
    }
    int rc = nvf_st_writer_open(w, r->opt->out, entries, ne, NULL, NULL, 0);
    free(entries);
    return rc;
}

/* Rows per backend call. FP8 block sources are split at block-row boundaries so that each
 * chunk's scales start at a whole block row. */
static int64_t chunk_rows(const nvf_quant_source *s) {
    int64_t rows = QF_CHUNK_BYTES / (s->cols > 0 ? s->cols : 1);
    if (rows < 1)
        rows = 1;
    if (s->scale) {
        rows = rows / s->block_rows * s->block_rows;
        if (rows < s->block_rows)
            rows = s->block_rows;
    }
    return rows;
}

static size_t scale_elem_size(nvf_dtype d) {
    return d == NVF_DTYPE_F32 ? 4 : d == NVF_DTYPE_BF16 ? 2 : 1;
}

/* Quantize item `i` in row chunks, writing X as it goes, then X_scale and X_scale_2. */
static int write_quantized(nvf_st_writer *w, const qf_run *r, size_t i) {
    const nvf_quant_source *s = &r->items[i].src;
    const nvf_quantize_file_tensor *ts = &r->sum->tensors[i];
    int64_t step = chunk_rows(s), cols = s->cols;
    size_t esize = nvf_dtype_bits(s->dtype) / 8;
    int64_t rows_max = step < s->rows ? step : s->rows;
    uint8_t *packed = malloc((size_t)(rows_max * cols / 2) + 1);
    uint8_t *scales = malloc((size_t)(s->rows * cols / NVF_BLOCK) + 1);
    int rc = NVF_OK;
    if (!packed || !scales) {
        rc = nvf_error_set(NVF_E_NOMEM, "out of memory quantizing '%s'", ts->name);
        goto done;
    }
    for (int64_t r0 = 0; r0 < s->rows; r0 += step) {
        if ((rc = stopped(r)) != NVF_OK)
            goto done;
        nvf_quant_source sub = *s;
        sub.rows = s->rows - r0 < step ? s->rows - r0 : step;
        sub.data = (const uint8_t *)s->data + (uint64_t)r0 * (uint64_t)cols * esize;
        if (s->scale) {
            uint64_t ncb = (uint64_t)((cols + s->block_cols - 1) / s->block_cols);
            uint64_t first = (uint64_t)(r0 / s->block_rows) * ncb;
            sub.scale = (const uint8_t *)s->scale + first * scale_elem_size(s->scale_dtype);
            sub.scale_numel = (uint64_t)((sub.rows + s->block_rows - 1) / s->block_rows) * ncb;
        }
        rc = nvf_backend_quantize(r->backend, packed, scales + r0 * cols / NVF_BLOCK, &sub, ts->gs,
                                  &r->opt->recipe->quant);
        if (rc == NVF_OK)
            rc = nvf_st_writer_write(w, packed, (size_t)(sub.rows * cols / 2));
        if (rc != NVF_OK)
            goto done;
    }
    rc = nvf_st_writer_write(w, scales, (size_t)(s->rows * cols / NVF_BLOCK));
    if (rc != NVF_OK)
        goto done;
    float s2 = nvf_quant_group_decode(ts->gs, &r->opt->recipe->quant);
    uint32_t bits;
    uint8_t le[4];
    memcpy(&bits, &s2, 4);
    for (int k = 0; k < 4; k++)
        le[k] = (uint8_t)(bits >> (8 * k));
    rc = nvf_st_writer_write(w, le, 4);
done:
    free(packed);
    free(scales);
    return rc;
}

static int write_kept(nvf_st_writer *w, const qf_run *r, const nvf_st_tensor *t) {
    uint64_t len = t->end - t->begin;
    for (uint64_t at = 0; at < len; at += (uint64_t)QF_CHUNK_BYTES) {
        int rc = stopped(r);
        uint64_t n = len - at < (uint64_t)QF_CHUNK_BYTES ? len - at : (uint64_t)QF_CHUNK_BYTES;
        if (rc == NVF_OK)
            rc = nvf_st_writer_write(w, t->data + at, (size_t)n);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

static int write_output(qf_run *r) {
    nvf_st_writer *w = NULL;
    int rc = open_writer(&w, r);
    for (size_t i = 0; i < r->n && rc == NVF_OK; i++) {
        nvf_quantize_action a = r->sum->tensors[i].action;
        if (a == NVF_QUANTIZE_KEEP)
            rc = write_kept(w, r, r->items[i].t);
        else if (a == NVF_QUANTIZE_QUANT)
            rc = write_quantized(w, r, i);
        if (rc == NVF_OK && a == NVF_QUANTIZE_QUANT)
            nvf_log(NVF_LOG_DEBUG, "quantized %s (amax %g, group scale %g)",
                    r->sum->tensors[i].name, (double)r->sum->tensors[i].amax,
                    (double)r->sum->tensors[i].gs);
    }
    if (rc == NVF_OK)
        rc = stopped(r);
    if (rc != NVF_OK) {
        nvf_st_writer_abort(w);
        return rc;
    }
    r->sum->bytes_written = nvf_st_writer_file_size(w);
    return nvf_st_writer_finish(w);
}

/* The summary's per-tensor entries (names copied: the checkpoint is closed on return). */
static int init_summary(qf_run *r) {
    nvf_quantize_file_summary *s = r->sum;
    s->tensors = calloc(r->n ? r->n : 1, sizeof *s->tensors);
    r->items = calloc(r->n ? r->n : 1, sizeof *r->items);
    if (!s->tensors || !r->items)
        return nvf_error_set(NVF_E_NOMEM, "no memory to plan '%s'", r->opt->in);
    s->n_tensors = r->n;
    for (size_t i = 0; i < r->n; i++) {
        r->items[i].t = &r->f->tensors[i];
        s->tensors[i].dtype = r->f->tensors[i].dtype;
        s->tensors[i].name = strdup(r->f->tensors[i].name);
        if (!s->tensors[i].name)
            return nvf_error_set(NVF_E_NOMEM, "no memory to plan '%s'", r->opt->in);
    }
    return NVF_OK;
}

int nvf_quantize_file(nvf_quantize_file_summary *out, const nvf_quantize_file_options *opt) {
    qf_run r = {.opt = opt, .sum = out};
    memset(out, 0, sizeof *out);
    int rc = nvf_recipe_check(opt->recipe);
    if (rc == NVF_OK)
        rc = check_output(opt);
    if (rc == NVF_OK)
        rc = nvf_ckpt_open_fp8_block(&r.ck, opt->in, opt->block);
    if (rc == NVF_OK && !r.ck->is_file)
        rc = nvf_error_set(NVF_E_INVALID,
                           "'%s' is a directory; quantize takes one .safetensors file (convert "
                           "takes a checkpoint directory)",
                           opt->in);
    if (rc != NVF_OK)
        goto done;
    r.f = r.ck->files[0].st;
    r.n = r.f->n_tensors;
    if ((rc = init_summary(&r)) != NVF_OK || (rc = plan(&r)) != NVF_OK)
        goto done;
    for (size_t i = 0; i < r.n; i++) {
        out->tensors_quantized += out->tensors[i].action == NVF_QUANTIZE_QUANT;
        out->tensors_kept += out->tensors[i].action == NVF_QUANTIZE_KEEP;
        out->tensors_dropped += out->tensors[i].action == NVF_QUANTIZE_DROP;
    }
    rc = nvf_backend_open(&r.backend, &opt->device, opt->threads);
    if (rc == NVF_OK)
        rc = global_scales(&r);
    if (rc == NVF_OK)
        rc = write_output(&r);
done:
    nvf_backend_close(r.backend);
    for (size_t i = 0; r.items && i < r.n; i++) {
        free(r.items[i].name_scale);
        free(r.items[i].name_scale_2);
    }
    free(r.items);
    nvf_ckpt_close(r.ck);
    if (rc != NVF_OK)
        nvf_quantize_file_summary_free(out);
    return rc;
}
