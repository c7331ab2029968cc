/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * httpd.c — see httpd.h. A connection lives through three states:
 *
 *   HEAD    bytes are read (at most head_bytes + 1 are buffered: the read
 *           watermark) and scanned once each for the blank line that ends
 *           the head; a head too long, a deadline passed or a malformed
 *           request is answered with an error
 *   ANSWER  the reply is queued; when it is written the sending side is shut
 *   LINGER  what the peer still sends is read and dropped until it closes
 *           (closing with unread bytes would reset the connection and could
 *           destroy the reply before the peer read it), within a short deadline
 *
 * At max_conns the listener is disabled, so further peers wait in the
 * kernel's backlog (costing nothing here) until a connection ends; when
 * accept runs out of descriptors it pauses, as the lock listener does.
 */
#include "httpd.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "config.h"
#include "listener.h"
#include "log.h"
#include "util.h"

#define HTTPD_PAUSE_MS 500  /* not accepting after running out of descriptors */
#define HTTPD_LINGER_MS 1000 /* reading what a peer still sends after the answer */

enum hstate { H_HEAD, H_ANSWER, H_LINGER };

struct hconn {
    struct httpd *d;
    struct bufferevent *bev;
    struct event *deadline;
    enum hstate state;
    size_t scanned; /* bytes of the head already searched for its end */
    int peer_eof;   /* the peer shut its sending side */
    TAILQ_ENTRY(hconn) link;
};

struct httpd {
    struct event_base *base;
    struct evconnlistener *evl;
    struct event *resume_ev;
    struct httpd_limits lim;
    httpd_route_fn route;
    void *arg;
    uint32_t nconns;
    int full;   /* the listener is disabled: max_conns reached */
    int paused; /* the listener is disabled: out of descriptors */
    TAILQ_HEAD(, hconn) conns;
};

/* What went wrong with a request, and how it is answered. */
struct hfail {
    int code;
    const char *reason;
    const char *why;
    enum metric_http_reason counter;
};

/* At max_conns: the listener pauses, and a connection accepted in the same batch as the last
 * slot is closed at once. */
static int at_cap(const struct httpd *d)
{
    return d->nconns >= d->lim.max_conns;
}

static void listener_update(struct httpd *d)
{
    int on = !d->full && !d->paused;
    if (on)
        evconnlistener_enable(d->evl);
    else
        evconnlistener_disable(d->evl);
}

static void conn_free(struct hconn *c)
{
    struct httpd *d = c->d;
    TAILQ_REMOVE(&d->conns, c, link);
    bufferevent_free(c->bev);
    event_free(c->deadline);
    free(c);
    d->nconns--;
    if (d->full && !at_cap(d)) {
        d->full = 0;
        listener_update(d);
    }
}

static void arm_deadline(struct hconn *c, uint32_t ms)
{
    struct timeval tv = util_tv_ms(ms);
    evtimer_add(c->deadline, &tv);
}

/* Queue the status line, the headers and (unless head_only) the body; then shut the sending
 * side once it is written (write_cb). */
static void answer(struct hconn *c, const struct httpd_reply *r, struct evbuffer *body,
                   int head_only)
{
    struct evbuffer *in = bufferevent_get_input(c->bev), *out = bufferevent_get_output(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "Cache-Control: no-store\r\nConnection: close\r\n",
                        r->code, r->reason, r->type, evbuffer_get_length(body));
    if (r->allow != NULL)
        evbuffer_add_printf(out, "Allow: %s\r\n", r->allow);
    if (r->headers != NULL)
        evbuffer_add(out, r->headers, strlen(r->headers));
    evbuffer_add(out, "\r\n", 2);
    if (!head_only)
        evbuffer_add_buffer(out, body);
    c->state = H_ANSWER;
    arm_deadline(c, c->d->lim.deadline_ms);
}

