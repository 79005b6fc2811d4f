/*
 * Private glue between the checkpoint modules: open (files, index, config), format (roles,
 * companions, detection), moe (structure discovery).
 */
#ifndef NVFP4_CKPT_INTERNAL_H
#define NVFP4_CKPT_INTERNAL_H

#include "nvfp4/checkpoint.h"

#include <cjson/cJSON.h>

/** Record a warning (also logged). @return 0 or NVF_E_NOMEM. */
int ckpt_warn(nvf_ckpt *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** The config.json value `key` at the top level or under "text_config"; NULL if absent. */
const cJSON *ckpt_config_get(const nvf_ckpt *ck, const char *key);

/** Classify every tensor, link scales to weights, detect the format, check FP8 block scales. */
int ckpt_detect_format(nvf_ckpt *ck);

/** Discover the MoE structure into ck->moe. */
int ckpt_discover_moe(nvf_ckpt *ck);

void ckpt_quant_free(nvf_ckpt_quant *q);
void ckpt_moe_free(nvf_moe *m);

/** Whether `s` ends with `suffix`. */
int ckpt_ends_with(const char *s, const char *suffix);

/** Format "[a, b, c]" into buf. */
void ckpt_shape_str(char *buf, size_t len, const int64_t *shape, int32_t ndim);

#endif
