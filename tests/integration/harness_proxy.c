/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_proxy.c — see harness_proxy.h.
 *
 * One thread polls the listening socket, a wake-up pipe and both sides of
 * every connection. Bytes read go to the queue of their direction as a chunk
 * with the instant it may go on (now + delay) or a held mark; a queue writes
 * only its head, so order is kept whatever the faults. Every socket is
 * non-blocking: a peer that reads nothing (a stopped rlockd) stalls its own
 * queue, never the thread. The mutex guards everything; the thread drops it
 * only while it sleeps in poll().
 */
#include "harness_proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PROXY_READ_MAX 65536
/* Long enough to hold "PSUBSCRIBE\r\n" split across two reads. */
#define PROXY_TAIL 16

struct chunk {
    struct chunk *next;
    int64_t due_ms;
    int held;
    size_t len, off;
    char data[];
};

struct queue {
    struct chunk *head, *tail;
};

struct rule {
    int delay_ms;
    int hold;
};

struct pconn {
    struct pconn *next;
    int cfd, sfd;   /* client and server sides; -1 once closed */
    int c_eof;      /* the client side will send nothing more (closed, cut or EOF) */
    int s_eof;      /* the server side will send nothing more */
    int pubsub;     /* its client has subscribed */
    struct rule rule[2];
    struct queue q[2]; /* q[H_PROXY_UP]: to the server; q[H_PROXY_DOWN]: to the client */
    char tail[PROXY_TAIL];
    size_t tail_len;
};

