/*
 * Logging. The library never writes to stdout; messages go to a sink the program installs
 * (cmd/ installs one that writes to stderr with the chosen level). Thread-safe.
 */
#ifndef NVFP4_LOG_H
#define NVFP4_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvf_log_level {
    NVF_LOG_ERROR = 0,
    NVF_LOG_WARN = 1,
    NVF_LOG_INFO = 2,
    NVF_LOG_DEBUG = 3,
} nvf_log_level;

typedef void (*nvf_log_sink)(nvf_log_level level, const char *msg, void *user);

/** Install the sink (NULL: discard everything) and the most verbose level it receives. */
void nvf_log_set_sink(nvf_log_sink sink, void *user, nvf_log_level max_level);

/** Whether a message at `level` would reach the sink. */
int nvf_log_enabled(nvf_log_level level);

/** Log a printf-style message. */
void nvf_log(nvf_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
