/*
 * The one threading primitive for data-parallel work: a pool of worker threads created once,
 * running "for i in [0, n)" batches. Work is split by index and the caller combines results in
 * index order, so output never depends on the thread count or on scheduling. The calling
 * thread takes part in its own batch, so a task may itself run a batch on the same pool
 * (nested batches cannot deadlock).
 */
#ifndef NVFP4_POOL_H
#define NVFP4_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_pool nvf_pool;

/** One task of a batch: @return 0 or a negative nvf_status (its message set with nvf_error_set). */
typedef int (*nvf_pool_task)(void *ctx, size_t index);

/**
 * Create a pool of `threads` threads in all, the caller's included (threads - 1 workers);
 * <= 0: one per online core. @return 0 or NVF_E_NOMEM. Free with nvf_pool_free().
 */
int nvf_pool_create(nvf_pool **out, int threads);

/** Stop and join the workers and free the pool; NULL is fine. No batch may be running. */
void nvf_pool_free(nvf_pool *p);

/** Threads in all (workers + the caller); 1 for NULL. */
int nvf_pool_size(const nvf_pool *p);

/**
 * The process-wide pool: one thread per online core, created on first use and freed at exit.
 * @return the pool, or NULL when it cannot be created (nvf_pool_run then runs serially).
 */
nvf_pool *nvf_pool_global(void);

/**
 * Run fn(ctx, i) once for every i in [0, n) with at most `width` threads at once, the calling
 * thread included (width <= 0 or larger than the pool: the pool's size; p NULL: serially on
 * the caller), and return when all have finished. After a task fails, tasks not yet started
 * are skipped.
 * @return 0, or the status of the failing task with the lowest index; that task's message is
 * restored on the calling thread (nvf_error_last).
 */
int nvf_pool_run(nvf_pool *p, size_t n, int width, nvf_pool_task fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
