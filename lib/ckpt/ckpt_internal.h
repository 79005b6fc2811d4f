/*
 * Private glue between the checkpoint modules. Calls go one way, top to bottom:
 *   1. ckpt_open.c: files, index, config; runs format detection, then MoE discovery;
 *      ckpt_nvfp4.c: the NVFP4 weight views of an open checkpoint; ckpt_modelopt_rules.c: the
 *      ModelOpt config rules (none calls another)
 *   2. ckpt_format.c (roles, companions, detection), ckpt_moe.c (structure, expert map),
 *      ckpt_plan.c (scope): none calls another of this level or ckpt_open.c
 *   3. ckpt_naming.c (what a name says), ckpt_moe_config.c (config.json's MoE fields),
 *      ckpt_source.c (a weight as a quantization source)
 *   4. ckpt_common.c (warnings, lookups, strings)
 * tests/cli/style/ckpt_layering.sh checks it.
 */
#ifndef NVFP4_CKPT_INTERNAL_H
#define NVFP4_CKPT_INTERNAL_H

#include "ckpt/ckpt_docs.h"
#include "nvfp4/checkpoint.h"

#include <cjson/cJSON.h>

/** Record a warning (also logged; ckpt_common.c). @return 0 or NVF_E_NOMEM. */
int ckpt_warn(nvf_ckpt *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** The config.json value `key` at the top level or under "text_config"; NULL if absent. */
const cJSON *ckpt_config_get(const nvf_ckpt *ck, const char *key);

/**
 * Warn that config.json field `key` (value `v`, from ckpt_config_get) is not of the type the
 * reader needs: the warning names the field, its value and `expected` ("a boolean", ...), and
 * the field is then read as absent. @return 0 or NVF_E_NOMEM.
 */
int ckpt_config_warn_type(nvf_ckpt *ck, const char *key, const cJSON *v, const char *expected);

/** Classify every tensor, link scales to weights, detect the format, check FP8 block scales. */
int ckpt_detect_format(nvf_ckpt *ck);

/* An expert count above this is taken as a broken config, not a model. */
#define CKPT_MAX_EXPERTS 1000000

/**
 * Read the MoE fields of config.json into `c` (ckpt_moe_config.c); a field of the wrong type
 * or range is a warning and reads as absent. @return 0 or NVF_E_NOMEM.
 */
int ckpt_moe_read_config(nvf_ckpt *ck, nvf_moe_config *c);

/** The router kind of a model with MoE layers from its config, `any_bias`: a layer has a
 * correction bias (ckpt_moe_config.c). */
nvf_router_kind ckpt_moe_router_kind(const nvf_moe_config *c, int any_bias);

/** Discover the MoE structure into ck->moe. */
int ckpt_discover_moe(nvf_ckpt *ck);

void ckpt_quant_free(nvf_ckpt_quant *q);
void ckpt_moe_free(nvf_moe *m);

/**
 * Split NAME = PREFIX ".mlp." REST (or ".block_sparse_moe.") where PREFIX ends in
 * "layers.{digits}" (ckpt_naming.c). @return 1 with the prefix length, the layer index and REST.
 */
int ckpt_split_mlp(const char *name, size_t *prefix_len, int64_t *index, const char **rest);

/** "gate_proj.weight" (or w1/w3/w2, ".weight_packed") -> projection, or NVF_PROJ_NONE. */
nvf_proj ckpt_proj_weight(const char *rest, int *w13);

/** Whether `s` ends with `suffix`. */
int ckpt_ends_with(const char *s, const char *suffix);

/** Format "[a, b, c]" into buf. */
void ckpt_shape_str(char *buf, size_t len, const int64_t *shape, int32_t ndim);

#endif
