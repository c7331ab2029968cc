/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pty_shell.c — a pseudo-terminal led by a tiny job-control shell (see
 * pty_shell.h). The shell does what an interactive shell does for a
 * foreground job: a process group of its own, the terminal's foreground
 * given to it before it execs (by both sides, whichever runs first), and on
 * a stop the terminal taken back; fg gives it back and sends SIGCONT.
 */
#include "pty_shell.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Write a line to fd (async-signal-safe enough for a forked child: no stdio buffers). */
static void pty_say(int fd, const char *fmt, int a, int b)
{
    char buf[96];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
}

/* The shell, in the forked child; never returns. */
static void pty_shell(const char *slave, int fg_rd, int rep, char *const argv[])
{
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU); /* it takes the terminal back while in the background */
    sigprocmask(SIG_BLOCK, &ttou, NULL);
    int fd = setsid() < 0 ? -1 : open(slave, O_RDWR); /* becomes the controlling terminal */
    if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
        _exit(127);
    pid_t job = fork();
    if (job == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setpgid(0, 0);
        tcsetpgrp(0, getpid());
        close_range(3, ~0U, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(job, job);
    tcsetpgrp(0, job);
    pty_say(rep, "JOB %d\n", (int)job, 0);
    for (;;) {
        int st;
        if (waitpid(job, &st, WUNTRACED) < 0) {
            if (errno == EINTR)
                continue;
            _exit(127);
        }
        if (!WIFSTOPPED(st)) {
            pty_say(rep, "EXIT %d FG %d\n", st, (int)tcgetpgrp(0));
            _exit(0);
        }
        pty_say(rep, "STOPPED %d FG %d\n", WSTOPSIG(st), (int)tcgetpgrp(0));
        tcsetpgrp(0, getpgrp());
        struct pollfd p = {.fd = fg_rd, .events = POLLIN};
        char b;
        if (poll(&p, 1, PTY_WAIT_MS) != 1 || read(fg_rd, &b, 1) != 1) {
            kill(-job, SIGKILL);
            _exit(127);
        }
        tcsetpgrp(0, job);
        kill(-job, SIGCONT);
        pty_say(rep, "CONT\n", 0, 0);
    }
}

void pty_start(struct pty *t, struct h_env *e, char *const argv[])
{
    memset(t, 0, sizeof *t);
    t->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ck_assert_msg(t->master >= 0, "posix_openpt: %s", strerror(errno));
    char slave[128];
    ck_assert_msg(grantpt(t->master) == 0 && unlockpt(t->master) == 0 &&
                      ptsname_r(t->master, slave, sizeof slave) == 0,
                  "pseudo-terminal: %s", strerror(errno));
    int fg[2];
    ck_assert_int_eq(pipe2(fg, O_CLOEXEC), 0);
    h_env_path(e, "shell.report", t->report, sizeof t->report);
    int rep = open(t->report, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ck_assert_int_ge(rep, 0);
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    t->shell = fork();
    ck_assert_msg(t->shell >= 0, "fork: %s", strerror(errno));
    if (t->shell == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
        close(t->master);
        close(fg[1]);
        pty_shell(slave, fg[0], rep, argv);
    }
    close(fg[0]);
    close(rep);
    t->fg_pipe = fg[1];
    char line[64];
    ck_assert_msg(h_wait_line(t->report, "JOB ", t->shell, PTY_WAIT_MS, line, sizeof line) == 0,
                  "the terminal's shell did not start its job");
    t->job = (pid_t)atoi(line + 4);
}

void pty_expect(struct pty *t, const char *text)
{
    int64_t deadline = h_now_ms() + PTY_WAIT_MS;
    for (;;) {
        t->seen[t->nseen] = '\0';
        if (strstr(t->seen, text))
            return;
        ck_assert_msg(h_now_ms() < deadline, "the terminal did not show \"%s\"; it showed:\n%s",
                      text, t->seen);
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        if (poll(&p, 1, 50) != 1)
            continue;
        if (t->nseen > sizeof t->seen / 2) {
            /* A program that redraws the screen writes without end: keep the latest half
             * (the text looked for may straddle the cut: it is on the next screen too). */
            size_t keep = sizeof t->seen / 4;
            memmove(t->seen, t->seen + t->nseen - keep, keep);
            t->nseen = keep;
        }
        ssize_t n = read(t->master, t->seen + t->nseen, sizeof t->seen - 1 - t->nseen);
        ck_assert_msg(n > 0, "the terminal closed before showing \"%s\"; it showed:\n%s", text,
                      t->seen);
        t->nseen += (size_t)n;
    }
}

void pty_forget(struct pty *t)
{
    t->nseen = 0;
}

void pty_type(struct pty *t, char c)
{
    ck_assert_int_eq(write(t->master, &c, 1), 1);
}

void pty_type_line(struct pty *t, const char *text)
{
    size_t n = strlen(text);
    ck_assert_int_eq(write(t->master, text, n), (ssize_t)n);
    pty_type(t, '\n');
}

void pty_report(struct pty *t, const char *prefix, int *a, int *b)
{
    char line[128], fmt[64];
    ck_assert_msg(h_wait_line(t->report, prefix, t->shell, PTY_WAIT_MS, line, sizeof line) == 0,
                  "no \"%s\" from the terminal's shell; the terminal showed:\n%s", prefix,
                  t->seen);
    snprintf(fmt, sizeof fmt, "%s%%d FG %%d", prefix);
    ck_assert_msg(sscanf(line, fmt, a, b) == 2, "the shell reported \"%s\"", line);
}

pid_t pty_foreground(const struct pty *t)
{
    return tcgetpgrp(t->master);
}

void pty_fg(struct pty *t)
{
    ck_assert_int_eq(write(t->fg_pipe, "f", 1), 1);
}

void pty_stop(struct pty *t)
{
    if (h_alive(t->shell))
        kill(t->shell, SIGKILL); /* its job dies with it (PR_SET_PDEATHSIG) */
    h_wait_exit(t->shell, 5000, NULL);
    close(t->fg_pipe);
    close(t->master);
}

