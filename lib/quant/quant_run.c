/*
 * The amax and quantizing passes over a source's rows (nvfp4/quant.h), run on the project's
 * one thread pool (nvfp4/pool.h). The rows are split into contiguous ranges, one task each;
 * every task writes only its own rows (quantize) or its own slot (amax), and the slots are
 * combined in task order, so the bytes and the reported error never depend on the number of
 * threads or on scheduling.
 */
#include "quant_internal.h"

#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>

/* Tasks per thread of the batch: a few, so that a task that runs late (its thread busy with
 * another batch) holds up little. */
#define TASKS_PER_THREAD 4

/* The amax result of one task. */
typedef struct amax_slot {
    uint32_t amax_bits;
    int64_t bad_row, bad_col; /* first non-finite value, bad_row = -1 when none */
    float bad_value;
} amax_slot;

/* One pass over the rows of `src`: the task layout, the per-pass inputs and each task's result
 * slot. */
typedef struct row_pass {
    const nvf_quant_source *src;
    int64_t ntasks;
    /* quantize */
    const nvf_qb_consts *k;
    uint8_t *packed, *scales;
    /* amax */
    int allow_nonfinite;
    amax_slot *slots; /* ntasks of them */
} row_pass;

/* The first row of range t when `rows` rows are split into `n` contiguous ranges whose sizes
 * differ by at most one (t = n gives rows). */
static int64_t split_at(int64_t rows, int64_t n, int64_t t) {
    int64_t q = rows / n, rem = rows % n;
    return q * t + (t < rem ? t : rem);
}

/* Rows [*row0, *row1) of task t. */
static void task_rows(int64_t *row0, int64_t *row1, const row_pass *ps, size_t t) {
    *row0 = split_at(ps->src->rows, ps->ntasks, (int64_t)t);
    *row1 = split_at(ps->src->rows, ps->ntasks, (int64_t)t + 1);
}

/* A buffer for one row of `s` in *out. @return 0 or NVF_E_NOMEM. */
static int row_buffer(float **out, const nvf_quant_source *s) {
    *out = malloc((size_t)s->cols * sizeof(float));
    if (!*out)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for a row of %lld values",
                             (long long)s->cols);
    return 0;
}

static int quant_task(void *ctx, size_t t) {
    const row_pass *ps = ctx;
    const nvf_quant_source *s = ps->src;
    int64_t row0, row1, nb = s->cols / NVF_BLOCK;
    task_rows(&row0, &row1, ps, t);
    int direct = s->dtype == NVF_DTYPE_F32 && ((uintptr_t)s->data & 3u) == 0;
    float *buf = NULL;
    int rc = direct ? 0 : row_buffer(&buf, s);
    if (rc < 0)
        return rc;
    for (int64_t r = row0; r < row1; r++) {
        const float *x = buf;
        if (direct)
            x = (const float *)s->data + (uint64_t)r * (uint64_t)s->cols;
        else
            nvf_quant_source_load_row(buf, s, r);
        uint8_t *pk = ps->packed + (uint64_t)r * (uint64_t)(s->cols / 2);
        uint8_t *sc = ps->scales + (uint64_t)r * (uint64_t)nb;
        nvf_quant_row_encode(pk, sc, x, nb, ps->k);
    }
    free(buf);
    return 0;
}

