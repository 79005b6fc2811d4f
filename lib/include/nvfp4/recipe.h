/*
 * Quantization recipes: the YAML file of SPEC section 4 (schemas/recipe.schema.json), its
 * defaults, and the command-line flags that override each key.
 *
 * The file, every key optional (a missing key or section takes its default):
 *   version: 1
 *   quantization: {method: 4over6|rtn, error: mse|mae, error_domain: scaled|original,
 *                  e4m3_max: 256|448, arithmetic: flashinfer|modelopt}
 *   scope: {include: [GLOB, ...], exclude: [GLOB, ...]}
 *   target: {format: modelopt|prepared-w4a16|prepared-w4a4, scale_layout: 128x4|8x4, ep: N}
 *   output: {max_shard_size: SIZE}      # "5GB", "512MiB" or a byte count
 *   verify: {tokens: N, seed: N}
 * When e4m3_max is not given it follows the method: 256 for 4over6 (SGLang's validated
 * default), 448 for rtn (plain NVFP4 as ModelOpt writes it). `arithmetic: modelopt` (ModelOpt's
 * own export operations, byte for byte) makes the method rtn unless one is given, and takes
 * rtn with e4m3_max 448 only (nvf_recipe_check).
 */
#ifndef NVFP4_RECIPE_H
#define NVFP4_RECIPE_H

#include "nvfp4/quant.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_target_format {
    NVF_TARGET_FORMAT_MODELOPT = 0,
    NVF_TARGET_FORMAT_PREPARED_W4A16 = 1,
    NVF_TARGET_FORMAT_PREPARED_W4A4 = 2,
} nvf_target_format;

typedef enum nvf_scale_layout {
    NVF_SCALE_LAYOUT_128X4 = 0,
    NVF_SCALE_LAYOUT_8X4 = 1,
} nvf_scale_layout;

typedef struct nvf_recipe {
    int32_t version;
    nvf_quant_params quant; /* quant.method RTN_MODELOPT: `method: rtn, arithmetic: modelopt` */
    int e4m3_max_set;       /* 0: quant.e4m3_max follows quant.method */
    int method_set;         /* 0: `arithmetic: modelopt` makes the method rtn */
    nvf_quant_arith arith;  /* quantization.arithmetic */
    char **include;         /* globs, owned */
    size_t n_include;
    char **exclude; /* globs, owned */
    size_t n_exclude;
    nvf_target_format target;
    nvf_scale_layout scale_layout;
    int32_t ep;
    uint64_t max_shard_size; /* bytes */
    char max_shard_size_text[32];
    int64_t verify_tokens;
    uint64_t verify_seed;
} nvf_recipe;

/**
 * Fill `out` with the default recipe (SPEC section 4). @return 0 or NVF_E_NOMEM.
 * The caller frees it with nvf_recipe_free().
 */
int nvf_recipe_init(nvf_recipe *out);

/** Free what a recipe owns (not the struct itself); NULL is fine. */
void nvf_recipe_free(nvf_recipe *r);

/**
 * Read the YAML recipe at `path` on top of `r` (normally fresh from nvf_recipe_init), keys
 * present in the file replacing their values.
 * @return 0; NVF_E_IO when the file cannot be read; NVF_E_CONFIG for a syntax error, an unknown
 * key, a duplicate key or a bad value, with a "PATH:LINE:COL: ..." message.
 */
int nvf_recipe_load(nvf_recipe *r, const char *path);

/** nvf_recipe_load() for `len` bytes of YAML in memory; `name` is used in messages. */
int nvf_recipe_parse(nvf_recipe *r, const char *text, size_t len, const char *name);

/**
 * Override one key from the command line. `flag` is the flag name without dashes (method,
 * error, error-domain, e4m3-max, arithmetic, target, scale-layout, ep, max-shard-size, tokens,
 * seed) and `value` its text, parsed as in a recipe file.
 * @return 0; NVF_E_INVALID for an unknown flag; NVF_E_CONFIG for a bad value ("--FLAG: ...").
 */
int nvf_recipe_set(nvf_recipe *r, const char *flag, const char *value);

/**
 * Check the keys that depend on each other, once the file and the flags are in: `arithmetic:
 * modelopt` takes `method: rtn` and `e4m3_max: 448` (SPEC section 4).
 * @return 0, or NVF_E_CONFIG saying which key conflicts.
 */
int nvf_recipe_check(const nvf_recipe *r);

/**
 * Replace the include (`exclude` = 0) or exclude (`exclude` = 1) globs with `n` copies of
 * `globs` (the --include / --exclude flags). @return 0, NVF_E_CONFIG (empty glob) or NVF_E_NOMEM.
 */
int nvf_recipe_set_globs(nvf_recipe *r, int exclude, const char *const *globs, size_t n);

/**
 * Parse a size: digits with an optional fraction, optional spaces, and an optional unit B, KB,
 * MB, GB, TB (decimal) or KiB, MiB, GiB, TiB ("5GB", "512MiB", "1.5 TB", "1000").
 * @return 0, or -1 when malformed or under 1 byte (no error is set).
 */
int nvf_size_parse(uint64_t *out, const char *text, size_t len);

/** The recipe flags nvf_recipe_set() takes, NULL-terminated (for option tables and help). */
const char *const *nvf_recipe_flags(void);

/**
 * The effective recipe as a JSON object with the file's sections and keys (it validates
 * against schemas/recipe.schema.json). @return a string the caller frees with free(), or NULL
 * (NVF_E_NOMEM set).
 */
char *nvf_recipe_to_json(const nvf_recipe *r);

#ifdef __cplusplus
}
#endif
#endif
