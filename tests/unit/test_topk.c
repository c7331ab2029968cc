/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topk.c — daemon/base/topk.c (weighted Space-Saving) against exact
 * counts: exact while there are no more names than counters; over a skewed
 * random stream of many more names, every counter's bounds hold
 * (count - error <= true <= count, error <= W / K) and every name heavier
 * than W / K is counted; the table finds exactly the counted names through
 * takeovers in a tiny table (runs that collide and wrap); a million distinct
 * names leave the memory where K put it; and the quantiles of contention.c.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "contention.h"
#include "topk.h"

/* An assertion for hot loops: Check reports every passing ck_assert through a pipe,
 * which millions of them turn into the test's whole run time. */
#define REQUIRE(cond)                                                                            \
    do {                                                                                        \
        if (!(cond))                                                                            \
            ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond);                              \
    } while (0)

static const uint8_t key[UTIL_HASH_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static size_t name_of(uint32_t i, char *buf, size_t len)
{
    return (size_t)snprintf(buf, len, "res-%u", i);
}

/* Every counter is found under its name, and at most k are in use. */
static void check_table(const struct topk *t)
{
    REQUIRE(topk_size(t) <= topk_capacity(t));
    for (uint32_t i = 0; i < topk_size(t); i++) {
        struct topk_entry *e = topk_at(t, i);
        REQUIRE(topk_find(t, e->name, e->name_len) == e);
        REQUIRE(strlen(e->name) == e->name_len);
        REQUIRE(e->count >= e->error);
        REQUIRE(e->count >= topk_min(t));
    }
}

START_TEST(test_exact_while_room)
{
    struct topk *t = topk_new(50, 16, key);
    ck_assert_ptr_nonnull(t);
    uint64_t want[50] = {0};
    char name[32];
    srandom(1);
    for (int step = 0; step < 5000; step++) {
        uint32_t i = (uint32_t)(random() % 50);
        uint64_t w = (uint64_t)(random() % 1000);
        size_t n = name_of(i, name, sizeof name);
        struct topk_entry *e = topk_add(t, name, n, w);
        want[i] += w;
        if (want[i] == 0) {
            REQUIRE(e == NULL); /* weight 0 and not counted: nothing changes */
            continue;
        }
        REQUIRE(e != NULL && e->count == want[i] && e->error == 0);
    }
    check_table(t);
    ck_assert_uint_eq(topk_size(t), 50);
    topk_free(t);
}
END_TEST

/* A skewed stream: half the weight on 20 hot names, the rest spread over 20,000. */
START_TEST(test_bounds_on_skewed_stream)
{
    enum { NAMES = 20000, K = 100, STEPS = 400000 };
    uint64_t *truth = calloc(NAMES, sizeof *truth);
    ck_assert_ptr_nonnull(truth);
    struct topk *t = topk_new(K, 8, key);
    ck_assert_ptr_nonnull(t);
    char name[32];
    srandom(7);
    uint64_t total = 0;
    for (int step = 0; step < STEPS; step++) {
        uint32_t i = random() % 2 ? (uint32_t)(random() % 20) : (uint32_t)(random() % NAMES);
        uint64_t w = 1 + (uint64_t)(random() % 100);
        truth[i] += w;
        total += w;
        REQUIRE(topk_add(t, name, name_of(i, name, sizeof name), w) != NULL);
        if (step % 50000 == 0)
            check_table(t);
    }
    ck_assert_uint_eq(topk_total(t), total);
    uint64_t bound = total / K;
    check_table(t);
    for (uint32_t i = 0; i < topk_size(t); i++) {
        struct topk_entry *e = topk_at(t, i);
        uint32_t idx = (uint32_t)strtoul(e->name + 4, NULL, 10);
        ck_assert_uint_le(truth[idx], e->count);
        ck_assert_uint_ge(truth[idx], e->count - e->error);
        ck_assert_uint_le(e->error, bound);
    }
    int heavy = 0;
    for (uint32_t i = 0; i < NAMES; i++) {
        if (truth[i] <= bound)
            continue;
        heavy++;
        ck_assert_msg(topk_find(t, name, name_of(i, name, sizeof name)) != NULL,
                      "res-%u (weight %llu > W/K %llu) is not counted", i,
                      (unsigned long long)truth[i], (unsigned long long)bound);
    }
    ck_assert_int_ge(heavy, 20); /* the hot names at least: the check means something */
    ck_assert_uint_eq(topk_size(t), K);
    topk_free(t);
    free(truth);
}
END_TEST

/* Four counters, eight slots: every takeover deletes from a full, wrapping run. */
START_TEST(test_tiny_table_takeovers)
{
    struct topk *t = topk_new(4, 32, key);
    ck_assert_ptr_nonnull(t);
    char name[32];
    srandom(11);
    for (int step = 0; step < 200000; step++) {
        uint32_t i = (uint32_t)(random() % 40);
        size_t n = name_of(i, name, sizeof name);
        int was = topk_find(t, name, n) != NULL;
        struct topk_entry *e = topk_add(t, name, n, 1 + (uint64_t)(random() % 5));
        REQUIRE(e != NULL && strcmp(e->name, name) == 0);
        if (!was) {
            /* Taken over: the payload starts from zero, the error is the count it inherited. */
            for (int b = 0; b < 32; b++)
                REQUIRE(e->payload[b] == 0);
            REQUIRE(e->error <= e->count);
        }
        memset(e->payload, 0xab, 32);
        check_table(t);
        /* Exactly the counted names are found. */
        int found = 0;
        for (uint32_t j = 0; j < 40; j++)
            found += topk_find(t, name, name_of(j, name, sizeof name)) != NULL;
        REQUIRE(found == (int)topk_size(t));
    }
    topk_free(t);
}
END_TEST

/* A million distinct names, each waited for once: memory stays where K put it. */
START_TEST(test_million_names_bounded)
{
    enum { K = 1000 };
    struct topk *t = topk_new(K, sizeof(struct contention_stats), key);
    ck_assert_ptr_nonnull(t);
    size_t after_new = topk_bytes(t);
    struct mallinfo2 before = mallinfo2();
    char name[600];
    memset(name, 'x', sizeof name);
    size_t peak = 0;
    for (uint32_t i = 0; i < 1000000; i++) {
        /* names of 10 to 512 bytes: the largest max_resource_bytes allows by default */
        size_t n = (size_t)snprintf(name, sizeof name, "%u-", i);
        name[n] = 'x';
        n = 10 + i % 503;
        REQUIRE(topk_add(t, name, n, 1 + i % 7) != NULL);
        if (topk_bytes(t) > peak)
            peak = topk_bytes(t);
    }
    struct mallinfo2 after = mallinfo2();
    /* The stated bound: the counters as allocated, plus a name of at most 512 bytes each. */
    size_t bound = after_new + (size_t)K * (512 + 1);
    ck_assert_uint_le(peak, bound);
    ck_assert_uint_le(after.uordblks - before.uordblks, (size_t)K * (512 + 1 + 32));
    ck_assert_uint_eq(topk_size(t), K);
    fprintf(stderr, "topk: K=%d, %zu bytes at most (bound %zu), %.0f bytes per counter\n", K,
            peak, bound, (double)peak / K);
    topk_free(t);
}
END_TEST

START_TEST(test_quantiles)
{
    ck_assert_uint_eq(contention_bucket(0), 0);
    ck_assert_uint_eq(contention_bucket(1), 0);
    ck_assert_uint_eq(contention_bucket(2), 1);
    ck_assert_uint_eq(contention_bucket(3), 1);
    ck_assert_uint_eq(contention_bucket(1024), 10);
    ck_assert_uint_eq(contention_bucket(UINT64_MAX), CONTENTION_BUCKETS - 1);
    uint32_t hist[CONTENTION_BUCKETS] = {0};
    ck_assert_uint_eq(contention_quantile(hist, 0, 0.5, 0), 0);
    /* 90 values of 1000 us, 10 of 100000 us */
    hist[contention_bucket(1000)] = 90;
    hist[contention_bucket(100000)] = 10;
    uint64_t p50 = contention_quantile(hist, 100, 0.5, 100000);
    ck_assert_uint_ge(p50, 1000);
    ck_assert_uint_lt(p50, 2000);
    uint64_t p90 = contention_quantile(hist, 100, 0.9, 100000);
    ck_assert_uint_lt(p90, 2000);
    uint64_t p99 = contention_quantile(hist, 100, 0.99, 100000);
    ck_assert_uint_eq(p99, 100000); /* the bucket's end is above the maximum: capped */
    ck_assert_uint_eq(contention_quantile(hist, 100, 0.99, 200000), 131071);
    ck_assert_uint_eq(contention_quantile(hist, 100, 0.9, 200000), 1023);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"topk", test_exact_while_room, 0},
        {"topk", test_bounds_on_skewed_stream, 0},
        {"topk", test_tiny_table_takeovers, 0},
        {"topk", test_million_names_bounded, 0},
        {"topk", test_quantiles, 0},
    };
    return unit_run("topk", tests, sizeof tests / sizeof tests[0]);
}
