/*
 * test_crash.c — a holder killed with SIGKILL loses its lock at once: the
 * daemon sees the connection drop and deletes the key long before its lease
 * (30 s by default) would run out, and the resource is free for others.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define RES "crashy"
#define CRASH_RELEASE_DEADLINE_MS 2000

START_TEST(test_crash_kill9)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    char key[256], out[320], bin[512], line[256], val[128];
    h_lock_key(&e, RES, key, sizeof key);
    h_env_path(&e, "holder.out", out, sizeof out);

    h_bin("rlock-holder", bin, sizeof bin);
    char *argv[] = { bin, e.rlockd_addr, RES, NULL };
    pid_t holder = h_spawn(argv, out);
    ck_assert_int_gt(holder, 0);
    ck_assert_msg(h_wait_line(out, "HELD ", holder, 15000, line, sizeof line) == 0,
                  "holder did not report HELD");

    char token[128];
    ck_assert_int_eq(sscanf(line, "HELD %*s %127s", token), 1);
    ck_assert_int_eq(h_get(r, key, val, sizeof val), 1);
    ck_assert_str_eq(val, token);
    long long pttl = h_pttl(r, key);
    ck_assert_msg(pttl > CRASH_RELEASE_DEADLINE_MS, "lease too short to prove anything: %lld",
                  pttl);

    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    int status;
    ck_assert_int_eq(h_wait_exit(holder, 5000, &status), 0);
    int64_t gone = h_wait_key_gone(r, key, CRASH_RELEASE_DEADLINE_MS, &e);
    printf("crash: key removed %lld ms after kill -9 (lease left was %lld ms)\n",
           (long long)gone, pttl);
    ck_assert_msg(gone >= 0, "key not removed within %d ms of kill -9", CRASH_RELEASE_DEADLINE_MS);

    /* The daemon survived and the resource is free for the next client. */
    h_assert_env_alive(&e);
    struct rlock_client *c = h_client(&e, NULL);
    ck_assert_ptr_nonnull(c);
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, RES, NULL, 0, &l));
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("crash");
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_crash_kill9);
    suite_add_tcase(s, tc);
    return h_run_suite(s);
}
