/*
 * Library-internal (lib/manifest exports it to the modules that link it, never to cmd/): the
 * private state around a nvf_manifest, which lib/convert fills for the manifest it writes.
 */
#ifndef NVFP4_MANIFEST_PRIV_H
#define NVFP4_MANIFEST_PRIV_H

#include "nvfp4/manifest.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/**
 * What a manifest holds beyond its public fields: the free-form documents and the arrays'
 * capacities. Every nvf_manifest the library hands out is the `pub` member of one of these
 * (lib/convert sets the documents of the manifest it writes).
 */
typedef struct nvf_manifest_priv {
    nvf_manifest pub; /* first: a nvf_manifest * is a nvf_manifest_priv * */
    cJSON *recipe;    /* owned; NULL writes null */
    cJSON *target;    /* owned; NULL writes null */
    cJSON *summary;   /* owned; NULL writes null */
    size_t cap_source, cap_files, cap_tensors;
} nvf_manifest_priv;

static inline nvf_manifest_priv *nvf_manifest_priv_of(nvf_manifest *m) {
    return (nvf_manifest_priv *)m;
}

static inline const nvf_manifest_priv *nvf_manifest_priv_of_const(const nvf_manifest *m) {
    return (const nvf_manifest_priv *)m;
}

#endif
