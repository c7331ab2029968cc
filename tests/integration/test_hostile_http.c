/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_hostile_http.c — the metrics endpoint against peers that hold no
 * token (docs/operations.md, "Securing rlockd"), real rlockd and
 * redis-server processes:
 *
 *  - protocol: HEAD answers carry Content-Length and no body; two
 *    Content-Length values that disagree, a body on a GET, a missing Host,
 *    a version that is not HTTP/1.0 or 1.1 and a method other than GET or
 *    HEAD are refused with the right status, never echoed back wrong;
 *  - sizes: a 64 MiB header line and a 256 MiB body are refused quickly,
 *    the daemon's memory and CPU stay small, and a lock client's Ping p99
 *    stays near its value without them (printed; only a generous bound is
 *    asserted);
 *  - descriptors: under `ulimit -n 128` (prlimit on the running daemon),
 *    200 connections dribbling a byte a second: the daemon does not spin,
 *    writes a bounded number of log lines, keeps its lock renewed, lets a
 *    new session in, and serves /healthz again once they are gone; with a
 *    connection cap above the descriptor limit, the descriptors kept for
 *    sessions and Redis stop them just the same.
 */
#include "harness.h"
#include "harness_raw.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define REPLY_MS 5000
#define PING_EVERY_MS 5
/* Generous: a loaded machine stays well below it; a daemon busy parsing a huge header does not. */
#define PING_P99_MAX_US 250000

/* Send req raw to e's endpoint and expect status; returns the reply (free with h_http_free). */
static struct h_http_reply expect_raw(struct h_env *e, const char *req, int status)
{
    struct h_http_reply r;
    ck_assert_msg(h_http_request(e->metrics_sock, req, strlen(req), REPLY_MS, &r) == 0,
                  "%.40s: %s", req, r.error);
    ck_assert_msg(r.status == status, "%.60s: answered %d, want %d:\n%s", req, r.status, status,
                  r.head);
    ck_assert_msg(strncmp(r.head, "HTTP/1.1 ", 9) == 0, "status line \"%.30s\"", r.head);
    return r;
}

static void expect_status(struct h_env *e, const char *req, int status)
{
    struct h_http_reply r = expect_raw(e, req, status);
    h_http_free(&r);
}

