/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_redis_faults.c — rlockd against a Redis that stops or is not there.
 *
 *   stall_3ttl     Redis is stopped (SIGSTOP) for three leases (1.5 s each)
 *                  while four sessions hold a renewed lock each. Every holder
 *                  gets LockLost(EXPIRED) no earlier than the validity its
 *                  client computed (rlock_lock_valid_until) and no later than
 *                  the key's own expiry (its PTTL read before the stop; the
 *                  daemon's loss margin is what lets the event arrive first).
 *                  Writes are paused (CLIENT PAUSE WRITE) before the PTTLs are
 *                  read, so that no renew runs between the read and the stop:
 *                  the expiry read is the key's last. The daemon's declaration
 *                  (its log stamp) must come before the expiry; the event's
 *                  arrival may take DELIVERY_SLACK_MS more.
 *                  After SIGCONT the daemon recovers by itself: acquires work
 *                  again, it reports held exactly what Redis holds, renewals
 *                  go on, Stats add up.
 *   down_at_start  rlockd starts while no redis-server runs: Ping works at
 *                  once, acquires get UNAVAILABLE at once (retry_after_ms > 0)
 *                  and never hang, rlockd does not spin (CPU time over 3 s),
 *                  it says so once per connection, and it serves locks within
 *                  2 s of Redis coming up.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* --- Redis stopped for three leases ----------------------------------------------- */

#define NHOLD 4
#define STALL_TTL_MS 1500u
#define STALL_MS (3 * STALL_TTL_MS)
#define STAGGER_MS 100      /* between the grants: the leases end at different times */
#define RENEWING_MS 800     /* renewals under way before the stop */
#define POLL_MS 2
#define RECOVER_WITHIN_MS 5000
#define HOLD_AFTER_MS (2 * STALL_TTL_MS)
/* valid_until comes from the library's clock, converted to CLOCK_MONOTONIC in whole ms. */
#define ROUNDING_MS 2
/*
 * From the daemon's push to the client's callback on a loaded host (this
 * machine is shared): the daemon's own declaration is checked against the
 * key's expiry exactly, the arrival with this much room.
 */
#define DELIVERY_SLACK_MS 50
/*
 * The loop lateness the daemon's loss margin allows (LEASE_LATENESS_MS of
 * daemon/lock/lease.h). A daemon held up longer (a host overloaded by other
 * work) says so in its loss line ("noticed N ms after it was due"): the
 * declaration is then judged by when it was due, N ms earlier — that it aimed
 * before the key's expiry — and the arrival gets the lateness past the margin.
 */
#define LOOP_LATENESS_MS 50

struct holder {
    char resource[32];
    char key[256];
    struct rlock_client *c;
    struct rlock_lock *l;
    struct h_lost lost;
    int64_t valid_until;  /* the latest rlock_lock_valid_until seen while held */
    int64_t key_expiry;   /* h_now_ms() after the PTTL read + PTTL (the latest it can be) */
    int64_t key_expiry_wall; /* the same on the wall clock (that of rlockd.log) */
    long long pttl;
};

static void holders_poll(struct holder *h)
{
    for (int i = 0; i < NHOLD; i++) {
        if (atomic_load(&h[i].lost.count) > 0)
            continue;
        int64_t v = rlock_lock_valid_until(h[i].l);
        if (v > 0 && atomic_load(&h[i].lost.count) == 0)
            h[i].valid_until = v;
    }
}

