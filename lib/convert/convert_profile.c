/*
 * The stage profile of a conversion (see convert_profile.h): process-wide counters of
 * nanoseconds per cv_prof_key, added with relaxed atomics by whichever thread measured them,
 * and their report as a JSON object (convert --json "profile") or a table (NVFP4_CONVERT_PROFILE).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "convert_profile.h"

#include "nvfp4/convert.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic uint64_t g_ns[CV_P_N];
static _Atomic uint64_t g_worker_max, g_writer_max;
static _Atomic uint64_t g_source_end, g_writer_end;
static _Atomic int g_threads[CV_R_N];
static _Atomic uint64_t g_cpu[CV_R_N];
static _Atomic uint64_t g_run[2], g_pipe[2]; /* start, end */

uint64_t cv_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cv_prof_reset(void) {
    for (int k = 0; k < CV_P_N; k++)
        atomic_store(&g_ns[k], 0);
    for (int k = 0; k < CV_R_N; k++) {
        atomic_store(&g_threads[k], 0);
        atomic_store(&g_cpu[k], 0);
    }
    atomic_store(&g_worker_max, 0);
    atomic_store(&g_writer_max, 0);
    atomic_store(&g_source_end, 0);
    atomic_store(&g_writer_end, 0);
    atomic_store(&g_pipe[0], 0);
    atomic_store(&g_pipe[1], 0);
    atomic_store(&g_run[1], 0);
    atomic_store(&g_run[0], cv_prof_now());
}

uint64_t cv_prof_add(cv_prof_key k, uint64_t since) {
    uint64_t now = cv_prof_now();
    atomic_fetch_add_explicit(&g_ns[k], now > since ? now - since : 0, memory_order_relaxed);
    return now;
}

static void store_max(_Atomic uint64_t *a, uint64_t v) {
    uint64_t cur = atomic_load(a);
    while (v > cur && !atomic_compare_exchange_weak(a, &cur, v))
        ;
}

