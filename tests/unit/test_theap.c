/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_theap.c — daemon/base/theap.c: nodes come out in time order, moving and
 * removing keep the order, many nodes at one instant, times far from zero
 * (BOOTTIME milliseconds of a long-running machine) and negative ones.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "theap.h"

#define N 5000

/* Pop everything, asserting non-decreasing times; returns how many came out. */
static size_t drain_in_order(struct theap *h)
{
    size_t count = 0;
    int64_t last = INT64_MIN;
    struct theap_node *n;
    while ((n = theap_first(h)) != NULL) {
        ck_assert_int_ge(n->at, last);
        last = n->at;
        theap_remove(h, n);
        ck_assert(!theap_armed(n));
        count++;
    }
    return count;
}

START_TEST(test_order)
{
    static struct theap_node nodes[N];
    struct theap h;
    theap_init(&h);
    srandom(1);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(theap_set(&h, &nodes[i], random() % 100000), 0);
    ck_assert_uint_eq(drain_in_order(&h), N);
    theap_free(&h);
}
END_TEST

START_TEST(test_move_and_remove)
{
    static struct theap_node nodes[N];
    struct theap h;
    theap_init(&h);
    srandom(2);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(theap_set(&h, &nodes[i], random() % 100000), 0);
    /* Move a third earlier or later, remove another third. */
    size_t removed = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) {
            ck_assert_int_eq(theap_set(&h, &nodes[i], random() % 200000 - 50000), 0);
        } else if (i % 3 == 1) {
            theap_remove(&h, &nodes[i]);
            theap_remove(&h, &nodes[i]); /* twice: a no-op */
            removed++;
        }
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(theap_armed(&nodes[i]), i % 3 != 1);
    ck_assert_uint_eq(drain_in_order(&h), N - removed);
    theap_free(&h);
}
END_TEST

START_TEST(test_same_instant)
{
    static struct theap_node nodes[N];
    struct theap h;
    theap_init(&h);
    const int64_t t = INT64_C(86400000) * 365 * 30; /* thirty years of uptime */
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(theap_set(&h, &nodes[i], t), 0);
    ck_assert_int_eq(theap_set(&h, &nodes[N / 2], t - 1), 0);
    ck_assert_ptr_eq(theap_first(&h), &nodes[N / 2]);
    ck_assert_uint_eq(drain_in_order(&h), N);
    theap_free(&h);
}
END_TEST

START_TEST(test_free_disarms)
{
    struct theap_node a = {0}, b = {0};
    struct theap h;
    theap_init(&h);
    ck_assert_ptr_null(theap_first(&h));
    ck_assert_int_eq(theap_set(&h, &a, 5), 0);
    ck_assert_int_eq(theap_set(&h, &b, 3), 0);
    ck_assert_ptr_eq(theap_first(&h), &b);
    theap_free(&h);
    ck_assert(!theap_armed(&a));
    ck_assert(!theap_armed(&b));
    ck_assert_ptr_null(theap_first(&h));
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"heap", test_order, 0},
        {"heap", test_move_and_remove, 0},
        {"heap", test_same_instant, 0},
        {"heap", test_free_disarms, 0},
    };
    return unit_run("theap", tests, sizeof tests / sizeof tests[0]);
}
