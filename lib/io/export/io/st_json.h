/*
 * Helpers of the safetensors reader/writer and the index: strict UTF-8 and JSON text checks
 * that cJSON does not make, and a growable buffer that writes JSON strings. Library-internal:
 * lib/io exports it to the modules that link it (lib/manifest writes its JSON with the buffer).
 */
#ifndef NVFP4_IO_ST_JSON_H
#define NVFP4_IO_ST_JSON_H

#include <stddef.h>
#include <stdint.h>

/** 2^53: the largest integer a JSON number (an IEEE double) holds exactly. */
#define NVF_ST_MAX_JSON_INT 9007199254740992ull

/**
 * Where `s[0..n)` stops being valid UTF-8 (no overlong forms, no surrogates, nothing above
 * U+10FFFF, no truncated sequence): the byte offset, or n when all of it is valid.
 */
size_t nvf_st_utf8_check(const uint8_t *s, size_t n);

/** What nvf_st_json_scan() found; `*_at` are byte offsets into the text. */
typedef struct nvf_st_json_scan_result {
    const char *problem; /* NULL when the text has none of the lexical faults below */
    size_t problem_at;
    /* The first number token that is not a plain decimal integer <= 2^53 (e.g. "1.0", "-0",
     * "1e3", "9007199254740993"); number_len 0 when there is none. */
    size_t number_at, number_len;
} nvf_st_json_scan_result;

/**
 * Lexical checks of JSON text, after UTF-8 validation and before cJSON parses it: a NUL byte,
 * a control byte other than JSON whitespace outside strings, an unescaped control byte inside
 * a string, or an escaped NUL (\u0000, which would cut a C string short) are problems. cJSON
 * accepts all of these. Number tokens are also checked (see the result's fields).
 */
void nvf_st_json_scan(nvf_st_json_scan_result *out, const uint8_t *s, size_t n);

/** A growable byte buffer; `oom` is set (and further appends ignored) when realloc fails. */
typedef struct nvf_st_buf {
    char *p;
    size_t len, cap;
    int oom;
} nvf_st_buf;

void nvf_st_buf_append(nvf_st_buf *b, const void *data, size_t len);
void nvf_st_buf_puts(nvf_st_buf *b, const char *s);
void nvf_st_buf_printf(nvf_st_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/**
 * Append `s` as a quoted JSON string: '"' and '\\' escaped, control bytes as \b \f \n \r \t or
 * \u00XX. With `ascii_only`, every non-ASCII character is written as \uXXXX (a UTF-16 pair
 * above U+FFFF), as Python's json.dumps does; `s` must then be valid UTF-8.
 */
void nvf_st_buf_json_string(nvf_st_buf *b, const char *s, int ascii_only);

#endif
