#include "io/st_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t nvf_st_utf8_check(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return i; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
        }
        if (n - i < len)
            return i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += len;
    }
    return n;
}

static int is_json_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_number_byte(uint8_t c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Whether s[0..n) is a decimal integer without sign, fraction, exponent or leading zero,
 * at most 2^53. */
static int plain_integer(const uint8_t *s, size_t n) {
    if (n == 0 || n > 16 || (s[0] == '0' && n > 1))
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    return v <= NVF_ST_MAX_JSON_INT;
}

void nvf_st_json_scan(nvf_st_json_scan_result *out, const uint8_t *s, size_t n) {
    memset(out, 0, sizeof *out);
    int in_string = 0;
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c == 0) {
            out->problem = "a NUL byte";
            out->problem_at = i;
            return;
        }
        if (in_string) {
            if (c == '"') {
                in_string = 0;
            } else if (c < 0x20) {
                out->problem = "an unescaped control character in a string";
                out->problem_at = i;
                return;
            } else if (c == '\\' && i + 1 < n) {
                if (s[i + 1] == 'u' && n - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) {
                    out->problem = "an escaped NUL (\\u0000) in a string";
                    out->problem_at = i;
                    return;
                }
                i++; /* the escaped byte cannot end the string */
            }
            i++;
            continue;
        }
        if (c == '"') {
            in_string = 1;
        } else if (c < 0x20 && !is_json_space(c)) {
            out->problem = "a control character outside a string";
            out->problem_at = i;
            return;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t start = i;
            while (i < n && is_number_byte(s[i]))
                i++;
            if (out->number_len == 0 && !plain_integer(s + start, i - start)) {
                out->number_at = start;
                out->number_len = i - start;
            }
            continue;
        }
        i++;
    }
}

void nvf_st_buf_append(nvf_st_buf *b, const void *data, size_t len) {
    if (b->oom)
        return;
    if (len > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) {
                b->oom = 1;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

void nvf_st_buf_puts(nvf_st_buf *b, const char *s) {
    nvf_st_buf_append(b, s, strlen(s));
}

void nvf_st_buf_printf(nvf_st_buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* Only used for numbers and short fixed text: 128 bytes always suffice. */
    if (k < 0 || (size_t)k >= sizeof tmp) {
        b->oom = 1;
        return;
    }
    nvf_st_buf_append(b, tmp, (size_t)k);
}

/* Decode one UTF-8 sequence at s (known valid); returns its length. */
static size_t utf8_decode(const uint8_t *s, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    uint32_t v = s[0] & (0x7F >> len);
    for (size_t k = 1; k < len; k++)
        v = (v << 6) | (s[k] & 0x3F);
    *cp = v;
    return len;
}

void nvf_st_buf_json_string(nvf_st_buf *b, const char *str, int ascii_only) {
    const uint8_t *s = (const uint8_t *)str;
    nvf_st_buf_append(b, "\"", 1);
    size_t i = 0;
    while (s[i]) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            nvf_st_buf_append(b, esc, 2);
        } else if (c == '\b') {
            nvf_st_buf_puts(b, "\\b");
        } else if (c == '\f') {
            nvf_st_buf_puts(b, "\\f");
        } else if (c == '\n') {
            nvf_st_buf_puts(b, "\\n");
        } else if (c == '\r') {
            nvf_st_buf_puts(b, "\\r");
        } else if (c == '\t') {
            nvf_st_buf_puts(b, "\\t");
        } else if (c < 0x20) {
            nvf_st_buf_printf(b, "\\u%04x", c);
        } else if (c >= 0x80 && ascii_only) {
            uint32_t cp;
            i += utf8_decode(s + i, &cp);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                nvf_st_buf_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                nvf_st_buf_printf(b, "\\u%04x", cp);
            }
            continue;
        } else {
            nvf_st_buf_append(b, &s[i], 1);
        }
        i++;
    }
    nvf_st_buf_append(b, "\"", 1);
}
