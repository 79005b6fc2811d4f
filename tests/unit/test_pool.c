/* lib/core/pool.c: every index runs once, widths hold, nested batches finish, the failure with
 * the lowest index is the one reported; nvf_error_save/restore carry errors across threads. */
#include "check.h"

#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct count_ctx {
    atomic_int *hits;
    atomic_int running, peak;
} count_ctx;

static int count_task(void *ctx, size_t i) {
    count_ctx *c = ctx;
    int now = atomic_fetch_add(&c->running, 1) + 1;
    int peak = atomic_load(&c->peak);
    while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now))
        ;
    atomic_fetch_add(&c->hits[i], 1);
    usleep(200);
    atomic_fetch_sub(&c->running, 1);
    return 0;
}

static void test_every_index_once(nvf_pool *p, int width) {
    enum { N = 500 };
    atomic_int hits[N];
    for (int i = 0; i < N; i++)
        atomic_init(&hits[i], 0);
    count_ctx c = {.hits = hits};
    atomic_init(&c.running, 0);
    atomic_init(&c.peak, 0);
    CHECK(nvf_pool_run(p, N, width, count_task, &c) == NVF_OK);
    int once = 1;
    for (int i = 0; i < N; i++)
        once &= atomic_load(&hits[i]) == 1;
    CHECK_MSG(once, "width %d: some index did not run exactly once", width);
    int limit = width <= 0 || width > nvf_pool_size(p) ? nvf_pool_size(p) : width;
    CHECK_MSG(atomic_load(&c.peak) <= limit, "width %d: %d tasks at once", width,
              atomic_load(&c.peak));
}

static int fail_task(void *ctx, size_t i) {
    (void)ctx;
    usleep((useconds_t)(i % 7) * 50);
    if (i == 37 || i == 90 || i == 200)
        return nvf_error_set(i == 37 ? NVF_E_IO : NVF_E_FORMAT, "task %zu failed", i);
    return 0;
}

typedef struct nest_ctx {
    nvf_pool *p;
    atomic_long sum;
} nest_ctx;

static int inner_task(void *ctx, size_t i) {
    nest_ctx *c = ctx;
    atomic_fetch_add(&c->sum, (long)i);
    return 0;
}

static int outer_task(void *ctx, size_t i) {
    (void)i;
    nest_ctx *c = ctx;
    return nvf_pool_run(c->p, 100, 0, inner_task, c);
}

typedef struct carry {
    nvf_error_state st;
} carry;

static void *carry_main(void *arg) {
    carry *c = arg;
    nvf_error_set(NVF_E_SHAPE, "tensor 'x': shape [3] does not fit");
    nvf_error_save(&c->st);
    return NULL;
}

int main(void) {
    nvf_pool *p = NULL;
    CHECK(nvf_pool_create(&p, 4) == NVF_OK);
    CHECK(nvf_pool_size(p) == 4);
    test_every_index_once(p, 0);
    test_every_index_once(p, 1);
    test_every_index_once(p, 2);
    test_every_index_once(p, 64);
    test_every_index_once(NULL, 0);

    /* The lowest failing index wins, with its own code and message. */
    for (int rep = 0; rep < 20; rep++) {
        nvf_error_clear();
        int rc = nvf_pool_run(p, 300, 0, fail_task, NULL);
        CHECK(rc == NVF_E_IO);
        CHECK_EQ_STR(nvf_error_last(), "task 37 failed");
    }
    CHECK(nvf_pool_run(NULL, 300, 0, fail_task, NULL) == NVF_E_IO);
    CHECK_EQ_STR(nvf_error_last(), "task 37 failed");

    /* Nested batches on the same pool finish: 50 outer tasks x sum(0..99). */
    nest_ctx nc = {.p = p};
    atomic_init(&nc.sum, 0);
    CHECK(nvf_pool_run(p, 50, 0, outer_task, &nc) == NVF_OK);
    CHECK(atomic_load(&nc.sum) == 50L * 4950L);

    /* The global pool exists and runs. */
    nvf_pool *g = nvf_pool_global();
    CHECK(g != NULL && nvf_pool_size(g) >= 1);
    test_every_index_once(g, 0);

    /* nvf_error_save/restore move an error from a worker thread to the joiner. */
    carry c;
    pthread_t t;
    nvf_error_clear();
    CHECK(pthread_create(&t, NULL, carry_main, &c) == 0);
    pthread_join(t, NULL);
    CHECK(nvf_error_code() == NVF_OK);
    CHECK(nvf_error_restore(&c.st) == NVF_E_SHAPE);
    CHECK_EQ_STR(nvf_error_last(), "tensor 'x': shape [3] does not fit");

    nvf_pool_free(p);
    nvf_pool_free(NULL);
    return check_summary("test_pool");
}
