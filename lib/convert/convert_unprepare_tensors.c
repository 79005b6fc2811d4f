/*
 * The tensors the inverse of a prepared checkpoint restores (convert_unprepare.h), each linear
 * of the record (nvfp4-inverse.json, convert_prepared_record.c) as its four ModelOpt tensors:
 *   X.weight          U8 [rows, cols/2]: the prepared rows of the expert's matrix (w13: row i of
 *                     gate or up is prepared row nvf_w13_prepared_row(proj, i));
 *   X.weight_scale    F8_E4M3 [rows, cols/16]: the expert's scales laid out back to linear
 *                     (nvf_backend_layout, the layout's inverse), then the same rows;
 *   X.weight_scale_2  F32 (shape as the source stored it): the recorded bytes; where the record
 *                     has none (records of earlier versions), alpha where that is exact (W4A16, or
 *                     W4A4 with input scale 1.0), else refused;
 *   X.input_scale     F32: the recorded bytes (left out where the source had none).
 * Every recorded scalar is checked against the stored alpha (and W4A4's w13_input_scale): a
 * record that does not belong to the tensors is NVF_E_VERIFY naming the tensor and values.
 * Every other tensor of rank 0 is restored as it is (UN_COPY).
 */
#include "convert_unprepare.h"

#include "nvfp4/backend.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int bad_record(const char *what) {
    return nvf_error_set(NVF_E_FORMAT, "invalid " CV_INVERSE_NAME_Q ": %s", what);
}

/* "0x%08x" -> bits; 0 when null (*known 0). */
static int hex_of(const cJSON *o, const char *key, uint32_t *bits, int *known, const char *mod) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *known = 0;
    *bits = 0;
    if (cJSON_IsNull(v))
        return NVF_OK; /* unknown: the caller decides */
    unsigned u;
    char end;
    if (!cJSON_IsString(v) || sscanf(v->valuestring, "0x%8x%c", &u, &end) != 1)
        return nvf_error_set(NVF_E_FORMAT,
                             "invalid " CV_INVERSE_NAME_Q ": '%s' %s is not \"0x\" and 8 hex "
                             "digits",
                             mod, key);
    *bits = u;
    *known = 1;
    return NVF_OK;
}

static int ndim_of(const cJSON *o, const char *key, int *ndim, const char *mod) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < -1 || v->valuedouble > 1 ||
        v->valuedouble != (double)(int)v->valuedouble)
        return nvf_error_set(NVF_E_FORMAT,
                             "invalid " CV_INVERSE_NAME_Q ": '%s' %s is not -1, 0 or 1", mod, key);
    *ndim = (int)v->valuedouble;
    return NVF_OK;
}

static un_ent *push(un_set *s, const char *module, const char *suffix) {
    if (s->n == s->cap) {
        size_t n = s->cap ? 2 * s->cap : 256;
        un_ent *e = realloc(s->ents, n * sizeof *e);
        if (!e)
            return NULL;
        s->ents = e;
        s->cap = n;
    }
    size_t len = strlen(module) + strlen(suffix) + 1;
    char *name = malloc(len);
    if (!name)
        return NULL;
    snprintf(name, len, "%s%s", module, suffix);
    un_ent *e = &s->ents[s->n++];
    memset(e, 0, sizeof *e);
    e->decl.name = name;
    e->slot = -1;
    e->proj = -1;
    return e;
}

/* A prepared tensor of rank `r` with the dtype and shape it must have (ndim dims of `shape`). */
static int find(const nvf_st_tensor **out, const un_set *s, int r, const char *P, const char *suf,
                nvf_dtype dtype, int32_t ndim, const int64_t *shape) {
    char name[1024];
    snprintf(name, sizeof name, "%s%s", P, suf);
    const nvf_ckpt_tensor *t = nvf_ckpt_find(s->ranks[r], name);
    if (!t)
        return nvf_error_set(NVF_E_FORMAT, "'%s': no tensor '%s' (the record names it)",
                             s->rank_names[r], name);
    const nvf_st_tensor *st = t->st;
    int ok = st->dtype == dtype && st->ndim == ndim;
    for (int32_t k = 0; ok && k < ndim; k++)
        ok = shape[k] < 0 || st->shape[k] == shape[k];
    if (!ok)
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s': '%s' is %s with %d dimensions [%" PRId64 ", ...], not the %s "
                             "the prepared layout and the record give",
                             s->rank_names[r], name, nvf_dtype_name(st->dtype), (int)st->ndim,
                             st->ndim > 0 ? st->shape[0] : 0, nvf_dtype_name(dtype));
    *out = st;
    return NVF_OK;
}

