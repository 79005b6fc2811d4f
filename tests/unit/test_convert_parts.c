/*
 * The split of `convert --shard I/N` (nvf_convert_part_range, lib/convert/convert_parts.c):
 * hand-worked cases of the midpoint rule (shard s goes to part floor(N * (C_s + c_s/2) / C)),
 * then, for random weights and every N up to 40, properties checked without the formula: every
 * shard in exactly one part, each part a contiguous run in order, and each part's weight within
 * one largest shard of C/N.
 */
#include "check.h"

#include "nvfp4/convert.h"

#include <stdint.h>
#include <stdlib.h>

/* The part of every shard, from the ranges of parts 0 .. count-1 (-1: none, -2: twice). */
static void owners(int *own, const uint64_t *cost, size_t n, int count) {
    for (size_t s = 0; s < n; s++)
        own[s] = -1;
    for (int p = 0; p < count; p++) {
        size_t first, k;
        nvf_convert_part_range(&first, &k, cost, n, p, count);
        for (size_t s = first; s < first + k; s++)
            own[s] = own[s] == -1 ? p : -2;
    }
}

static void test_hand(void) {
    int own[4];
    const uint64_t even[4] = {10, 10, 10, 10};
    owners(own, even, 4, 2);
    CHECK(own[0] == 0 && own[1] == 0 && own[2] == 1 && own[3] == 1);
    /* C = 103: midpoints 50, 100.5, 101.5, 102.5. N = 2: halves at 51.5. N = 4: quarters
     * of 25.75, so shard 0 is part 1 (50 / 25.75 = 1.94) and the rest part 3; 0 and 2 empty. */
    const uint64_t heavy[4] = {100, 1, 1, 1};
    owners(own, heavy, 4, 2);
    CHECK(own[0] == 0 && own[1] == 1 && own[2] == 1 && own[3] == 1);
    owners(own, heavy, 4, 4);
    CHECK(own[0] == 1 && own[1] == 3 && own[2] == 3 && own[3] == 3);
    size_t first = 99, k = 99;
    nvf_convert_part_range(&first, &k, heavy, 4, 0, 4);
    CHECK(k == 0);
    /* No weight at all: by count (s * N / n). */
    const uint64_t zero[3] = {0, 0, 0};
    owners(own, zero, 3, 2);
    CHECK(own[0] == 0 && own[1] == 0 && own[2] == 1);
    /* One part: everything. */
    owners(own, heavy, 4, 1);
    CHECK(own[0] == 0 && own[1] == 0 && own[2] == 0 && own[3] == 0);
    /* More parts than shards. */
    int own2[2];
    const uint64_t two[2] = {5, 5};
    owners(own2, two, 2, 7);
    CHECK(own2[0] == 1 && own2[1] == 5); /* midpoints at 1/4 and 3/4 of 7 parts */
}

static uint64_t g_rnd = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void) {
    g_rnd ^= g_rnd << 13;
    g_rnd ^= g_rnd >> 7;
    g_rnd ^= g_rnd << 17;
    return g_rnd;
}

static void test_random(void) {
    enum { N_MAX = 200 };
    uint64_t cost[N_MAX];
    int own[N_MAX];
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 1 + rnd() % N_MAX;
        uint64_t total = 0, largest = 0;
        for (size_t s = 0; s < n; s++) {
            /* Shard-like weights up to 5 GB, some tiny, some equal. */
            cost[s] = trial % 3 == 0 ? 5000000000ULL : rnd() % 5000000001ULL;
            total += cost[s];
            largest = cost[s] > largest ? cost[s] : largest;
        }
        for (int count = 1; count <= 40; count++) {
            owners(own, cost, n, count);
            for (size_t s = 0; s < n; s++) {
                CHECK_MSG(own[s] >= 0, "trial %d N=%d shard %zu owned by %d", trial, count, s,
                          own[s]);
                if (s > 0)
                    CHECK_MSG(own[s] >= own[s - 1], "trial %d N=%d not in order at %zu", trial,
                              count, s);
            }
            for (int p = 0; p < count; p++) {
                double sum = 0;
                for (size_t s = 0; s < n; s++)
                    sum += own[s] == p ? (double)cost[s] : 0.0;
                double share = (double)total / count;
                CHECK_MSG(sum <= share + (double)largest + 1 && sum >= share - (double)largest - 1,
                          "trial %d N=%d part %d holds %.0f, share %.0f, largest %llu", trial,
                          count, p, sum, share, (unsigned long long)largest);
            }
        }
    }
}

int main(void) {
    test_hand();
    test_random();
    return check_summary("convert_parts");
}
