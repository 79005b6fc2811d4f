/*
 * Fuzz target of the safetensors header parser: any input is a whole file. A file the parser
 * accepts must satisfy the format's invariants, checked here independently; abort() otherwise.
 */
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_invariants(const nvf_st_file *f, size_t size) {
    if (f->file_size != size || f->data_start != 8 + f->header_len || f->data_start > size)
        abort();
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const nvf_st_tensor *t = &f->tensors[i];
        /* Sorted by offset, tiling the data area from 0 with no gap or overlap. */
        if (t->begin != pos || t->end < t->begin || t->data != NULL)
            abort();
        pos = t->end;
        if (t->ndim < 0 || t->ndim > NVF_ST_MAX_DIMS)
            abort();
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                abort();
            numel *= (uint64_t)t->shape[d];
        }
        uint64_t bits = nvf_dtype_bits(t->dtype);
        if (bits == 0 || numel != t->numel || t->numel * bits / 8 != t->end - t->begin)
            abort();
        if (nvf_st_find(f, t->name) != t)
            abort();
    }
    if (pos != size - f->data_start)
        abort();
    for (size_t i = 0; i < f->n_meta; i++)
        if (nvf_st_meta(f, f->meta_keys[i]) != f->meta_values[i])
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nvf_st_file *f = NULL;
    int rc = nvf_st_parse(&f, "fuzz", data, size, size);
    if (rc == NVF_OK) {
        check_invariants(f, size);
    } else if ((rc != NVF_E_FORMAT && rc != NVF_E_NOMEM) || f != NULL ||
               strncmp(nvf_error_last(),
                       "invalid safetensors file 'fuzz': ", rc == NVF_E_FORMAT ? 33 : 0) != 0) {
        abort();
    }
    nvf_st_close(f);
    return 0;
}
