/*
 * A minimal test harness: CHECK-style macros that count failures and keep going, and a
 * summary line in the plain "N passed, N failed" form.
 */
#ifndef NVFP4_TEST_CHECK_H
#define NVFP4_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int g_checks, g_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        g_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            g_failures++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        g_checks++;                                                                                \
        if (!(cond)) {                                                                             \
            g_failures++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        uint64_t va_ = (uint64_t)(a), vb_ = (uint64_t)(b);                                         \
        CHECK_MSG(va_ == vb_, "%s = %" PRIu64 ", expected %" PRIu64, #a, va_, vb_);                \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        CHECK_MSG(sa_ &&sb_ &&strcmp(sa_, sb_) == 0, "%s = \"%s\", expected \"%s\"", #a,           \
                  sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                     \
    } while (0)

/* The message contains `needle`. */
#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        CHECK_MSG(h_ &&strstr(h_, n_) != NULL, "\"%s\" does not contain \"%s\"",                   \
                  h_ ? h_ : "(null)", n_);                                                         \
    } while (0)

static inline int check_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, g_checks - g_failures, g_failures);
    return g_failures == 0 ? 0 : 1;
}

#endif
