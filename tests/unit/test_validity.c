/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_validity.c — daemon/lock/validity.c: the keepalive's valid_ms is the
 * earliest end of validity of a session's watchdog leases, rounded down to
 * its bucket: never later than that end, and less than VALIDITY_BUCKET_MS
 * short of it, under renewals in order and out of order, adopted leases with
 * any end, several ttls, Extends that change the ttl, forgotten leases; a
 * drained session starts over, and out of memory it walks its leases.
 * Leases are made by hand; validity_session_ms is compared with a walk.
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
    minbag_init(&sess.valid);
    TAILQ_INIT(&sess.leases);
    for (uint32_t i = 0; i < n; i++) {
        struct lease *l = &leases[i];
        memset(l, 0, sizeof *l);
        l->sess = &sess;
        l->watchdog = 1;
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

/* valid_ms at or below the earliest end, by less than a bucket. */
static void check_bound(uint32_t n, const char *when)
{
    int64_t want = brute_min(n);
    uint32_t got = validity_session_ms(&sess, FROM);
    if (want == INT64_MAX) {
        ck_assert_msg(got == 0, "%s: valid_ms %u without a lease", when, got);
        return;
    }
    ck_assert_msg((int64_t)got <= want && (int64_t)got > want - VALIDITY_BUCKET_MS,
                  "%s: valid_ms %u, the earliest lease ends at %lld", when, got, (long long)want);
}

static void renew(struct lease *l, int64_t valid_until)
{
    if (valid_until > l->valid_until_ms)
        validity_raise(l, valid_until);
}

static void forget(struct lease *l)
{
    validity_forget(l);
    l->forgotten = 1;
}

static void teardown(uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!leases[i].forgotten)
            forget(&leases[i]);
    ck_assert_uint_eq(validity_session_ms(&sess, FROM), 0);
    validity_drain(&sess);
    ck_assert_uint_eq(minbag_keys(&sess.valid), 0);
    minbag_free(&sess.valid);
}

/* Renewals in the order validity ends, as the watchdog makes them. */
START_TEST(test_in_order)
{
    setup(N, TTL);
    check_bound(N, "granted");
    int64_t t = 2000000;
    for (int round = 0; round < 3; round++) {
        for (uint32_t i = 0; i < N; i++) {
            renew(&leases[i], t += 10);
            if (i % 7 == 0)
                check_bound(N, "renewing in order");
        }
    }
    check_bound(N, "renewed three times");
    /* The buckets left behind were dropped: the bag holds what the leases span. */
    ck_assert_uint_le(minbag_keys(&sess.valid), N * 10 / VALIDITY_BUCKET_MS + 2);
    teardown(N);
}
END_TEST

/* Confirmations out of order (another connection's batch answered first), and
 * adopted leases whose keys had any ttl left. */
START_TEST(test_out_of_order_and_adopted)
{
    setup(N, TTL);
    int64_t t = 2000000;
    for (uint32_t i = 0; i + 8 <= N; i += 8) {
        for (int j = 7; j >= 0; j--) /* a batch confirmed backwards */
            renew(&leases[i + (uint32_t)j], t + j);
        t += 8;
        check_bound(N, "a batch confirmed backwards");
    }
    srandom(7);
    for (uint32_t i = 0; i < N; i += 10) {
        forget(&leases[i]);
        leases[i].forgotten = 0;
        leases[i].valid_until_ms = 1500000 + random() % 1000000;
        validity_add(&leases[i]);
        check_bound(N, "an adopted lease");
    }
    for (uint32_t i = 0; i < N; i += 10) {
        forget(&leases[i]);
        check_bound(N, "an adopted lease let go");
    }
    teardown(N);
}
END_TEST

/* Extends change the ttl and with it the loss margin: a longer ttl ending a little
 * later may still be first. */
