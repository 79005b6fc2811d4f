/*
 * inspect: what made a checkpoint, from this tool's manifest beside it (the recipe's method and
 * arithmetic), for the text and JSON outputs of cmd_inspect.c.
 */
#include "cli.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The `quantization` section of the recipe that a conversion by this tool recorded in CKPT's
 * manifest (method, arithmetic, ...), or NULL: no manifest of ours, or a single file. */
cJSON *inspect_made_with(const nvf_ckpt *ck) {
    size_t len = strlen(ck->path) + sizeof NVF_MANIFEST_NAME + 1;
    char *path = ck->is_file ? NULL : malloc(len);
    nvf_manifest *m = NULL;
    cJSON *q = NULL;
    if (path)
        snprintf(path, len, "%s/%s", ck->path, NVF_MANIFEST_NAME);
    if (path && nvf_manifest_read(&m, path) == NVF_OK) {
        char *rj = nvf_manifest_recipe_json(m);
        cJSON *r = rj ? cJSON_Parse(rj) : NULL;
        q = cJSON_DetachItemFromObjectCaseSensitive(r, "quantization");
        cJSON_Delete(r);
        free(rj);
    }
    nvf_manifest_free(m);
    free(path);
    return q;
}

/* "method M, arithmetic A" of a made_with() section (a recipe without the key: flashinfer). */
void inspect_print_made_with(const nvf_ckpt *ck) {
    cJSON *q = inspect_made_with(ck);
    const char *meth = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q, "method"));
    const char *ar = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q, "arithmetic"));
    if (meth)
        printf("Made by nvfp4tool: method %s, arithmetic %s\n", meth, ar ? ar : "flashinfer");
    cJSON_Delete(q);
}
