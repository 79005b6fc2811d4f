/*
 * The inverse of the prepared targets (convert_unprepare*.c), shared between its two files:
 *   convert_unprepare.c          the entry: detect, read the record, open the ranks, restore the
 *                                source into a temporary directory, convert it to modelopt;
 *   convert_unprepare_tensors.c  the restored tensors: what each is made of, checked against
 *                                the record, and its bytes (de-interleave, inverse layout).
 */
#ifndef NVFP4_CONVERT_UNPREPARE_H
#define NVFP4_CONVERT_UNPREPARE_H

#include "convert_internal.h"

#include "nvfp4/backend.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/layout.h"
#include "nvfp4/safetensors.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define CV_INVERSE_NAME_Q "'" CV_INVERSE_NAME "'"

/* How a restored tensor's bytes are made. */
typedef enum un_kind {
    UN_COPY = 0, /* a tensor of rank 0 as it is */
    UN_WEIGHT,   /* rows of a prepared weight (a w13 projection's de-interleaved) */
    UN_SCALES,   /* rows of prepared scales, laid out back to linear */
    UN_F32,      /* an F32 scalar ([] or [1]) */
} un_kind;

typedef struct un_ent {
    nvf_st_entry decl; /* name owned (char *) */
    un_kind kind;
    const nvf_st_tensor *src; /* UN_COPY, UN_WEIGHT, UN_SCALES: the prepared tensor */
    int64_t slot;             /* the expert's matrix in `src` (-1: a 2-D dense tensor) */
    int proj;                 /* -1: rows as they are; NVF_PROJ_GATE / NVF_PROJ_UP of a w13 */
    int64_t rows, prows, kc;  /* restored rows, rows of the prepared matrix, scale columns */
    uint32_t bits;            /* UN_F32 */
} un_ent;

typedef struct un_set {
    nvf_layout layout;
    int w4a4;
    int ep;
    nvf_ckpt **ranks; /* ep open rank checkpoints (the top directory when ep is 1) */
    const char **rank_names;
    nvf_backend *backend; /* lays the scales out back to linear */
    size_t n, cap;
    un_ent *ents;
    /* the last matrix of scales laid out to linear (gate and up of a w13 share it) */
    const nvf_st_tensor *lin_src;
    int64_t lin_slot;
    uint8_t *lin;
    size_t lin_cap;
} un_set;

/** The restored tensors of every layer and dense linear of `record`, then rank 0's other
 * tensors; every prepared tensor is checked (dtype, shape) and every recorded scalar against
 * the stored alpha. @return 0, NVF_E_FORMAT / NVF_E_VERIFY naming the tensor, NVF_E_NOMEM. */
int un_plan(un_set *s, const cJSON *record);

/** The bytes of entry `e` (its declared size) into `buf`. */
int un_produce(uint8_t *buf, un_set *s, const un_ent *e);

/** Bytes of entry `e`. */
uint64_t un_bytes(const un_ent *e);

/** Free the entries (not the ranks). */
void un_free(un_set *s);

#endif
