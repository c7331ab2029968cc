/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_runjob.c — `rlockctl run` holds the lock for the whole job (the
 * command and every process it started), against a real rlockd:
 *  - on a loss (the key deleted in Redis), every process of the job is gone
 *    by the time rlockctl exits 79: its process group, and a grandchild
 *    that left it with setsid and ignores SIGTERM (and one that left it and
 *    stops on SIGTERM gets that SIGTERM first, not only a SIGKILL);
 *  - after the command's normal end, the lock is held until what it left
 *    running has exited (another rlockctl run waits meanwhile), unless
 *    --no-wait-children; SIGTERM to rlockctl during that wait stops them;
 *  - under a pseudo-terminal, run by a small job-control shell: Ctrl-C
 *    reaches the command (exit 130); Ctrl-Z stops the command and rlockctl
 *    with the terminal back at the shell, and fg continues both; rlockctl
 *    started by a script (not leading its process group) leaves the terminal
 *    alone and still stops its whole job on a loss;
 *  - an acquire refused by a limit of the daemon exits 75.
 *
 * Without a terminal, rlockctl is started in a session of its own, so it
 * behaves the same whether the suite runs from a terminal or not. Every
 * process a test starts is killed by pid if it is still there at the end.
 */
#include "harness.h"
#include "pty_shell.h"

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
/* The most pids a job writes (its shell's and those of what it starts). */
#define MAX_PIDS 8
/* The exit status of rlockctl run after a loss. */
#define EXIT_LOST 79
/* A short lease: the watchdog renews (and finds a deleted key) every 0.5 s. */
#define TTL "1500ms"

/*
 * Jobs; $0 is the file they append their pids to. JOB_GROUP: the shell and
 * two background sleeps, all in the job's process group. JOB_DETACHED: a
 * grandchild in a session of its own that ignores SIGTERM (only a scan of
 * rlockctl's descendants finds it, and only SIGKILL stops it).
 */
#define JOB_GROUP                                                                             \
    "echo $$ >>\"$0\"; sleep 30 & echo $! >>\"$0\"; sleep 30 & echo $! >>\"$0\"; wait"
#define JOB_DETACHED                                                                          \
    "echo $$ >>\"$0\"; setsid sh -c 'trap \"\" TERM; echo $$ >>\"$0\"; exec sleep 30' \"$0\" & wait"
/*
 * As JOB_DETACHED, but the grandchild handles SIGTERM: it appends "term" to
 * $0.term and exits. Outside the job's group, only rlockctl's scan of its
 * descendants can send it that SIGTERM.
 */
#define JOB_DETACHED_TERM                                                                     \
    "echo $$ >>\"$0\"; setsid sh -c 'trap \"echo term >>\\\"$0.term\\\"; exit 0\" TERM; "          \
    "echo $$ >>\"$0\"; while :; do sleep 0.1; done' \"$0\" & wait"
/* The command leaves a process that ignores SIGTERM and SIGINT (its pid to $0) and exits. */
#define JOB_STUBBORN "sh -c 'trap \"\" TERM INT; echo $$ >>\"$0\"; exec sleep 30' \"$0\" &"
/*
 * The command leaves JOB_STUBBORN's process behind, then runs until SIGTERM
 * and exits 0 on it (both pids to $0: the leftover's, then its own).
 */
#define JOB_ENDS_ON_TERM                                                                      \
    JOB_STUBBORN " echo $$ >>\"$0\"; trap 'exit 0' TERM; while :; do sleep 0.1; done"
/*
 * The command starts a subshell (its pid to $4), writes a marker to $3 and
 * exits at once. The subshell appends "late" to $2 once the file $1 exists
 * (it waits 30 s at the most).
 */
#define JOB_LEFTOVER                                                                          \
    "(i=0; while [ ! -e \"$1\" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "          \
    "echo late >>\"$2\") & echo $! >\"$4\"; echo exiting >\"$3\""

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
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == want,
                  "%s ended with %s, want exit %d", what, h_status_str(status, st, sizeof st),
                  want);
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

