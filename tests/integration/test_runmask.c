/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_runmask.c — `rlockctl run` started with SIGCHLD and SIGTERM blocked
 * (a parent's signal mask is inherited across exec) must still notice the
 * command's end, and still pass SIGTERM on to the command; otherwise it
 * would hold the lock for ever.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* fork+exec argv with SIGCHLD and SIGTERM blocked, stderr appended to err_path. */
static pid_t spawn_masked(char *const argv[], const char *err_path)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    int fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0)
        _exit(127);
    close_range(3, ~0U, 0);
    execv(argv[0], argv);
    _exit(127);
}

/* Wait up to timeout_ms for ctl; SIGKILL it (and so its command) when it is still there. */
static int wait_or_kill(pid_t ctl, int timeout_ms, const char *err, int *status)
{
    int rc = h_wait_exit(ctl, timeout_ms, status);
    if (rc != 0) {
        kill(ctl, SIGKILL);
        h_wait_exit(ctl, 5000, status);
    }
    h_print_tail(err, 10);
    return rc;
}

START_TEST(test_runmask_command_end_noticed)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char key[256], bin[512], err[320];
    h_lock_key(&f.e, "masked", key, sizeof key);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_bin("rlockctl", bin, sizeof bin);

    char *argv[] = {bin, "run", "--server", f.e.rlockd_addr, "masked", "--", "true", NULL};
    pid_t ctl = spawn_masked(argv, err);
    ck_assert_int_gt(ctl, 0);
    int status;
    ck_assert_msg(wait_or_kill(ctl, 10000, err, &status) == 0,
                  "rlockctl run (SIGCHLD blocked) still running 10 s after `true`");
    char st[32];
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl run ended with %s",
                  h_status_str(status, st, sizeof st));
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_runmask_sigterm_forwarded)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320];
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "child.pid", pidfile, sizeof pidfile);
    h_bin("rlockctl", bin, sizeof bin);

    char *argv[] = {bin, "run", "--server", f.e.rlockd_addr, "masked-term", "--", "sh", "-c",
                    "echo $$ > \"$0\"; exec sleep 30", pidfile, NULL};
    pid_t ctl = spawn_masked(argv, err);
    ck_assert_int_gt(ctl, 0);
    /* The command runs (so the handlers are in place) once it has written its pid. */
    int64_t deadline = h_now_ms() + 15000;
    char *text = NULL;
    while (h_now_ms() < deadline && !((text = h_read_file(pidfile)) && strchr(text, '\n'))) {
        free(text);
        text = NULL;
        if (!h_alive(ctl))
            break;
        h_sleep_ms(10);
    }
    int started = text != NULL;
    free(text);
    if (!started)
        kill(ctl, SIGKILL);
    ck_assert_msg(started, "the command did not start");

    ck_assert_int_eq(kill(ctl, SIGTERM), 0);
    int status;
    ck_assert_msg(wait_or_kill(ctl, 10000, err, &status) == 0,
                  "rlockctl run (SIGTERM blocked) still running 10 s after SIGTERM");
    char st[32];
    h_status_str(status, st, sizeof st);
    printf("runmask: rlockctl run ended with %s after SIGTERM\n", st);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM,
                  "rlockctl run ended with %s, want exit %d (command killed by SIGTERM)", st,
                  128 + SIGTERM);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_runmask_command_end_noticed, test_runmask_sigterm_forwarded};
    return h_run_tests("runmask", 60, tests, H_LEN(tests));
}
