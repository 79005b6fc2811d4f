/*
 * Building a cJSON document with every allocation checked. cJSON's Add functions return NULL
 * when out of memory and leave the document without the item, which would write a file with a
 * key missing; a builder instead remembers the first failure, later calls on a NULL parent do
 * nothing, and nvf_jb_done() hands back NULL (the document deleted) if anything failed: the
 * caller reports NVF_E_NOMEM. Library-internal (lib/ modules only).
 */
#ifndef NVFP4_IO_JSON_BUILD_H
#define NVFP4_IO_JSON_BUILD_H

#include <cjson/cJSON.h>

typedef struct nvf_jb {
    int failed;
} nvf_jb;

/** `item`, noting a failure when it is NULL. */
static inline cJSON *nvf_jb_take(nvf_jb *b, cJSON *item) {
    if (!item)
        b->failed = 1;
    return item;
}

/** A new object or array under `key` of `parent` (NULL parent: nothing, NULL). */
static inline cJSON *nvf_jb_obj(nvf_jb *b, cJSON *parent, const char *key) {
    return parent ? nvf_jb_take(b, cJSON_AddObjectToObject(parent, key)) : NULL;
}

static inline cJSON *nvf_jb_arr(nvf_jb *b, cJSON *parent, const char *key) {
    return parent ? nvf_jb_take(b, cJSON_AddArrayToObject(parent, key)) : NULL;
}

static inline void nvf_jb_str(nvf_jb *b, cJSON *o, const char *key, const char *v) {
    if (o)
        nvf_jb_take(b, cJSON_AddStringToObject(o, key, v));
}

static inline void nvf_jb_num(nvf_jb *b, cJSON *o, const char *key, double v) {
    if (o)
        nvf_jb_take(b, cJSON_AddNumberToObject(o, key, v));
}

static inline void nvf_jb_bool(nvf_jb *b, cJSON *o, const char *key, int v) {
    if (o)
        nvf_jb_take(b, cJSON_AddBoolToObject(o, key, v));
}

static inline void nvf_jb_null(nvf_jb *b, cJSON *o, const char *key) {
    if (o)
        nvf_jb_take(b, cJSON_AddNullToObject(o, key));
}

/** Attach `item` (owned) under `key` of object `o`; on failure it is deleted. */
static inline void nvf_jb_put(nvf_jb *b, cJSON *o, const char *key, cJSON *item) {
    if (!o || !item || !cJSON_AddItemToObject(o, key, item)) {
        cJSON_Delete(item);
        b->failed = 1;
    }
}

/** Append `item` (owned) to array `a`; on failure it is deleted. */
static inline void nvf_jb_push(nvf_jb *b, cJSON *a, cJSON *item) {
    if (!a || !item || !cJSON_AddItemToArray(a, item)) {
        cJSON_Delete(item);
        b->failed = 1;
    }
}

/** The document, or NULL (deleted) when any allocation failed. */
static inline cJSON *nvf_jb_done(nvf_jb *b, cJSON *doc) {
    if (b->failed || !doc) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

#endif