/* Read up to max pids from path (one a line) into pids. Returns how many. */
static int read_pids(const char *path, pid_t *pids, int max)
{
    char *text = h_read_file(path);
    int n = 0;
    for (char *p = text, *end; p && n < max; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p || *end != '\n')
            break;
        pids[n++] = (pid_t)v;
        end++;
    }
    free(text);
    return n;
}

/* Wait until path lists n pids (into pids), while watched (rlockctl, a terminal's shell) lives. */
static void wait_pids(const char *path, pid_t *pids, int n, pid_t watched)
{
    int64_t deadline = h_now_ms() + WAIT_MS;
    while (read_pids(path, pids, n) < n) {
        ck_assert_msg(h_alive(watched), "pid %d exited before the job wrote %d pids to %s",
                      (int)watched, n, path);
        ck_assert_msg(h_now_ms() < deadline, "the job did not write %d pids to %s", n, path);
        h_sleep_ms(10);
    }
}

/* The state letter of pid in /proc/PID/stat ('T' stopped, 'Z' zombie), 0 when it is gone. */
static char state_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *text = h_read_file(path);
    const char *end = text ? strrchr(text, ')') : NULL;
    char st = end && end[1] == ' ' ? end[2] : 0;
    free(text);
    return st;
}

/*
 * Assert that none of pids exists any more, not even as a zombie (they are
 * not our children: a zombie would mean that its parent still lives). Any
 * that does is killed first, so that the test leaves nothing behind.
 */
static void assert_gone(const pid_t *pids, int n, const char *when)
{
    char alive[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (kill(pids[i], 0) < 0 && errno == ESRCH)
            continue;
        len += (size_t)snprintf(alive + len, sizeof alive - len, " %d(%c)", (int)pids[i],
                                state_of(pids[i]) ? state_of(pids[i]) : '?');
        if (len >= sizeof alive)
            len = sizeof alive - 1;
        kill(pids[i], SIGKILL);
    }
    ck_assert_msg(alive[0] == '\0', "processes of the job still there %s:%s", when, alive);
}

/* SIGKILL whichever of pids still exist (clean-up; they are not our children). */
static void kill_pids(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++) {
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    }
}

/* `rlockctl run --wait 10s resource -- true` must be granted now: exit 0. */
static void assert_granted(struct h_fixture *f, const char *resource)
{
    char bin[512], err[320], res[128];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f->e, "granted.err", err, sizeof err);
    snprintf(res, sizeof res, "%s", resource);
    char *argv[] = {bin, "run", "--server", f->e.rlockd_addr, "--wait", "10s", res, "--", "true",
                    NULL};
    int status = wait_ctl(spawn_ctl(argv, err), WAIT_MS, err, "rlockctl run --wait 10s");
    assert_exit(status, 0, "rlockctl run --wait 10s after the first one ended");
}

/* Create an empty file (a signal for a job). */
static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    close(fd);
}

/* 1 when the file at path contains text. */
static int file_has(const char *path, const char *text)
{
    char *t = h_read_file(path);
    int has = t && strstr(t, text);
    free(t);
    return has;
}

/*
 * Run job (with its pid file as $0) under rlockctl without a terminal, wait
 * for npids pids, delete the lock's key in Redis and check that rlockctl
 * exits 79 with every one of them already gone; then the lock is free. With
 * term_marker, the file $0.term must then hold it (a process was sent SIGTERM).
 */