struct h_proxy {
    pthread_t thread;
    pthread_mutex_t mu;
    int wake[2];
    int lfd;
    int stop;
    char target[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct rule defaults[2][2]; /* [pubsub][dir], for connections yet to come */
    struct pconn *conns;
    uint64_t accepted;
    char buf[PROXY_READ_MAX]; /* the thread's read buffer */
};

static int64_t proxy_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void queue_clear(struct queue *q)
{
    struct chunk *c = q->head;
    while (c != NULL) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    q->head = q->tail = NULL;
}

static void queue_push(struct queue *q, const char *data, size_t len, const struct rule *r,
                       int64_t now)
{
    struct chunk *c = malloc(sizeof *c + len);
    if (c == NULL)
        abort();
    c->next = NULL;
    c->due_ms = now + r->delay_ms;
    c->held = r->hold;
    c->len = len;
    c->off = 0;
    memcpy(c->data, data, len);
    if (q->tail != NULL)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
}

static uint64_t queue_held(const struct queue *q)
{
    uint64_t n = 0;
    for (const struct chunk *c = q->head; c != NULL; c = c->next)
        n += c->held ? c->len - c->off : 0;
    return n;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The client side is gone: nothing more comes from it, nothing can go to it. */
static void conn_close_client(struct pconn *c)
{
    close_fd(&c->cfd);
    c->c_eof = 1;
    queue_clear(&c->q[H_PROXY_DOWN]);
}

static void conn_free(struct pconn *c)
{
    close_fd(&c->cfd);
    close_fd(&c->sfd);
    queue_clear(&c->q[0]);
    queue_clear(&c->q[1]);
    free(c);
}

/* --- selections ------------------------------------------------------------ */

static int sel_matches(enum h_proxy_sel sel, const struct pconn *c)
{
    switch (sel) {
    case H_PROXY_ALL:
    case H_PROXY_OPEN:
        return 1;
    case H_PROXY_COMMANDS:
    case H_PROXY_OPEN_COMMANDS:
        return !c->pubsub;
    case H_PROXY_PUBSUB:
    case H_PROXY_OPEN_PUBSUB:
        return c->pubsub;
    }
    return 0;
}

/* Apply f to the selected connections, and to the defaults of the classes it names for later. */
static void sel_apply(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir,
                      void (*f)(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int arg),
                      int arg)
{
    pthread_mutex_lock(&p->mu);
    for (struct pconn *c = p->conns; c != NULL; c = c->next)
        if (sel_matches(sel, c))
            f(c, &c->rule[dir], dir, arg);
    if (sel == H_PROXY_ALL || sel == H_PROXY_COMMANDS)
        f(NULL, &p->defaults[0][dir], dir, arg);
    if (sel == H_PROXY_ALL || sel == H_PROXY_PUBSUB)
        f(NULL, &p->defaults[1][dir], dir, arg);
    pthread_mutex_unlock(&p->mu);
    char b = 1;
    ssize_t n = write(p->wake[1], &b, 1);
    (void)n; /* a full pipe already holds a wake-up */
}

static void do_delay(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int ms)
{
    (void)c, (void)dir;
    r->delay_ms = ms;
}

static void do_hold(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int arg)
{
    (void)arg;
    r->hold = 1;
    for (struct chunk *k = c != NULL ? c->q[dir].head : NULL; k != NULL; k = k->next)
        k->held = 1;
}

static void do_release(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int arg)
{
    (void)arg;
    r->hold = 0;
    r->delay_ms = 0;
    int64_t now = proxy_now_ms();
    for (struct chunk *k = c != NULL ? c->q[dir].head : NULL; k != NULL; k = k->next) {
        k->held = 0;
        k->due_ms = now;
    }
}

void h_proxy_delay(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir, int delay_ms)
{
    sel_apply(p, sel, dir, do_delay, delay_ms);
}

void h_proxy_hold(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir)
{
    sel_apply(p, sel, dir, do_hold, 0);
}

void h_proxy_release(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir)
{
    sel_apply(p, sel, dir, do_release, 0);
}

static void do_cut(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int arg)
{
    (void)r, (void)dir, (void)arg;
    if (c != NULL)
        conn_close_client(c);
}

static void do_drop(struct pconn *c, struct rule *r, enum h_proxy_dir dir, int arg)
{
    (void)r, (void)dir, (void)arg;
    if (c == NULL)
        return;
    conn_close_client(c);
    close_fd(&c->sfd);
    c->s_eof = 1;
    queue_clear(&c->q[H_PROXY_UP]);
}

static enum h_proxy_sel sel_open(enum h_proxy_sel sel)
{
    return sel == H_PROXY_ALL        ? H_PROXY_OPEN
           : sel == H_PROXY_COMMANDS ? H_PROXY_OPEN_COMMANDS
           : sel == H_PROXY_PUBSUB   ? H_PROXY_OPEN_PUBSUB
                                     : sel;
}

void h_proxy_cut(struct h_proxy *p, enum h_proxy_sel sel)
{
    sel_apply(p, sel_open(sel), H_PROXY_UP, do_cut, 0);
}

void h_proxy_drop(struct h_proxy *p, enum h_proxy_sel sel)
{
    sel_apply(p, sel_open(sel), H_PROXY_UP, do_drop, 0);
}

int h_proxy_count(struct h_proxy *p, enum h_proxy_sel sel)
{
    int n = 0;
    pthread_mutex_lock(&p->mu);
    for (struct pconn *c = p->conns; c != NULL; c = c->next)
        n += sel_matches(sel, c) && c->cfd >= 0;
    pthread_mutex_unlock(&p->mu);
    return n;
}

uint64_t h_proxy_held(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir)
{
    uint64_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (struct pconn *c = p->conns; c != NULL; c = c->next)
        if (sel_matches(sel, c))
            n += queue_held(&c->q[dir]);
    pthread_mutex_unlock(&p->mu);
    return n;
}

uint64_t h_proxy_accepted(struct h_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->accepted;
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* --- the thread ------------------------------------------------------------ */

static int unix_socket(const char *path, int listening)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = listening ? bind(fd, (struct sockaddr *)&sa, sizeof sa)
                       : connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc == 0 && listening)
        rc = listen(fd, 128);
    if (rc == 0)
        rc = fcntl(fd, F_SETFL, O_NONBLOCK);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void proxy_accept(struct h_proxy *p)
{
    for (;;) {
        int cfd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        int sfd = unix_socket(p->target, 0);
        struct pconn *c = sfd >= 0 ? calloc(1, sizeof *c) : NULL;
        if (c == NULL) {
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        c->cfd = cfd;
        c->sfd = sfd;
        c->rule[0] = p->defaults[0][0];
        c->rule[1] = p->defaults[0][1];
        c->next = p->conns;
        p->conns = c;
        p->accepted++;
    }
}

/* A client that sends SUBSCRIBE becomes a pub/sub connection, with the rules for those. */
static void note_subscribe(struct h_proxy *p, struct pconn *c, const char *data, size_t len)
{
    static const char word[] = "SUBSCRIBE\r\n";
    char joint[2 * PROXY_TAIL];
    size_t head = len < PROXY_TAIL ? len : PROXY_TAIL;
    memcpy(joint, c->tail, c->tail_len);
    memcpy(joint + c->tail_len, data, head);
    if (memmem(joint, c->tail_len + head, word, sizeof word - 1) != NULL ||
        memmem(data, len, word, sizeof word - 1) != NULL) {
        c->pubsub = 1;
        c->rule[0] = p->defaults[1][0];
        c->rule[1] = p->defaults[1][1];
    }
    size_t keep = len < PROXY_TAIL ? len : PROXY_TAIL;
    if (c->tail_len + keep > PROXY_TAIL) {
        size_t drop = c->tail_len + keep - PROXY_TAIL;
        memmove(c->tail, c->tail + drop, c->tail_len - drop);
        c->tail_len -= drop;
    }
    memcpy(c->tail + c->tail_len, data + len - keep, keep);
    c->tail_len += keep;
}

/* Read what fd has for direction dir; 1 at its end (EOF or error). */
static int pump_in(struct h_proxy *p, struct pconn *c, int fd, enum h_proxy_dir dir, int64_t now)
{
    char *buf = p->buf;
    ssize_t n = recv(fd, buf, PROXY_READ_MAX, 0);
    if (n < 0)
        return errno != EAGAIN && errno != EINTR;
    if (n == 0)
        return 1;
    if (dir == H_PROXY_UP && !c->pubsub)
        note_subscribe(p, c, buf, (size_t)n);
    /* Answers for a client that was cut go nowhere. */
    if (dir == H_PROXY_UP || c->cfd >= 0)
        queue_push(&c->q[dir], buf, (size_t)n, &c->rule[dir], now);
    return 0;
}

/* Write the due head chunks of q to fd. -1 when fd failed. */
static int pump_out(struct queue *q, int fd, int64_t now)
{
    struct chunk *k;
    while ((k = q->head) != NULL && !k->held && k->due_ms <= now) {
        ssize_t n = send(fd, k->data + k->off, k->len - k->off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        k->off += (size_t)n;
        if (k->off < k->len)
            return 0;
        q->head = k->next;
        if (q->head == NULL)
            q->tail = NULL;
        free(k);
    }
    return 0;
}

static int head_ready(const struct queue *q, int64_t now)
{
    return q->head != NULL && !q->head->held && q->head->due_ms <= now;
}

/* Milliseconds until some head chunk falls due (-1: none waits for a time). */
static int next_due(const struct h_proxy *p, int64_t now)
{
    int64_t best = -1;
    for (const struct pconn *c = p->conns; c != NULL; c = c->next)
        for (int d = 0; d < 2; d++) {
            const struct chunk *k = c->q[d].head;
            if (k == NULL || k->held)
                continue;
            int64_t wait = k->due_ms > now ? k->due_ms - now : 0;
            if (best < 0 || wait < best)
                best = wait;
        }
    return best > 1000 ? 1000 : (int)best;
}

/* Close what is over: a side whose peer ended once its queue is empty. 1 when c is done. */
static int conn_settle(struct pconn *c)
{
    if (c->c_eof && c->q[H_PROXY_UP].head == NULL && c->sfd >= 0)
        close_fd(&c->sfd); /* Redis sees the end only after the last held command */
    if (c->s_eof && c->q[H_PROXY_DOWN].head == NULL && c->cfd >= 0)
        conn_close_client(c);
    if (c->sfd < 0 && c->cfd >= 0 && c->q[H_PROXY_DOWN].head == NULL)
        conn_close_client(c);
    return c->cfd < 0 && c->sfd < 0;
}

static void *proxy_run(void *arg)
{
    struct h_proxy *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        int64_t now = proxy_now_ms();
        size_t n = 0, cap = 2;
        for (struct pconn *c = p->conns; c != NULL; c = c->next)
            cap += 2;
        struct pollfd *fds = calloc(cap, sizeof *fds);
        if (fds == NULL)
            abort();
        fds[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        for (struct pconn *c = p->conns; c != NULL; c = c->next) {
            short ce = (c->c_eof ? 0 : POLLIN) | (head_ready(&c->q[1], now) ? POLLOUT : 0);
            short se = (c->s_eof ? 0 : POLLIN) | (head_ready(&c->q[0], now) ? POLLOUT : 0);
            fds[n++] = (struct pollfd){.fd = c->cfd, .events = ce};
            fds[n++] = (struct pollfd){.fd = c->sfd, .events = se};
        }
        int timeout = next_due(p, now);
        pthread_mutex_unlock(&p->mu);
        poll(fds, n, timeout);
        pthread_mutex_lock(&p->mu);
        if (fds[0].revents & POLLIN) {
            char drain[64];
            while (read(p->wake[0], drain, sizeof drain) > 0)
                ;
        }
        /* The list may have changed while the lock was free: match by descriptor. */
        now = proxy_now_ms();
        size_t i = 2;
        for (struct pconn *c = p->conns; c != NULL && i + 1 < n; c = c->next, i += 2) {
            if (fds[i].fd == c->cfd && c->cfd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
                !c->c_eof && pump_in(p, c, c->cfd, H_PROXY_UP, now))
                c->c_eof = 1;
            if (fds[i + 1].fd == c->sfd && c->sfd >= 0 &&
                (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) && !c->s_eof &&
                pump_in(p, c, c->sfd, H_PROXY_DOWN, now))
                c->s_eof = 1;
        }
        free(fds);
        if (p->stop)
            break;
        proxy_accept(p);
        struct pconn **pp = &p->conns;
        while (*pp != NULL) {
            struct pconn *c = *pp;
            if (c->sfd >= 0 && pump_out(&c->q[H_PROXY_UP], c->sfd, now) < 0) {
                close_fd(&c->sfd);
                c->s_eof = 1;
                queue_clear(&c->q[H_PROXY_UP]);
            }
            if (c->cfd >= 0 && pump_out(&c->q[H_PROXY_DOWN], c->cfd, now) < 0)
                conn_close_client(c);
            if (conn_settle(c)) {
                *pp = c->next;
                conn_free(c);
            } else {
                pp = &c->next;
            }
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct h_proxy *h_proxy_start(const char *listen_path, const char *target_path)
{
    struct h_proxy *p = calloc(1, sizeof *p);
    if (p == NULL || strlen(target_path) >= sizeof p->target) {
        free(p);
        return NULL;
    }
    strcpy(p->target, target_path);
    pthread_mutex_init(&p->mu, NULL);
    unlink(listen_path);
    p->lfd = unix_socket(listen_path, 1);
    if (p->lfd < 0 || pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "harness: proxy on %s: %s\n", listen_path, strerror(errno));
        if (p->lfd >= 0)
            close(p->lfd);
        free(p);
        return NULL;
    }
    if (pthread_create(&p->thread, NULL, proxy_run, p) != 0) {
        close(p->lfd);
        close(p->wake[0]);
        close(p->wake[1]);
        free(p);
        return NULL;
    }
    return p;
}

void h_proxy_free(struct h_proxy *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    char b = 1;
    ssize_t n = write(p->wake[1], &b, 1);
    (void)n;
    pthread_join(p->thread, NULL);
    while (p->conns != NULL) {
        struct pconn *c = p->conns;
        p->conns = c->next;
        conn_free(c);
    }
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
