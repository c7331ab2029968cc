/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_validity.c — daemon/lock/validity.c: the keepalive's valid_ms is the
 * earliest end of validity of a session's watchdog leases, never later, under
 * renewals in order and out of order, places further back than the walk
 * (adopted leases), several ttls, Extends that change the ttl, forgotten
 * leases; the exceptions' heap stays bounded; every reference it took is
 * given back. Leases are made by hand (the test holds a reference to each, so
 * none is freed under it); validity_session_ms is compared with a walk.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "lease.h"
#include "session.h"
#include "validity.h"

#define N 1000
#define TTL 30000u
#define FROM 0 /* valid_ms counted from time 0: the answer is the minimum key itself */

static struct session sess;
static struct lease leases[N];

static void setup(uint32_t n, uint32_t ttl)
{
    memset(&sess, 0, sizeof sess);
    lheap_init(&sess.valid_heap);
    LIST_INIT(&sess.valid_lists);
    TAILQ_INIT(&sess.leases);
    for (uint32_t i = 0; i < n; i++) {
        struct lease *l = &leases[i];
        memset(l, 0, sizeof *l);
        l->sess = &sess;
        l->watchdog = 1;
        l->refs = 1; /* the test's */
        l->ttl_ms = ttl;
        l->valid_until_ms = 1000000 + (int64_t)i * 10; /* granted in order */
        TAILQ_INSERT_TAIL(&sess.leases, l, sess_link);
        validity_add(l);
    }
}

/* The earliest key over the live watchdog leases, by a walk. */
static int64_t brute_min(uint32_t n)
{
    int64_t min = INT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const struct lease *l = &leases[i];
        if (l->forgotten || !l->watchdog)
            continue;
        int64_t key = l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
        if (key < min)
            min = key;
    }
    return min;
}

static void check_exact(uint32_t n, const char *when)
{
    int64_t want = brute_min(n);
    uint32_t got = validity_session_ms(&sess, FROM);
    ck_assert_msg(want == INT64_MAX ? got == 0 : (int64_t)got == want,
                  "%s: valid_ms %u, the earliest lease ends at %lld", when, got, (long long)want);
}

static void renew(struct lease *l, int64_t valid_until)
{
    if (valid_until > l->valid_until_ms)
        l->valid_until_ms = valid_until;
    validity_raised(l);
}

static void teardown(uint32_t n)
{
    validity_drain(&sess);
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(leases[i].refs == 1, "lease %u keeps %u references", i, leases[i].refs);
    ck_assert(LIST_EMPTY(&sess.valid_lists));
    lheap_free(&sess.valid_heap);
}

/* Renewals in the order validity ends: each moves the head to the tail, nothing in the heap. */
START_TEST(test_in_order)
{
    setup(N, TTL);
    check_exact(N, "granted");
    int64_t t = 2000000;
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < N; i++) {
            renew(&leases[i], t += 7);
            if (i % 97 == 0)
                check_exact(N, "renewing in order");
        }
    }
    check_exact(N, "renewed three times");
    ck_assert_uint_eq(sess.valid_heap.n, 0);
    teardown(N);
}
END_TEST

/* Confirmations out of order by less than the walk: still lists only, still exact. */
START_TEST(test_out_of_order_within_walk)
{
    setup(N, TTL);
    int64_t t = 2000000;
    for (uint32_t i = 0; i + 8 <= N; i += 8) {
        /* a batch of 8 confirmed backwards: the later sends' answers came first */
        for (int j = 7; j >= 0; j--)
            renew(&leases[i + (uint32_t)j], t + j);
        t += 8;
        check_exact(N, "a batch confirmed backwards");
    }
    ck_assert_uint_eq(sess.valid_heap.n, 0);
    teardown(N);
}
END_TEST

/* Places further back than the walk (adopted leases with any ttl left): the heap. */
START_TEST(test_far_places_use_heap)
{
    setup(N, TTL);
    /* Everyone renewed to late ends, then every tenth one to an earlier end than most. */
    int64_t t = 5000000;
    for (uint32_t i = 0; i < N; i++)
        renew(&leases[i], t += 10);
    srandom(7);
    for (uint32_t i = 0; i < N; i += 10) {
        /* a lease that was forgotten and adopted back with a key of any ttl left */
        validity_forget(&leases[i]);
        leases[i].valid_until_ms = 5000000 + random() % 10000;
        validity_add(&leases[i]);
        check_exact(N, "an adopted lease placed");
    }
    ck_assert_msg(sess.valid_heap_live > 0, "no lease went to the heap");
    /* The listed ones renewed far ahead: the heap's leases end first. */
    t = 7000000;
    for (uint32_t i = 0; i < N; i++) {
        if (leases[i].valid_in == VALID_LIST)
            renew(&leases[i], t += 10);
    }
    check_exact(N, "the heap's leases first");
    /* Let go of the adopted ones: only a keepalive's correction drops their entries. */
    for (uint32_t i = 0; i < N; i += 10) {
        if (leases[i].valid_in != VALID_HEAP)
            continue;
        leases[i].forgotten = 1;
        validity_forget(&leases[i]);
        check_exact(N, "an adopted lease let go");
    }
    for (uint32_t i = 0; i < N; i += 10) {
        if (!leases[i].forgotten)
            continue;
        leases[i].forgotten = 0;
        validity_add(&leases[i]);
        check_exact(N, "an adopted lease back");
    }
    /* Renewed again in order, they leave the heap for the list. */
    t = 9000000;
    for (uint32_t i = 0; i < N; i++) {
        renew(&leases[i], t += 10);
        check_exact(N, "renewed after adoption");
    }
    ck_assert_uint_eq(sess.valid_heap_live, 0);
    /* Dead entries bounded: at most twice the live ones, or the minimum size. */
    ck_assert_msg(sess.valid_heap.n < 64 || sess.valid_heap.n <= 2 * sess.valid_heap_live,
                  "the heap keeps %u entries for %u leases", sess.valid_heap.n,
                  sess.valid_heap_live);
    teardown(N);
}
END_TEST