static void check_loss_stops_marked(const char *resource, const char *job, int npids,
                                    const char *term_marker)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320], key[256], res[128], script[256];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "job.pids", pidfile, sizeof pidfile);
    h_lock_key(&f.e, resource, key, sizeof key);
    snprintf(res, sizeof res, "%s", resource);
    snprintf(script, sizeof script, "%s", job);
    /* A process that stops on SIGTERM gets a long grace: its trap runs only once its
     * shell is scheduled, which on a busy machine took more than 1 s once. One that
     * ignores SIGTERM is killed after 1 s. */
    char grace[8];
    snprintf(grace, sizeof grace, "%s", term_marker != NULL ? "10s" : "1s");
    char *argv[] = {bin,  "run", "--server", f.e.rlockd_addr, "--ttl", TTL, "--grace", grace, res,
                    "--", "sh",  "-c",       script,          pidfile, NULL};
    pid_t ctl = spawn_ctl(argv, err);
    pid_t pids[MAX_PIDS];
    wait_pids(pidfile, pids, npids, ctl);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);

    int status = wait_ctl(ctl, WAIT_MS, err, "rlockctl run after the loss");
    assert_gone(pids, npids, "when rlockctl exited");
    assert_exit(status, EXIT_LOST, "rlockctl run after the loss");
    if (term_marker != NULL) {
        char term[340];
        snprintf(term, sizeof term, "%s.term", pidfile);
        ck_assert_msg(file_has(term, term_marker),
                      "a detached process of the job that stops on SIGTERM was not sent it "
                      "(killed without a chance to clean up)");
    }
    assert_granted(&f, resource);
    h_fixture_stop(&f);
}

static void check_loss_stops(const char *resource, const char *job, int npids)
{
    check_loss_stops_marked(resource, job, npids, NULL);
}

/* Loss: the job's process group (the shell and its background jobs) is stopped. */
START_TEST(test_runjob_loss_stops_group)
{
    check_loss_stops("lostgroup", JOB_GROUP, 3);
}
END_TEST

/* Loss: a grandchild in a session of its own that ignores SIGTERM is found and killed. */
START_TEST(test_runjob_loss_stops_detached)
{
    check_loss_stops("lostdetached", JOB_DETACHED, 2);
}
END_TEST

/* Loss: a detached grandchild that stops on SIGTERM is sent SIGTERM first, not just SIGKILL. */
START_TEST(test_runjob_loss_terms_detached)
{
    check_loss_stops_marked("lostdetachedterm", JOB_DETACHED_TERM, 2, "term");
}
END_TEST

/*
 * Loss while the command is stopped (SIGSTOP, as a debugger or a terminal's
 * Ctrl-Z would leave it): SIGTERM alone would wait until it is continued, so
 * rlockctl sends SIGCONT after it, and a command that exits on SIGTERM is gone
 * at once, long before the grace period (10 s) would SIGKILL it.
 */
START_TEST(test_runjob_loss_continues_stopped)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320], key[256];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "job.pids", pidfile, sizeof pidfile);
    h_lock_key(&f.e, "loststopped", key, sizeof key);
    char *argv[] = {bin,           "run", "--server", f.e.rlockd_addr, "--ttl", TTL, "--grace",
                    "10s",         "loststopped", "--", "sh", "-c",
                    "trap 'exit 0' TERM; echo $$ >>\"$0\"; while :; do sleep 0.1; done",
                    pidfile,       NULL};
    pid_t ctl = spawn_ctl(argv, err);
    pid_t pid;
    wait_pids(pidfile, &pid, 1, ctl);
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    int64_t until = h_now_ms() + 2000;
    while (state_of(pid) != 'T') {
        ck_assert_msg(h_now_ms() < until, "the command did not stop");
        h_sleep_ms(5);
    }
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    int64_t lost = h_now_ms();
    int status = wait_ctl(ctl, WAIT_MS, err, "rlockctl run after the loss");
    int64_t took = h_now_ms() - lost;
    assert_gone(&pid, 1, "when rlockctl exited");
    assert_exit(status, EXIT_LOST, "rlockctl run after the loss");
    printf("runjob: a stopped command was gone %lld ms after its key was deleted\n",
           (long long)took);
    ck_assert_msg(took < 5000,
                  "a stopped command that exits on SIGTERM took %lld ms to go (grace 10 s): not "
                  "continued after SIGTERM?",
                  (long long)took);
    h_fixture_stop(&f);
}
END_TEST