static float f32_at(const nvf_st_tensor *t, int64_t i) {
    const uint8_t *p = t->data + 4 * (i < 0 ? 0 : i);
    return nvf_f32_from_bits((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
}

/* One recorded linear's scalars, read and checked. */
typedef struct un_lin {
    const cJSON *doc;
    const char *module;
    uint32_t ws2, in;
    int ws2_known, ndim[2], requantized;
} un_lin;

static int read_lin(un_lin *l, const cJSON *doc, const char *what) {
    memset(l, 0, sizeof *l);
    l->doc = doc;
    l->module = cJSON_IsObject(doc) ? str_of(doc, "module") : NULL;
    if (!l->module) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s has no \"module\"", what);
        return bad_record(msg);
    }
    int known, rc = hex_of(doc, "weight_scale_2", &l->ws2, &l->ws2_known, l->module);
    if (rc == NVF_OK)
        rc = hex_of(doc, "input_scale", &l->in, &known, l->module);
    if (rc == NVF_OK && !known)
        rc = nvf_error_set(NVF_E_FORMAT, "invalid " CV_INVERSE_NAME_Q ": '%s' has no input_scale",
                           l->module);
    if (rc == NVF_OK)
        rc = ndim_of(doc, "weight_scale_2_ndim", &l->ndim[0], l->module);
    if (rc == NVF_OK)
        rc = ndim_of(doc, "input_scale_ndim", &l->ndim[1], l->module);
    if (rc == NVF_OK && l->ndim[0] < 0)
        rc = nvf_error_set(NVF_E_FORMAT,
                           "invalid " CV_INVERSE_NAME_Q ": '%s' weight_scale_2_ndim is -1",
                           l->module);
    l->requantized = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "requantized"));
    return rc;
}

/*
 * The shared scalars of a prepared matrix (n linears: gate and up, or one) against its alpha
 * (and W4A4's stored input scale `in_t`, NULL when none): alpha must be the decode scale
 * (W4A16) or RN(input_scale * decode scale) (W4A4) of the largest recorded values. A linear
 * without a recorded weight_scale_2 takes alpha where that is exact.
 */
static int check_alpha(const un_set *s, un_lin *l, int n, const nvf_st_tensor *alpha_t,
                       const nvf_st_tensor *in_t, int64_t slot) {
    float alpha = f32_at(alpha_t, slot), ws2 = 0.0f, in = 0.0f;
    for (int k = 0; k < n; k++) {
        float v = nvf_f32_from_bits(l[k].in);
        in = v > in ? v : in;
    }
    for (int k = 0; k < n; k++) {
        if (l[k].ws2_known)
            continue;
        if (s->w4a4 && in != 1.0f)
            return nvf_error_set(NVF_E_FORMAT,
                                 "'%s': its weight_scale_2 was not recorded (a record of an "
                                 "earlier version, from a resumed conversion) and alpha %.9g = "
                                 "input_scale %.9g x weight_scale_2 does not give it exactly: "
                                 "convert the source to the prepared target again",
                                 l[k].module, alpha, in);
        l[k].ws2 = nvf_f32_bits(alpha);
        l[k].ws2_known = 1;
    }
    for (int k = 0; k < n; k++) {
        float v = nvf_f32_from_bits(l[k].ws2);
        ws2 = v > ws2 ? v : ws2;
    }
    float want = s->w4a4 ? in * ws2 : ws2;
    if (nvf_f32_bits(want) != nvf_f32_bits(alpha))
        return nvf_error_set(NVF_E_VERIFY,
                             "'%s'[%" PRId64 "] alpha is %.9g, the record's '%s' gives %.9g: "
                             "the record does not belong to these tensors",
                             alpha_t->name, slot < 0 ? 0 : slot, alpha, l[0].module, want);
    if (in_t && nvf_f32_bits(f32_at(in_t, slot)) != nvf_f32_bits(in))
        return nvf_error_set(NVF_E_VERIFY,
                             "'%s'[%" PRId64 "] is %.9g, the record's '%s' gives %.9g: the "
                             "record does not belong to these tensors",
                             in_t->name, slot < 0 ? 0 : slot, f32_at(in_t, slot), l[0].module, in);
    return NVF_OK;
}