START_TEST(test_redis_faults_stall_3ttl)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct holder h[NHOLD];
    memset(h, 0, sizeof h);
    for (int i = 0; i < NHOLD; i++) {
        snprintf(h[i].resource, sizeof h[i].resource, "stall-%d", i);
        h_lock_key(&f.e, h[i].resource, h[i].key, sizeof h[i].key);
        struct rlock_options o = {.on_lost = h_lost_cb, .on_lost_arg = &h[i].lost};
        h[i].c = h_client_or_fail(&f.e, &o);
        struct rlock_acquire_opts ao = {.ttl_ms = STALL_TTL_MS};
        h[i].l = h_acquire_ok(h[i].c, h[i].resource, &ao);
        h_sleep_ms(STAGGER_MS);
    }
    int64_t until = h_now_ms() + RENEWING_MS;
    while (h_now_ms() < until) {
        holders_poll(h);
        h_sleep_ms(POLL_MS);
    }
    ck_assert_int_eq(h_redis_ok(f.r, "CLIENT PAUSE 60000 WRITE"), 0);
    for (int i = 0; i < NHOLD; i++) {
        h[i].pttl = h_pttl(f.r, h[i].key);
        h[i].key_expiry = h_now_ms() + h[i].pttl;
        h[i].key_expiry_wall = h_wall_ms() + h[i].pttl;
        ck_assert_msg(h[i].pttl > 0, "%s: PTTL %lld before the stop", h[i].key, h[i].pttl);
    }
    h_sigstop(f.e.redis_pid, "redis-server");
    int64_t t_stop = h_now_ms();
    while (h_now_ms() - t_stop < STALL_MS) {
        holders_poll(h);
        h_sleep_ms(POLL_MS);
    }
    h_sigcont(f.e.redis_pid, "redis-server");
    ck_assert_int_eq(h_redis_ok(f.r, "CLIENT UNPAUSE"), 0);
    int64_t t_cont = h_now_ms();

    for (int i = 0; i < NHOLD; i++) {
        int64_t lost = atomic_load(&h[i].lost.first_ms);
        char line[80];
        int64_t declared = 0;
        snprintf(line, sizeof line, "lost lock %.31s ", h[i].resource);
        ck_assert_msg(h_log_find(&f.e, line, &declared), "rlockd did not log the loss of %s",
                      h[i].resource);
        long long late = h_log_number_after(&f.e, line, "; noticed ");
        int64_t held_up = late > LOOP_LATENESS_MS ? late - LOOP_LATENESS_MS : 0;
        if (late >= 0)
            printf("redis_faults: FIGURE %s: the daemon noticed the loss %lld ms after it was "
                   "due (held up)\n", h[i].resource, late);
        printf("redis_faults: FIGURE %s: PTTL %lld ms before the stop; the daemon declared it "
               "lost %lld ms before the key's expiry; the client got LockLost(%s) at +%lld ms "
               "after the stop, %lld ms after its valid_until, %lld ms before the key's expiry\n",
               h[i].resource, h[i].pttl, (long long)(h[i].key_expiry_wall - declared),
               rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&h[i].lost.reason)),
               (long long)(lost - t_stop), (long long)(lost - h[i].valid_until),
               (long long)(h[i].key_expiry - lost));
        ck_assert_msg(atomic_load(&h[i].lost.count) == 1, "%s: %d LockLost events during a "
                      "stall of three leases", h[i].resource, atomic_load(&h[i].lost.count));
        ck_assert_int_eq(atomic_load(&h[i].lost.reason), RLOCK_LOST_EXPIRED);
        ck_assert_msg(lost >= h[i].valid_until - ROUNDING_MS, "%s: LockLost %lld ms before the "
                      "validity the client was given", h[i].resource,
                      (long long)(h[i].valid_until - lost));
        ck_assert_msg(declared - (late > 0 ? late : 0) <= h[i].key_expiry_wall,
                      "%s: the daemon declared the loss %lld ms after the key expired",
                      h[i].resource, (long long)(declared - h[i].key_expiry_wall));
        ck_assert_msg(lost <= h[i].key_expiry + held_up + DELIVERY_SLACK_MS,
                      "%s: LockLost reached the client %lld ms after the key expired",
                      h[i].resource, (long long)(lost - h[i].key_expiry));
        ck_assert_int_eq(rlock_lock_state(h[i].l), RLOCK_LOST);
    }

    /* Recovery: nothing is held any more, and acquires work again without help. */
    struct rlock_stats st;
    h_assert_ok(h[0].c, rlock_stats(h[0].c, 0, &st));
    ck_assert_msg(st.held_locks == 0, "Stats: %llu held locks after every lock was lost",
                  (unsigned long long)st.held_locks);
    for (int i = 0; i < NHOLD; i++) {
        rlock_lock_free(h[i].l);
        h[i].l = NULL;
        struct rlock_acquire_opts ao = {.ttl_ms = STALL_TTL_MS};
        enum rlock_err err;
        int unavailable = 0;
        while ((err = rlock_acquire(h[i].c, h[i].resource, &ao, 0, &h[i].l)) ==
                   RLOCK_ERR_UNAVAILABLE &&
               h_now_ms() - t_cont < RECOVER_WITHIN_MS) {
            unavailable++;
            h_sleep_ms(10);
        }
        printf("redis_faults: FIGURE %s acquired again %lld ms after SIGCONT (%d UNAVAILABLE "
               "first)\n",
               h[i].resource, (long long)(h_now_ms() - t_cont), unavailable);
        ck_assert_msg(err == RLOCK_OK, "%s: acquire %lld ms after SIGCONT: %s", h[i].resource,
                      (long long)(h_now_ms() - t_cont), rlock_strerror(err));
        h_assert_key_token(f.r, h[i].key, rlock_lock_token(h[i].l));
    }
    /* Renewals work again: the new leases outlive two ttls. */
    h_sleep_ms(HOLD_AFTER_MS);
    h_assert_ok(h[0].c, rlock_stats(h[0].c, 0, &st));
    printf("redis_faults: FIGURE after recovery: held %llu, lost %llu, redis_up %d, "
           "redis_errors %llu\n",
           (unsigned long long)st.held_locks, (unsigned long long)st.locks_lost, st.redis_up,
           (unsigned long long)st.redis_errors);
    ck_assert_uint_eq(st.held_locks, NHOLD);
    ck_assert_uint_eq(st.locks_lost, NHOLD);
    ck_assert_int_eq(st.redis_up, 1);
    for (int i = 0; i < NHOLD; i++) {
        ck_assert_int_eq(atomic_load(&h[i].lost.count), 1);
        ck_assert_int_eq(rlock_lock_state(h[i].l), RLOCK_HELD);
        h_assert_key_token(f.r, h[i].key, rlock_lock_token(h[i].l));
        h_release_gone(&f, h[i].c, h[i].l);
        rlock_lock_free(h[i].l);
        rlock_close(h[i].c);
    }
    h_fixture_stop(&f);
}
END_TEST