/* A command that cannot be executed: 127 when it is not found, 126 when it is no program. */
START_TEST(test_runjob_exec_failures)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], notexec[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "rlockd.conf", notexec, sizeof notexec); /* a file, mode 0644 */
    char *missing[] = {bin, "run", "--server", f.e.rlockd_addr, "execfail", "--",
                       "/nonexistent/rlock-no-such-command", NULL};
    int status = wait_ctl(spawn_ctl(missing, err), WAIT_MS, err, "rlockctl run of nothing");
    assert_exit(status, 127, "rlockctl run of a command that does not exist");
    char *noprog[] = {bin, "run", "--server", f.e.rlockd_addr, "execfail", "--", notexec, NULL};
    status = wait_ctl(spawn_ctl(noprog, err), WAIT_MS, err, "rlockctl run of a file");
    assert_exit(status, 126, "rlockctl run of a file that is not executable");
    /* Neither kept the lock. */
    assert_granted(&f, "execfail");
    h_fixture_stop(&f);
}
END_TEST

/*
 * The daemon goes silent (SIGSTOP): no renewal, no answer to the keepalives.
 * The library stops vouching for the lock (UNCERTAIN) a margin before the key
 * can expire, and rlockctl must stop the job then, not only once the session
 * is given up for lost (its timeout, 10 s): the job must be gone before the
 * key's expiry, which the test reads from Redis after the stop. The job dies
 * on SIGTERM; the 250 ms allowance is for this test's own polling on a loaded
 * machine (the library's margin is ttl/100 + 52 ms).
 */
START_TEST(test_runjob_uncertain_stops_job)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320], key[256];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "job.pids", pidfile, sizeof pidfile);
    h_lock_key(&f.e, "silent", key, sizeof key);
    char *argv[] = {bin, "run", "--server", f.e.rlockd_addr, "--ttl", "3s", "--grace", "5s",
                    "silent", "--", "sh", "-c", "echo $$ >>\"$0\"; exec sleep 60", pidfile,
                    NULL};
    pid_t ctl = spawn_ctl(argv, err);
    pid_t job;
    wait_pids(pidfile, &job, 1, ctl);
    h_sleep_ms(1200); /* a renewal or so */
    h_rlockd_sigstop(&f.e);
    int64_t before = h_now_ms();
    long long pttl = h_pttl(f.r, key);
    ck_assert_msg(pttl > 0, "the lock's key has no ttl (%lld)", pttl);
    int64_t expiry = before + pttl; /* no renewal can run any more */
    while (!h_pid_gone(job)) {
        ck_assert_msg(h_now_ms() < expiry + 15000, "the job still runs 15 s after its lock's key "
                      "expired (rlockd silent)");
        h_sleep_ms(2);
    }
    int64_t gone = h_now_ms();
    printf("runjob: the job was gone %lld ms before its lock's key expired\n",
           (long long)(expiry - gone));
    int status = wait_ctl(ctl, WAIT_MS, err, "rlockctl run with a silent daemon");
    h_rlockd_sigcont(&f.e);
    assert_exit(status, EXIT_LOST, "rlockctl run whose lock became uncertain");
    char *text = h_read_file(err);
    ck_assert_msg(text != NULL && strstr(text, "validity ran out") != NULL,
                  "rlockctl did not say the lock's validity ran out");
    free(text);
    ck_assert_msg(gone <= expiry + 250,
                  "the job ran %lld ms past its lock's key expiry: stopped when the lock was "
                  "lost, not when it became uncertain?",
                  (long long)(gone - expiry));
    h_fixture_stop(&f);
}
END_TEST

/* The files of a JOB_LEFTOVER job, in the env's dir. */
struct leftover {
    char go[320];     /* created by the test: the leftover may write */
    char late[320];   /* where it writes "late" */
    char marker[320]; /* the command is about to exit */
    char pidf[320];   /* the leftover's pid */
    char out[320];    /* what a second rlockctl run saw of late */
    pid_t pid;
};