/* The four tensors of linear `l`: rows of matrix `slot` of w / sc. */
static int add_linear(un_set *s, const un_lin *l, const nvf_st_tensor *w, const nvf_st_tensor *sc,
                      int64_t slot, int proj, int64_t rows, int64_t prows, int64_t kc) {
    un_ent *e = push(s, l->module, ".weight");
    if (!e)
        return nvf_error_set(NVF_E_NOMEM, "no memory to restore '%s'", l->module);
    nvf_st_entry decl = e->decl;
    *e = (un_ent){.decl = decl,
                  .kind = UN_WEIGHT,
                  .src = w,
                  .slot = slot,
                  .proj = proj,
                  .rows = rows,
                  .prows = prows,
                  .kc = kc};
    e->decl.dtype = NVF_DTYPE_U8;
    e->decl.ndim = 2;
    e->decl.shape[0] = rows;
    e->decl.shape[1] = kc * NVF_BLOCK / 2;
    un_ent w_ent = *e;
    if (!(e = push(s, l->module, ".weight_scale")))
        return nvf_error_set(NVF_E_NOMEM, "no memory to restore '%s'", l->module);
    const char *nm = e->decl.name;
    *e = w_ent;
    e->decl.name = nm;
    e->kind = UN_SCALES;
    e->src = sc;
    e->decl.dtype = NVF_DTYPE_F8_E4M3;
    e->decl.shape[1] = kc;
    static const char *const suffix[2] = {".weight_scale_2", ".input_scale"};
    const uint32_t bits[2] = {l->ws2, l->in};
    for (int k = 0; k < 2; k++) {
        if (l->ndim[k] < 0)
            continue;
        if (!(e = push(s, l->module, suffix[k])))
            return nvf_error_set(NVF_E_NOMEM, "no memory to restore '%s'", l->module);
        e->kind = UN_F32;
        e->bits = bits[k];
        e->decl.dtype = NVF_DTYPE_F32;
        e->decl.ndim = l->ndim[k];
        e->decl.shape[0] = 1;
    }
    if (l->requantized)
        nvf_log(NVF_LOG_WARN,
                "'%s' was re-quantized onto its expert's shared weight_scale_2 when prepared: "
                "restored with those bytes, not the source's",
                l->module);
    return NVF_OK;
}

/* The prepared tensors of layer P in every rank: [Er, 2I, H/2], ... (dims from rank 0). */
typedef struct un_layer_t {
    const nvf_st_tensor *w13, *s13, *a13, *i13, *w2, *s2, *a2;
} un_layer_t;