/* --- Redis not there when rlockd starts ---------------------------------------------- */

#define PROMPT_MS 3000 /* far below the 10 s wait asked: generous for a loaded machine */
#define CPU_WINDOW_MS 3000
#define CPU_MAX_MS 300 /* 10% of one CPU, generously: a retry loop spins at 100% */
#define READY_WITHIN_MS 5000 /* the reconnect backoff is capped at 1 s */
#define POOL_SIZE 2 /* [redis] pool_size's default */
/* Connections that retry: the pool's and the pub/sub connection ([redis] notify's default). */
#define RETRYING_CONNS (POOL_SIZE + 1)

START_TEST(test_redis_faults_down_at_start)
{
    struct h_env e;
    ck_assert_msg(h_env_start_without_redis(&e, NULL) == 0, "could not start rlockd");
    struct h_lost lost = {0};
    struct rlock_options o = {.on_lost = h_lost_cb, .on_lost_arg = &lost};
    struct rlock_client *c = h_client_or_fail(&e, &o);

    int64_t t = h_now_ms();
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    int64_t ping_ms = h_now_ms() - t;
    struct rlock_stats st;
    h_assert_ok(c, rlock_stats(c, 5000, &st));
    ck_assert_int_eq(st.redis_up, 0);

    /* Try and wait: both answered at once. */
    static const uint32_t waits[2] = {0, 10000};
    for (int i = 0; i < 2; i++) {
        struct rlock_acquire_opts ao = {.wait_ms = waits[i]};
        struct rlock_lock *l = NULL;
        t = h_now_ms();
        enum rlock_err err = rlock_acquire(c, "down", &ao, 20000, &l);
        int64_t took = h_now_ms() - t;
        uint32_t retry = rlock_last_error()->retry_after_ms;
        printf("redis_faults: FIGURE Redis down: acquire (wait %u) answered %s after %lld ms, "
               "retry_after_ms %u\n",
               waits[i], rlock_strerror(err), (long long)took, retry);
        ck_assert_msg(err == RLOCK_ERR_UNAVAILABLE, "acquire with Redis down: %s",
                      rlock_strerror(err));
        ck_assert_msg(took < PROMPT_MS, "the UNAVAILABLE took %lld ms", (long long)took);
        ck_assert_uint_gt(retry, 0);
        ck_assert_ptr_null(l);
    }

    /* No busy loop while Redis stays away. */
    int64_t cpu0 = h_proc_cpu_ms(e.rlockd_pid);
    h_sleep_ms(CPU_WINDOW_MS);
    int64_t cpu1 = h_proc_cpu_ms(e.rlockd_pid);
    printf("redis_faults: FIGURE Redis down: Ping answered in %lld ms; rlockd used %lld ms of CPU "
           "in %d ms; %d \"retrying with backoff\" lines in its log\n",
           (long long)ping_ms, (long long)(cpu1 - cpu0), CPU_WINDOW_MS,
           h_log_count(&e, "retrying with backoff"));
    ck_assert_msg(cpu0 >= 0 && cpu1 >= 0, "cannot read rlockd's CPU time");
    ck_assert_msg(cpu1 - cpu0 < CPU_MAX_MS, "rlockd used %lld ms of CPU in %d ms with Redis down",
                  (long long)(cpu1 - cpu0), CPU_WINDOW_MS);
    ck_assert_int_le(h_log_count(&e, "retrying with backoff"), RETRYING_CONNS);
    ck_assert_msg(h_alive(e.rlockd_pid), "rlockd died while Redis was down");

    /* Redis comes up: locks within a few backoffs. */
    ck_assert_int_eq(h_redis_start(&e), 0);
    int64_t t_up = h_now_ms();
    enum rlock_err err;
    struct rlock_lock *l = NULL;
    int unavailable = 0;
    while ((err = rlock_acquire(c, "down", NULL, 5000, &l)) == RLOCK_ERR_UNAVAILABLE &&
           h_now_ms() - t_up < READY_WITHIN_MS + 3000) {
        unavailable++;
        h_sleep_ms(10);
    }
    int64_t ready = h_now_ms() - t_up;
    printf("redis_faults: FIGURE Redis up: first grant %lld ms later (%d UNAVAILABLE first)\n",
           (long long)ready, unavailable);
    ck_assert_msg(err == RLOCK_OK, "acquire after Redis came up: %s", rlock_strerror(err));
    ck_assert_msg(ready <= READY_WITHIN_MS, "rlockd served locks only %lld ms after Redis came up",
                  (long long)ready);

    /* Nor once the connections are back, a lock held: an event left armed for writing
       on a Redis socket that has nothing to write fires on every loop turn. */
    cpu0 = h_proc_cpu_ms(e.rlockd_pid);
    h_sleep_ms(CPU_WINDOW_MS);
    cpu1 = h_proc_cpu_ms(e.rlockd_pid);
    printf("redis_faults: FIGURE Redis up, a lock held: rlockd used %lld ms of CPU in %d ms\n",
           (long long)(cpu1 - cpu0), CPU_WINDOW_MS);
    ck_assert_msg(cpu0 >= 0 && cpu1 >= 0, "cannot read rlockd's CPU time");
    ck_assert_msg(cpu1 - cpu0 < CPU_MAX_MS,
                  "rlockd used %lld ms of CPU in %d ms, idle with a lock held",
                  (long long)(cpu1 - cpu0), CPU_WINDOW_MS);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    rlock_close(c);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_redis_faults_stall_3ttl, test_redis_faults_down_at_start};
    return h_run_tests("redis_faults", 60, tests, H_LEN(tests));
}