uint64_t cv_prof_thread_cpu(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void cv_prof_cpu(cv_prof_role role, uint64_t ns) {
    atomic_fetch_add_explicit(&g_cpu[role], ns, memory_order_relaxed);
}

void cv_prof_worker_busy(uint64_t ns) {
    store_max(&g_worker_max, ns);
}

void cv_prof_source_done(void) {
    store_max(&g_source_end, cv_prof_now());
}

void cv_prof_writer_busy(uint64_t ns) {
    store_max(&g_writer_max, ns);
}

void cv_prof_writer_done(void) {
    store_max(&g_writer_end, cv_prof_now());
}

void cv_prof_pipeline(int start) {
    atomic_store(&g_pipe[start ? 0 : 1], cv_prof_now());
}

void cv_prof_threads(cv_prof_role role, int n) {
    int cur = atomic_load(&g_threads[role]);
    while (n > cur && !atomic_compare_exchange_weak(&g_threads[role], &cur, n))
        ;
}

void cv_prof_end(void) {
    atomic_store(&g_run[1], cv_prof_now());
}

void cv_prof_name_thread(const char *fmt, ...) {
    char name[16]; /* the kernel keeps 15 characters */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
#ifdef __linux__
    pthread_setname_np(pthread_self(), name);
#endif
}

/* The report -------------------------------------------------------------------------------- */

static double secs(uint64_t ns) {
    return (double)ns / 1e9;
}

static double key_s(cv_prof_key k) {
    return secs(atomic_load(&g_ns[k]));
}

/* Seconds between two clock readings; 0 when either is missing. */
static double span_s(uint64_t a, uint64_t b) {
    return a && b > a ? secs(b - a) : 0.0;
}

typedef struct part {
    const char *name;
    int key;  /* cv_prof_key */
    int busy; /* 1 busy, 0 waiting, -1 neither (a detail) */
} part;

typedef struct stage {
    const char *name;
    int role; /* cv_prof_role, or -1: one thread */
    part parts[10];
} stage;

static const stage k_stages[] = {
    {"compute",
     CV_R_COMPUTE,
     {{"backend_open", CV_P_BACKEND_OPEN, 1},
      {"compute", CV_P_COMPUTE, 1},
      {"stage", CV_P_STAGE, -1},
      {"release", CV_P_RELEASE, 1},
      {"wait_memory", CV_P_WAIT_MEMORY, 0},
      {"wait_handover", CV_P_WAIT_HANDOVER, 0}}},
    {"writer",
     CV_R_WRITER,
     {{"write", CV_P_WRITE, 1},
      {"copy", CV_P_COPY, 1},
      {"open", CV_P_OPEN, 1},
      {"publish", CV_P_PUBLISH, 1},
      {"wait_job", CV_P_WAIT_JOB, 0},
      {"wait_hasher", CV_P_WAIT_HASHER, 0}}},
    {"hasher",
     CV_R_HASHER,
     {{"sha_read", CV_P_SHA_READ, 1},
      {"sha256", CV_P_SHA, 1},
      {"finalize", CV_P_FINALIZE, 1},
      {"journal", CV_P_JOURNAL, 1},
      {"wait_shard", CV_P_WAIT_SHARD, 0},
      {"wait_published", CV_P_WAIT_PUBLISHED, 0},
      {"crc_wall", CV_P_CRC_WALL, 0}}},
    {"crc", CV_R_CRC, {{"crc", CV_P_CRC, 1}}},
    {"source_hash", CV_R_POOL, {{"sha256", CV_P_SOURCE_HASH, 1}}},
    {"finish", -1, {{"finish", CV_P_FINISH, 1}}},
};

#define N_STAGES (sizeof k_stages / sizeof k_stages[0])

static int stage_threads(const stage *s) {
    return s->role < 0 ? 1 : atomic_load(&g_threads[s->role]);
}

static void stage_sums(const stage *s, double *busy, double *wait) {
    *busy = *wait = 0;
    for (size_t i = 0; i < 10 && s->parts[i].name; i++)
        if (s->parts[i].busy >= 0) /* a detail (-1) is part of a busy interval */
            *(s->parts[i].busy ? busy : wait) += key_s((cv_prof_key)s->parts[i].key);
}

/* The run's seconds: to its end, or to now while it runs. */
static double run_s(void) {
    uint64_t end = atomic_load(&g_run[1]);
    return span_s(atomic_load(&g_run[0]), end ? end : cv_prof_now());
}

static double source_end_s(void) {
    return span_s(atomic_load(&g_run[0]), atomic_load(&g_source_end));
}

static double writer_end_s(void) {
    return span_s(atomic_load(&g_run[0]), atomic_load(&g_writer_end));
}

/* The busiest thread of the compute workers or of the writers. */
static double busy_max_s(int role) {
    return secs(atomic_load(role == CV_R_COMPUTE ? &g_worker_max : &g_writer_max));
}

static int add_num(cJSON *o, const char *k, double v) {
    return cJSON_AddNumberToObject(o, k, v) != NULL;
}

char *nvf_convert_profile_to_json(void) {
    cJSON *o = cJSON_CreateObject();
    int ok =
        o && add_num(o, "seconds", run_s()) &&
        add_num(o, "pipeline_seconds", span_s(atomic_load(&g_pipe[0]), atomic_load(&g_pipe[1])));
    for (size_t i = 0; ok && i < N_STAGES; i++) {
        const stage *s = &k_stages[i];
        cJSON *so = cJSON_AddObjectToObject(o, s->name);
        double busy, wait;
        stage_sums(s, &busy, &wait);
        ok = so && add_num(so, "threads", stage_threads(s)) && add_num(so, "busy", busy) &&
             add_num(so, "wait", wait);
        for (size_t k = 0; ok && s->parts[1].name && k < 10 && s->parts[k].name; k++)
            ok = add_num(so, s->parts[k].name, key_s((cv_prof_key)s->parts[k].key));
        if (ok && (s->role == CV_R_COMPUTE || s->role == CV_R_WRITER))
            ok = add_num(so, "busy_max", busy_max_s(s->role));
        if (ok && s->parts[1].name)
            ok = add_num(so, "cpu", secs(atomic_load(&g_cpu[s->role])));
        if (ok && s->role == CV_R_WRITER)
            ok = add_num(so, "end_seconds", writer_end_s());
        if (ok && s->parts[0].key == CV_P_SOURCE_HASH)
            ok = add_num(so, "end_seconds", source_end_s());
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    if (!text)
        nvf_error_set(NVF_E_NOMEM, "no memory for the conversion profile");
    cJSON_Delete(o);
    return text;
}

void nvf_convert_profile_print(FILE *f) {
    fprintf(f,
            "convert profile: run %.2f s, pipeline %.2f s, writer done at %.2f s, source hashing "
            "done at %.2f s\n",
            run_s(), span_s(atomic_load(&g_pipe[0]), atomic_load(&g_pipe[1])), writer_end_s(),
            source_end_s());
    fprintf(f, "  %-12s %7s %9s %9s  %s\n", "stage", "threads", "busy s", "wait s", "detail (s)");
    for (size_t i = 0; i < N_STAGES; i++) {
        const stage *s = &k_stages[i];
        double busy, wait;
        stage_sums(s, &busy, &wait);
        fprintf(f, "  %-12s %7d %9.2f %9.2f ", s->name, stage_threads(s), busy, wait);
        if (s->role == CV_R_COMPUTE || s->role == CV_R_WRITER)
            fprintf(f, " busy_max %.2f", busy_max_s(s->role));
        if (s->parts[1].name)
            fprintf(f, " cpu %.2f", secs(atomic_load(&g_cpu[s->role])));
        for (size_t k = 0; s->parts[1].name && k < 10 && s->parts[k].name; k++)
            fprintf(f, " %s %.2f", s->parts[k].name, key_s((cv_prof_key)s->parts[k].key));
        fputc('\n', f);
    }
}
