/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_minbag.c — daemon/base/minbag.c: counts and the least key against a
 * plain array, through random adds and removes over keys that collide in the
 * table and wrap around its end (deletion by backward shift must keep every
 * key findable); emptied keys are dropped at the top, at most `budget` per
 * question, and a stopped question is still a lower bound; clear keeps a
 * small table and frees a large one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "minbag.h"

#define KEYS 3000

static uint32_t want[KEYS]; /* occurrences of key k + BASE */
#define BASE 1000000

static int64_t least_present(void)
{
    for (int k = 0; k < KEYS; k++)
        if (want[k] > 0)
            return k + BASE;
    return INT64_MAX;
}

static int cmp_key(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void check_all(const struct minbag *m)
{
    for (int k = 0; k < KEYS; k++)
        ck_assert_msg(minbag_count(m, k + BASE) == want[k], "key %d: count %u, want %u",
                      k + BASE, minbag_count(m, k + BASE), want[k]);
}

START_TEST(test_random_against_array)
{
    struct minbag m;
    minbag_init(&m);
    ck_assert_uint_eq(minbag_count(&m, 5), 0);
    int64_t out;
    ck_assert_int_eq(minbag_min(&m, 100, &out), 0);
    srandom(3);
    for (int step = 0; step < 300000; step++) {
        /* keys spread over a window that slides forward, as validity ends do */
        int lo = (step / 200) % (KEYS - 200);
        int k = lo + (int)(random() % 200);
        if (want[k] > 0 && random() % 2) {
            minbag_remove(&m, k + BASE);
            want[k]--;
        } else {
            ck_assert_int_eq(minbag_add(&m, k + BASE), 0);
            want[k]++;
        }
        if (step % 97 == 0) {
            int64_t least = least_present();
            int has = minbag_min(&m, UINT32_MAX, &out);
            ck_assert_int_eq(has, least != INT64_MAX);
            if (has)
                ck_assert_int_eq(out, least);
        }
        if (step % 20011 == 0)
            check_all(&m);
    }
    check_all(&m);
    /* Remove everything: the bag answers empty and drops every key. */
    for (int k = 0; k < KEYS; k++)
        while (want[k] > 0) {
            minbag_remove(&m, k + BASE);
            want[k]--;
        }
    ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 0);
    ck_assert_uint_eq(minbag_keys(&m), 0);
    minbag_free(&m);
}
END_TEST

/* Keys that all hash near each other's slots still come back, deletion or not. */
START_TEST(test_dense_keys_and_deletes)
{
    struct minbag m;
    minbag_init(&m);
    for (int64_t k = 0; k < 1000; k++)
        ck_assert_int_eq(minbag_add(&m, k * 1024), 0);
    int64_t out;
    /* Empty every other key from the bottom up and drop them at the top. */
    for (int64_t k = 0; k < 1000; k += 2)
        minbag_remove(&m, k * 1024);
    for (int64_t k = 0; k < 1000; k += 2) {
        ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 1);
        ck_assert_int_eq(out, (k + 1) * 1024);
        minbag_remove(&m, (k + 1) * 1024);
        for (int64_t j = k + 2; j < 1000; j++)
            ck_assert_uint_eq(minbag_count(&m, j * 1024), (uint32_t)(j % 2));
    }
    ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 0);
    ck_assert_uint_eq(minbag_keys(&m), 0);
    minbag_free(&m);
}
END_TEST

/* Keys spread at random collide in the table and form runs, some wrapping around its
 * end: drops in the middle of a run (at the heap's top: the least keys) must leave
 * every other key findable. Many small full tables (47 keys in 64 slots), so runs
 * across the end occur often. */
START_TEST(test_random_keys_collide)
{
    enum { R = 47, ROUNDS = 3000 };
    int64_t key[R], sorted[R];
    srandom(5);
    for (int round = 0; round < ROUNDS; round++) {
        struct minbag m;
        minbag_init(&m);
        for (int i = 0; i < R; i++) {
            key[i] = ((int64_t)random() << 31) ^ random();
            ck_assert_int_eq(minbag_add(&m, key[i]), 0);
        }
        /* Empty the least half and drop them at the top. */
        memcpy(sorted, key, sizeof sorted);
        qsort(sorted, R, sizeof sorted[0], cmp_key);
        int64_t median = sorted[R / 2], out;
        for (int i = 0; i < R; i++)
            if (key[i] < median)
                minbag_remove(&m, key[i]);
        ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 1);
        ck_assert_int_eq(out, median);
        ck_assert_uint_eq(minbag_keys(&m), R - R / 2);
        for (int i = 0; i < R; i++)
            ck_assert_msg(minbag_count(&m, key[i]) == (key[i] < median ? 0u : 1u),
                          "round %d: key %d (%lld) lost after the drops", round, i,
                          (long long)key[i]);
        minbag_free(&m);
    }
}
END_TEST

/* A question drops at most budget emptied keys; what it answers is never above the least key. */
START_TEST(test_budget)
{
    struct minbag m;
    minbag_init(&m);
    for (int64_t k = 0; k < 100; k++)
        ck_assert_int_eq(minbag_add(&m, k), 0);
    ck_assert_int_eq(minbag_add(&m, 500), 0);
    for (int64_t k = 0; k < 100; k++)
        minbag_remove(&m, k);
    int64_t out;
    ck_assert_int_eq(minbag_min(&m, 30, &out), 1);
    ck_assert_int_eq(out, 30); /* 30 dropped, the 31st emptied key answered */
    ck_assert_uint_eq(minbag_keys(&m), 71);
    ck_assert_int_eq(minbag_min(&m, 30, &out), 1);
    ck_assert_int_eq(out, 60);
    ck_assert_int_eq(minbag_min(&m, 100, &out), 1);
    ck_assert_int_eq(out, 500);
    ck_assert_uint_eq(minbag_keys(&m), 1);
    minbag_free(&m);
}
END_TEST

/* clear: empty at once; a small table is kept for the next add, a large one freed. */
START_TEST(test_clear)
{
    struct minbag m;
    minbag_init(&m);
    for (int64_t k = 0; k < 10; k++)
        ck_assert_int_eq(minbag_add(&m, k), 0);
    struct minbag_slot *small = m.slot;
    minbag_clear(&m);
    ck_assert_ptr_eq(m.slot, small);
    ck_assert_uint_eq(minbag_keys(&m), 0);
    ck_assert_uint_eq(minbag_count(&m, 3), 0);
    int64_t out;
    ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 0);
    ck_assert_int_eq(minbag_add(&m, 7), 0);
    ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 1);
    ck_assert_int_eq(out, 7);
    for (int64_t k = 0; k < 10000; k++)
        ck_assert_int_eq(minbag_add(&m, k), 0);
    minbag_clear(&m);
    ck_assert_ptr_null(m.slot);
    ck_assert_int_eq(minbag_min(&m, UINT32_MAX, &out), 0);
    minbag_free(&m);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"minbag", test_random_against_array, 0},
        {"minbag", test_dense_keys_and_deletes, 0},
        {"minbag", test_random_keys_collide, 0},
        {"minbag", test_budget, 0},
        {"minbag", test_clear, 0},
    };
    return unit_run("minbag", tests, sizeof tests / sizeof tests[0]);
}