static void answer_error(struct hconn *c, const struct hfail *f, int head_only)
{
    struct evbuffer *body = evbuffer_new();
    if (body == NULL) {
        conn_free(c);
        return;
    }
    c->d->lim.refused[f->counter]++;
    evbuffer_add_printf(body, "%s\n", f->why);
    struct httpd_reply r = {.code = f->code, .reason = f->reason, .type = "text/plain",
                            .allow = f->code == 405 ? "GET, HEAD" : NULL};
    answer(c, &r, body, head_only);
    evbuffer_free(body);
}

/* --- parsing a head ------------------------------------------------------------------- */

static const struct hfail BAD = {400, "Bad Request", "bad request", METRIC_HTTP_BAD_REQUEST};

/* A token character of RFC 9110 (method and header names). */
static int is_tchar(int ch)
{
    return isalnum(ch) || (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* The next line of the head at *p (ending "\n" or "\r\n", not included); NUL-terminated in
 * place; *p moves past it. */
static char *next_line(char **p)
{
    char *line = *p, *nl = strchr(line, '\n');
    *p = nl + 1;
    if (nl > line && nl[-1] == '\r')
        nl--;
    *nl = '\0';
    return line;
}

/* What handle_head keeps of the headers. */
struct hseen {
    long long clen;      /* the Content-Length, -1 without one */
    int host;            /* Host headers */
    const char *auth;    /* the Authorization value, or NULL */
};

/* Check one header line; Content-Length values must agree and be 0 (clen keeps the first). */
static const struct hfail *check_header(char *line, struct hseen *seen)
{
    static const struct hfail BODY = {413, "Content Too Large",
                                      "a GET or HEAD request carries no body",
                                      METRIC_HTTP_TOO_LARGE};
    char *colon = line;
    while (is_tchar((unsigned char)*colon))
        colon++;
    if (colon == line || *colon != ':') /* a folded line, a space before the colon, no name */
        return &BAD;
    *colon = '\0';
    char *v = colon + 1;
    for (char *q = v; *q; q++)
        if ((unsigned char)*q < 0x20 && *q != '\t')
            return &BAD;
    while (*v == ' ' || *v == '\t')
        v++;
    if (strcasecmp(line, "host") == 0)
        seen->host++;
    if (strcasecmp(line, "authorization") == 0) {
        if (seen->auth != NULL)
            return &BAD; /* which one would count? */
        seen->auth = v;
    }
    if (strcasecmp(line, "transfer-encoding") == 0)
        return &BODY;
    if (strcasecmp(line, "content-length") != 0)
        return NULL;
    size_t digits = strspn(v, "0123456789");
    if (digits == 0 || digits > 18 || strspn(v + digits, " \t") != strlen(v + digits))
        return &BAD;
    long long n = strtoll(v, NULL, 10);
    if (seen->clen >= 0 && seen->clen != n)
        return &BAD; /* two lengths that disagree: a smuggling attempt, or a broken client */
    seen->clen = n;
    return n != 0 ? &BODY : NULL;
}

/* Parse the head (NUL-terminated, ending in its blank line) and answer it. */
static void handle_head(struct hconn *c, char *head)
{
    static const struct hfail METHOD = {405, "Method Not Allowed", "only GET and HEAD",
                                        METRIC_HTTP_METHOD};
    static const struct hfail VERSION = {505, "HTTP Version Not Supported",
                                         "HTTP/1.0 and HTTP/1.1 only", METRIC_HTTP_VERSION};
    char *p = head;
    char *line = next_line(&p);
    char *sp1 = strchr(line, ' '), *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || strchr(sp2 + 1, ' ') != NULL) {
        answer_error(c, &BAD, 0);
        return;
    }
    *sp1 = *sp2 = '\0';
    const char *method = line, *target = sp1 + 1, *version = sp2 + 1;
    int head_only = strcmp(method, "HEAD") == 0;
    for (const char *m = method; *m; m++)
        if (!is_tchar((unsigned char)*m)) {
            answer_error(c, &BAD, 0);
            return;
        }
    int minor;
    if (strcmp(version, "HTTP/1.1") == 0)
        minor = 1;
    else if (strcmp(version, "HTTP/1.0") == 0)
        minor = 0;
    else {
        int other = strncmp(version, "HTTP/", 5) == 0 && isdigit((unsigned char)version[5]) &&
                    version[6] == '.' && isdigit((unsigned char)version[7]) && version[8] == 0;
        answer_error(c, other ? &VERSION : &BAD, head_only);
        return;
    }
    if (!head_only && strcmp(method, "GET") != 0) {
        answer_error(c, &METHOD, 0);
        return;
    }
    struct hseen seen = {.clen = -1};
    for (;;) {
        line = next_line(&p);
        if (line[0] == '\0')
            break;
        const struct hfail *f = check_header(line, &seen);
        if (f != NULL) {
            answer_error(c, f, head_only);
            return;
        }
    }
    if (target[0] != '/' || (minor == 1 && seen.host != 1)) { /* RFC 9112: exactly one Host */
        answer_error(c, &BAD, head_only);
        return;
    }
    for (const char *t = target; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f) {
            answer_error(c, &BAD, head_only);
            return;
        }
    char path[256];
    size_t plen = strcspn(target, "?#");
    if (plen >= sizeof path)
        plen = sizeof path - 1; /* no route is that long: it stays unknown, answered 404 */
    memcpy(path, target, plen);
    path[plen] = '\0';
    struct evbuffer *body = evbuffer_new();
    if (body == NULL) {
        conn_free(c);
        return;
    }
    struct httpd_reply r = {.code = 500, .reason = "Internal Server Error", .type = "text/plain"};
    const struct httpd_request q = {.path = path, .authorization = seen.auth};
    c->d->route(c->d->arg, &q, &r, body);
    answer(c, &r, body, head_only);
    evbuffer_free(body);
}

/* --- events --------------------------------------------------------------------------- */

/* The end of the head within the first n bytes of p (scanning from c->scanned): the offset
 * just past its blank line, or 0 when it has not come yet. */
static size_t head_end(struct hconn *c, const char *p, size_t n)
{
    for (size_t i = c->scanned; i < n; i++) {
        if (p[i] != '\n')
            continue;
        if ((i >= 1 && p[i - 1] == '\n') || (i >= 2 && p[i - 1] == '\r' && p[i - 2] == '\n'))
            return i + 1;
    }
    c->scanned = n;
    return 0;
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    struct hconn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->state != H_HEAD) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    static const struct hfail LONG = {431, "Request Header Fields Too Large",
                                      "request head too large", METRIC_HTTP_TOO_LARGE};
    size_t n = evbuffer_get_length(in);
    size_t cap = c->d->lim.head_bytes;
    size_t look = n < cap ? n : cap;
    char *p = (char *)evbuffer_pullup(in, (ev_ssize_t)look);
    size_t end = p != NULL ? head_end(c, p, look) : 0;
    if (end == 0) {
        if (n >= cap)
            answer_error(c, &LONG, 0);
        return;
    }
    char *head = malloc(end + 1);
    if (head == NULL) {
        conn_free(c);
        return;
    }
    memcpy(head, p, end);
    head[end] = '\0';
    evbuffer_drain(in, evbuffer_get_length(in));
    if (memchr(head, '\0', end) != NULL) {
        answer_error(c, &BAD, 0);
    } else {
        handle_head(c, head);
    }
    free(head);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
    struct hconn *c = arg;
    if (c->state != H_ANSWER || evbuffer_get_length(bufferevent_get_output(bev)) != 0)
        return;
    if (c->peer_eof) { /* nothing more can come: done */
        conn_free(c);
        return;
    }
    shutdown(bufferevent_getfd(bev), SHUT_WR);
    c->state = H_LINGER;
    arm_deadline(c, HTTPD_LINGER_MS);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct hconn *c = arg;
    /* A peer that shut its sending side after the request still gets the answer. */
    if (c->state == H_ANSWER && (what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
        c->peer_eof = 1;
        return;
    }
    conn_free(c);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct hconn *c = arg;
    static const struct hfail SLOW = {408, "Request Timeout", "request not received in time",
                                      METRIC_HTTP_TIMEOUT};
    if (c->state == H_HEAD) {
        answer_error(c, &SLOW, 0);
        return;
    }
    if (c->state == H_ANSWER)
        c->d->lim.refused[METRIC_HTTP_TIMEOUT]++; /* a peer not reading its answer */
    conn_free(c);
}

static void accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)evl;
    (void)sa;
    (void)salen;
    struct httpd *d = arg;
    if (at_cap(d) || !listener_fd_spare(fd, 2 * LISTENER_FD_RESERVE)) {
        /* Accepted in the same batch as the last slot, or into the descriptors kept for
         * sessions and Redis. */
        d->lim.refused[at_cap(d) ? METRIC_HTTP_MAX_CONNECTIONS : METRIC_HTTP_DESCRIPTORS]++;
        evutil_closesocket(fd);
        return;
    }
    struct hconn *c = calloc(1, sizeof *c);
    if (c != NULL) {
        c->bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
        c->deadline = evtimer_new(d->base, deadline_cb, c);
    }
    if (c == NULL || c->bev == NULL || c->deadline == NULL) {
        if (c != NULL && c->bev != NULL)
            bufferevent_free(c->bev);
        else
            evutil_closesocket(fd);
        if (c != NULL && c->deadline != NULL)
            event_free(c->deadline);
        free(c);
        return;
    }
    c->d = d;
    c->state = H_HEAD;
    TAILQ_INSERT_TAIL(&d->conns, c, link);
    d->nconns++;
    if (at_cap(d)) {
        d->full = 1;
        listener_update(d);
    }
    /* Buffer no more than a head may be, plus one byte to know it is longer. */
    bufferevent_setwatermark(c->bev, EV_READ, 0, d->lim.head_bytes + 1);
    bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    arm_deadline(c, d->lim.deadline_ms);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct httpd *d = arg;
    d->paused = 0;
    listener_update(d);
}

