/*
 * The choices of the NVFP4 block arithmetic (SPEC section 4) as named enums, shared by the CPU
 * reference (lib/quant), the CUDA kernels (kernels/) and the recipe. Usable from C and CUDA:
 * the kernels take these enums as template arguments and in kernel argument structs, so their
 * sizes are pinned below.
 */
#ifndef NVFP4_QUANT_TYPES_H
#define NVFP4_QUANT_TYPES_H

#include <stdint.h>

/** How a block's scale is chosen, and with whose arithmetic. */
typedef enum nvf_quant_method {
    NVF_QUANT_METHOD_RTN = 0,    /* plain NVFP4: one scale candidate per block */
    NVF_QUANT_METHOD_4OVER6 = 1, /* two candidates (max maps to 6 or to 4), lower error wins */
    /* plain NVFP4 in ModelOpt's export arithmetic (SPEC section 4 "ModelOpt arithmetic"): the
     * recipe's `method: rtn` with `arithmetic: modelopt`. Its group scale is the decode scale
     * sf2 = RN(amax / 2688) itself and its blocks divide by it; a method of its own (not a fifth
     * field) because ModelOpt exports only RTN this way and the kernels dispatch on the method. */
    NVF_QUANT_METHOD_RTN_MODELOPT = 2,
} nvf_quant_method;

/** Whose operations produce the bytes (`quantization.arithmetic` of a recipe). */
typedef enum nvf_quant_arith {
    NVF_QUANT_ARITH_FLASHINFER = 0, /* FlashInfer's exact reference (the default) */
    NVF_QUANT_ARITH_MODELOPT = 1, /* ModelOpt's export (RTN only: NVF_QUANT_METHOD_RTN_MODELOPT) */
} nvf_quant_arith;

/** The error measure that picks a 4over6 candidate. */
typedef enum nvf_quant_error {
    NVF_QUANT_ERROR_MSE = 0, /* sum of squared differences */
    NVF_QUANT_ERROR_MAE = 1, /* sum of absolute differences */
} nvf_quant_error;

/** Where a 4over6 candidate's error is measured. */
typedef enum nvf_quant_domain {
    NVF_QUANT_DOMAIN_SCALED = 0,   /* compare in the global-scaled domain (x * gs) */
    NVF_QUANT_DOMAIN_ORIGINAL = 1, /* compare dequantized values with x */
} nvf_quant_domain;

/** The E of the global scale (`e4m3_max` in a recipe); blocks always clamp at 448. */
typedef enum nvf_quant_e4m3_max {
    NVF_QUANT_E4M3_MAX_256 = 256, /* SGLang's E4M3_USE_256 (the default recipe's 4over6) */
    NVF_QUANT_E4M3_MAX_448 = 448, /* the largest E4M3 value (RTN, ModelOpt) */
} nvf_quant_e4m3_max;

/** How blocks are quantized (the `quantization:` section of a recipe). */
typedef struct nvf_quant_params {
    nvf_quant_method method;
    nvf_quant_error error;   /* 4over6 only */
    nvf_quant_domain domain; /* 4over6 only */
    int32_t e4m3_max;        /* an nvf_quant_e4m3_max value, as read from a recipe */
} nvf_quant_params;

#ifndef __cplusplus
_Static_assert(sizeof(nvf_quant_method) == 4 && sizeof(nvf_quant_error) == 4 &&
                   sizeof(nvf_quant_domain) == 4 && sizeof(nvf_quant_arith) == 4,
               "the quantization enums are passed to kernels as 32-bit values");
_Static_assert(sizeof(nvf_quant_params) == 16, "nvf_quant_params is four 32-bit fields");
#else
static_assert(sizeof(nvf_quant_method) == 4 && sizeof(nvf_quant_error) == 4 &&
                  sizeof(nvf_quant_domain) == 4 && sizeof(nvf_quant_arith) == 4,
              "the quantization enums are passed to kernels as 32-bit values");
static_assert(sizeof(nvf_quant_params) == 16, "nvf_quant_params is four 32-bit fields");
#endif

#endif
