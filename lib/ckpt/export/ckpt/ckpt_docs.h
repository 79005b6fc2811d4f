/*
 * What an open checkpoint holds beyond the public fields of nvf_ckpt: the parsed config.json and
 * hf_quant_config.json. Library-internal (lib/ckpt reads them; lib/convert copies config.json
 * into its output): it hands out cJSON trees, which the public headers never mention.
 */
#ifndef NVFP4_CKPT_DOCS_H
#define NVFP4_CKPT_DOCS_H

#include "nvfp4/checkpoint.h"

#include <cjson/cJSON.h>

/** Every nvf_ckpt that nvf_ckpt_open() hands out is the `pub` member of one of these. */
typedef struct nvf_ckpt_priv {
    nvf_ckpt pub;           /* first: a nvf_ckpt * is a nvf_ckpt_priv * */
    cJSON *config;          /* config.json, or NULL; owned */
    cJSON *hf_quant_config; /* hf_quant_config.json, or NULL; owned */
} nvf_ckpt_priv;

/** config.json of the checkpoint, or NULL when it has none. */
static inline const cJSON *nvf_ckpt_config_doc(const nvf_ckpt *ck) {
    return ((const nvf_ckpt_priv *)ck)->config;
}

/** hf_quant_config.json of the checkpoint, or NULL when it has none. */
static inline const cJSON *nvf_ckpt_hf_quant_config_doc(const nvf_ckpt *ck) {
    return ((const nvf_ckpt_priv *)ck)->hf_quant_config;
}

#endif