static int layer_tensors(un_layer_t *t, const un_set *s, int r, const char *P, int64_t Er,
                         int64_t *I, int64_t *H) {
    int64_t any3[3] = {Er, -1, -1};
    int rc = find(&t->w13, s, r, P, ".w13_weight", NVF_DTYPE_U8, 3, any3);
    if (rc != NVF_OK)
        return rc;
    if (r == 0) {
        *I = t->w13->shape[1] / 2;
        *H = t->w13->shape[2] * 2;
    }
    int64_t w13[3] = {Er, 2 * *I, *H / 2}, w2[3] = {Er, *H, *I / 2}, per[1] = {Er};
    int64_t s13[3] = {Er, nvf_layout_rows_padded(s->layout, 2 * *I),
                      nvf_layout_cols_padded(s->layout, *H / NVF_BLOCK)};
    int64_t s2[3] = {Er, nvf_layout_rows_padded(s->layout, *H),
                     nvf_layout_cols_padded(s->layout, *I / NVF_BLOCK)};
    if (*I <= 0 || *I % NVF_W13_GROUP != 0 || *H <= 0 || *H % NVF_BLOCK != 0)
        return nvf_error_set(NVF_E_FORMAT,
                             "'%s': '%s.w13_weight' [%" PRId64 ", %" PRId64 ", %" PRId64
                             "] is not a prepared w13 (2I rows, I a multiple of 64)",
                             s->rank_names[r], P, t->w13->shape[0], t->w13->shape[1],
                             t->w13->shape[2]);
    t->i13 = NULL;
    if ((rc = find(&t->w13, s, r, P, ".w13_weight", NVF_DTYPE_U8, 3, w13)) != NVF_OK ||
        (rc = find(&t->s13, s, r, P, ".w13_weight_scale", NVF_DTYPE_F8_E4M3, 3, s13)) != NVF_OK ||
        (rc = find(&t->a13, s, r, P, ".w13_alpha", NVF_DTYPE_F32, 1, per)) != NVF_OK ||
        (rc = find(&t->w2, s, r, P, ".w2_weight", NVF_DTYPE_U8, 3, w2)) != NVF_OK ||
        (rc = find(&t->s2, s, r, P, ".w2_weight_scale", NVF_DTYPE_F8_E4M3, 3, s2)) != NVF_OK ||
        (rc = find(&t->a2, s, r, P, ".w2_alpha", NVF_DTYPE_F32, 1, per)) != NVF_OK)
        return rc;
    if (s->w4a4)
        rc = find(&t->i13, s, r, P, ".w13_input_scale", NVF_DTYPE_F32, 1, per);
    return rc;
}

static int plan_layer(un_set *s, const cJSON *layer) {
    const char *P = str_of(layer, "prefix");
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(layer, "experts");
    if (!P || !cJSON_IsArray(ex))
        return bad_record("a layer without \"prefix\" or \"experts\"");
    int64_t E = cJSON_GetArraySize(ex);
    if (E <= 0 || E % s->ep != 0)
        return nvf_error_set(NVF_E_FORMAT,
                             "invalid " CV_INVERSE_NAME_Q ": layer '%s' has %" PRId64
                             " experts, not a multiple of the %d ranks",
                             P, E, s->ep);
    int64_t Er = E / s->ep, I = 0, H = 0;
    int rc = NVF_OK;
    un_layer_t t;
    for (int r = 0; r < s->ep && rc == NVF_OK; r++) {
        rc = layer_tensors(&t, s, r, P, Er, &I, &H);
        for (int64_t k = 0; k < Er && rc == NVF_OK; k++) {
            const cJSON *x = cJSON_GetArrayItem(ex, (int)(r * Er + k));
            un_lin l[3];
            char what[1100];
            snprintf(what, sizeof what, "layer '%s' expert %" PRId64 " gate, up or down", P,
                     r * Er + k);
            if ((rc = read_lin(&l[0], cJSON_GetObjectItemCaseSensitive(x, "gate"), what)) ||
                (rc = read_lin(&l[1], cJSON_GetObjectItemCaseSensitive(x, "up"), what)) ||
                (rc = read_lin(&l[2], cJSON_GetObjectItemCaseSensitive(x, "down"), what)) ||
                (rc = check_alpha(s, l, 2, t.a13, t.i13, k)) ||
                (rc = check_alpha(s, l + 2, 1, t.a2, NULL, k)))
                break;
            if ((rc = add_linear(s, &l[0], t.w13, t.s13, k, NVF_PROJ_GATE, I, 2 * I,
                                 H / NVF_BLOCK)) ||
                (rc =
                     add_linear(s, &l[1], t.w13, t.s13, k, NVF_PROJ_UP, I, 2 * I, H / NVF_BLOCK)) ||
                (rc = add_linear(s, &l[2], t.w2, t.s2, k, -1, H, H, I / NVF_BLOCK)))
                break;
        }
    }
    return rc;
}

