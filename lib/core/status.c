#include "nvfp4/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NVF_ERROR_MAX 1024

_Static_assert(sizeof(((nvf_error_state *)0)->msg) == NVF_ERROR_MAX, "one message size");

static _Thread_local char g_msg[NVF_ERROR_MAX];
static _Thread_local int g_code;

const char *nvf_status_str(int status) {
    switch ((nvf_status)status) {
    case NVF_OK:
        return "ok";
    case NVF_E_INVALID:
        return "invalid argument";
    case NVF_E_IO:
        return "I/O error";
    case NVF_E_FORMAT:
        return "format error";
    case NVF_E_SHAPE:
        return "shape error";
    case NVF_E_NOMEM:
        return "out of memory";
    case NVF_E_CUDA:
        return "CUDA error";
    case NVF_E_DEVICE:
        return "device unavailable";
    case NVF_E_NONFINITE:
        return "non-finite value";
    case NVF_E_UNSUPPORTED:
        return "unsupported";
    case NVF_E_INTERRUPTED:
        return "interrupted";
    case NVF_E_VERIFY:
        return "verification failed";
    case NVF_E_NOTIMPL:
        return "not implemented yet";
    case NVF_E_CONFIG:
        return "configuration error";
    }
    return "unknown error";
}

int nvf_error_set(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_code = code;
    return code;
}

int nvf_error_prefix(const char *fmt, ...) {
    char prefix[NVF_ERROR_MAX];
    char old[NVF_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_msg, sizeof old);
    size_t k = strlen(prefix);
    if (k > sizeof g_msg - 3)
        k = sizeof g_msg - 3;
    memcpy(g_msg, prefix, k);
    g_msg[k] = ':';
    g_msg[k + 1] = ' ';
    size_t rest = sizeof g_msg - (k + 2) - 1;
    size_t n = strnlen(old, rest);
    memcpy(g_msg + k + 2, old, n);
    g_msg[k + 2 + n] = '\0';
    return g_code;
}

const char *nvf_error_last(void) {
    return g_msg;
}

int nvf_error_code(void) {
    return g_code;
}

void nvf_error_clear(void) {
    g_msg[0] = '\0';
    g_code = NVF_OK;
}

void nvf_error_save(nvf_error_state *out) {
    out->code = g_code;
    memcpy(out->msg, g_msg, sizeof out->msg);
}

int nvf_error_restore(const nvf_error_state *s) {
    memcpy(g_msg, s->msg, sizeof g_msg);
    g_msg[sizeof g_msg - 1] = '\0';
    g_code = s->code;
    return g_code;
}
