/*
 * Fuzz target: the recipe parser (YAML through libyaml into nvf_recipe) on arbitrary bytes.
 * Invariants: it returns 0 or NVF_E_CONFIG (never crashes or leaks); on success the recipe
 * holds only allowed values and prints as JSON; on failure the message names the input.
 */
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nvf_recipe r;
    if (nvf_recipe_init(&r) != 0)
        abort();
    int rc = nvf_recipe_parse(&r, (const char *)data, size, "fuzz.yaml");
    if (rc == 0) {
        if (r.quant.e4m3_max != 256 && r.quant.e4m3_max != 448)
            abort();
        if (r.ep < 1 || r.max_shard_size < 1 || r.verify_tokens < 1)
            abort();
        char *js = nvf_recipe_to_json(&r);
        if (!js)
            abort();
        free(js);
    } else if (rc != NVF_E_CONFIG || strncmp(nvf_error_last(), "fuzz.yaml:", 10) != 0) {
        abort();
    }
    nvf_recipe_free(&r);
    return 0;
}