/* Start `rlockctl run [extra] resource -- sh -c JOB_LEFTOVER` and wait for the command's end. */
static pid_t start_leftover(struct h_fixture *f, struct leftover *lo, const char *resource,
                            const char *extra, const char *err)
{
    char bin[512], res[128], opt[32];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f->e, "go", lo->go, sizeof lo->go);
    h_env_path(&f->e, "late", lo->late, sizeof lo->late);
    h_env_path(&f->e, "marker", lo->marker, sizeof lo->marker);
    h_env_path(&f->e, "leftover.pid", lo->pidf, sizeof lo->pidf);
    h_env_path(&f->e, "out", lo->out, sizeof lo->out);
    snprintf(res, sizeof res, "%s", resource);
    snprintf(opt, sizeof opt, "%s", extra ? extra : "--grace=1s");
    char *argv[] = {bin,        "run",    "--server",  f->e.rlockd_addr, opt,   res,  "--",
                    "sh",       "-c",     JOB_LEFTOVER, "sh",            lo->go, lo->late,
                    lo->marker, lo->pidf, NULL};
    pid_t ctl = spawn_ctl(argv, err);
    char line[64];
    ck_assert_msg(h_wait_line(lo->marker, "exiting", ctl, WAIT_MS, line, sizeof line) == 0,
                  "the command did not run to its end");
    wait_pids(lo->pidf, &lo->pid, 1, ctl);
    return ctl;
}

/* A second `rlockctl run --wait 10s resource` that copies the leftover's file into out. */
static pid_t start_reader(struct h_fixture *f, struct leftover *lo, const char *resource,
                          const char *err)
{
    char bin[512], res[128];
    h_bin("rlockctl", bin, sizeof bin);
    snprintf(res, sizeof res, "%s", resource);
    char *argv[] = {bin, "run", "--server", f->e.rlockd_addr, "--wait", "10s", res, "--", "sh",
                    "-c", "cat \"$0\" >\"$1\" 2>/dev/null; true", lo->late, lo->out, NULL};
    return spawn_ctl(argv, err);
}

/*
 * The command exits, leaving a subshell running: the lock stays held (a
 * second rlockctl run waits for it) until the subshell has written "late"
 * and exited; rlockctl then exits with the command's status.
 */
START_TEST(test_runjob_leftovers_hold_lock)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct leftover lo;
    char err1[320], err2[320], key[256];
    h_env_path(&f.e, "first.err", err1, sizeof err1);
    h_env_path(&f.e, "second.err", err2, sizeof err2);
    h_lock_key(&f.e, "leftover", key, sizeof key);
    pid_t first = start_leftover(&f, &lo, "leftover", NULL, err1);
    pid_t second = start_reader(&f, &lo, "leftover", err2);

    wait_waiters(&f, 1, second, "the second rlockctl run, while the leftover runs,");
    ck_assert_msg(h_alive(first), "rlockctl exited while the command's leftover still ran");
    ck_assert_int_eq(h_key_exists(f.r, key), 1);
    touch(lo.go);

    assert_exit(wait_ctl(first, WAIT_MS, err1, "the first rlockctl run"), 0,
                "the first rlockctl run");
    assert_gone(&lo.pid, 1, "when the first rlockctl exited");
    assert_exit(wait_ctl(second, WAIT_MS, err2, "the second rlockctl run"), 0,
                "the second rlockctl run");
    ck_assert_msg(file_has(lo.out, "late"),
                  "the second command ran before the first command's leftover had finished");
    h_fixture_stop(&f);
}
END_TEST

/*
 * --no-wait-children: the lock goes with the command. The second rlockctl
 * run gets it and ends while the leftover still waits for its signal.
 */
START_TEST(test_runjob_no_wait_children)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct leftover lo;
    char err1[320], err2[320];
    h_env_path(&f.e, "first.err", err1, sizeof err1);
    h_env_path(&f.e, "second.err", err2, sizeof err2);
    pid_t first = start_leftover(&f, &lo, "nowait", "--no-wait-children", err1);
    assert_exit(wait_ctl(first, WAIT_MS, err1, "rlockctl run --no-wait-children"), 0,
                "rlockctl run --no-wait-children");
    pid_t second = start_reader(&f, &lo, "nowait", err2);
    int status = wait_ctl(second, WAIT_MS, err2, "the second rlockctl run");
    int early = !file_has(lo.out, "late");
    int left_running = kill(lo.pid, 0) == 0;
    kill_pids(&lo.pid, 1);
    assert_exit(status, 0, "the second rlockctl run");
    ck_assert_msg(early, "the second command waited for the first command's leftover");
    ck_assert_msg(left_running, "the leftover did not survive rlockctl --no-wait-children");
    h_fixture_stop(&f);
}
END_TEST