START_TEST(test_protocol)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    /* HEAD: the length GET would have, and no body. */
    struct h_http_reply r = expect_raw(&e, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200);
    ck_assert_msg(strstr(r.head, "\r\nContent-Length: 3") != NULL, "HEAD without the length:\n%s",
                  r.head);
    ck_assert_str_eq(r.body, "");
    h_http_free(&r);
    r = expect_raw(&e, "GET /healthz?probe=1 HTTP/1.1\r\nHost: x\r\n\r\n", 200);
    ck_assert_str_eq(r.body, "ok\n");
    h_http_free(&r);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                      "Content-Length: 0\r\n\r\n", 200);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                      "Content-Length: 5\r\n\r\nhello", 400);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "0\r\n\r\n", 413);
    expect_status(&e, "GET /healthz HTTP/1.1\r\n\r\n", 400); /* no Host */
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400);
    expect_status(&e, "GET /healthz HTTP/1.0\r\n\r\n", 200);
    r = expect_raw(&e, "GET /healthz HTTP/1.1000\r\nHost: x\r\n\r\n", 400);
    ck_assert_msg(strstr(r.head, "1.-") == NULL, "a version echoed wrong:\n%s", r.head);
    h_http_free(&r);
    expect_status(&e, "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505);
    expect_status(&e, "GET /healthz  HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400);
    expect_status(&e, "GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400);
    r = expect_raw(&e, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", 405);
    ck_assert_msg(strstr(r.head, "\r\nAllow: GET, HEAD") != NULL, "405 without Allow:\n%s",
                  r.head);
    h_http_free(&r);
    expect_status(&e, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

/* --- sizes ------------------------------------------------------------------------------ */

/* A nonblocking connection to the unix socket at path; fails the test when it cannot. */
static int connect_unix(const char *path)
{
    struct sockaddr_un sa;
    h_unix_sockaddr(&sa, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect %s: %s", path,
                  strerror(errno));
    return fd;
}

/*
 * Send head, then fill bytes of 'a' (at most total), until the daemon answers or closes;
 * return the status it answered (0 when none came within deadline_ms).
 */
static int stream_until_answer(const char *path, const char *head, size_t total, int deadline_ms)
{
    int fd = connect_unix(path);
    int64_t end = h_now_ms() + deadline_ms;
    static char chunk[1 << 16];
    memset(chunk, 'a', sizeof chunk);
    size_t head_len = strlen(head), sent = 0;
    char reply[256];
    size_t got = 0;
    int peer_closed = 0;
    while (h_now_ms() < end && got < 12) {
        short want = POLLIN | (!peer_closed && sent < head_len + total ? POLLOUT : 0);
        struct pollfd p = {.fd = fd, .events = want};
        if (poll(&p, 1, 100) <= 0)
            continue;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t k = recv(fd, reply + got, sizeof reply - 1 - got, 0);
            if (k <= 0)
                break;
            got += (size_t)k;
            continue;
        }
        const char *src = sent < head_len ? head + sent : chunk;
        size_t n = sent < head_len ? head_len - sent : sizeof chunk;
        if (sent >= head_len && n > head_len + total - sent)
            n = head_len + total - sent;
        ssize_t k = send(fd, src, n, MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            peer_closed = 1; /* the daemon closed its side; the answer may still be readable */
        else if (k > 0)
            sent += (size_t)k;
    }
    close(fd);
    reply[got] = '\0';
    int status = 0;
    if (sscanf(reply, "HTTP/1.1 %d", &status) != 1)
        status = 0;
    printf("hostile_http: %zu bytes sent, answered \"%.40s\"\n", sent, reply);
    return status;
}


START_TEST(test_sizes)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    struct h_pinger pg;
    h_pinger_start(&pg, &e, PING_EVERY_MS);
    h_sleep_ms(500);
    struct h_ping_figures quiet = h_pinger_stop(&pg, "hostile_http: no hostile load");
    h_pinger_start(&pg, &e, PING_EVERY_MS);
    long rss0 = h_proc_rss_kib(e.rlockd_pid);
    int64_t cpu0 = h_proc_cpu_ms(e.rlockd_pid), t0 = h_now_ms();
    int st = stream_until_answer(e.metrics_sock, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: ",
                                 (size_t)64 << 20, 20000);
    ck_assert_msg(st == 431, "a 64 MiB header line answered %d, want 431", st);
    st = stream_until_answer(e.metrics_sock,
                             "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n",
                             (size_t)256 << 20, 20000);
    ck_assert_msg(st == 413, "a 256 MiB body answered %d, want 413", st);
    h_sleep_ms(500); /* the refusals were quick: give the pinger time to count */
    long rss = h_proc_rss_kib(e.rlockd_pid) - rss0;
    int64_t cpu = h_proc_cpu_ms(e.rlockd_pid) - cpu0, took = h_now_ms() - t0;
    struct h_ping_figures loud = h_pinger_stop(&pg, "hostile_http: while huge requests come");
    printf("hostile_http: both refused in %lld ms; rlockd used %lld ms of CPU, RSS grew %ld KiB; "
           "ping p99 %lld us quiet, %lld us under the load\n",
           (long long)took, (long long)cpu, rss, (long long)quiet.p99_us, (long long)loud.p99_us);
    ck_assert_msg(rss0 > 0 && rss < 32 * 1024,
                  "rlockd's RSS grew by %ld KiB: the request was buffered", rss);
    ck_assert_msg(cpu < 3000, "rlockd used %lld ms of CPU on two refused requests",
                  (long long)cpu);
    ck_assert_msg(loud.p99_us < PING_P99_MAX_US, "ping p99 %lld us while huge requests came",
                  (long long)loud.p99_us);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

/* --- descriptors ------------------------------------------------------------------------ */

#define DRIBBLERS 200
#define DRIBBLE_S 8

/* Open up to n connections (those the backlog cannot take are skipped); returns how many. */
static int open_many(const char *path, int *fds, int n)
{
    struct sockaddr_un sa;
    h_unix_sockaddr(&sa, path);
    int open = 0;
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(fd, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            continue;
        }
        fds[open++] = fd;
    }
    return open;
}

/* The dribble: one header byte a second on every connection for DRIBBLE_S seconds, while the
 * test watches the daemon; returns rlockd's CPU ms over that time. */
static int64_t dribble(struct h_env *e, int *fds, int n)
{
    int64_t cpu0 = h_proc_cpu_ms(e->rlockd_pid);
    for (int s = 0; s < DRIBBLE_S; s++) {
        for (int i = 0; i < n; i++)
            (void)send(fds[i], s == 0 ? "G" : "a", 1, MSG_NOSIGNAL);
        h_sleep_ms(1000);
    }
    return h_proc_cpu_ms(e->rlockd_pid) - cpu0;
}

/* Descriptors pid has open. */
static int fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void limit_fds(pid_t pid, rlim_t n)
{
    struct rlimit rl = {.rlim_cur = n, .rlim_max = n};
    ck_assert_msg(prlimit(pid, RLIMIT_NOFILE, &rl, NULL) == 0, "prlimit: %s", strerror(errno));
}

/* A new client connects and pings. */
static void new_session_pings(struct h_env *e)
{
    struct rlock_client *c = h_client_or_fail(e, NULL);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    rlock_close(c);
}

/* The value of rlockd_http_requests_refused_total{reason} in a /metrics body. */
static double refused(const char *body, const char *reason)
{
    char name[128];
    snprintf(name, sizeof name, "rlockd_http_requests_refused_total{reason=\"%s\"} ", reason);
    const char *t = strstr(body, name);
    double v = 0;
    ck_assert_msg(t != NULL && sscanf(t + strlen(name), "%lf", &v) == 1, "no %s in /metrics",
                  name);
    return v;
}

/* Everything the dribblers must not cost: the lock, new sessions, CPU, log lines, the endpoint. */
static void dribblers_check(const char *extra_ini, int fd_starved, const char *what)
{
    struct h_fixture f;
    h_fixture_start(&f, extra_ini);
    struct rlock_acquire_opts o = {.ttl_ms = 2000};
    struct rlock_lock *l = h_acquire_ok(f.c, "dribble/held", &o);
    limit_fds(f.e.rlockd_pid, 128);
    int base = fd_count(f.e.rlockd_pid);
    size_t log0 = h_log_size(&f.e);
    struct h_pinger pg;
    h_pinger_start(&pg, &f.e, PING_EVERY_MS);
    int fds[DRIBBLERS];
    int n = open_many(f.e.metrics_sock, fds, DRIBBLERS);
    h_sleep_ms(300); /* accepted, up to the cap or the descriptors kept */
    int used = fd_count(f.e.rlockd_pid);
    printf("%s: rlockd has %d descriptors open (%d before)\n", what, used, base);
    new_session_pings(&f.e); /* descriptors are kept for sessions: a new one gets in */
    int64_t cpu = dribble(&f.e, fds, n);
    if (!fd_starved) /* the default cap of 16, and a few more for the pinger */
        ck_assert_msg(used <= base + 16 + 8, "%d descriptors open, %d before: the cap did not hold",
                      used, base);
    new_session_pings(&f.e); /* and still after the dribble */
    for (int i = 0; i < n; i++)
        close(fds[i]);
    struct h_ping_figures fig = h_pinger_stop(&pg, what);
    size_t log_bytes = h_log_size(&f.e) - log0;
    printf("%s: %d connections, rlockd CPU %lld ms over %d s, %zu log bytes, ping p99 %lld us\n",
           what, n, (long long)cpu, DRIBBLE_S, log_bytes, (long long)fig.p99_us);
    ck_assert_msg(cpu < DRIBBLE_S * 1000 / 2, "rlockd spun: %lld ms of CPU in %d s",
                  (long long)cpu, DRIBBLE_S);
    ck_assert_msg(log_bytes < 64 * 1024, "%zu bytes of log in %d s", log_bytes, DRIBBLE_S);
    if (rlock_lock_state(l) != RLOCK_HELD)
        h_env_dump_logs(&f.e);
    ck_assert_msg(rlock_lock_state(l) == RLOCK_HELD, "the held lock was lost");
    ck_assert_int_eq(f.lost.count, 0);
    struct h_http_reply r;
    int64_t end = h_now_ms() + 15000;
    while (h_http_get(f.e.metrics_sock, "/healthz", 2000, &r) != 0 || r.status != 200) {
        if (r.head != NULL)
            h_http_free(&r);
        ck_assert_msg(h_now_ms() < end, "/healthz not served after the dribblers left: %s",
                      r.error);
        h_sleep_ms(200);
    }
    h_http_free(&r);
    /* The dribblers were cut off by the request deadline, not by their own leaving; with the
     * cap above the descriptor limit, the descriptors kept for sessions stopped them. */
    ck_assert_msg(h_http_get(f.e.metrics_sock, "/metrics", 5000, &r) == 0, "%s", r.error);
    double timeouts = refused(r.body, "timeout"), spare = refused(r.body, "descriptors");
    h_http_free(&r);
    ck_assert_msg(timeouts > 0, "no dribbler was timed out");
    if (fd_starved)
        ck_assert_msg(spare > 0, "no dribbler was refused to keep descriptors for sessions");
    h_assert_ok(f.c, rlock_release(l, 5000));
    h_fixture_stop(&f);
}

START_TEST(test_descriptor_cap)
{
    dribblers_check(NULL, 0, "hostile_http: dribblers, cap 16");
}
END_TEST

/* The cap above the descriptor limit: the descriptors kept for sessions and Redis stop them. */
START_TEST(test_cap_above_limit)
{
    dribblers_check("[metrics]\nrequest_timeout = 2s\nmax_connections = 1024\n", 1,
                    "hostile_http: dribblers, cap above ulimit");
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_protocol, test_sizes, test_descriptor_cap, test_cap_above_limit};
    return h_run_tests("hostile_http", 120, tests, H_LEN(tests));
}
