/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_http.c — plain HTTP/1.0 GETs on a unix socket (rlockd's metrics
 * endpoint in the test envs), with a deadline on the whole exchange.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Connect to the unix socket at path; the fd, or -1 (errno set). */
static int http_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Wait for events on fd until deadline (an h_now_ms() time): 1 ready, 0 timed out, -1 error. */
static int http_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n > 0 ? 1 : n;
    }
}

void h_unix_sockaddr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t len = strlen(path);
    ck_assert_msg(len < sizeof sa->sun_path, "socket path too long: %s", path);
    memcpy(sa->sun_path, path, len + 1);
}

int h_http_request(const char *sock_path, const char *req, size_t n, int timeout_ms,
                   struct h_http_reply *out)
{
    memset(out, 0, sizeof *out);
    int64_t deadline = h_now_ms() + timeout_ms;
    int fd = http_connect(sock_path);
    if (fd < 0) {
        snprintf(out->error, sizeof out->error, "connect %s: %s", sock_path, strerror(errno));
        return -1;
    }
    size_t sent = 0;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    while (sent < n) {
        if (http_wait(fd, POLLOUT, deadline) <= 0)
            goto timeout;
        ssize_t k = send(fd, req + sent, n - sent, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k < 0) {
            snprintf(out->error, sizeof out->error, "send: %s", strerror(errno));
            goto fail;
        }
        sent += (size_t)k;
    }
    for (;;) { /* the server closes after its reply */
        if (http_wait(fd, POLLIN, deadline) <= 0)
            goto timeout;
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *p = realloc(buf, cap);
            if (p == NULL) {
                snprintf(out->error, sizeof out->error, "out of memory");
                goto fail;
            }
            buf = p;
        }
        ssize_t k = recv(fd, buf + len, cap - len - 1, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k < 0) {
            snprintf(out->error, sizeof out->error, "recv: %s", strerror(errno));
            goto fail;
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    if (buf == NULL) {
        snprintf(out->error, sizeof out->error, "empty reply");
        return -1;
    }
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &out->status) != 1 || body == NULL) {
        snprintf(out->error, sizeof out->error, "not an HTTP reply: %.80s", buf);
        free(buf);
        return -1;
    }
    *body = '\0';
    out->head = buf;
    out->body = body + 4;
    return 0;
timeout:
    snprintf(out->error, sizeof out->error, "%.40s...: no reply within %d ms", req, timeout_ms);
fail:
    close(fd);
    free(buf);
    return -1;
}

int h_http_get(const char *sock_path, const char *path, int timeout_ms, struct h_http_reply *out)
{
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    return h_http_request(sock_path, req, (size_t)n, timeout_ms, out);
}

void h_http_free(struct h_http_reply *r)
{
    free(r->head);
    r->head = r->body = NULL;
}

double h_metric(const struct h_env *e, const char *sample)
{
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e->metrics_sock, "/metrics", 5000, &r) == 0, "GET /metrics: %s",
                  r.error);
    size_t n = strlen(sample);
    double v = -1;
    for (const char *p = r.body; p != NULL && *p != '\0';) {
        if (strncmp(p, sample, n) == 0 && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    h_http_free(&r);
    return v;
}
