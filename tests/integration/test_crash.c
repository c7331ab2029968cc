/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_crash.c — a holder killed with SIGKILL loses its lock at once: the
 * daemon sees the connection drop and deletes the key long before its lease
 * (30 s by default) would run out, and the resource is free for others.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define RES "crashy"
#define CRASH_RELEASE_DEADLINE_MS 2000

START_TEST(test_crash_kill9)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char key[256];
    h_lock_key(&f.e, RES, key, sizeof key);

    struct h_holder holder;
    h_holder_start(&holder, &f.e, RES, 0, 15000);
    h_assert_key_token(f.r, key, holder.token);
    long long pttl = h_pttl(f.r, key);
    ck_assert_msg(pttl > CRASH_RELEASE_DEADLINE_MS, "lease too short to prove anything: %lld",
                  pttl);

    h_holder_kill9(&holder);
    int64_t gone = h_wait_key_gone(f.r, key, CRASH_RELEASE_DEADLINE_MS, &f.e);
    printf("crash: key removed %lld ms after kill -9 (lease left was %lld ms)\n",
           (long long)gone, pttl);
    ck_assert_msg(gone >= 0, "key not removed within %d ms of kill -9", CRASH_RELEASE_DEADLINE_MS);

    /* The daemon survived and the resource is free for the next client. */
    h_assert_env_alive(&f.e);
    f.c = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *l = h_acquire_ok(f.c, RES, NULL);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_crash_kill9 };
    return h_run_tests("crash", 60, tests, H_LEN(tests));
}
