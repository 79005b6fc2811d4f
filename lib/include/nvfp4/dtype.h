/*
 * The safetensors element types (SPEC section 3), with their on-disk names and bit widths.
 */
#ifndef NVFP4_DTYPE_H
#define NVFP4_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_dtype {
    NVF_DTYPE_INVALID = 0,
    NVF_DTYPE_BOOL,
    NVF_DTYPE_U8,
    NVF_DTYPE_I8,
    NVF_DTYPE_F8_E5M2,
    NVF_DTYPE_F8_E4M3,
    NVF_DTYPE_F8_E8M0,
    NVF_DTYPE_F8_E4M3FNUZ,
    NVF_DTYPE_F8_E5M2FNUZ,
    NVF_DTYPE_F4,
    NVF_DTYPE_F6_E2M3,
    NVF_DTYPE_F6_E3M2,
    NVF_DTYPE_I16,
    NVF_DTYPE_U16,
    NVF_DTYPE_F16,
    NVF_DTYPE_BF16,
    NVF_DTYPE_I32,
    NVF_DTYPE_U32,
    NVF_DTYPE_F32,
    NVF_DTYPE_C64,
    NVF_DTYPE_F64,
    NVF_DTYPE_I64,
    NVF_DTYPE_U64,
    NVF_DTYPE_COUNT
} nvf_dtype;

/** The on-disk name ("BF16", ...); "INVALID" for NVF_DTYPE_INVALID. Never NULL. */
const char *nvf_dtype_name(nvf_dtype dtype);

/** Parse an on-disk name of `len` bytes; NVF_DTYPE_INVALID when unknown. */
nvf_dtype nvf_dtype_from_name(const char *name, size_t len);

/** Bits per element (4 for F4, 6 for F6_*, 1 byte = 8 for BOOL); 0 for invalid. */
unsigned nvf_dtype_bits(nvf_dtype dtype);

/** Whether the dtype holds floating-point values (F8..F64, F4, F6; not C64). */
int nvf_dtype_is_float(nvf_dtype dtype);

/**
 * Bytes taken by `numel` elements: numel * bits / 8, with overflow and whole-byte checks.
 * @return 0, or NVF_E_SHAPE (error set) when it overflows 2^64 or is not a whole byte count.
 */
int nvf_dtype_nbytes(uint64_t *out, nvf_dtype dtype, uint64_t numel);

#ifdef __cplusplus
}
#endif
#endif
