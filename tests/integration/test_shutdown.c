/*
 * test_shutdown.c — SIGTERM releases every held lock before rlockd exits
 * (status 0), and the clients learn their locks are gone; with Redis
 * stalled, shutdown_timeout bounds the wait instead of hanging.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#define NLOCKS 3

static int lost_all(void *arg)
{
    struct h_lost *lost = arg;
    return atomic_load(&lost->count) >= NLOCKS;
}

/* SIGTERM rlockd; returns how long it took to exit, asserting a clean exit. */
static int64_t term_rlockd(struct h_env *e)
{
    int status = 0;
    int64_t t0 = h_now_ms();
    ck_assert_int_eq(h_stop_pid(e->rlockd_pid, SIGTERM, 10000, "rlockd", &status), 0);
    e->rlockd_pid = 0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "rlockd did not exit 0 on SIGTERM (status %#x)", status);
    return h_now_ms() - t0;
}

START_TEST(test_shutdown_releases_locks)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    static const char *const names[NLOCKS] = {"sd-a", "sd-b", "sd-c"};
    struct rlock_lock *locks[NLOCKS];
    char keys[NLOCKS][256];
    for (int i = 0; i < NLOCKS; i++) {
        locks[i] = h_acquire_ok(f.c, names[i], NULL);
        h_lock_key(&f.e, names[i], keys[i], sizeof keys[i]);
        ck_assert_int_eq(h_key_exists(f.r, keys[i]), 1);
    }
    int64_t took = term_rlockd(&f.e);
    printf("shutdown: rlockd exited %lld ms after SIGTERM\n", (long long)took);
    for (int i = 0; i < NLOCKS; i++)
        ck_assert_msg(h_key_exists(f.r, keys[i]) == 0, "%s survived the shutdown", keys[i]);
    ck_assert_msg(h_wait_for(lost_all, &f.lost, 5000), "the client saw %d of %d locks lost",
                  atomic_load(&f.lost.count), NLOCKS);
    for (int i = 0; i < NLOCKS; i++) {
        ck_assert_int_eq(rlock_lock_state(locks[i]), RLOCK_LOST);
        rlock_lock_free(locks[i]);
    }
    rlock_close(f.c);
    redisFree(f.r);
    h_env_stop(&f.e);
}
END_TEST

START_TEST(test_shutdown_redis_stalled)
{
    struct h_fixture f;
    h_fixture_start(&f, "[server]\nshutdown_timeout = 1s\n");
    struct rlock_lock *l = h_acquire_ok(f.c, "sd-stall", NULL);
    ck_assert_int_eq(kill(f.e.redis_pid, SIGSTOP), 0);
    int64_t took = term_rlockd(&f.e);
    ck_assert_int_eq(kill(f.e.redis_pid, SIGCONT), 0);
    printf("shutdown: with Redis stalled, rlockd exited %lld ms after SIGTERM\n",
           (long long)took);
    ck_assert_msg(took < 5000, "shutdown took %lld ms despite shutdown_timeout 1s",
                  (long long)took);
    rlock_lock_free(l);
    rlock_close(f.c);
    redisFree(f.r);
    h_env_stop(&f.e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_shutdown_releases_locks, test_shutdown_redis_stalled};
    return h_run_tests("shutdown", 60, tests, H_LEN(tests));
}
