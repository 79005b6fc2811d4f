/*
 * Thread pool (nvfp4/pool.h). Batches wait in a list; a worker takes the next index of the
 * first batch that has one and is under its width. A batch's caller takes indices of its own
 * batch too, then waits for the ones workers took. The failure with the lowest index wins,
 * whatever order tasks finish in, so the error reported does not depend on scheduling.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "nvfp4/pool.h"

#include "nvfp4/status.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pool_batch {
    struct pool_batch *next;
    nvf_pool_task fn;
    void *ctx;
    size_t n, claimed, finished;
    int width;   /* threads at once, the caller's included */
    int workers; /* tasks of this batch running on workers */
    int failed;
    size_t fail_index;
    nvf_error_state fail;
    pthread_cond_t done;
} pool_batch;

struct nvf_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;
    pool_batch *batches;
    int threads, started, quit;
    int named; /* workers named so far (nvf-poolN, for top -H) */
    pthread_t *tid;
};

/* Claim the next index of `b` (lock held); 0 when none is left, or for a worker when the
 * batch already has width - 1 workers (the caller keeps its place). */
static int claim(pool_batch *b, size_t *out, int worker) {
    if (b->claimed >= b->n || b->failed)
        return 0;
    if (worker && b->workers >= b->width - 1)
        return 0;
    *out = b->claimed++;
    b->workers += worker;
    return 1;
}

/* Run index `i` of `b` with the lock released; record the outcome (lock held again). */
static void run_one(nvf_pool *p, pool_batch *b, size_t i, int worker) {
    pthread_mutex_unlock(&p->mu);
    nvf_error_clear();
    int rc = b->fn(b->ctx, i);
    nvf_error_state st;
    if (rc != 0)
        nvf_error_save(&st);
    pthread_mutex_lock(&p->mu);
    if (rc != 0 && (!b->failed || i < b->fail_index)) {
        b->failed = 1;
        b->fail_index = i;
        b->fail = st;
        b->fail.code = rc;
    }
    b->workers -= worker;
    b->finished++;
    if (b->finished == b->claimed && (b->claimed == b->n || b->failed))
        pthread_cond_broadcast(&b->done);
}

static void *worker_main(void *arg) {
    nvf_pool *p = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals go to the threads that wait for them */
    pthread_mutex_lock(&p->mu);
#ifdef __linux__
    char name[16];
    snprintf(name, sizeof name, "nvf-pool%d", p->named++);
    pthread_setname_np(pthread_self(), name);
#endif
    while (!p->quit) {
        pool_batch *b;
        size_t i = 0;
        for (b = p->batches; b && !claim(b, &i, 1); b = b->next)
            ;
        if (!b) {
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        run_one(p, b, i, 1);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int nvf_pool_create(nvf_pool **out, int threads) {
    *out = NULL;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)(c < 1024 ? c : 1024) : 1;
    }
    nvf_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->tid = calloc((size_t)threads, sizeof *p->tid))) {
        free(p);
        return nvf_error_set(NVF_E_NOMEM, "no memory for a pool of %d threads", threads);
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    p->threads = threads;
    for (int k = 1; k < threads; k++) {
        if (pthread_create(&p->tid[p->started], NULL, worker_main, p) != 0)
            break; /* fewer workers: still correct, only slower */
        p->started++;
    }
    p->threads = p->started + 1;
    *out = p;
    return NVF_OK;
}

void nvf_pool_free(nvf_pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->started; k++)
        pthread_join(p->tid[k], NULL);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p->tid);
    free(p);
}

int nvf_pool_size(const nvf_pool *p) {
    return p ? p->threads : 1;
}

static nvf_pool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void global_free(void) {
    nvf_pool_free(g_pool);
    g_pool = NULL;
}

static void global_init(void) {
    if (nvf_pool_create(&g_pool, 0) == NVF_OK)
        atexit(global_free);
    else
        nvf_error_clear();
}

nvf_pool *nvf_pool_global(void) {
    pthread_once(&g_pool_once, global_init);
    return g_pool;
}

int nvf_pool_run(nvf_pool *p, size_t n, int width, nvf_pool_task fn, void *ctx) {
    if (n == 0)
        return NVF_OK;
    if (!p || n == 1 || width == 1) {
        for (size_t i = 0; i < n; i++) {
            int rc = fn(ctx, i);
            if (rc != 0)
                return rc;
        }
        return NVF_OK;
    }
    pool_batch b;
    memset(&b, 0, sizeof b);
    b.fn = fn;
    b.ctx = ctx;
    b.n = n;
    b.width = width <= 0 || width > p->threads ? p->threads : width;
    pthread_cond_init(&b.done, NULL);
    pthread_mutex_lock(&p->mu);
    b.next = p->batches;
    p->batches = &b;
    pthread_cond_broadcast(&p->work);
    size_t i;
    while (claim(&b, &i, 0))
        run_one(p, &b, i, 0);
    while (b.finished < b.claimed)
        pthread_cond_wait(&b.done, &p->mu);
    pool_batch **pp = &p->batches;
    while (*pp != &b)
        pp = &(*pp)->next;
    *pp = b.next;
    pthread_mutex_unlock(&p->mu);
    pthread_cond_destroy(&b.done);
    if (b.failed)
        return nvf_error_restore(&b.fail);
    return NVF_OK;
}
