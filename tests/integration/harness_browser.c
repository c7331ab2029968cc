/* SPDX-License-Identifier: BSD-3-Clause */
/* harness_browser.c — see harness_browser.h. */
#include "harness_browser.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BROWSER_PY
#error "BROWSER_PY must name tests/integration/browser.py"
#endif
#define PYTHON "/usr/bin/python3"

/* Read browser.py's next answer line into b->buf (within the deadline); 0 for "ok", -1 for
 * "err"; fails the test when none comes. */
static int answer(struct h_browser *b)
{
    int64_t deadline = h_now_ms() + H_BROWSER_DEADLINE_MS;
    for (;;) {
        char *nl = memchr(b->ahead, '\n', b->have);
        if (nl != NULL) {
            size_t len = (size_t)(nl - b->ahead);
            ck_assert_msg(len < sizeof b->buf, "browser.py: answer line too long");
            memcpy(b->buf, b->ahead, len);
            b->buf[len] = '\0';
            b->have -= len + 1;
            memmove(b->ahead, nl + 1, b->have);
            break;
        }
        ck_assert_msg(b->have < sizeof b->ahead, "browser.py: answer line too long");
        int64_t left = deadline - h_now_ms();
        ck_assert_msg(left > 0, "browser.py did not answer within %d ms", H_BROWSER_DEADLINE_MS);
        struct pollfd p = {.fd = b->from, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t n = read(b->from, b->ahead + b->have, sizeof b->ahead - b->have);
        if (n < 0 && errno == EINTR)
            continue;
        ck_assert_msg(n > 0, "browser.py ended (see chromedriver.log in the env's dir)");
        b->have += (size_t)n;
    }
    int ok = strncmp(b->buf, "ok", 2) == 0;
    ck_assert_msg(ok || strncmp(b->buf, "err", 3) == 0, "browser.py said: %s", b->buf);
    size_t skip = ok ? 2 : 3;
    if (b->buf[skip] == ' ')
        skip++;
    memmove(b->buf, b->buf + skip, strlen(b->buf + skip) + 1);
    return ok ? 0 : -1;
}

void h_browser_start(struct h_browser *b, struct h_env *e)
{
    memset(b, 0, sizeof *b);
    int in[2], out[2];
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* browser.py then ends its group */
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        char *argv[] = {PYTHON, BROWSER_PY, e->dir, NULL};
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* either of the two calls wins the race; both ask the same */
    close(in[0]);
    close(out[1]);
    b->pid = pid;
    b->to = in[1];
    b->from = out[0];
    ck_assert_msg(answer(b) == 0, "headless Chromium: %s", b->buf);
}

static int command(struct h_browser *b, const char *fmt, va_list ap)
{
    char line[8192];
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    ck_assert_msg(n > 0 && (size_t)n < sizeof line - 1 && strchr(line, '\n') == NULL,
                  "browser command too long or with a newline");
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(b->to, line + off, (size_t)(n - off));
        ck_assert_msg(w > 0 || errno == EINTR, "browser.py: write: %s", strerror(errno));
        off += w > 0 ? (int)w : 0;
    }
    return answer(b);
}

const char *h_browser(struct h_browser *b, const char *fmt, ...)
{
    char what[96];
    snprintf(what, sizeof what, "%s", fmt);
    va_list ap;
    va_start(ap, fmt);
    int rc = command(b, fmt, ap);
    va_end(ap);
    ck_assert_msg(rc == 0, "browser (%s...): %s", what, b->buf);
    return b->buf;
}

int h_browser_try(struct h_browser *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = command(b, fmt, ap);
    va_end(ap);
    return rc;
}

void h_browser_stop(struct h_browser *b)
{
    if (b->pid <= 0)
        return;
    char line[] = "quit\n";
    if (write(b->to, line, sizeof line - 1) == (ssize_t)(sizeof line - 1))
        (void)answer(b); /* "ok bye": the group is being ended */
    int status;
    if (h_wait_exit(b->pid, 20000, &status) != 0)
        kill(-b->pid, SIGKILL);
    kill(-b->pid, SIGKILL); /* whatever of Chromium is left; nothing when all went */
    h_wait_exit(b->pid, 5000, &status);
    close(b->to);
    close(b->from);
    b->pid = 0;
}