static int plan_dense(un_set *s, const cJSON *doc) {
    un_lin l;
    int rc = read_lin(&l, doc, "a dense linear");
    if (rc != NVF_OK)
        return rc;
    const nvf_st_tensor *w, *sc, *a, *in = NULL;
    int64_t any2[2] = {-1, -1}, one[1] = {1};
    if ((rc = find(&w, s, 0, l.module, ".weight", NVF_DTYPE_U8, 2, any2)) != NVF_OK)
        return rc;
    int64_t rows = w->shape[0], kc = w->shape[1] * 2 / NVF_BLOCK;
    int64_t sh[2] = {nvf_layout_rows_padded(s->layout, rows),
                     nvf_layout_cols_padded(s->layout, kc)};
    if ((rc = find(&sc, s, 0, l.module, ".weight_scale", NVF_DTYPE_F8_E4M3, 2, sh)) != NVF_OK ||
        (rc = find(&a, s, 0, l.module, ".alpha", NVF_DTYPE_F32, 1, one)) != NVF_OK ||
        (s->w4a4 && (rc = find(&in, s, 0, l.module, ".input_scale", NVF_DTYPE_F32, 0, one))))
        return rc;
    if (w->shape[1] % (NVF_BLOCK / 2) != 0)
        return nvf_error_set(NVF_E_FORMAT, "'%s': '%s' has %" PRId64 " bytes a row, not 8k",
                             s->rank_names[0], w->name, w->shape[1]);
    if ((rc = check_alpha(s, &l, 1, a, in, -1)) != NVF_OK)
        return rc;
    return add_linear(s, &l, w, sc, -1, -1, rows, rows, kc);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Rank 0's tensors that no restored linear takes: as they are. */
static int plan_copies(un_set *s, const cJSON *record) {
    static const char *const lsuf[] = {".w13_weight",      ".w13_weight_scale", ".w13_alpha",
                                       ".w13_input_scale", ".w2_weight",        ".w2_weight_scale",
                                       ".w2_alpha",        ".fc2_input_scale"};
    static const char *const dsuf[] = {".weight", ".weight_scale", ".alpha", ".input_scale"};
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(record, "layers");
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(record, "dense");
    size_t n = 8 * (size_t)cJSON_GetArraySize(layers) + 4 * (size_t)cJSON_GetArraySize(dense),
           k = 0;
    char **taken = calloc(n ? n : 1, sizeof *taken);
    int rc = taken ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, layers) {
        for (size_t i = 0; i < 8 && rc == NVF_OK; i++) {
            size_t len = strlen(str_of(it, "prefix")) + strlen(lsuf[i]) + 1;
            if (!(taken[k] = malloc(len)))
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            else
                snprintf(taken[k++], len, "%s%s", str_of(it, "prefix"), lsuf[i]);
        }
    }
    cJSON_ArrayForEach(it, dense) {
        for (size_t i = 0; i < 4 && rc == NVF_OK; i++) {
            size_t len = strlen(str_of(it, "module")) + strlen(dsuf[i]) + 1;
            if (!(taken[k] = malloc(len)))
                rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            else
                snprintf(taken[k++], len, "%s%s", str_of(it, "module"), dsuf[i]);
        }
    }
    if (rc == NVF_OK)
        qsort(taken, k, sizeof *taken, cmp_str);
    const nvf_ckpt *ck = s->ranks[0];
    for (size_t i = 0; i < ck->n_tensors && rc == NVF_OK; i++) {
        const nvf_st_tensor *st = ck->tensors[i].st;
        const char *key = st->name;
        if (bsearch(&key, taken, k, sizeof *taken, cmp_str))
            continue;
        un_ent *e = push(s, st->name, "");
        if (!e) {
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
            break;
        }
        e->kind = UN_COPY;
        e->src = st;
        e->decl.dtype = st->dtype;
        e->decl.ndim = st->ndim;
        memcpy(e->decl.shape, st->shape, sizeof e->decl.shape);
    }
    for (size_t i = 0; taken && i < k; i++)
        free(taken[i]);
    free(taken);
    return rc;
}

