/*
 * Fuzz target of the nvfp4-manifest.json reader. An accepted manifest must satisfy every rule
 * the reader promises (sorted, unique, well-formed names and digests, sizes <= 2^53, each
 * tensor in a listed file), serialize without error, and read back to the same bytes; a
 * rejected one must be NVF_E_FORMAT (or NVF_E_NOMEM) with no result. abort() otherwise.
 */
#include "manifest/manifest_internal.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_files(const nvf_manifest_file *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (nvf_manifest_name_problem(f[i].name) || !nvf_manifest_is_hex(f[i].sha256, 64) ||
            f[i].bytes > ((uint64_t)1 << 53))
            abort();
        if (i > 0 && strcmp(f[i - 1].name, f[i].name) >= 0)
            abort();
    }
}

static void check_invariants(const nvf_manifest *m) {
    check_files(m->files, m->n_files);
    check_files(m->source, m->n_source);
    if (!m->has_source && m->n_source != 0)
        abort();
    for (size_t i = 0; i < m->n_tensors; i++) {
        const nvf_manifest_tensor *t = &m->tensors[i];
        if (t->name[0] == '\0' || t->ndim < 0 || t->ndim > 8)
            abort();
        for (int32_t d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0)
                abort();
        size_t k = 0;
        while (k < m->n_files && strcmp(m->files[k].name, t->file) != 0)
            k++;
        if (k == m->n_files)
            abort();
        if (i > 0) {
            const nvf_manifest_tensor *p = &m->tensors[i - 1];
            int c = strcmp(p->name, t->name);
            if (c > 0 || (c == 0 && strcmp(p->file, t->file) >= 0))
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nvf_manifest *m = NULL, *again = NULL;
    char *text = NULL, *text2 = NULL;
    size_t len = 0, len2 = 0;
    int rc = nvf_manifest_parse(&m, "fuzz.json", (const char *)data, size);
    if (rc != NVF_OK) {
        if ((rc != NVF_E_FORMAT && rc != NVF_E_NOMEM) || m != NULL)
            abort();
        return 0;
    }
    check_invariants(m);
    rc = nvf_manifest_to_string(&text, &len, m);
    if (rc == NVF_E_NOMEM)
        goto done;
    if (rc != NVF_OK)
        abort();
    rc = nvf_manifest_parse(&again, "fuzz.json", text, len);
    if (rc == NVF_E_NOMEM)
        goto done;
    if (rc != NVF_OK)
        abort();
    rc = nvf_manifest_to_string(&text2, &len2, again);
    if (rc == NVF_OK && (len2 != len || memcmp(text, text2, len) != 0))
        abort();
done:
    free(text);
    free(text2);
    nvf_manifest_free(again);
    nvf_manifest_free(m);
    return 0;
}
