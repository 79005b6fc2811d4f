/*
 * Whether a failed cJSON parse was the text's fault or the allocator's (io/json_strict.h).
 * cJSON reports both as NULL; this checks the grammar cJSON 1.7 accepts without allocating:
 *   1. an optional UTF-8 byte order mark, then one value between optional whitespace (bytes
 *      1 to 32, as cJSON skips them);
 *   2. objects and arrays nested at most CJSON_NESTING_LIMIT deep;
 *   3. RFC 8259 numbers, of any length (the cJSON built here reads them whole);
 *   4. strings (raw control bytes kept, as cJSON does) whose escapes are \" \\ \/ \b \f \n \r \t or
 * \uXXXX forming valid UTF-16 (a high surrogate followed by a low one; no lone low surrogate). Text
 * that passes and that cJSON still refused was refused for want of memory.
 */
#include "io/json_strict.h"

#include <string.h>

typedef struct cursor {
    const unsigned char *p, *end;
} cursor;

/* cJSON skips every byte from 1 to 32 as whitespace (the strict readers' scan has already
 * refused the control bytes among them). */
static void skip_ws(cursor *c) {
    while (c->p < c->end && *c->p >= 1 && *c->p <= 32)
        c->p++;
}

static int hex4(cursor *c, unsigned *out) {
    unsigned v = 0;
    if (c->end - c->p < 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = *c->p++;
        unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static int string_ok(cursor *c) {
    c->p++;                                 /* the opening quote */
    while (c->p < c->end && *c->p != '"') { /* raw control bytes: cJSON keeps them */
        if (*c->p++ != '\\')
            continue;
        if (c->p >= c->end)
            return 0;
        unsigned char e = *c->p++;
        unsigned u, lo;
        if (e != 'u') {
            if (e == '\0' || !strchr("\"\\/bfnrt", e))
                return 0;
            continue;
        }
        if (!hex4(c, &u) || (u >= 0xDC00 && u <= 0xDFFF))
            return 0;
        if (u >= 0xD800 && u <= 0xDBFF &&
            (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u' || (c->p += 2, !hex4(c, &lo)) ||
             lo < 0xDC00 || lo > 0xDFFF))
            return 0;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    return 1;
}

static int digits(cursor *c) {
    const unsigned char *s = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    return c->p > s;
}

static int number_ok(cursor *c) {
    const unsigned char *s = c->p;
    if (*c->p == '-')
        c->p++;
    if (c->p < c->end && *c->p == '0')
        c->p++;
    else if (!digits(c))
        return 0;
    if (c->p < c->end && *c->p == '.' && (c->p++, !digits(c)))
        return 0;
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (!digits(c))
            return 0;
    }
    return c->p > s;
}

static int literal_ok(cursor *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

static int value_ok(cursor *c, int depth) {
    skip_ws(c);
    if (c->p >= c->end)
        return 0;
    unsigned char ch = *c->p;
    if (ch == '"')
        return string_ok(c);
    if (ch == '-' || (ch >= '0' && ch <= '9'))
        return number_ok(c);
    if (ch == 't')
        return literal_ok(c, "true");
    if (ch == 'f')
        return literal_ok(c, "false");
    if (ch == 'n')
        return literal_ok(c, "null");
    if (ch != '[' && ch != '{')
        return 0;
    if (depth >= CJSON_NESTING_LIMIT)
        return 0;
    unsigned char close = ch == '[' ? ']' : '}';
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 1;
    }
    for (;;) {
        if (close == '}') {
            skip_ws(c);
            if (c->p >= c->end || *c->p != '"' || !string_ok(c))
                return 0;
            skip_ws(c);
            if (c->p >= c->end || *c->p++ != ':')
                return 0;
        }
        if (!value_ok(c, depth + 1))
            return 0;
        skip_ws(c);
        if (c->p >= c->end)
            return 0;
        if (*c->p == close) {
            c->p++;
            return 1;
        }
        if (*c->p++ != ',')
            return 0;
    }
}

int nvf_json_syntax_ok(const char *text, size_t len, int trailing_ok) {
    cursor c = {(const unsigned char *)text, (const unsigned char *)text + len};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        c.p += 3;
    if (!value_ok(&c, 0))
        return 0;
    skip_ws(&c);
    return trailing_ok || c.p == c.end;
}
