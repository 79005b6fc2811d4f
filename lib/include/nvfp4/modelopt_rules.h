/*
 * The ModelOpt NVFP4 configuration rules (SPEC section 5), in one place: the values `convert`
 * writes into config.json "quantization_config" and hf_quant_config.json "quantization", and
 * the check `validate` runs on any checkpoint that claims them (ours or a third party's):
 *   1. quant_method "modelopt" (config.json);
 *   2. quant_algo "NVFP4", or "MIXED_PRECISION" with a "quantized_layers" object;
 *   3. group_size 16 (required in hf_quant_config.json, checked where config.json gives it);
 *   4. a non-empty module exclusion list: hf_quant_config.json "exclude_modules", config.json
 *      "ignore" (loaders quantize every linear the list does not name);
 *   5. the two files agree (algorithm, group size, excluded modules as sets);
 *   6. the tensors agree: the configs say NVFP4 only when an NVFP4 linear exists, no excluded
 *      module holds NVFP4 tensors, and under MIXED_PRECISION every NVFP4 linear is listed.
 */
#ifndef NVFP4_MODELOPT_RULES_H
#define NVFP4_MODELOPT_RULES_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/finding.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NVF_MODELOPT_QUANT_METHOD     "modelopt"
#define NVF_MODELOPT_QUANT_ALGO       "NVFP4"
#define NVF_MODELOPT_QUANT_ALGO_MIXED "MIXED_PRECISION"
#define NVF_MODELOPT_GROUP_SIZE       16
#define NVF_MODELOPT_HF_QUANT_CONFIG  "hf_quant_config.json"

/**
 * Check the ModelOpt configuration of checkpoint `ck` (a directory; nothing is checked for a
 * single file, a compressed-tensors or a prepared checkpoint, or one with neither NVFP4
 * tensors nor a ModelOpt config) against rules 1-6 above; each broken rule is appended to
 * `out` as an error finding "modelopt.quant-config-missing", "modelopt.quant-method",
 * "modelopt.quant-algo", "modelopt.group-size", "modelopt.exclude-modules-empty",
 * "modelopt.config-mismatch" or "modelopt.config-contradicts-tensors", naming the file, the
 * field or tensor and the offending value.
 * @return 0 or NVF_E_NOMEM.
 */
int nvf_modelopt_check_config(nvf_findings *out, const nvf_ckpt *ck);

#ifdef __cplusplus
}
#endif
#endif
