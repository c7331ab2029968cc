/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lheap.c — daemon/base/lheap.c: entries come out in time order, equal
 * times included, with the objects they were pushed with, through pushes and
 * pops interleaved.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "lheap.h"

#define N 5000

static int64_t times[N];

/* Pop everything: non-decreasing times, each object with the time it was given. */
static uint32_t drain_in_order(struct lheap *h)
{
    uint32_t count = 0;
    int64_t last = INT64_MIN;
    struct lheap_entry *e;
    while ((e = lheap_top(h)) != NULL) {
        int64_t *obj = e->obj;
        if (e->at < last || e->at != *obj)
            ck_abort_msg("entry at %lld after %lld (its own time %lld)", (long long)e->at,
                         (long long)last, (long long)*obj);
        last = e->at;
        lheap_pop(h);
        count++;
    }
    return count;
}

START_TEST(test_order)
{
    struct lheap h;
    lheap_init(&h);
    srandom(1);
    for (int i = 0; i < N; i++) {
        times[i] = random() % 1000 - 500; /* many equal times */
        ck_assert_int_eq(lheap_push(&h, times[i], &times[i]), 0);
    }
    ck_assert_uint_eq(drain_in_order(&h), N);
    ck_assert_ptr_null(lheap_top(&h));
    lheap_free(&h);
}
END_TEST

/* Pushes and pops interleaved: each pop takes the least of what is in, by a walk. */
START_TEST(test_interleaved)
{
    struct lheap h;
    lheap_init(&h);
    srandom(2);
    static int in[N];
    for (int step = 0, n = 0; step < 4 * N; step++) {
        if (n < N && (n == 0 || random() % 3 != 0)) {
            int i = n++;
            times[i] = random() % 100000;
            in[i] = 1;
            ck_assert_int_eq(lheap_push(&h, times[i], &times[i]), 0);
            continue;
        }
        int64_t least = INT64_MAX;
        for (int i = 0; i < n; i++)
            if (in[i] && times[i] < least)
                least = times[i];
        struct lheap_entry *top = lheap_top(&h);
        if (least == INT64_MAX) {
            ck_assert_ptr_null(top);
            continue;
        }
        ck_assert_int_eq(top->at, least);
        in[(int64_t *)top->obj - times] = 0;
        lheap_pop(&h);
    }
    lheap_free(&h);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"lheap", test_order, 0},
        {"lheap", test_interleaved, 0},
    };
    return unit_run("lheap", tests, sizeof tests / sizeof tests[0]);
}