static void error_cb(struct evconnlistener *evl, void *arg)
{
    (void)evl;
    struct httpd *d = arg;
    /* Out of descriptors the pending connection stays in the backlog and would be reported
     * again at once: pause (one line per pause) instead of spinning. */
    log_error("metrics endpoint: accept: %s; not accepting for %d ms", strerror(errno),
              HTTPD_PAUSE_MS);
    d->paused = 1;
    listener_update(d);
    struct timeval tv = util_tv_ms(HTTPD_PAUSE_MS);
    evtimer_add(d->resume_ev, &tv);
}

struct httpd *httpd_new(struct event_base *base, const struct config_address *addr,
                        const struct httpd_limits *lim, httpd_route_fn route, void *arg)
{
    struct httpd *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->base = base;
    d->lim = *lim;
    d->route = route;
    d->arg = arg;
    TAILQ_INIT(&d->conns);
    d->resume_ev = evtimer_new(base, resume_cb, d);
    d->evl = d->resume_ev != NULL ? listener_bind(base, addr, accept_cb, d) : NULL;
    if (d->evl == NULL) {
        int err = errno;
        if (d->resume_ev != NULL)
            event_free(d->resume_ev);
        free(d);
        errno = err;
        return NULL;
    }
    evconnlistener_set_error_cb(d->evl, error_cb);
    return d;
}

void httpd_free(struct httpd *d)
{
    if (d == NULL)
        return;
    while (!TAILQ_EMPTY(&d->conns))
        conn_free(TAILQ_FIRST(&d->conns));
    evconnlistener_free(d->evl);
    event_free(d->resume_ev);
    free(d);
}

uint32_t httpd_conns(const struct httpd *d)
{
    return d != NULL ? d->nconns : 0;
}
