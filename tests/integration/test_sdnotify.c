/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sdnotify.c — the test plays systemd: it binds a NOTIFY_SOCKET
 * datagram socket, starts rlockd with it and WATCHDOG_USEC, and reads what
 * a Type=notify service manager would: READY=1 (with STATUS= and Redis
 * ready), STATUS= following the session and lock counts, WATCHDOG=1 pings,
 * RELOADING=1 with MONOTONIC_USEC= then READY=1 around a SIGHUP, and
 * STOPPING=1 on SIGTERM before a clean exit. Also: the abstract-namespace
 * form of NOTIFY_SOCKET ("@name"), and a WATCHDOG_PID naming another process
 * (the watchdog is then not ours to ping).
 */
#include "harness.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The manager's end: a bound datagram socket, and a count of the pings read so far. */
struct manager {
    int fd;
    char name[128]; /* NOTIFY_SOCKET's value */
    int pings;      /* WATCHDOG=1 datagrams seen */
};

/* Bind m to the path (or, with '@' first, the abstract name) in name. */
static void manager_bind(struct manager *m, const char *name)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    ck_assert_uint_lt(n, sizeof sa.sun_path);
    memcpy(sa.sun_path, name, n);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    m->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(m->fd, 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    ck_assert_msg(bind(m->fd, (struct sockaddr *)&sa, len) == 0, "bind %s: %s", name,
                  strerror(errno));
}

/*
 * Read datagrams until one contains needle, at most timeout_ms; it goes to buf.
 * Pings are counted on the way. 0 when found, -1 on timeout.
 */
static int manager_wait(struct manager *m, const char *needle, int timeout_ms, char *buf,
                        size_t len)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = m->fd, .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        ck_assert_int_ge(n, 0);
        if (n == 0)
            return -1;
        ssize_t k = recv(m->fd, buf, len - 1, 0);
        ck_assert_msg(k >= 0, "recv: %s", strerror(errno));
        buf[k] = '\0';
        if (strcmp(buf, "WATCHDOG=1") == 0)
            m->pings++;
        if (strstr(buf, needle) != NULL)
            return 0;
    }
}

/* manager_wait, failing the test with what when nothing came. */
static void expect(struct manager *m, const char *needle, int timeout_ms, char *buf, size_t len,
                   const char *what)
{
    ck_assert_msg(manager_wait(m, needle, timeout_ms, buf, len) == 0,
                  "%s: no datagram with \"%s\" within %d ms", what, needle, timeout_ms);
}

/* Restart e's rlockd with NOTIFY_SOCKET and the watchdog variables as given (NULL: unset). */
static void start_managed(struct h_env *e, const struct manager *m, const char *watchdog_usec,
                          const char *watchdog_pid)
{
    ck_assert_int_eq(h_rlockd_signal(e, SIGTERM), 0);
    setenv("NOTIFY_SOCKET", m->name, 1);
    if (watchdog_usec != NULL)
        setenv("WATCHDOG_USEC", watchdog_usec, 1);
    if (watchdog_pid != NULL)
        setenv("WATCHDOG_PID", watchdog_pid, 1);
    int rc = h_rlockd_start(e);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    ck_assert_msg(rc == 0, "rlockd did not start under the test's NOTIFY_SOCKET");
}

static uint64_t monotonic_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

START_TEST(test_notify_lifecycle)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    struct manager m;
    char path[320], msg[512];
    manager_bind(&m, h_env_path(&e, "notify.sock", path, sizeof path));
    start_managed(&e, &m, "300000", NULL); /* 300 ms: a ping every 150 ms */

    expect(&m, "READY=1", 10000, msg, sizeof msg, "start");
    ck_assert_msg(strstr(msg, "\nSTATUS=") != NULL, "READY=1 without STATUS=: %s", msg);
    ck_assert_msg(strstr(msg, "Redis 2/2 ready") != NULL, "READY=1 before Redis: %s", msg);

    int before = m.pings;
    int64_t t0 = h_now_ms();
    while (h_now_ms() - t0 < 2000)
        manager_wait(&m, "\n(none)", 100, msg, sizeof msg);
    printf("sdnotify: %d WATCHDOG=1 in 2 s at WATCHDOG_USEC=300000\n", m.pings - before);
    ck_assert_msg(m.pings - before >= 4, "only %d WATCHDOG=1 in 2 s (WATCHDOG_USEC 300 ms)",
                  m.pings - before);

    /* STATUS= follows the sessions and locks. */
    struct rlock_client *a = h_client_or_fail(&e, NULL);
    struct rlock_client *b = h_client_or_fail(&e, NULL);
    struct rlock_lock *l = h_acquire_ok(a, "notify-1", NULL);
    expect(&m, "STATUS=2 sessions, 1 lock held, 0 waiting; Redis 2/2 ready", 6000, msg,
           sizeof msg, "status");

    /* SIGHUP: RELOADING=1 with MONOTONIC_USEC= on our clock, then READY=1. */
    uint64_t hup_at = monotonic_usec();
    ck_assert_int_eq(kill(e.rlockd_pid, SIGHUP), 0);
    expect(&m, "RELOADING=1", 5000, msg, sizeof msg, "reload");
    const char *mono = strstr(msg, "\nMONOTONIC_USEC=");
    ck_assert_msg(mono != NULL, "RELOADING=1 without MONOTONIC_USEC=: %s", msg);
    uint64_t usec = strtoull(mono + strlen("\nMONOTONIC_USEC="), NULL, 10);
    ck_assert_msg(usec >= hup_at && usec <= monotonic_usec(),
                  "MONOTONIC_USEC=%" PRIu64 " is not between SIGHUP (%" PRIu64 ") and now", usec,
                  hup_at);
    ck_assert_msg(strstr(msg, "READY=1") == NULL, "READY=1 in the RELOADING=1 datagram");
    expect(&m, "READY=1", 5000, msg, sizeof msg, "end of reload");
    ck_assert_msg(strstr(msg, "STATUS=2 sessions") != NULL, "READY=1 after reload: %s", msg);

    /* SIGTERM: STOPPING=1, then a clean exit. */
    pid_t pid = e.rlockd_pid;
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    expect(&m, "STOPPING=1", 5000, msg, sizeof msg, "shutdown");
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, 10000, &status) == 0, "rlockd did not exit after SIGTERM");
    e.rlockd_pid = 0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockd ended with %#x", status);

    rlock_lock_free(l);
    rlock_close(a);
    rlock_close(b);
    close(m.fd);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_notify_abstract_other_watchdog)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    struct manager m;
    char name[128], msg[512];
    snprintf(name, sizeof name, "@rlockd-itest-%d-notify", (int)getpid());
    manager_bind(&m, name);
    /* WATCHDOG_PID names another process: that watchdog is not rlockd's to feed. */
    start_managed(&e, &m, "200000", "1");
    expect(&m, "READY=1", 10000, msg, sizeof msg, "start on an abstract socket");
    int64_t t0 = h_now_ms();
    while (h_now_ms() - t0 < 1500)
        manager_wait(&m, "\n(none)", 100, msg, sizeof msg);
    ck_assert_msg(m.pings == 0, "%d WATCHDOG=1 for a watchdog of pid 1", m.pings);
    close(m.fd);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_notify_lifecycle, test_notify_abstract_other_watchdog};
    return h_run_tests("sdnotify", 120, tests, H_LEN(tests));
}
