/*
 * Fuzz target of the model.safetensors.index.json reader. The reader takes a path, so each
 * input goes to a per-process temporary file first. An accepted index must be sorted, free of
 * duplicates and name only plain files; abort() otherwise.
 */
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check_invariants(const nvf_st_index *idx) {
    for (size_t i = 0; i < idx->n; i++) {
        if (i > 0 && strcmp(idx->names[i - 1], idx->names[i]) >= 0)
            abort();
        const char *file = idx->files[i];
        if (file[0] == '\0' || strchr(file, '/') || strstr(file, ".."))
            abort();
        if (nvf_st_index_file(idx, idx->names[i]) != file)
            abort();
        size_t k = 0;
        while (k < idx->n_files && strcmp(idx->file_list[k], file) != 0)
            k++;
        if (k == idx->n_files)
            abort();
    }
    for (size_t i = 1; i < idx->n_files; i++)
        if (strcmp(idx->file_list[i - 1], idx->file_list[i]) >= 0)
            abort();
    if (idx->n_files > idx->n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_st_index.%ld.json", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t put = fwrite(data, 1, size, f);
    fclose(f);
    if (put != size) {
        unlink(path);
        return 0;
    }
    nvf_st_index *idx = NULL;
    int rc = nvf_st_index_read(&idx, path);
    unlink(path);
    if (rc == NVF_OK)
        check_invariants(idx);
    else if ((rc != NVF_E_FORMAT && rc != NVF_E_NOMEM) || idx != NULL)
        abort();
    nvf_st_index_free(idx);
    return 0;
}
