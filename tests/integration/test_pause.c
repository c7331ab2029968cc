/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pause.c — a paused holder (SIGSTOP) stops sending keepalives; the
 * daemon ends its session after the session timeout and frees its locks.
 * When the holder resumes (SIGCONT) it must learn that the lock is gone:
 *  - rlock-holder (the client library) reports LOST and exits 3;
 *  - rlockctl run kills the command it guards and exits 79.
 */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define SESSION_MS 2000
#define SESSION_INI "[session]\ntimeout = 2s\n"
#define KEEPALIVE_MS (SESSION_MS / 3)
/* The key may go once no keepalive came for a session timeout: the last one may have been
 * sent up to one keepalive interval before the stop. */
#define GONE_EARLIEST_MS (SESSION_MS - KEEPALIVE_MS - 100)
#define GONE_LATEST_MS 4000
#define RLOCKCTL_EXIT_LOST 79

/*
 * Stop pid, measure when key disappears, check it lies in the window, and
 * resume pid. The env must stay up meanwhile.
 */
static void stop_until_released(struct h_fixture *f, const char *key, pid_t pid, const char *who)
{
    ck_assert_int_eq(h_key_exists(f->r, key), 1);
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    int64_t gone = h_wait_key_gone(f->r, key, GONE_LATEST_MS, &f->e);
    printf("pause: %s stopped; key removed after %lld ms (window %d..%d ms)\n", who,
           (long long)gone, GONE_EARLIEST_MS, GONE_LATEST_MS);
    kill(pid, SIGCONT);
    ck_assert_msg(gone >= 0, "%s: key not removed within %d ms of SIGSTOP", who, GONE_LATEST_MS);
    ck_assert_msg(gone >= GONE_EARLIEST_MS, "%s: key removed only %lld ms after SIGSTOP", who,
                  (long long)gone);
}

START_TEST(test_pause_holder)
{
    struct h_fixture f;
    h_fixture_start_env(&f, SESSION_INI);
    char key[256], line[256];
    h_lock_key(&f.e, "paused", key, sizeof key);

    struct h_holder holder;
    h_holder_start(&holder, &f.e, "paused", 0, 15000);
    h_assert_key_token(f.r, key, holder.token);
    /* Let a few keepalives pass so the session is in its steady state. */
    h_sleep_ms(SESSION_MS);
    ck_assert_msg(h_alive(holder.pid), "holder exited while holding");

    stop_until_released(&f, key, holder.pid, "rlock-holder");

    int64_t t_cont = h_now_ms();
    ck_assert_msg(h_wait_line(holder.out, "LOST ", holder.pid, 5000, line, sizeof line) == 0,
                  "resumed holder did not report LOST");
    int status;
    ck_assert_msg(h_wait_exit(holder.pid, 5000 - (int)(h_now_ms() - t_cont), &status) == 0,
                  "holder still running 5 s after SIGCONT");
    char st[32];
    printf("pause: holder said \"%s\" and ended (%s) %lld ms after SIGCONT\n", line,
           h_status_str(status, st, sizeof st), (long long)(h_now_ms() - t_cont));
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3, "holder ended with %s", st);

    h_fixture_stop(&f);
}
END_TEST

/* pid written by the guarded command into path, or 0 before it is there. */
static pid_t read_pid(const char *path)
{
    char *text = h_read_file(path);
    pid_t pid = 0;
    if (text && strchr(text, '\n'))
        pid = (pid_t)atoi(text);
    free(text);
    return pid;
}

START_TEST(test_pause_rlockctl)
{
    struct h_fixture f;
    h_fixture_start_env(&f, SESSION_INI);
    char key[256], bin[512], pidfile[320], out[320];
    h_lock_key(&f.e, "pausedctl", key, sizeof key);
    h_env_path(&f.e, "child.pid", pidfile, sizeof pidfile);
    h_env_path(&f.e, "rlockctl.out", out, sizeof out);

    h_bin("rlockctl", bin, sizeof bin);
    char *argv[] = { bin, "run", "--server", f.e.rlockd_addr,
                     "pausedctl", "--", "sh", "-c", "echo $$ > \"$0\"; exec sleep 60", pidfile,
                     NULL };
    pid_t ctl = h_spawn(argv, out);
    ck_assert_int_gt(ctl, 0);
    int64_t deadline = h_now_ms() + 15000;
    pid_t child = 0;
    while (!(child = read_pid(pidfile)) && h_now_ms() < deadline) {
        ck_assert_msg(h_alive(ctl), "rlockctl exited before starting the command");
        h_sleep_ms(10);
    }
    ck_assert_msg(child > 0, "the guarded command did not start within 15 s");
    h_sleep_ms(SESSION_MS);
    ck_assert_msg(h_alive(ctl), "rlockctl exited while holding");
    ck_assert_int_eq(kill(child, 0), 0);

    stop_until_released(&f, key, ctl, "rlockctl run");

    int64_t t_cont = h_now_ms();
    int status;
    int rc = h_wait_exit(ctl, 10000, &status);
    if (rc != 0) {
        kill(ctl, SIGKILL);
        kill(child, SIGKILL);
    }
    ck_assert_msg(rc == 0, "rlockctl still running 10 s after SIGCONT");
    char st[32];
    printf("pause: rlockctl ended (%s) %lld ms after SIGCONT\n",
           h_status_str(status, st, sizeof st), (long long)(h_now_ms() - t_cont));

    /* The command is gone too (a zombie left to init counts as gone). */
    deadline = h_now_ms() + 2000;
    while (!h_pid_gone(child) && h_now_ms() < deadline)
        h_sleep_ms(10);
    int child_alive = !h_pid_gone(child);
    if (child_alive)
        kill(child, SIGKILL);
    ck_assert_msg(!child_alive, "the guarded command (pid %d) outlived rlockctl", (int)child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == RLOCKCTL_EXIT_LOST,
                  "rlockctl ended with %s, not exit %d (lock lost)", st, RLOCKCTL_EXIT_LOST);

    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_pause_holder, test_pause_rlockctl };
    return h_run_tests("pause", 90, tests, H_LEN(tests));
}
