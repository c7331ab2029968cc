/*
 * test_runjob.c — `rlockctl run` against a real rlockd: the exit status of
 * an acquire refused by a limit of the daemon.
 *
 * rlockctl is started in a session of its own (no controlling terminal), so
 * it behaves the same whether the suite runs from a terminal or not.
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
#include <sysexits.h>
#include <unistd.h>

/* Every wait on rlockctl or its job ends by this deadline. */
#define WAIT_MS 15000

/*
 * fork() for a child that must not outlive the test: it gets
 * PR_SET_PDEATHSIG(SIGKILL). Returns the pid in the parent and 0 in the child.
 */
static pid_t fork_guarded(void)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
        _exit(127);
    return pid;
}

/* In a child: stderr appended to path (stdout stays), no other descriptor, nothing blocked. */
static void child_io(const char *err_path)
{
    int fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
        _exit(127);
    close_range(3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Start argv (a path) in a new session, without a controlling terminal. */
static pid_t spawn_ctl(char *const argv[], const char *err_path)
{
    pid_t pid = fork_guarded();
    if (pid > 0)
        return pid;
    setsid();
    child_io(err_path);
    execv(argv[0], argv);
    _exit(127);
}

/*
 * Wait up to timeout_ms for rlockctl (pid) to exit and return its wait
 * status; fails the test (after SIGKILL, which takes its command along) if
 * it does not. Its stderr (err_path) is printed either way.
 */
static int wait_ctl(pid_t pid, int timeout_ms, const char *err_path, const char *what)
{
    int status = 0;
    int rc = h_wait_exit(pid, timeout_ms, &status);
    if (rc != 0) {
        kill(pid, SIGKILL);
        h_wait_exit(pid, 5000, NULL);
    }
    h_print_tail(err_path, 20);
    ck_assert_msg(rc == 0, "%s still running after %d ms", what, timeout_ms);
    return status;
}

/* Assert that a wait status is exit code want. */
static void assert_exit(int status, int want, const char *what)
{
    char st[32];
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == want, "%s ended with %s, want exit %d",
                  what, h_status_str(status, st, sizeof st), want);
}

/* Wait until the daemon counts at least n waiters, while pid (who should wait) lives. */
static void wait_waiters(struct h_fixture *f, uint64_t n, pid_t pid, const char *what)
{
    int64_t deadline = h_now_ms() + WAIT_MS;
    struct rlock_stats st = {0};
    for (;;) {
        h_assert_ok(f->c, rlock_stats(f->c, 0, &st));
        if (st.waiters >= n)
            return;
        ck_assert_msg(h_alive(pid), "%s exited instead of waiting", what);
        ck_assert_msg(h_now_ms() < deadline, "%s not waiting after %d ms", what, WAIT_MS);
        h_sleep_ms(10);
    }
}

/*
 * A daemon limit (here [limits] max_waiters = 1) is temporary like a held
 * lock: exit 75, EX_TEMPFAIL.
 */
START_TEST(test_runjob_limit_is_tempfail)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nmax_waiters = 1\n");
    struct h_holder holder;
    h_holder_start(&holder, &f.e, "limited", 0, WAIT_MS);
    char bin[512], err1[320], err2[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "first.err", err1, sizeof err1);
    h_env_path(&f.e, "second.err", err2, sizeof err2);

    char *first[] = {bin, "run", "--server", f.e.rlockd_addr, "--wait", "60s", "limited", "--",
                     "true", NULL};
    pid_t w1 = spawn_ctl(first, err1);
    wait_waiters(&f, 1, w1, "the first rlockctl run --wait");

    char *second[] = {bin, "run", "--server", f.e.rlockd_addr, "--wait", "60s", "limited", "--",
                      "true", NULL};
    pid_t w2 = spawn_ctl(second, err2);
    int status = wait_ctl(w2, WAIT_MS, err2, "the second rlockctl run --wait");
    assert_exit(status, EX_TEMPFAIL, "rlockctl run refused by max_waiters");
    char *text = h_read_file(err2);
    ck_assert_msg(text && strstr(text, "rlockctl: run: lock 'limited' not acquired: a limit"),
                  "rlockctl did not say why");
    free(text);

    h_holder_kill9(&holder);
    status = wait_ctl(w1, WAIT_MS, err1, "the first rlockctl run --wait");
    assert_exit(status, 0, "the first rlockctl run --wait (granted once the holder died)");
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_runjob_limit_is_tempfail};
    return h_run_tests("runjob", 120, tests, H_LEN(tests));
}