START_TEST(test_ttls_and_extend)
{
    setup(N, TTL);
    for (uint32_t i = 0; i < N; i += 3) {
        validity_ttl_change(&leases[i], 5000);
        check_bound(N, "ttl changed by an Extend");
    }
    validity_ttl_change(&leases[5], 3600000); /* margin 36 s more */
    renew(&leases[5], leases[5].valid_until_ms + 1000);
    check_bound(N, "a long ttl's larger margin");
    for (uint32_t i = 0; i < N; i += 3) {
        validity_ttl_change(&leases[i], TTL);
        check_bound(N, "back to the first ttl");
    }
    teardown(N);
}
END_TEST

/* Forgotten leases leave the answer at once; a lease with the watchdog off never counts. */
START_TEST(test_forget_and_watchdog_off)
{
    setup(N, TTL);
    struct lease *off = &leases[0];
    forget(off);
    off->forgotten = 0;
    off->watchdog = 0;
    off->valid_until_ms = 1;
    validity_add(off);
    check_bound(N, "a watchdog-off lease ending first");
    for (uint32_t i = 1; i < N; i += 2) {
        forget(&leases[i]);
        check_bound(N, "a lease forgotten");
    }
    for (uint32_t i = 2; i < N; i += 2)
        forget(&leases[i]);
    ck_assert_uint_eq(validity_session_ms(&sess, FROM), 0);
    teardown(N);
}
END_TEST

/* A keepalive after many buckets emptied drops at most VALIDITY_DROP_MAX: a lower
 * bound then, exact by the next ones. */
START_TEST(test_bounded_drop)
{
    setup(N, TTL);
    /* Every lease in a bucket of its own, then all but the last renewed far ahead. */
    for (uint32_t i = 0; i < N; i++)
        renew(&leases[i], 2000000 + (int64_t)i * 100 * VALIDITY_BUCKET_MS);
    check_bound(N, "a bucket each");
    for (uint32_t i = 0; i + 1 < N; i++)
        renew(&leases[i], 1000000000 + (int64_t)i);
    /* N - 1 emptied buckets lie under the last lease's: a first answer may stop short. */
    uint32_t first = validity_session_ms(&sess, FROM);
    ck_assert_uint_le(first, brute_min(N));
    for (int k = 0; k < (N / VALIDITY_DROP_MAX) + 1; k++)
        (void)validity_session_ms(&sess, FROM);
    check_bound(N, "after enough keepalives");
    teardown(N);
}
END_TEST

/* Out of memory once (the session marked broken): the answer is a walk, exact, until
 * the session holds nothing and starts counting again. */
START_TEST(test_broken_walks)
{
    setup(N, TTL);
    sess.valid_broken = 1;
    int64_t t = 3000000;
    for (uint32_t i = 0; i < N; i++)
        renew(&leases[i], t += 10);
    ck_assert_uint_eq(validity_session_ms(&sess, FROM), brute_min(N));
    for (uint32_t i = 0; i < N; i++)
        forget(&leases[i]);
    validity_drain(&sess);
    ck_assert_int_eq(sess.valid_broken, 0);
    for (uint32_t i = 0; i < N; i++) {
        leases[i].forgotten = 0;
        validity_add(&leases[i]);
        ck_assert_int_eq(leases[i].valid_counted, 1);
    }
    check_bound(N, "counting again");
    teardown(N);
}
END_TEST

/* Random confirmations, adoptions, Extends and forgets. */
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
            forget(l);
        }
        if (step % 101 == 0)
            check_bound(N, "random operations");
    }
    check_bound(N, "random operations, at the end");
    teardown(N);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"validity", test_in_order, 0},
        {"validity", test_out_of_order_and_adopted, 0},
        {"validity", test_ttls_and_extend, 0},
        {"validity", test_forget_and_watchdog_off, 0},
        {"validity", test_bounded_drop, 0},
        {"validity", test_broken_walks, 0},
        {"validity", test_random, 0},
    };
    return unit_run("validity", tests, sizeof tests / sizeof tests[0]);
}