int un_plan(un_set *s, const cJSON *record) {
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(record, "layers");
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(record, "dense");
    if (!cJSON_IsArray(layers) || !cJSON_IsArray(dense))
        return bad_record("no \"layers\" or \"dense\" array");
    int rc = NVF_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, layers) {
        if (rc == NVF_OK)
            rc = plan_layer(s, it);
    }
    cJSON_ArrayForEach(it, dense) {
        if (rc == NVF_OK)
            rc = cJSON_IsObject(it) && str_of(it, "module") ? plan_dense(s, it)
                                                            : bad_record("a dense entry without "
                                                                         "\"module\"");
    }
    return rc == NVF_OK ? plan_copies(s, record) : rc;
}

uint64_t un_bytes(const un_ent *e) {
    if (e->kind == UN_COPY)
        return e->src->end - e->src->begin;
    if (e->kind == UN_F32)
        return 4;
    return (uint64_t)e->rows * (uint64_t)(e->kind == UN_WEIGHT ? e->kc * NVF_BLOCK / 2 : e->kc);
}

/* Prepared row of restored row r. */
static int64_t prow_of(const un_ent *e, int64_t r) {
    return e->proj < 0 ? r : nvf_w13_prepared_row(e->proj == NVF_PROJ_UP ? 1 : 0, r);
}

int un_produce(uint8_t *buf, un_set *s, const un_ent *e) {
    int64_t slot = e->slot < 0 ? 0 : e->slot;
    if (e->kind == UN_COPY) {
        memcpy(buf, e->src->data, (size_t)un_bytes(e));
    } else if (e->kind == UN_F32) {
        for (int k = 0; k < 4; k++)
            buf[k] = (uint8_t)(e->bits >> (8 * k));
    } else if (e->kind == UN_WEIGHT) {
        size_t rb = (size_t)(e->kc * NVF_BLOCK / 2);
        const uint8_t *base = e->src->data + (size_t)slot * (size_t)e->prows * rb;
        for (int64_t r = 0; r < e->rows; r++)
            memcpy(buf + (size_t)r * rb, base + (size_t)prow_of(e, r) * rb, rb);
    } else {
        /* The matrix laid out back to linear once (gate and up share it). */
        if (s->lin_src != e->src || s->lin_slot != slot) {
            size_t need = (size_t)(e->prows * e->kc);
            if (need > s->lin_cap) {
                uint8_t *p = realloc(s->lin, need);
                if (!p)
                    return nvf_error_set(NVF_E_NOMEM, "no memory to restore '%s'", e->decl.name);
                s->lin = p;
                s->lin_cap = need;
            }
            size_t sb = (size_t)nvf_layout_bytes(s->layout, e->prows, e->kc);
            int rc =
                nvf_backend_layout(s->backend, s->lin, NVF_LAYOUT_LINEAR,
                                   e->src->data + (size_t)slot * sb, s->layout, e->prows, e->kc, 1);
            if (rc != NVF_OK)
                return rc;
            s->lin_src = e->src;
            s->lin_slot = slot;
        }
        for (int64_t r = 0; r < e->rows; r++)
            memcpy(buf + (size_t)(r * e->kc), s->lin + (size_t)(prow_of(e, r) * e->kc),
                   (size_t)e->kc);
    }
    return NVF_OK;
}

void un_free(un_set *s) {
    for (size_t i = 0; i < s->n; i++)
        free((char *)s->ents[i].decl.name);
    free(s->ents);
    free(s->lin);
    s->ents = NULL;
    s->lin = NULL;
    s->n = s->cap = s->lin_cap = 0;
}
