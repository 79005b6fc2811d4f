#include "nvfp4/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static nvf_log_sink g_sink;
static void *g_user;
static nvf_log_level g_level = NVF_LOG_WARN;

void nvf_log_set_sink(nvf_log_sink sink, void *user, nvf_log_level max_level) {
    pthread_mutex_lock(&g_log_lock);
    g_sink = sink;
    g_user = user;
    g_level = max_level;
    pthread_mutex_unlock(&g_log_lock);
}

int nvf_log_enabled(nvf_log_level level) {
    return g_sink != NULL && level <= g_level;
}

void nvf_log(nvf_log_level level, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    if (!nvf_log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_log_lock);
    if (g_sink)
        g_sink(level, msg, g_user);
    pthread_mutex_unlock(&g_log_lock);
}
