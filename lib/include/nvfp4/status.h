/*
 * Status codes and the thread-local error message.
 *
 * Every library function that can fail returns an int: 0 (NVF_OK) or one of the negative
 * nvf_status values below. The human-readable message, with the file, tensor and value that
 * caused it, is kept per thread and read with nvf_error_last(). The codes are pinned: they
 * are mapped to the command-line exit codes in cmd/ and never renumbered.
 */
#ifndef NVFP4_STATUS_H
#define NVFP4_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_status {
    NVF_OK = 0,
    NVF_E_INVALID = -1,      /* bad argument from the caller (usage) */
    NVF_E_IO = -2,           /* open/read/write/fsync/rename failed */
    NVF_E_FORMAT = -3,       /* an input file is malformed */
    NVF_E_SHAPE = -4,        /* shapes or dtypes do not fit together */
    NVF_E_NOMEM = -5,        /* host allocation failed */
    NVF_E_CUDA = -6,         /* a CUDA call failed */
    NVF_E_DEVICE = -7,       /* a requested device is unavailable */
    NVF_E_NONFINITE = -8,    /* NaN or Inf where finite values are required */
    NVF_E_UNSUPPORTED = -9,  /* well-formed input this version cannot handle */
    NVF_E_INTERRUPTED = -10, /* SIGINT/SIGTERM arrived */
    NVF_E_VERIFY = -11,      /* validation or verification found the checkpoint bad */
    NVF_E_NOTIMPL = -12,     /* the feature is not implemented yet */
    NVF_E_CONFIG = -13,      /* a recipe or option file is invalid */
} nvf_status;

/** Name of a status code, e.g. "format error". Never NULL. */
const char *nvf_status_str(int status);

/**
 * Record an error for the calling thread and return `code` (so callers can write
 * `return nvf_error_set(NVF_E_IO, "...")`). printf-style message.
 */
int nvf_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/**
 * Prefix the calling thread's current message with "prefix: " (printf-style), keeping its
 * code. Used by callers that add context (file name, tensor) to a lower layer's error.
 * @return the current code.
 */
int nvf_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/** The calling thread's last message ("" when none). Owned by the library. */
const char *nvf_error_last(void);

/** The calling thread's last code (NVF_OK when none). */
int nvf_error_code(void);

/** Forget the calling thread's error. */
void nvf_error_clear(void);

/** A thread's error (code and message), to carry it to another thread. */
typedef struct nvf_error_state {
    int code;
    char msg[1024];
} nvf_error_state;

/** Copy the calling thread's error into `out` (a worker thread, before it ends). */
void nvf_error_save(nvf_error_state *out);

/**
 * Make `s` the calling thread's error (the thread that joins the worker).
 * @return s->code.
 */
int nvf_error_restore(const nvf_error_state *s);

#ifdef __cplusplus
}
#endif
#endif