/*
 * SIGTERM to rlockctl while it waits for a leftover that ignores SIGTERM:
 * the leftover is killed after --grace, the lock released, and rlockctl
 * exits with the command's status.
 */
START_TEST(test_runjob_sigterm_stops_leftovers)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320], key[256];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "job.pids", pidfile, sizeof pidfile);
    h_lock_key(&f.e, "termleft", key, sizeof key);
    char *argv[] = {bin,  "run", "--server", f.e.rlockd_addr, "--grace", "1s", "termleft",
                    "--", "sh",  "-c",       JOB_STUBBORN,    pidfile,   NULL};
    pid_t ctl = spawn_ctl(argv, err);
    pid_t pid;
    wait_pids(pidfile, &pid, 1, ctl);
    ck_assert_int_eq(kill(ctl, SIGTERM), 0);
    int status = wait_ctl(ctl, WAIT_MS, err, "rlockctl run after SIGTERM");
    assert_gone(&pid, 1, "when rlockctl exited");
    assert_exit(status, 0, "rlockctl run (the command exited 0) after SIGTERM");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_fixture_stop(&f);
}
END_TEST

/*
 * SIGTERM while the command runs: passed on, the command exits 0 on it, and
 * what it left running ignores it. rlockctl must not wait for that leftover
 * for as long as it likes (the signal asked the job to stop): it stops it
 * (SIGKILL after --grace), releases and exits 0. Before, a SIGTERM that came
 * just before the command's end (test_runjob_sigterm_stops_leftovers on a
 * busy machine) left rlockctl waiting 30 s for the leftover's sleep.
 */
START_TEST(test_runjob_sigterm_while_command_runs)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char bin[512], err[320], pidfile[320], key[256];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "rlockctl.err", err, sizeof err);
    h_env_path(&f.e, "job.pids", pidfile, sizeof pidfile);
    h_lock_key(&f.e, "termrun", key, sizeof key);
    char *argv[] = {bin,  "run", "--server", f.e.rlockd_addr, "--grace", "1s", "termrun",
                    "--", "sh",  "-c",       JOB_ENDS_ON_TERM, pidfile,  NULL};
    pid_t ctl = spawn_ctl(argv, err);
    pid_t pids[2];
    wait_pids(pidfile, pids, 2, ctl);
    ck_assert_int_eq(kill(ctl, SIGTERM), 0);
    int status = wait_ctl(ctl, WAIT_MS, err, "rlockctl run after SIGTERM to a running command");
    assert_gone(pids, 2, "when rlockctl exited");
    assert_exit(status, 0, "rlockctl run (the command exited 0 on SIGTERM)");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    h_fixture_stop(&f);
}
END_TEST

/* --- under a pseudo-terminal (pty_shell.h) ------------------------------ */

/*
 * A job for a terminal: writes its pid to $0 and READY, reads a line from
 * the terminal (only the terminal's foreground may) and shows it, then
 * waits in another read. A read, not a sleep: dash catches SIGINT in
 * `sh -c`, and a Ctrl-C that comes while it forks a command is lost by the
 * child.
 */
#define TTY_JOB "echo $$ >\"$0\"; echo READY; read line; echo \"GOT $line\"; read line"

/*
 * Start `rlockctl run resource -- sh -c TTY_JOB` as the job of a terminal's
 * shell and wait until it is READY. Returns the command's pid.
 */
static pid_t start_tty_job(struct pty *t, struct h_fixture *f, const char *resource)
{
    char bin[512], pidfile[320], res[128];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f->e, "job.pid", pidfile, sizeof pidfile);
    snprintf(res, sizeof res, "%s", resource);
    char *argv[] = {bin, "run", "--server", f->e.rlockd_addr, res, "--", "sh", "-c", TTY_JOB,
                    pidfile, NULL};
    pty_start(t, &f->e, argv);
    pty_expect(t, "READY");
    pid_t cmd;
    wait_pids(pidfile, &cmd, 1, t->shell);
    return cmd;
}