/* Several ttls: one list each, the answer is the earliest head; an Extend moves a lease. */
START_TEST(test_ttls_and_extend)
{
    setup(N, TTL);
    for (uint32_t i = 0; i < N; i += 3) { /* a third with a shorter ttl, ending earlier */
        validity_ttl_change(&leases[i], 5000);
        renew(&leases[i], leases[i].valid_until_ms);
        check_exact(N, "ttl changed by an Extend");
    }
    ck_assert_uint_eq(validity_lists(&sess), 2);
    /* Back to one ttl: the other list goes once empty. */
    for (uint32_t i = 0; i < N; i += 3) {
        validity_ttl_change(&leases[i], TTL);
        renew(&leases[i], leases[i].valid_until_ms);
    }
    ck_assert_uint_eq(validity_lists(&sess), 1);
    check_exact(N, "back to one ttl");
    for (uint32_t i = 0; i < N; i += 3) {
        validity_ttl_change(&leases[i], 5000);
        renew(&leases[i], leases[i].valid_until_ms);
    }
    /* The margin differs by ttl: a longer ttl ending a little later may still be first. */
    validity_ttl_change(&leases[5], 3600000); /* margin 36 s more */
    renew(&leases[5], leases[5].valid_until_ms + 1000);
    check_exact(N, "a long ttl's larger margin");
    teardown(N);
}
END_TEST

/* Forgotten leases leave the answer at once, wherever they were ordered. */
START_TEST(test_forget)
{
    setup(N, TTL);
    for (uint32_t i = 0; i < N; i += 2) {
        leases[i].forgotten = 1;
        validity_forget(&leases[i]);
        check_exact(N, "a lease forgotten");
    }
    for (uint32_t i = 1; i < N; i += 2) {
        leases[i].forgotten = 1;
        validity_forget(&leases[i]);
    }
    check_exact(N, "every lease forgotten");
    ck_assert_uint_le(validity_lists(&sess), 1); /* the last list stays, empty, for the next */
    teardown(N);
}
END_TEST

/* Random confirmations, adoptions and forgets: never later than the walk, and exact. */
START_TEST(test_random)
{
    setup(N, TTL);
    srandom(11);
    int64_t t = 2000000;
    for (int step = 0; step < 200000; step++) {
        struct lease *l = &leases[random() % N];
        long op = random() % 100;
        t += random() % 3;
        if (l->forgotten) {
            l->forgotten = 0;
            l->valid_until_ms = t + TTL - random() % TTL;
            validity_add(l);
        } else if (op < 85) {
            renew(l, t + TTL - random() % 40);
        } else if (op < 90) {
            validity_ttl_change(l, op % 2 ? TTL : 10000);
            renew(l, t + l->ttl_ms);
        } else {
            l->forgotten = 1;
            validity_forget(l);
        }
        if (step % 101 == 0)
            check_exact(N, "random operations");
    }
    check_exact(N, "random operations, at the end");
    ck_assert_msg(sess.valid_heap.n < 64 || sess.valid_heap.n <= 2 * sess.valid_heap_live + 1,
                  "the heap keeps %u entries for %u leases", sess.valid_heap.n,
                  sess.valid_heap_live);
    teardown(N);
}
END_TEST

/* A lease back in the heap with a later end than before: its old entry is low, and
 * the answer must be its own key, not the old one. */
START_TEST(test_heap_reentry)
{
    setup(N, TTL);
    struct lease *x = &leases[N / 2];
    for (int again = 0; again < 2; again++) {
        x->forgotten = 1;
        validity_forget(x);
        x->forgotten = 0;
        x->valid_until_ms += 5; /* adopted again, a little later: still far from the tail */
        validity_add(x);
        ck_assert_int_eq(x->valid_in, VALID_HEAP);
    }
    /* Every other lease renewed far ahead: x ends first. */
    int64_t t = 9000000;
    for (uint32_t i = 0; i < N; i++)
        if (&leases[i] != x)
            renew(&leases[i], t += 10);
    check_exact(N, "a lease back in the heap ends first");
    teardown(N);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"validity", test_in_order, 0},
        {"validity", test_out_of_order_within_walk, 0},
        {"validity", test_far_places_use_heap, 0},
        {"validity", test_ttls_and_extend, 0},
        {"validity", test_forget, 0},
        {"validity", test_heap_reentry, 0},
        {"validity", test_random, 0},
    };
    return unit_run("validity", tests, sizeof tests / sizeof tests[0]);
}
