/*
 * Private to lib/synth: the value generator shared by the planner and the writer (and read by
 * tests/unit/test_synth.c). The generator is described in nvfp4/synth.h.
 */
#ifndef NVFP4_SYNTH_INTERNAL_H
#define NVFP4_SYNTH_INTERNAL_H

#include "nvfp4/synth.h"

#include <stddef.h>
#include <stdint.h>

/* synth_make.kind: the distribution of a tensor's values. */
enum {
    SYNTH_KIND_WEIGHT = 0, /* N(0, 0.02^2)-like with 1-in-4096 outliers x(8..32) */
    SYNTH_KIND_ROUTER = 1, /* N(0, 0.02^2)-like, no outliers */
    SYNTH_KIND_NORM = 2,   /* 1 + N(0, 0.05^2)-like */
    SYNTH_KIND_BIAS = 3,   /* N(0, 0.001^2)-like */
};

/* synth_make.role. */
enum {
    SYNTH_ROLE_PLAIN = 0, /* values stored as the tensor's dtype (BF16 or F32) */
    SYNTH_ROLE_FP8 = 1,   /* F8_E4M3 block-quantized from the BF16 values */
    SYNTH_ROLE_SCALE = 2, /* the F32 weight_scale_inv of the FP8 tensor just before it */
};

/* FP8 block edge (weight_block_size [128, 128]) and E4M3's largest finite value. */
#define SYNTH_NAME_MAX  256 /* longest tensor or module name a preset makes, with its NUL */
#define SYNTH_FP8_BLOCK 128
#define SYNTH_FP8_MAX   448.0f

/** How the values of one tensor of the plan are made. */
typedef struct synth_make {
    int kind;       /* value distribution */
    int role;       /* plain values, FP8 weight, or the scale of the tensor before it */
    size_t n_parts; /* logical matrices concatenated in flat order */
    uint64_t part_numel;
    uint64_t *part_keys; /* owned */
} synth_make;

/** Every nvf_synth_plan that nvf_synth_plan_build() hands out is the `pub` member of one. */
typedef struct synth_plan_priv {
    nvf_synth_plan pub; /* first: a nvf_synth_plan * is a synth_plan_priv * */
    synth_make *make;   /* parallel to pub.tensors */
} synth_plan_priv;

/** How tensor `i` of plan `p` is made. */
static inline const synth_make *synth_make_of(const nvf_synth_plan *p, size_t i) {
    return &((const synth_plan_priv *)p)->make[i];
}

/** The key of a logical matrix: mix(fnv1a64(name) ^ mix(seed)). */
uint64_t synth_key(uint64_t seed, const char *name);

/**
 * Values of elements [first, first + n) of the tensor made by `m` in flat row-major order, as
 * binary32 before any rounding to the stored dtype.
 */
void synth_fill_f32(float *out, const synth_make *m, uint64_t first, size_t n);

/* The writer's files (synth_files.c) ------------------------------------------------------ */

/** Record a written file and its size in the summary. @return 0 or NVF_E_NOMEM. */
int synth_summary_add(nvf_synth_summary *s, const char *name, uint64_t bytes);

/** Write `text` (NULL: out of memory) atomically as dst/name and record it. */
int synth_write_text(nvf_synth_summary *sum, const char *dst, const char *name, const char *text);

/**
 * Write the side files of the plan's checkpoint into dst: generation_config.json, the
 * tokenizer stub (tokenizer.json, tokenizer_config.json, special_tokens_map.json), README.md.
 * The README names `shown` as the dtype (an NVFP4 dtype for the bf16 source it is made from).
 */
int synth_write_side_files(nvf_synth_summary *sum, const nvf_synth_plan *p, const char *dst,
                           nvf_synth_dtype shown);

/* The writers (synth_write.c, synth_nvfp4.c, synth_ct.c) -------------------------------------- */

/** nvf_synth_write() of a bf16 or fp8-block checkpoint whose README names dtype `shown`. */
int synth_write_plain(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt,
                      nvf_synth_dtype shown);

/** nvf_synth_write() of an NVFP4 dtype: the bf16 checkpoint converted (nvfp4/synth.h). */
int synth_write_nvfp4(nvf_synth_summary *out, const char *dst, const nvf_synth_options *opt);

/**
 * Rewrite the ModelOpt NVFP4 checkpoint `dst` (as the conversion wrote it) in
 * compressed-tensors form (nvfp4/synth.h "nvfp4-ct"). @return 0 or a negative nvf_status.
 */
int synth_rewrite_ct(const char *dst);

#endif
