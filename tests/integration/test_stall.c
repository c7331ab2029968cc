/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stall.c — a Redis that stops answering (SIGSTOP) while an acquire is
 * in flight: the client gets a prompt UNAVAILABLE, never a lock, and once
 * Redis runs again the acquire it may still execute from its socket buffer
 * does not leave a key blocking the resource for its whole lease.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>

#define RES "stalled"
#define STALL_TTL_MS 30000
#define ANSWER_DEADLINE_MS 5000  /* command_timeout is 300 ms; generous for a loaded machine */
#define CLEANUP_DEADLINE_MS 10000 /* far below the 30 s lease */

START_TEST(test_stall_acquire_unknown_outcome)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, RES, key, sizeof key);

    ck_assert_int_eq(kill(f.e.redis_pid, SIGSTOP), 0);
    struct rlock_acquire_opts o = {.ttl_ms = STALL_TTL_MS};
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err err = rlock_acquire(f.c, RES, &o, 5000, &l);
    int64_t took = h_now_ms() - t0;
    ck_assert_int_eq(kill(f.e.redis_pid, SIGCONT), 0);
    printf("stall: acquire answered %s after %lld ms\n", rlock_strerror(err), (long long)took);
    ck_assert_msg(err == RLOCK_ERR_UNAVAILABLE, "acquire during a stall: %s",
                  rlock_strerror(err));
    ck_assert_msg(took < ANSWER_DEADLINE_MS, "acquire took %lld ms", (long long)took);

    /* Whatever Redis did with the buffered acquire, the key must not linger. */
    int64_t gone = h_wait_key_gone(f.r, key, CLEANUP_DEADLINE_MS, &f.e);
    printf("stall: no key %lld ms after Redis resumed\n", (long long)gone);
    ck_assert_msg(gone >= 0, "key still present %d ms after Redis resumed", CLEANUP_DEADLINE_MS);

    l = h_acquire_ok(f.c, RES, NULL);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);

    struct rlock_stats st;
    h_assert_ok(f.c, rlock_stats(f.c, 0, &st));
    ck_assert_msg(st.redis_errors > 0, "the stall was not counted as a Redis error");
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_stall_acquire_unknown_outcome};
    return h_run_tests("stall", 60, tests, H_LEN(tests));
}
