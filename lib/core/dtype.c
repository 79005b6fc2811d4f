#include "nvfp4/dtype.h"

#include "nvfp4/status.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
    int is_float;
} k_dtypes[NVF_DTYPE_COUNT] = {
    [NVF_DTYPE_INVALID] = {"INVALID", 0, 0},
    [NVF_DTYPE_BOOL] = {"BOOL", 8, 0},
    [NVF_DTYPE_U8] = {"U8", 8, 0},
    [NVF_DTYPE_I8] = {"I8", 8, 0},
    [NVF_DTYPE_F8_E5M2] = {"F8_E5M2", 8, 1},
    [NVF_DTYPE_F8_E4M3] = {"F8_E4M3", 8, 1},
    [NVF_DTYPE_F8_E8M0] = {"F8_E8M0", 8, 1},
    [NVF_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, 1},
    [NVF_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, 1},
    [NVF_DTYPE_F4] = {"F4", 4, 1},
    [NVF_DTYPE_F6_E2M3] = {"F6_E2M3", 6, 1},
    [NVF_DTYPE_F6_E3M2] = {"F6_E3M2", 6, 1},
    [NVF_DTYPE_I16] = {"I16", 16, 0},
    [NVF_DTYPE_U16] = {"U16", 16, 0},
    [NVF_DTYPE_F16] = {"F16", 16, 1},
    [NVF_DTYPE_BF16] = {"BF16", 16, 1},
    [NVF_DTYPE_I32] = {"I32", 32, 0},
    [NVF_DTYPE_U32] = {"U32", 32, 0},
    [NVF_DTYPE_F32] = {"F32", 32, 1},
    [NVF_DTYPE_C64] = {"C64", 64, 0},
    [NVF_DTYPE_F64] = {"F64", 64, 1},
    [NVF_DTYPE_I64] = {"I64", 64, 0},
    [NVF_DTYPE_U64] = {"U64", 64, 0},
};

const char *nvf_dtype_name(nvf_dtype dtype) {
    if ((unsigned)dtype >= NVF_DTYPE_COUNT)
        return "INVALID";
    return k_dtypes[dtype].name;
}

nvf_dtype nvf_dtype_from_name(const char *name, size_t len) {
    for (int d = 1; d < NVF_DTYPE_COUNT; d++) {
        if (strlen(k_dtypes[d].name) == len && memcmp(k_dtypes[d].name, name, len) == 0)
            return (nvf_dtype)d;
    }
    return NVF_DTYPE_INVALID;
}

unsigned nvf_dtype_bits(nvf_dtype dtype) {
    if ((unsigned)dtype >= NVF_DTYPE_COUNT)
        return 0;
    return k_dtypes[dtype].bits;
}

int nvf_dtype_is_float(nvf_dtype dtype) {
    if ((unsigned)dtype >= NVF_DTYPE_COUNT)
        return 0;
    return k_dtypes[dtype].is_float;
}

int nvf_dtype_nbytes(uint64_t *out, nvf_dtype dtype, uint64_t numel) {
    unsigned bits = nvf_dtype_bits(dtype);
    if (bits == 0)
        return nvf_error_set(NVF_E_SHAPE, "invalid dtype");
    if (numel > UINT64_MAX / bits)
        return nvf_error_set(NVF_E_SHAPE, "%llu elements of %s overflow 64 bits",
                             (unsigned long long)numel, k_dtypes[dtype].name);
    uint64_t total_bits = numel * bits;
    if (total_bits % 8 != 0)
        return nvf_error_set(NVF_E_SHAPE, "%llu elements of %s are not a whole number of bytes",
                             (unsigned long long)numel, k_dtypes[dtype].name);
    *out = total_bits / 8;
    return NVF_OK;
}
