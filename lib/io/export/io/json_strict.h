/*
 * The one strict JSON reader of the library's own documents (manifest, resume journal,
 * --input-amax, ...): cJSON parses, but accepts text the tool must refuse, so the text is
 * checked first and the tree after:
 *   1. valid UTF-8 (nvf_st_utf8_check), no NUL or stray control bytes (nvf_st_json_scan);
 *   2. a single JSON value with nothing after it (cJSON with require-null-terminated);
 *   3. no key twice in one object, no number beyond the range of a double (cJSON reads 1e999
 *      as infinity).
 * A text that passes 1 but that cJSON refuses is checked against the grammar (json_syntax.c) to
 * tell a malformed file from a failed allocation. Library-internal: lib/io exports it to the
 * modules that link it (never to cmd/), since it
 * hands out cJSON trees.
 */
#ifndef NVFP4_IO_JSON_STRICT_H
#define NVFP4_IO_JSON_STRICT_H

#include <cjson/cJSON.h>
#include <stddef.h>

/**
 * Parse `text` (`len` bytes, need not be NUL-terminated) strictly. On a fault, *out is NULL and
 * the error is NVF_E_FORMAT (or `code` when non-zero, e.g. NVF_E_INVALID for an option file)
 * with the message "invalid WHAT 'PATH': <fault>", the fault naming the byte offset or the
 * JSON path ("duplicate key 'x' in shards[2]").
 * @return 0 and *out (the caller deletes it), the fault's code, or NVF_E_NOMEM.
 */
int nvf_json_parse_strict(cJSON **out, const char *text, size_t len, const char *what,
                          const char *path, int code);

/**
 * Whether `len` bytes of `text` are JSON that cJSON 1.7 parses (see json_syntax.c), checked
 * without allocating; `trailing_ok` accepts anything after the value. When cJSON returned NULL
 * for text that passes, it ran out of memory: callers report NVF_E_NOMEM, not a malformed file.
 */
int nvf_json_syntax_ok(const char *text, size_t len, int trailing_ok);

/**
 * nvf_json_parse_strict() of a whole file of at most `max_bytes` bytes.
 * @return as above, or NVF_E_IO when the file cannot be read.
 */
int nvf_json_read_strict(cJSON **out, const char *path, size_t max_bytes, const char *what,
                         int code);

#endif
