/*
 * What recipe.c (defaults, keys, setters, flags, JSON) shares with recipe_yaml.c (the file
 * reader): the table of settable keys and the scalar type their setters take.
 */
#ifndef NVFP4_RECIPE_INTERNAL_H
#define NVFP4_RECIPE_INTERNAL_H

#include "nvfp4/recipe.h"

#include <stddef.h>

#define MAX_SHOWN 64 /* longest piece of a key or value quoted in a message */

/* A scalar as the setters see it. `plain` is 0 for a quoted scalar (always a string). */
typedef struct scalar {
    const char *s;
    size_t len;
    int plain;
} scalar;

/* A setter's result for a well-formed value that names something not built yet. */
#define NOT_YET (-2)

/* One settable key: its recipe path, its flag, what it accepts (for messages), its setter, and
 * what is built of it so far. A setter returns 0, -1 when the value is bad, or NOT_YET. */
typedef struct key_def {
    const char *section, *key, *flag, *expect;
    int (*set)(nvf_recipe *r, const scalar *v);
    const char *built; /* for NOT_YET messages */
} key_def;

/* Every settable key; [0] is the top-level "version". */
extern const key_def nvf_recipe_keys[];
extern const size_t nvf_recipe_n_keys;

#endif
