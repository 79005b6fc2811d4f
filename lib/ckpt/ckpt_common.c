/*
 * What every checkpoint module shares: warnings, config.json lookups, tensor lookups by name
 * and small string helpers. The bottom of lib/ckpt: it calls no other checkpoint module.
 */
#include "ckpt_internal.h"

#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ckpt_ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

void ckpt_shape_str(char *buf, size_t len, const int64_t *shape, int32_t ndim) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int32_t i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

int ckpt_warn(nvf_ckpt *ck, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char **w = realloc(ck->warnings, (ck->n_warnings + 1) * sizeof *w);
    if (!w)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a warning");
    ck->warnings = w;
    w[ck->n_warnings] = strdup(msg);
    if (!w[ck->n_warnings])
        return nvf_error_set(NVF_E_NOMEM, "no memory for a warning");
    ck->n_warnings++;
    nvf_log(NVF_LOG_WARN, "%s: %s", ck->path, msg);
    return NVF_OK;
}

const cJSON *ckpt_config_get(const nvf_ckpt *ck, const char *key) {
    const cJSON *cfg = nvf_ckpt_config_doc(ck);
    if (!cfg)
        return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (v && !cJSON_IsNull(v))
        return v;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    if (!cJSON_IsObject(text))
        return NULL;
    v = cJSON_GetObjectItemCaseSensitive(text, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int ckpt_config_warn_type(nvf_ckpt *ck, const char *key, const cJSON *v, const char *expected) {
    /* The value as written (cJSON prints numbers back the way it read them, 1e300 as 1e+300),
     * cut so that a large object does not flood the report. */
    char *text = cJSON_PrintUnformatted(v);
    const char *where =
        cJSON_GetObjectItemCaseSensitive(nvf_ckpt_config_doc(ck), key) == v ? "" : "text_config.";
    size_t len = text ? strlen(text) : 0;
    int rc =
        ckpt_warn(ck, "config.json %s%s is %.*s%s, expected %s: ignored", where, key,
                  len > 60 ? 57 : (int)len, text ? text : "?", len > 60 ? "..." : "", expected);
    free(text);
    return rc;
}

size_t nvf_ckpt_find_index(const nvf_ckpt *ck, const char *name) {
    size_t lo = 0, hi = ck->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->tensors[mid].st->name, name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NVF_CKPT_NONE;
}

const nvf_ckpt_tensor *nvf_ckpt_find(const nvf_ckpt *ck, const char *name) {
    size_t i = nvf_ckpt_find_index(ck, name);
    return i == NVF_CKPT_NONE ? NULL : &ck->tensors[i];
}
