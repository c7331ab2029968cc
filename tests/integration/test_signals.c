/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_signals.c — signals that would end a process by default (signal(7))
 * never end rlockd without releasing its locks:
 *  - SIGUSR1 (a state line in the log), SIGUSR2, SIGALRM, SIGVTALRM,
 *    SIGPROF, SIGIO, SIGSTKFLT, SIGXCPU, SIGXFSZ and real-time signals leave
 *    the daemon serving: a held lock is renewed past its ttl, its key keeps
 *    its token;
 *  - SIGQUIT and SIGPWR stop it as SIGTERM does: every lock released, exit 0.
 * Real rlockd and redis-server processes, real signals.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define TTL_MS 1500

START_TEST(test_ignored)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, "sig/held", &o);
    char key[256];
    h_lock_key(&f.e, "sig/held", key, sizeof key);
    const int sigs[] = {SIGUSR1,   SIGUSR2, SIGALRM,   SIGVTALRM, SIGPROF,  SIGIO,
                        SIGSTKFLT, SIGXCPU, SIGXFSZ,   SIGRTMIN,  SIGRTMAX, SIGRTMIN + 3};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        ck_assert_int_eq(kill(f.e.rlockd_pid, sigs[i]), 0);
        h_assert_ok(f.c, rlock_ping(f.c, 5000, NULL));
        ck_assert_msg(h_env_alive(&f.e), "rlockd died of signal %d (%s)", sigs[i],
                      strsignal(sigs[i]));
    }
    ck_assert_msg(h_log_wait(&f.e, "SIGUSR1: ", 5000, NULL) == 0, "no state line after SIGUSR1");
    ck_assert_int_eq(h_log_count(&f.e, ", 1 locks held, 0 waiters"), 1);
    /* Renewed past its ttl: the daemon's watchdog still runs. */
    h_sleep_ms(2 * TTL_MS);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    ck_assert_int_eq(f.lost.count, 0);
    h_assert_ok(f.c, rlock_release(l, 5000));
    h_fixture_stop(&f);
}
END_TEST

/* SIGQUIT or SIGPWR: the locks are released before the daemon exits 0. */
static void stops_cleanly(int sig)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 60000};
    struct rlock_lock *l = h_acquire_ok(f.c, "sig/stop", &o);
    (void)l;
    char key[256];
    h_lock_key(&f.e, "sig/stop", key, sizeof key);
    ck_assert_int_eq(kill(f.e.rlockd_pid, sig), 0);
    int status;
    ck_assert_msg(h_wait_exit(f.e.rlockd_pid, 15000, &status) == 0, "rlockd did not stop on %s",
                  strsignal(sig));
    f.e.rlockd_pid = 0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "rlockd ended with status 0x%x on %s", status, strsignal(sig));
    ck_assert_msg(h_key_exists(f.r, key) == 0, "a lock of a daemon stopped by %s stayed in Redis",
                  strsignal(sig));
    rlock_close(f.c);
    f.c = NULL;
    redisFree(f.r);
    f.r = NULL;
    h_env_stop(&f.e);
}

START_TEST(test_sigquit)
{
    stops_cleanly(SIGQUIT);
}
END_TEST

START_TEST(test_sigpwr)
{
    stops_cleanly(SIGPWR);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_ignored, test_sigquit, test_sigpwr};
    return h_run_tests("signals", 120, tests, H_LEN(tests));
}
