/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_resume.c — a client process stopped for longer than its session
 * timeout, then resumed (SIGSTOP/SIGCONT; a suspended machine looks the same
 * to the client):
 *  - the application's first look at its lock after resuming says LOST, even
 *    if it runs before the library's background thread (rlock-resumer);
 *  - `rlockctl run` whose command had finished before the session ran out
 *    (the command stops rlockctl, then exits 0) exits with the command's
 *    status, not 79: the loss came after the command's end.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define SESSION_INI "[session]\ntimeout = 1s\n"
#define SESSION_MS 1000
/* After the key is gone the daemon has ended the session; a little more for good measure. */
#define AFTER_GONE_MS 200

/* The state letter of pid from /proc/PID/stat ('T' stopped), or 0 when unreadable. */
static char proc_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *text = h_read_file(path);
    char st = 0;
    const char *paren = text ? strrchr(text, ')') : NULL;
    if (paren && paren[1] == ' ')
        st = paren[2];
    free(text);
    return st;
}

/* Wait up to timeout_ms for pid to be stopped; fails the test otherwise. */
static void wait_stopped(pid_t pid, int timeout_ms, const char *what)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (proc_state(pid) != 'T' && h_now_ms() < deadline) {
        ck_assert_msg(h_alive(pid), "%s exited instead of stopping", what);
        h_sleep_ms(5);
    }
    ck_assert_msg(proc_state(pid) == 'T', "%s did not stop within %d ms", what, timeout_ms);
}

/* With pid stopped: wait until the daemon has ended its session (its lock key is gone). */
static void wait_session_gone(struct h_fixture *f, const char *key, pid_t pid, const char *what)
{
    int64_t stopped_at = h_now_ms();
    int64_t gone = h_wait_key_gone(f->r, key, 4 * SESSION_MS, &f->e);
    if (gone < 0) {
        kill(pid, SIGKILL);
        ck_abort_msg("%s: lock key still there %d ms after the stop", what, 4 * SESSION_MS);
    }
    h_sleep_ms(AFTER_GONE_MS);
    printf("resume: %s stopped; session ended; resuming after %lld ms\n", what,
           (long long)(h_now_ms() - stopped_at));
    ck_assert_int_eq(proc_state(pid), 'T');
}

START_TEST(test_resume_first_state_lost)
{
    struct h_fixture f;
    h_fixture_start_env(&f, SESSION_INI);
    char key[256], bin[512], out[320], line[256];
    h_lock_key(&f.e, "resumed", key, sizeof key);
    h_env_path(&f.e, "resumer.out", out, sizeof out);
    h_bin("rlock-resumer", bin, sizeof bin);

    char *argv[] = {bin, f.e.rlockd_addr, "resumed", NULL};
    pid_t pid = h_spawn(argv, out);
    ck_assert_int_gt(pid, 0);
    ck_assert_msg(h_wait_line(out, "HELD ", pid, 15000, line, sizeof line) == 0,
                  "rlock-resumer did not acquire");
    wait_stopped(pid, 5000, "rlock-resumer");
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    wait_session_gone(&f, key, pid, "rlock-resumer");

    ck_assert_int_eq(kill(pid, SIGCONT), 0);
    int found = h_wait_line(out, "FIRST ", pid, 5000, line, sizeof line);
    if (found != 0)
        kill(pid, SIGKILL);
    ck_assert_msg(found == 0, "rlock-resumer said nothing after SIGCONT");
    printf("resume: rlock-resumer: %s\n", line);
    ck_assert_msg(strcmp(line, "FIRST LOST") == 0,
                  "first rlock_lock_state after resuming: \"%s\", want \"FIRST LOST\"", line);

    /* on_lost still comes, once, from the background thread. */
    ck_assert_int_eq(h_wait_line(out, "ALIVE ", pid, 10000, line, sizeof line), 0);
    char *text = h_read_file(out);
    ck_assert_ptr_nonnull(text);
    printf("resume: rlock-resumer output:\n%s", text);
    ck_assert_msg(strstr(text, "ONLOST 1 session\n") != NULL, "on_lost not called once");
    ck_assert_msg(strstr(text, "ALIVE 0\n") != NULL, "client still alive");
    free(text);
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 5000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlock-resumer failed");
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_resume_command_done_before_loss)
{
    struct h_fixture f;
    h_fixture_start_env(&f, SESSION_INI);
    char key[256], bin[512], err[320];
    h_lock_key(&f.e, "stopsparent", key, sizeof key);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_bin("rlockctl", bin, sizeof bin);

    /* The command stops rlockctl, then ends well inside the session timeout. */
    char *argv[] = {bin, "run", "--server", f.e.rlockd_addr, "stopsparent", "--",
                    "sh", "-c", "kill -STOP $PPID; exit 0", NULL};
    pid_t ctl = h_spawn_io(argv, NULL, err);
    ck_assert_int_gt(ctl, 0);
    wait_stopped(ctl, 15000, "rlockctl run");
    wait_session_gone(&f, key, ctl, "rlockctl run");

    ck_assert_int_eq(kill(ctl, SIGCONT), 0);
    int status;
    int rc = h_wait_exit(ctl, 10000, &status);
    if (rc != 0)
        kill(ctl, SIGKILL);
    h_print_tail(err, 10);
    ck_assert_msg(rc == 0, "rlockctl still running 10 s after SIGCONT");
    char st[32];
    h_status_str(status, st, sizeof st);
    printf("resume: rlockctl run ended with %s\n", st);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "rlockctl run ended with %s, want the command's exit 0", st);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_resume_first_state_lost, test_resume_command_done_before_loss};
    return h_run_tests("resume", 90, tests, H_LEN(tests));
}
