/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lheap.c — daemon/base/lheap.c: entries come out in time order, a
 * raised top finds its place, and a filtered array put back in order with
 * lheap_heapify does too; the objects ride along with their times.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "lheap.h"

#define N 5000

static int64_t times[N];

/* Pop everything: non-decreasing times, each object with the time it was given last. */
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

START_TEST(test_order_and_raise)
{
    struct lheap h;
    lheap_init(&h);
    srandom(1);
    for (int i = 0; i < N; i++) {
        times[i] = random() % 100000;
        ck_assert_int_eq(lheap_push(&h, times[i], &times[i]), 0);
    }
    /* Raise the top a thousand times, as stale keys are corrected. */
    for (int k = 0; k < 1000; k++) {
        struct lheap_entry *top = lheap_top(&h);
        int64_t *obj = top->obj;
        *obj += 1 + random() % 50000;
        lheap_raise_top(&h, *obj);
    }
    ck_assert_uint_eq(drain_in_order(&h), N);
    ck_assert_ptr_null(lheap_top(&h));
    lheap_free(&h);
}
END_TEST

START_TEST(test_filter_then_heapify)
{
    struct lheap h;
    lheap_init(&h);
    srandom(2);
    for (int i = 0; i < N; i++) {
        times[i] = random() % 100000 - 50000;
        ck_assert_int_eq(lheap_push(&h, times[i], &times[i]), 0);
    }
    /* Drop every entry whose time is odd, in place, as the dead are filtered out. */
    uint32_t kept = 0, want = 0;
    for (uint32_t i = 0; i < h.n; i++)
        if (h.a[i].at % 2 == 0)
            h.a[kept++] = h.a[i];
    for (int i = 0; i < N; i++)
        want += times[i] % 2 == 0;
    h.n = kept;
    lheap_heapify(&h);
    ck_assert_uint_eq(drain_in_order(&h), want);
    lheap_free(&h);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"lheap", test_order_and_raise, 0},
        {"lheap", test_filter_then_heapify, 0},
    };
    return unit_run("lheap", tests, sizeof tests / sizeof tests[0]);
}