/*
 * Started by a job-control shell on a terminal: the command gets the
 * terminal's foreground, Ctrl-C reaches it (exit 130), and rlockctl takes
 * the terminal back before it exits; the lock is released.
 */
START_TEST(test_runjob_tty_ctrl_c)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "ttyint", key, sizeof key);
    struct pty t;
    pid_t cmd = start_tty_job(&t, &f, "ttyint");
    ck_assert_msg(pty_foreground(&t) == cmd,
                  "the terminal's foreground is %d, not the command's group %d",
                  (int)pty_foreground(&t), (int)cmd);
    pty_type_line(&t, "hello");
    pty_expect(&t, "GOT hello");
    ck_assert_int_eq(h_key_exists(f.r, key), 1);

    pty_type(&t, '\003');
    int status, fg;
    pty_report(&t, "EXIT ", &status, &fg);
    assert_exit(status, 128 + SIGINT, "rlockctl run after Ctrl-C");
    ck_assert_msg(fg == t.job, "rlockctl left the terminal to %d, not to its own group %d", fg,
                  (int)t.job);
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    assert_gone(&cmd, 1, "after rlockctl exited");
    pty_stop(&t);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Ctrl-Z stops the command, and rlockctl with it (the shell sees its job
 * stopped by SIGTSTP and has the terminal back); fg continues rlockctl,
 * which gives the terminal back to the command and continues it.
 */
START_TEST(test_runjob_tty_ctrl_z)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "ttystop", key, sizeof key);
    struct pty t;
    pid_t cmd = start_tty_job(&t, &f, "ttystop");

    pty_type(&t, '\032');
    int sig, fg;
    pty_report(&t, "STOPPED ", &sig, &fg);
    ck_assert_msg(sig == SIGTSTP, "rlockctl stopped by signal %d, not SIGTSTP", sig);
    ck_assert_msg(fg == t.job, "rlockctl stopped with the terminal at %d, not at its group %d",
                  fg, (int)t.job);
    ck_assert_msg(state_of(cmd) == 'T', "the command is in state %c, not stopped", state_of(cmd));

    pty_fg(&t);
    int64_t deadline = h_now_ms() + WAIT_MS;
    while ((pty_foreground(&t) != cmd || state_of(cmd) == 'T') && h_now_ms() < deadline)
        h_sleep_ms(10);
    ck_assert_msg(pty_foreground(&t) == cmd,
                  "after fg the terminal's foreground is %d, not the command %d",
                  (int)pty_foreground(&t), (int)cmd);
    ck_assert_msg(state_of(cmd) != 'T', "the command was not continued after fg");
    pty_type_line(&t, "again");
    pty_expect(&t, "GOT again");
    ck_assert_int_eq(h_key_exists(f.r, key), 1);

    pty_type(&t, '\003');
    int status;
    pty_report(&t, "EXIT ", &status, &fg);
    assert_exit(status, 128 + SIGINT, "rlockctl run after Ctrl-Z, fg, Ctrl-C");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    pty_stop(&t);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Write a script that runs `rlockctl run run_args -- sh -c job pidfile`,
 * then writes "RC=<its status>" to rcfile. Its SIGINT trap keeps it alive
 * through a Ctrl-C, long enough to write that.
 */
static void write_script(const char *path, const char *bin, const char *addr,
                         const char *run_args, const char *job, const char *pidfile,
                         const char *rcfile)
{
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp,
            "trap 'echo script: SIGINT' INT\n"
            "'%s' run --server '%s' %s -- sh -c '%s' '%s'\n"
            "echo \"RC=$?\" >'%s'\n",
            bin, addr, run_args, job, pidfile, rcfile);
    ck_assert_int_eq(fclose(fp), 0);
}

