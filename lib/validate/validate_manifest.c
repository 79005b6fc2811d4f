/*
 * The manifest check of validate: nvfp4-manifest.json at the top of the checkpoint against the
 * sizes, SHA-256s and tensor CRC-32s the scan computed (so every byte is read once), through
 * lib/manifest's comparison (nvf_manifest_compare, the findings of `hash --check`), each finding
 * turned into its manifest.* id.
 */
#include "validate_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *id_of(nvf_finding_kind kind) {
    switch (kind) {
    case NVF_FINDING_MISSING:
        return "manifest.missing-file";
    case NVF_FINDING_SIZE:
        return "manifest.size";
    case NVF_FINDING_SHA256:
        return "manifest.sha256";
    case NVF_FINDING_EXTRA:
        return "manifest.extra-file";
    case NVF_FINDING_CRC32:
        return "manifest.crc32";
    case NVF_FINDING_TENSOR:
        return "manifest.tensor";
    }
    return "manifest.malformed";
}

/* The hashes of the scan as a manifest of files and tensors. */
static int actual_manifest(nvf_manifest **out, const vd_ctx *c) {
    nvf_manifest *a = nvf_manifest_new();
    int rc = a ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; i < c->n_files && rc == NVF_OK; i++) {
        const vd_file *f = &c->files[i];
        rc = nvf_manifest_add_file(a, f->name, f->bytes, f->sha256);
        for (size_t k = 0; f->st && k < f->st->n_tensors && rc == NVF_OK; k++) {
            const nvf_st_tensor *t = &f->st->tensors[k];
            rc = nvf_manifest_add_tensor(a, t->name, f->name, nvf_dtype_name(t->dtype), t->ndim,
                                         t->shape, f->crc[k]);
        }
    }
    if (rc != NVF_OK) {
        nvf_manifest_free(a);
        return rc;
    }
    *out = a;
    return NVF_OK;
}

/* Split "file:tensor" (a CRC32 / TENSOR finding's name) at the file the scan knows. */
static const vd_file *file_of(const vd_ctx *c, const char *label, const char **tensor) {
    for (size_t i = 0; i < c->n_files; i++) {
        size_t n = strlen(c->files[i].name);
        if (strncmp(label, c->files[i].name, n) == 0 && label[n] == ':') {
            *tensor = label + n + 1;
            return &c->files[i];
        }
    }
    *tensor = "";
    return NULL;
}

int vd_check_manifest(vd_ctx *c) {
    char *path = nvf_path_join(c->top, NVF_MANIFEST_NAME);
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    nvf_manifest *m = NULL, *a = NULL;
    nvf_manifest_report *rep = NULL;
    int rc = NVF_OK;
    if (!nvf_path_is_file(path)) {
        int req = c->o->require_manifest;
        rc = nvf_findings_add(c->out, "manifest.absent", req ? "error" : "warning",
                              NVF_MANIFEST_NAME, "",
                              "%s has no " NVF_MANIFEST_NAME ": file hashes not checked%s", c->top,
                              req ? " (--require-manifest)" : " (a third-party checkpoint?)");
        goto done;
    }
    c->r->manifest = 1;
    rc = nvf_manifest_read(&m, path);
    if (rc == NVF_E_FORMAT) {
        rc = nvf_findings_add(c->out, "manifest.malformed", "error", NVF_MANIFEST_NAME, "", "%s",
                              nvf_error_last());
        goto done;
    }
    if (rc == NVF_OK)
        rc = actual_manifest(&a, c);
    if (rc == NVF_OK)
        rc = nvf_manifest_compare(&rep, m, a, 1);
    for (size_t i = 0; rc == NVF_OK && i < rep->n_findings; i++) {
        const nvf_manifest_finding *f = &rep->findings[i];
        const char *tensor = "";
        const vd_file *vf = NULL;
        if (f->kind == NVF_FINDING_CRC32 || f->kind == NVF_FINDING_TENSOR) {
            vf = file_of(c, f->name, &tensor);
            /* A malformed shard has no tensors to compare: safetensors.malformed says why. */
            if (vf && vf->st_error)
                continue;
        }
        rc = nvf_findings_add(c->out, id_of(f->kind), "error", vf ? vf->name : f->name, tensor,
                              "%s (against " NVF_MANIFEST_NAME ")", f->line);
    }
done:
    nvf_manifest_report_free(rep);
    nvf_manifest_free(a);
    nvf_manifest_free(m);
    free(path);
    return rc;
}