static int amax_task(void *ctx, size_t t) {
    const row_pass *ps = ctx;
    const nvf_quant_source *s = ps->src;
    amax_slot *slot = &ps->slots[t];
    int64_t row0, row1;
    task_rows(&row0, &row1, ps, t);
    float *buf;
    int rc = row_buffer(&buf, s);
    if (rc < 0)
        return rc;
    uint32_t m = 0;
    slot->bad_row = -1;
    for (int64_t r = row0; r < row1; r++) {
        uint32_t rm, any_bad;
        if (s->dtype == NVF_DTYPE_BF16) {
            const uint8_t *p = (const uint8_t *)s->data + (uint64_t)r * (uint64_t)s->cols * 2;
            rm = nvf_quant_row_amax_bf16(p, s->cols, &any_bad);
            if (any_bad && !ps->allow_nonfinite)
                nvf_quant_source_load_row(buf, s, r);
        } else {
            nvf_quant_source_load_row(buf, s, r);
            rm = nvf_quant_row_amax_f32(buf, s->cols, &any_bad);
        }
        m = rm > m ? rm : m;
        if (any_bad && !ps->allow_nonfinite) {
            for (int64_t i = 0; i < s->cols; i++) {
                if (!isfinite(buf[i])) {
                    slot->bad_row = r;
                    slot->bad_col = i;
                    slot->bad_value = buf[i];
                    break;
                }
            }
            break;
        }
    }
    slot->amax_bits = m;
    free(buf);
    return 0;
}

/* A pass over the rows of `s` with at most `threads` threads at once (<= 0: the global pool's
 * size): ps->src, ps->ntasks and *width set. */
static void pass_init(row_pass *ps, int *width, const nvf_quant_source *s, int threads) {
    int size = nvf_pool_size(nvf_pool_global());
    *width = threads <= 0 || threads > size ? size : threads;
    int64_t ntasks = *width == 1 ? 1 : (int64_t)*width * TASKS_PER_THREAD;
    ps->src = s;
    ps->ntasks = ntasks < s->rows ? ntasks : s->rows;
}

int nvf_quant_amax_ref(float *out, const nvf_quant_source *s, int allow_nonfinite, int threads,
                       const char *name) {
    row_pass ps = {.allow_nonfinite = allow_nonfinite};
    int width;
    pass_init(&ps, &width, s, threads);
    ps.slots = calloc((size_t)(ps.ntasks > 0 ? ps.ntasks : 1), sizeof *ps.slots);
    if (!ps.slots)
        return nvf_error_set(NVF_E_NOMEM, "out of memory for the amax of tensor '%s'", name);
    int rc = nvf_pool_run(nvf_pool_global(), (size_t)ps.ntasks, width, amax_task, &ps);
    if (rc < 0)
        goto done;
    uint32_t m = 0;
    for (int64_t t = 0; t < ps.ntasks; t++) {
        const amax_slot *slot = &ps.slots[t];
        if (slot->bad_row >= 0) {
            rc = nvf_error_set(NVF_E_NONFINITE,
                               "tensor '%s': non-finite value %g at index [%lld, %lld] (use "
                               "--allow-nonfinite to pass such values through)",
                               name, (double)slot->bad_value, (long long)slot->bad_row,
                               (long long)slot->bad_col);
            goto done;
        }
        m = slot->amax_bits > m ? slot->amax_bits : m;
    }
    *out = nvf_f32_from_bits(m);
done:
    free(ps.slots);
    return rc;
}

int nvf_quant_source_ref(uint8_t *packed, uint8_t *scales, const nvf_quant_source *s, float gs,
                         const nvf_quant_params *p, int threads) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, p->method, p->error, p->domain);
    row_pass ps = {.k = &k, .packed = packed, .scales = scales};
    int width;
    pass_init(&ps, &width, s, threads);
    return nvf_pool_run(nvf_pool_global(), (size_t)ps.ntasks, width, quant_task, &ps);
}

int nvf_quant_rows_ref(uint8_t *packed, uint8_t *scales, const float *x, int64_t rows, int64_t cols,
                       float gs, const nvf_quant_params *p, int threads) {
    nvf_quant_source s = {.dtype = NVF_DTYPE_F32, .data = x, .rows = rows, .cols = cols};
    int rc = nvf_quant_source_check(&s, "(f32 rows)");
    if (rc < 0)
        return rc;
    return nvf_quant_source_ref(packed, scales, &s, gs, p, threads);
}
