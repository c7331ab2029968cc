/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn.c — sockets, clocks and futex waits for librlock.
 *
 * Every socket is created non-blocking and close-on-exec, so a program that
 * forks and execs (rlockctl run) never leaks the session into its child, and
 * so that every connect can be bounded by a deadline with poll(). Waits use
 * CLOCK_MONOTONIC (deadlines) and CLOCK_BOOTTIME (liveness); nothing here
 * reads the wall clock, which may jump.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Backoff between connects while a unix socket's listen backlog is full. */
#define UNIX_RETRY_FIRST_MS 1
#define UNIX_RETRY_MAX_MS 50

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rlk_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t rlk_alive_ms(void)
{
    return clock_ms(CLOCK_BOOTTIME);
}

int64_t rlk_alive_to_mono(int64_t alive_ms)
{
    /* The two clocks differ by the time spent suspended, which only grows. */
    return alive_ms - (rlk_alive_ms() - rlk_mono_ms());
}

void rlk_futex_wait(atomic_uint *word, unsigned expect, int64_t deadline_ms)
{
    struct timespec ts, *tsp = NULL;
    if (deadline_ms >= 0) {
        ts.tv_sec = (time_t)(deadline_ms / 1000);
        ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
        tsp = &ts;
    }
    /* FUTEX_WAIT_BITSET takes an absolute time on CLOCK_MONOTONIC (no FUTEX_CLOCK_REALTIME). */
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_BITSET_PRIVATE, expect, tsp, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

void rlk_futex_wake(atomic_uint *word)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Milliseconds left until deadline, for poll(); never negative. */
static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - rlk_mono_ms();
    if (left < 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/*
 * Connect the non-blocking fd to sa and wait until deadline. Returns 0, or
 * -1 with errno (ETIMEDOUT when the deadline passed).
 */
static int connect_wait(int fd, const struct sockaddr *sa, socklen_t salen, int64_t deadline)
{
    if (connect(fd, sa, salen) == 0)
        return 0;
    if (errno != EINPROGRESS && errno != EINTR)
        return -1;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int n = poll(&p, 1, remaining_ms(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        break;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        return -1;
    if (soerr != 0) {
        errno = soerr;
        return -1;
    }
    return 0;
}

/*
 * What to check when a connect failed with e: appended to the error, so that
 * a user who typed a wrong address, or whose rlockd is not running, reads
 * what to look at rather than only the system's word for it.
 */
static const char *connect_hint(int e, int is_unix)
{
    switch (e) {
    case ENOENT:
        return "; no socket at that path: is rlockd running, and does its config's [server] "
               "listen name it? (the default config listens on " RLOCK_DEFAULT_ADDRESS " only)";
    case EACCES:
    case EPERM:
        return "; this user may not open the socket: see its owner, group and mode (ls -l), "
               "which rlockd's unit sets with Group= and UMask=";
    case ECONNREFUSED:
        return is_unix ? "; nothing listens on that socket (left by an rlockd that stopped?): "
                         "is rlockd running (systemctl status rlockd)?"
                       : "; nothing listens there: is rlockd running (systemctl status rlockd), "
                         "and does its config's [server] listen include this address? (default "
                         RLOCK_DEFAULT_ADDRESS ")";
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
        return "; no answer from that host: check the address, and any firewall on the way";
    default:
        return "";
    }
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int open_unix(const char *path, int64_t deadline, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof sun.sun_path) {
        snprintf(err, errlen, "unix socket path is empty or too long");
        return -2;
    }
    memcpy(sun.sun_path, path, n + 1);
    int64_t backoff = UNIX_RETRY_FIRST_MS;
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            snprintf(err, errlen, "socket: %s", strerror(errno));
            return -1;
        }
        if (connect_wait(fd, (const struct sockaddr *)&sun, sizeof sun, deadline) == 0)
            return fd;
        int e = errno;
        close(fd);
        /*
         * A non-blocking connect to a unix socket whose listen backlog is
         * full fails at once with EAGAIN, where TCP would wait: the daemon
         * is busy, not gone, so keep trying until the deadline.
         */
        int64_t left = deadline - rlk_mono_ms();
        if (e != EAGAIN || left <= 0) {
            snprintf(err, errlen, "connect unix:%s: %s%s", path, strerror(e),
                     e == EAGAIN ? " (the daemon's listen backlog stayed full)"
                                 : connect_hint(e, 1));
            return -1;
        }
        sleep_ms(backoff < left ? backoff : left);
        backoff = backoff * 2 < UNIX_RETRY_MAX_MS ? backoff * 2 : UNIX_RETRY_MAX_MS;
    }
}

/* "1".."65535" in decimal, nothing else: a service name or port 0 is a malformed address. */
static int port_valid(const char *s)
{
    unsigned long v = 0;
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        if (s[n] < '0' || s[n] > '9' || n >= 5)
            return 0;
        v = v * 10 + (unsigned long)(s[n] - '0');
    }
    return n > 0 && v >= 1 && v <= 65535;
}

/* Split "HOST:PORT" or "[V6]:PORT" into host and port (copied into hostbuf). */
static int split_host_port(const char *address, char *hostbuf, size_t hostlen,
                           const char **port)
{
    const char *colon;
    const char *host = address;
    size_t n;
    if (address[0] == '[') {
        const char *close_br = strchr(address, ']');
        if (close_br == NULL || close_br[1] != ':')
            return -1;
        host = address + 1;
        n = (size_t)(close_br - host);
        colon = close_br + 1;
    } else {
        colon = strrchr(address, ':');
        if (colon == NULL)
            return -1;
        n = (size_t)(colon - address);
    }
    if (n == 0 || n >= hostlen || colon[1] == '\0')
        return -1;
    memcpy(hostbuf, host, n);
    hostbuf[n] = '\0';
    *port = colon + 1;
    return 0;
}

/*
 * The addresses "HOST:PORT" or "[V6]:PORT" resolves to (*res, for
 * freeaddrinfo). 0, or -2 (malformed) / -1 (not resolved) with err.
 */
static int resolve(const char *address, struct addrinfo **res, char *err, size_t errlen)
{
    char host[256];
    const char *port;
    if (split_host_port(address, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "bad address '%s' (want HOST:PORT or unix:/path)", address);
        return -2;
    }
    if (!port_valid(port)) {
        snprintf(err, errlen, "bad port '%s' in '%s' (want a number from 1 to 65535)", port,
                 address);
        return -2;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    *res = NULL;
    int gai = getaddrinfo(host, port, &hints, res);
    if (gai != 0) {
        snprintf(err, errlen, "resolve %s: %s", address, gai_strerror(gai));
        return -1;
    }
    return 0;
}

static int open_tcp(const char *address, int64_t deadline, char *err, size_t errlen)
{
    struct addrinfo *res = NULL;
    int rc = resolve(address, &res, err, errlen);
    if (rc < 0)
        return rc;
    int fd = -1;
    snprintf(err, errlen, "connect %s: no address", address);
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
        if (fd < 0) {
            snprintf(err, errlen, "socket: %s", strerror(errno));
            continue;
        }
        if (connect_wait(fd, ai->ai_addr, ai->ai_addrlen, deadline) < 0) {
            int e = errno;
            snprintf(err, errlen, "connect %s: %s%s", address, strerror(e), connect_hint(e, 0));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        /* Requests are small and latency-bound: never wait to coalesce them. */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

/* Open one address ("HOST:PORT", "[V6]:PORT" or "unix:/path") by deadline. */
static int open_one(const char *address, int64_t deadline, char *err, size_t errlen)
{
    address = rlk_addr_plain(address);
    if (strncmp(address, "unix:", 5) == 0)
        return open_unix(address + 5, deadline, err, errlen);
    return open_tcp(address, deadline, err, errlen);
}

/* 0 when address is well formed (a unix path, or a host and a valid port), else -1 (err). */
static int address_check(const char *address, char *err, size_t errlen)
{
    address = rlk_addr_plain(address);
    if (strncmp(address, "unix:", 5) == 0) {
        if (address[5] == '\0' || strlen(address + 5) >= sizeof(struct sockaddr_un) -
                                                        offsetof(struct sockaddr_un, sun_path)) {
            snprintf(err, errlen, "unix socket path is empty or too long in '%s'", address);
            return -1;
        }
        return 0;
    }
    char host[256];
    const char *port;
    if (split_host_port(address, host, sizeof host, &port) < 0) {
        snprintf(err, errlen, "bad address '%s' (want HOST:PORT or unix:/path)", address);
        return -1;
    }
    if (!port_valid(port)) {
        snprintf(err, errlen, "bad port '%s' in '%s' (want a number from 1 to 65535)", port,
                 address);
        return -1;
    }
    return 0;
}

int rlk_addr_list_parse(const char *list, struct rlk_addr_list *out, char *err, size_t errlen)
{
    out->n = 0;
    const char *p = list;
    for (;;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, ",");
        size_t end = len;
        while (end > 0 && p[end - 1] == ' ')
            end--;
        if (end == 0) {
            snprintf(err, errlen, "empty address in the list '%s'", list);
            return -1;
        }
        if (out->n == RLK_MAX_ADDRESSES) {
            snprintf(err, errlen, "more than %d addresses in the list", RLK_MAX_ADDRESSES);
            return -1;
        }
        if (end >= RLK_ADDRESS_BYTES) {
            snprintf(err, errlen, "address longer than %d bytes in the list",
                     RLK_ADDRESS_BYTES - 1);
            return -1;
        }
        memcpy(out->a[out->n], p, end);
        out->a[out->n][end] = '\0';
        if (address_check(out->a[out->n], err, errlen) < 0)
            return -1;
        out->n++;
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

unsigned rlk_addr_start(unsigned n)
{
    unsigned r = 0;
    if (n <= 1)
        return 0;
    /* Spread clients over the list: a random first address each time. */
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned)rlk_mono_ms() ^ (unsigned)getpid();
    return r % n;
}

int rlk_conn_open_list(const struct rlk_addr_list *l, unsigned start, uint32_t timeout_ms,
                       unsigned *used, char *err, size_t errlen)
{
    int64_t deadline = rlk_mono_ms() + timeout_ms;
    char last[2 * RLK_REASON_BYTES] = "";
    for (unsigned i = 0; i < l->n; i++) {
        unsigned k = (start + i) % l->n;
        /* An equal share of what is left: an address that swallows its connect (a
         * black hole) must not take the time of the ones after it. */
        int64_t now = rlk_mono_ms();
        int64_t share = (deadline - now) / (int64_t)(l->n - i);
        int fd = open_one(l->a[k], now + (share > 0 ? share : 0), last, sizeof last);
        if (fd >= 0) {
            if (used != NULL)
                *used = k;
            return fd;
        }
        if (fd == -2) {
            snprintf(err, errlen, "%s", last);
            return -2;
        }
    }
    if (l->n == 1)
        snprintf(err, errlen, "%s", last);
    else
        snprintf(err, errlen, "none of the %u addresses answered; the last: %s", l->n, last);
    return -1;
}

int rlk_conn_open(const char *address, uint32_t timeout_ms, char *err, size_t errlen)
{
    struct rlk_addr_list l;
    if (rlk_addr_list_parse(address, &l, err, errlen) < 0)
        return -2;
    return rlk_conn_open_list(&l, rlk_addr_start(l.n), timeout_ms, NULL, err, errlen);
}

/* Start a non-blocking connect of a new socket to sa. The fd (*done set), or -1 (errno). */
static int start_one(int family, int type, int proto, const struct sockaddr *sa,
                     socklen_t salen, int *done)
{
    int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, salen) == 0) {
        *done = 1;
        return fd;
    }
    if (errno == EINPROGRESS || errno == EINTR) {
        *done = 0;
        return fd;
    }
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int rlk_conn_start(const char *address, unsigned pick, int *done, char *err, size_t errlen)
{
    address = rlk_addr_plain(address);
    if (strncmp(address, "unix:", 5) == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        size_t n = strlen(address + 5);
        if (n == 0 || n >= sizeof sun.sun_path) {
            snprintf(err, errlen, "unix socket path is empty or too long");
            return -1;
        }
        memcpy(sun.sun_path, address + 5, n + 1);
        int fd = start_one(AF_UNIX, SOCK_STREAM, 0, (const struct sockaddr *)&sun, sizeof sun,
                           done);
        if (fd < 0) {
            int e = errno;
            snprintf(err, errlen, "connect %s: %s%s", address, strerror(e), connect_hint(e, 1));
        }
        return fd;
    }
    struct addrinfo *res = NULL;
    if (resolve(address, &res, err, errlen) < 0)
        return -1;
    unsigned count = 0;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
        count++;
    struct addrinfo *ai = res;
    for (unsigned i = 0; count > 0 && i < pick % count; i++)
        ai = ai->ai_next;
    int fd = -1;
    if (ai == NULL)
        snprintf(err, errlen, "connect %s: no address", address);
    else if ((fd = start_one(ai->ai_family, ai->ai_socktype, ai->ai_protocol, ai->ai_addr,
                             ai->ai_addrlen, done)) < 0) {
        int e = errno;
        snprintf(err, errlen, "connect %s: %s%s", address, strerror(e), connect_hint(e, 0));
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

int rlk_conn_result(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, 0);
    if (n < 0)
        return errno == EINTR ? EINPROGRESS : errno;
    if (n == 0)
        return EINPROGRESS;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        return errno;
    return soerr;
}