/* Start such a script as the job of a terminal's shell; pidfile and rcfile get their paths. */
static void start_script(struct pty *t, struct h_fixture *f, const char *run_args, const char *job,
                         char pidfile[320], char rcfile[320])
{
    char bin[512], script[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f->e, "script.sh", script, sizeof script);
    h_env_path(&f->e, "job.pids", pidfile, 320);
    h_env_path(&f->e, "rc", rcfile, 320);
    write_script(script, bin, f->e.rlockd_addr, run_args, job, pidfile, rcfile);
    char *argv[] = {"/bin/sh", script, NULL};
    pty_start(t, &f->e, argv);
}

/*
 * A script run on the terminal runs rlockctl: rlockctl does not lead its
 * process group, so it leaves the terminal to the script's group, which
 * its command shares: the command reads the terminal, and Ctrl-C reaches
 * it there (exit 130).
 */
START_TEST(test_runjob_tty_script_ctrl_c)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char pidfile[320], rcfile[320], key[256], line[64];
    h_lock_key(&f.e, "scriptint", key, sizeof key);
    struct pty t;
    start_script(&t, &f, "scriptint", TTY_JOB, pidfile, rcfile);
    pty_expect(&t, "READY");
    ck_assert_msg(pty_foreground(&t) == t.job,
                  "the terminal's foreground is %d, not the script's group %d",
                  (int)pty_foreground(&t), (int)t.job);
    pty_type_line(&t, "hello");
    pty_expect(&t, "GOT hello");

    pty_type(&t, '\003');
    ck_assert_msg(h_wait_line(rcfile, "RC=", t.shell, WAIT_MS, line, sizeof line) == 0,
                  "the script did not finish after Ctrl-C; the terminal showed:\n%s", t.seen);
    ck_assert_str_eq(line, "RC=130");
    ck_assert_int_eq(h_key_exists(f.r, key), 0);
    pty_stop(&t);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Inside a script's job on a terminal (the job shares rlockctl's group, so
 * no process group can be signalled as a whole): a loss still stops every
 * process of the job, the detached one too, and only those.
 */
START_TEST(test_runjob_tty_script_loss)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char pidfile[320], rcfile[320], key[256], line[64];
    h_lock_key(&f.e, "scriptlost", key, sizeof key);
    struct pty t;
    start_script(&t, &f, "--ttl " TTL " --grace 1s scriptlost",
                 "echo $$ >>\"$0\"; sleep 30 & echo $! >>\"$0\"; "
                 "setsid sh -c \"trap \\\"\\\" TERM; echo \\$\\$ >>\\\"\\$0\\\"; exec sleep 30\" "
                 "\"$0\" & wait",
                 pidfile, rcfile);
    pid_t pids[MAX_PIDS];
    wait_pids(pidfile, pids, 3, t.shell);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);

    int found = h_wait_line(rcfile, "RC=", t.shell, WAIT_MS, line, sizeof line);
    if (found != 0)
        kill_pids(pids, 3);
    ck_assert_msg(found == 0, "the script did not go on after the loss; the terminal showed:\n%s",
                  t.seen);
    assert_gone(pids, 3, "when rlockctl exited");
    ck_assert_str_eq(line, "RC=79");
    pty_stop(&t);
    assert_granted(&f, "scriptlost");
    h_fixture_stop(&f);
}
END_TEST

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
    const TTest *tests[] = {
        test_runjob_loss_stops_group,    test_runjob_loss_stops_detached,
        test_runjob_loss_terms_detached,
        test_runjob_leftovers_hold_lock, test_runjob_no_wait_children,
        test_runjob_sigterm_stops_leftovers, test_runjob_sigterm_while_command_runs,
        test_runjob_uncertain_stops_job, test_runjob_loss_continues_stopped,
        test_runjob_exec_failures,       test_runjob_tty_ctrl_c,
        test_runjob_tty_ctrl_z,          test_runjob_tty_script_ctrl_c,
        test_runjob_tty_script_loss,     test_runjob_limit_is_tempfail,
    };
    return h_run_tests("runjob", 120, tests, H_LEN(tests));
}
