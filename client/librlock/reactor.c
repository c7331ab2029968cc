/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reactor.c — the library's two threads, shared by every blocking client of
 * the process, and what fork() does to them.
 *
 * The I/O thread waits in epoll on every blocking client's socket and on a
 * CLOCK_BOOTTIME timerfd (a clock that keeps counting while the machine is
 * suspended, as the daemon's peers do). Readable: the engine reads and acts
 * on the frames, waking the callers whose answers came. (While a blocking
 * caller reads its client's socket itself, the I/O thread leaves it alone:
 * see rlk_reactor_lead.) Writable: it writes
 * what callers queued but could not write themselves. Timer: the clients
 * whose keepalive or liveness check is due, kept in a min-heap keyed by that
 * time. It never runs application code, so a slow callback cannot delay a
 * keepalive and cost every client its session.
 *
 * The callback thread runs the lost-lock and election callbacks, one at a
 * time, from a queue the engine's notes are posted to.
 *
 * Lazy hand-back: a leader that ends with no other call of its client
 * awaiting an answer leaves the socket off the I/O thread's read interest
 * (two epoll_ctl a call saved: a thread calling in a loop leads every call).
 * Whatever comes meanwhile (a keepalive's answer, a lost lock, the end of
 * the connection) is read by the next leader, or by the I/O thread once a
 * tick (every REACTOR_LAZY_MS, armed only while some client is lazy) finds
 * the client has not led for that long: at most twice that late.
 *
 * Removing a client: the I/O thread holds client pointers only within one
 * turn of its loop (epoll's data, the heap pop), and counts turns. A client
 * leaving the epoll set and the heap waits (rlk_reactor_remove) until the
 * next turn has begun: no pointer to it is left.
 *
 * fork(): the prepare handler takes every lock of the library (registry,
 * each client's mutex, reactor, callback queue), so the child inherits
 * consistent memory and no lock held by a thread that does not exist there.
 * The child gets a new fork generation: its inherited clients see that and
 * stay off their connections, its reactor starts from scratch (the epoll,
 * timer and wake descriptors are the parent's: closed, not used) and no
 * callback is carried over.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define REACTOR_EVENTS 64
/* How long a client's socket may stay off the I/O thread's read interest
 * after its last leader (lazy hand-back, above); the tick's period. */
#define REACTOR_LAZY_MS 4

/* --- the registry of clients, and fork ---------------------------------------------- */

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rlock_client *registry;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static atomic_uint fork_gen;

unsigned rlk_fork_gen(void)
{
    return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

/* --- the reactor --------------------------------------------------------------------- */

/* The I/O thread's state: every blocking client's socket and keepalive timer. */
static struct reactor {
    pthread_mutex_t mu;
    pthread_cond_t turn_cv;   /* a new turn of the loop began */
    int started;
    int epfd, timerfd, wakefd;
    int tickfd;               /* the lazy clients' tick (timerfd), -1 none */
    int tick_armed;
    struct rlock_client *lazy; /* clients whose socket a leader left off the read interest */
    uint64_t turn;
    int64_t armed;            /* what the timerfd is set for (rlk_alive_ms), -1 none */
    struct rlock_client **heap;
    size_t n, cap;
} reactor = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .turn_cv = PTHREAD_COND_INITIALIZER,
    .epfd = -1,
    .timerfd = -1,
    .wakefd = -1,
    .tickfd = -1,
    .armed = -1,
};

/* epoll data of the three descriptors that are not clients. */
static int tag_timer, tag_wake, tag_tick;

/* --- the callback queue --------------------------------------------------------------- */

struct cb_item {
    struct cb_item *next;
    struct rlock_client *c;
    struct rlk_note *notes;
};

/* The callback thread's queue of lost-lock notes. */
static struct cbqueue {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* an item was queued */
    pthread_cond_t idle_cv;   /* a callback returned */
    struct cb_item *head, **tail;
    struct rlock_client *current; /* whose callback runs now */
    pthread_t thread;
} cbq = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .idle_cv = PTHREAD_COND_INITIALIZER,
    .tail = &cbq.head,
};

static void notes_free(struct rlk_note *n)
{
    while (n != NULL) {
        struct rlk_note *next = n->next;
        free(n);
        n = next;
    }
}

/* --- timer heap (reactor.mu held) ------------------------------------------------------------ */

static void heap_set(size_t i, struct rlock_client *c)
{
    reactor.heap[i] = c;
    c->heap_idx = i + 1;
}

static void heap_up(size_t i)
{
    struct rlock_client *c = reactor.heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (reactor.heap[p]->wake_at <= c->wake_at)
            break;
        heap_set(i, reactor.heap[p]);
        i = p;
    }
    heap_set(i, c);
}

static void heap_down(size_t i)
{
    struct rlock_client *c = reactor.heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        int64_t best = c->wake_at;
        if (l < reactor.n && reactor.heap[l]->wake_at < best)
            m = l, best = reactor.heap[l]->wake_at;
        if (l + 1 < reactor.n && reactor.heap[l + 1]->wake_at < best)
            m = l + 1;
        if (m == i)
            break;
        heap_set(i, reactor.heap[m]);
        i = m;
    }
    heap_set(i, c);
}

static void heap_remove(struct rlock_client *c)
{
    if (c->heap_idx == 0)
        return;
    size_t i = c->heap_idx - 1;
    c->heap_idx = 0;
    struct rlock_client *last = reactor.heap[--reactor.n];
    if (last == c)
        return;
    heap_set(i, last);
    heap_up(i);
    heap_down(last->heap_idx - 1);
}

/* Put c in the heap at wake_at, or move it there. 0, or -1 when out of memory. */
static int heap_put(struct rlock_client *c, int64_t wake_at)
{
    if (c->heap_idx != 0) {
        c->wake_at = wake_at;
        heap_up(c->heap_idx - 1);
        heap_down(c->heap_idx - 1);
        return 0;
    }
    if (reactor.n == reactor.cap) {
        size_t cap = reactor.cap ? reactor.cap * 2 : 64;
        struct rlock_client **h = realloc(reactor.heap, cap * sizeof *h);
        if (h == NULL)
            return -1;
        reactor.heap = h;
        reactor.cap = cap;
    }
    c->wake_at = wake_at;
    heap_set(reactor.n++, c);
    heap_up(reactor.n - 1);
    return 0;
}

/* Aim the timerfd at the heap's earliest time. */
static void timer_rearm(void)
{
    int64_t at = reactor.n > 0 ? reactor.heap[0]->wake_at : -1;
    if (at == reactor.armed || reactor.timerfd < 0)
        return;
    struct itimerspec its = {0};
    if (at >= 0) {
        its.it_value.tv_sec = at / 1000;
        its.it_value.tv_nsec = (long)(at % 1000) * 1000000L;
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1; /* all zero would disarm it */
    }
    if (timerfd_settime(reactor.timerfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        reactor.armed = at;
}

/* --- serving a client ------------------------------------------------------------------ */

/*
 * c->mu held: epoll interest follows the engine (write interest, or nothing
 * once it ended) and the leader (no read interest while a caller reads).
 */
static void interest_update(struct rlock_client *c)
{
    if (!c->epoll_in)
        return;
    if (!rlk_eng_linked(c)) {
        /* A lost connection stays readable (EOF): stop watching it. */
        epoll_ctl(reactor.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->epoll_in = 0;
        c->epoll_out = 0;
        c->epoll_rd = 0;
        return;
    }
    int want_out = rlk_eng_want_write(c);
    int want_rd = c->leader_call == NULL && !c->rd_lazy;
    if (want_out == c->epoll_out && want_rd == c->epoll_rd)
        return;
    struct epoll_event ev = {
        .events = (want_rd ? EPOLLIN : 0u) | (want_out ? EPOLLOUT : 0u),
        .data.ptr = c,
    };
    if (epoll_ctl(reactor.epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0) {
        c->epoll_out = want_out;
        c->epoll_rd = want_rd;
    }
}

/* c->mu held: move c's timer earlier if its engine wants to run before wake_at says. */
static void timer_update(struct rlock_client *c, int64_t next)
{
    if (next < 0)
        return;
    pthread_mutex_lock(&reactor.mu);
    if (c->registered && (c->heap_idx == 0 || next < c->wake_at)) {
        (void)heap_put(c, next);
        timer_rearm();
    }
    pthread_mutex_unlock(&reactor.mu);
}

static void serve(struct rlock_client *c, uint32_t events)
{
    rlk_client_lock(c);
    if (rlk_eng_linked(c)) {
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            rlk_eng_read(c);
        if ((events & EPOLLOUT) && rlk_eng_linked(c))
            rlk_eng_flush(c);
        /* A Hello answered or a short lease granted may need a keepalive sooner. */
        if (c->state != RLK_SESSION_ENDED)
            timer_update(c, rlk_eng_timers(c, rlk_alive_ms()));
    }
    interest_update(c);
    rlk_client_unlock(c);
}

static void drain(int fd)
{
    uint64_t v;
    ssize_t n = read(fd, &v, sizeof v);
    (void)n; /* only the wake-up matters */
}

/* --- lazy hand-back --------------------------------------------------------------------- */

/* c->mu and reactor.mu held: take c off the lazy list (its interest is the caller's). */
static void lazy_unlink(struct rlock_client *c)
{
    if (!c->lazy_listed)
        return;
    *c->lazy_pprev = c->lazy_next;
    if (c->lazy_next != NULL)
        c->lazy_next->lazy_pprev = c->lazy_pprev;
    c->lazy_next = NULL;
    c->lazy_pprev = NULL;
    c->lazy_listed = 0;
}

/* reactor.mu held: run the tick every REACTOR_LAZY_MS, or stop it. */
static void tick_arm(int on)
{
    if (on == reactor.tick_armed || reactor.tickfd < 0)
        return;
    struct itimerspec its = {0};
    if (on) {
        its.it_value.tv_nsec = REACTOR_LAZY_MS * 1000000L;
        its.it_interval.tv_nsec = REACTOR_LAZY_MS * 1000000L;
    }
    if (timerfd_settime(reactor.tickfd, 0, &its, NULL) == 0)
        reactor.tick_armed = on;
}

/*
 * c->mu held, its leader just gone: leave the read interest off when no
 * other call awaits an answer (those callers wait for the I/O thread to read
 * it), and let the tick hand the socket back if no leader comes. Returns 1
 * when it did so.
 */
static int lazy_begin(struct rlock_client *c)
{
    if (c->pending.n > 0 || c->state != RLK_SESSION_OPEN || c->link != RLK_LINK_UP ||
        !c->epoll_in || !c->registered)
        return 0;
    c->rd_lazy = 1;
    c->lazy_since = rlk_mono_ms();
    if (!c->lazy_listed) {
        pthread_mutex_lock(&reactor.mu);
        c->lazy_next = reactor.lazy;
        if (reactor.lazy != NULL)
            reactor.lazy->lazy_pprev = &c->lazy_next;
        reactor.lazy = c;
        c->lazy_pprev = &reactor.lazy;
        c->lazy_listed = 1;
        tick_arm(1);
        pthread_mutex_unlock(&reactor.mu);
    }
    return 1;
}

/*
 * The tick (I/O thread): hand back the sockets of lazy clients no leader has
 * read for REACTOR_LAZY_MS. A client whose mutex is taken is busy (a caller,
 * a leader): it is looked at next tick. trylock, since the lock order is
 * client before reactor.
 */
static void run_tick(void)
{
    int64_t now = rlk_mono_ms();
    pthread_mutex_lock(&reactor.mu);
    struct rlock_client *c = reactor.lazy, *next;
    for (; c != NULL; c = next) {
        next = c->lazy_next;
        if (pthread_mutex_trylock(&c->mu) != 0)
            continue;
        if (!c->rd_lazy || (c->leader_call == NULL && now - c->lazy_since >= REACTOR_LAZY_MS)) {
            lazy_unlink(c);
            c->rd_lazy = 0;
            interest_update(c); /* data already there: the next epoll_wait reports it */
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (reactor.lazy == NULL)
        tick_arm(0);
    pthread_mutex_unlock(&reactor.mu);
}

/* --- a caller that reads for itself ------------------------------------------------------ */

/*
 * Leader/follower: a blocking caller waiting for its answer, when no other
 * thread reads the socket for it, takes the socket off the I/O thread's read
 * interest and reads it itself. The answer then wakes the caller directly,
 * instead of waking the I/O thread, which wakes the caller: one context
 * switch instead of two on every call. Whatever it reads for other callers
 * (threads sharing the client) or for the engine (keepalive answers, lost
 * locks) is handled exactly as the I/O thread would, under c->mu; only one
 * thread reads at a time since every read happens under c->mu. When it has
 * its answer it gives the socket back.
 */

/*
 * What interrupts a leader's poll (its call completed by another thread, a
 * cancellation) is an eventfd of the leader's thread, not of the client: a
 * thread driving ten thousand clients needs one descriptor, not ten
 * thousand. Made on first use, closed when the thread exits; a forked child
 * makes its own (the inherited one is shared with the parent, whose drains
 * would eat the child's wake-ups).
 */
static pthread_key_t leadfd_key;
static pthread_once_t leadfd_once = PTHREAD_ONCE_INIT;
static int leadfd_key_ok;
static __thread int leadfd = -1;
static __thread unsigned leadfd_gen;

static void leadfd_close(void *v)
{
    close((int)(intptr_t)v - 1);
}

static void leadfd_key_make(void)
{
    leadfd_key_ok = pthread_key_create(&leadfd_key, leadfd_close) == 0;
}

static int thread_leadfd(void)
{
    unsigned gen = rlk_fork_gen();
    if (leadfd >= 0 && leadfd_gen == gen)
        return leadfd;
    pthread_once(&leadfd_once, leadfd_key_make);
    if (!leadfd_key_ok)
        return -1;
    if (leadfd >= 0)
        close(leadfd); /* the parent's, inherited by this child */
    leadfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    leadfd_gen = gen;
    if (leadfd >= 0 && pthread_setspecific(leadfd_key, (void *)(intptr_t)(leadfd + 1)) != 0) {
        close(leadfd);
        leadfd = -1;
    }
    return leadfd;
}

int rlk_reactor_lead_begin(struct rlock_client *c, struct rlk_call *call)
{
    if (c->leader_call != NULL || c->state != RLK_SESSION_OPEN || c->link != RLK_LINK_UP ||
        !c->epoll_in)
        return 0;
    int fd = thread_leadfd();
    if (fd < 0)
        return 0;
    c->leader_call = call;
    /* seq_cst, as rlock_cancel's store of the state and load of this: one of
     * the two sides sees the other's store. */
    atomic_store_explicit(&call->lead_fd1, fd + 1, memory_order_seq_cst);
    interest_update(c);
    return 1;
}

void rlk_reactor_lead_end(struct rlock_client *c, struct rlk_call *call)
{
    atomic_store_explicit(&call->lead_fd1, 0, memory_order_seq_cst);
    c->leader_call = NULL;
    /* The I/O thread reads again (at once if data is waiting), or lazily. */
    if (!lazy_begin(c))
        c->rd_lazy = 0;
    interest_update(c);
}

int rlk_reactor_lead_wait(struct rlock_client *c, struct rlk_call *call, int64_t deadline)
{
    int wakefd = atomic_load_explicit(&call->lead_fd1, memory_order_relaxed) - 1;
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = wakefd, .events = POLLIN}};
    int rc = 0;
    for (;;) {
        unsigned s = atomic_load_explicit(&call->state, memory_order_acquire);
        if (s & (RLK_CALL_DONE | RLK_CALL_CANCEL_REQ))
            break;
        int64_t left = deadline - rlk_mono_ms();
        if (left <= 0)
            break;
        int n = poll(p, 2, left > INT_MAX ? INT_MAX : (int)left);
        if (n < 0 && errno != EINTR) {
            rc = -1; /* cannot poll: the I/O thread reads instead */
            break;
        }
        if (n <= 0)
            continue; /* EINTR or the deadline: the checks above decide */
        if (p[1].revents & POLLIN)
            drain(wakefd);
        if (p[0].revents == 0)
            continue;
        rlk_client_lock(c);
        if (c->state == RLK_SESSION_OPEN && c->link == RLK_LINK_UP) {
            c->leader_reading = 1;
            rlk_eng_read(c);
            c->leader_reading = 0;
            if (c->state != RLK_SESSION_ENDED)
                timer_update(c, rlk_eng_timers(c, rlk_alive_ms()));
        }
        /* What reading queued (a held-back request, a keepalive) may wait for
         * the socket: the I/O thread writes it. */
        interest_update(c);
        rlk_client_unlock(c);
    }
    rlk_client_lock(c);
    rlk_reactor_lead_end(c, call);
    rlk_client_unlock(c);
    return rc;
}

int rlk_reactor_lead(struct rlock_client *c, struct rlk_call *call, int64_t deadline)
{
    rlk_client_lock(c);
    int lead = rlk_reactor_lead_begin(c, call);
    unsigned s = atomic_load_explicit(&call->state, memory_order_seq_cst);
    if (lead && (s & (RLK_CALL_DONE | RLK_CALL_CANCEL_REQ))) {
        rlk_reactor_lead_end(c, call);
        lead = 0;
    }
    rlk_client_unlock(c);
    if (lead && rlk_reactor_lead_wait(c, call, deadline) < 0)
        return -1;
    return lead;
}

void rlk_reactor_wake_leader(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a full counter still wakes the poll */
}

/* Serve every client whose timer is due. */
static void run_timers(void)
{
    int64_t now = rlk_alive_ms();
    for (;;) {
        pthread_mutex_lock(&reactor.mu);
        if (reactor.n == 0 || reactor.heap[0]->wake_at > now) {
            timer_rearm();
            pthread_mutex_unlock(&reactor.mu);
            return;
        }
        struct rlock_client *c = reactor.heap[0];
        heap_remove(c);
        pthread_mutex_unlock(&reactor.mu);

        rlk_client_lock(c);
        int64_t next = c->state != RLK_SESSION_ENDED ? rlk_eng_timers(c, now) : -1;
        timer_update(c, next);
        interest_update(c);
        rlk_client_unlock(c);
    }
}

static void *io_main(void *arg)
{
    (void)arg;
    struct epoll_event evs[REACTOR_EVENTS];
    for (;;) {
        pthread_mutex_lock(&reactor.mu);
        reactor.turn++;
        pthread_cond_broadcast(&reactor.turn_cv);
        int epfd = reactor.epfd;
        pthread_mutex_unlock(&reactor.mu);
        int n = epoll_wait(epfd, evs, REACTOR_EVENTS, -1);
        if (n < 0 && errno != EINTR)
            n = 0; /* cannot happen with a valid epfd; keep turning */
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &tag_wake) {
                drain(reactor.wakefd);
            } else if (p == &tag_timer) {
                drain(reactor.timerfd);
                run_timers();
            } else if (p == &tag_tick) {
                drain(reactor.tickfd);
                run_tick();
            } else {
                serve(p, evs[i].events);
            }
        }
    }
    return NULL;
}

static void *cb_main(void *arg)
{
    (void)arg;
    rlk_in_callback = 1;
    pthread_mutex_lock(&cbq.mu);
    for (;;) {
        while (cbq.head == NULL)
            pthread_cond_wait(&cbq.work_cv, &cbq.mu);
        struct cb_item *it = cbq.head;
        cbq.head = it->next;
        if (cbq.head == NULL)
            cbq.tail = &cbq.head;
        struct rlock_client *c = it->c;
        cbq.current = c;
        pthread_mutex_unlock(&cbq.mu);
        for (struct rlk_note *n = it->notes; n != NULL; n = n->next) {
            /* Closed from an earlier callback of this batch: no further calls. */
            if (atomic_load(&c->cb_closed))
                break;
            rlk_note_deliver(c, n);
        }
        notes_free(it->notes);
        free(it);
        pthread_mutex_lock(&cbq.mu);
        cbq.current = NULL;
        int free_it = c->free_after_cb;
        pthread_cond_broadcast(&cbq.idle_cv);
        if (free_it) {
            pthread_mutex_unlock(&cbq.mu);
            rlk_client_free(c);
            pthread_mutex_lock(&cbq.mu);
        }
    }
    return NULL;
}

/* reactor.mu held: create the descriptors and the two threads, once per process (and per fork). */
static int reactor_start(void)
{
    if (reactor.started)
        return 0;
    reactor.epfd = epoll_create1(EPOLL_CLOEXEC);
    reactor.timerfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    reactor.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    reactor.tickfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    reactor.armed = -1;
    reactor.tick_armed = 0;
    struct epoll_event te = {.events = EPOLLIN, .data.ptr = &tag_timer};
    struct epoll_event we = {.events = EPOLLIN, .data.ptr = &tag_wake};
    struct epoll_event ke = {.events = EPOLLIN, .data.ptr = &tag_tick};
    if (reactor.epfd < 0 || reactor.timerfd < 0 || reactor.wakefd < 0 || reactor.tickfd < 0 ||
        epoll_ctl(reactor.epfd, EPOLL_CTL_ADD, reactor.timerfd, &te) < 0 ||
        epoll_ctl(reactor.epfd, EPOLL_CTL_ADD, reactor.wakefd, &we) < 0 ||
        epoll_ctl(reactor.epfd, EPOLL_CTL_ADD, reactor.tickfd, &ke) < 0)
        goto fail;
    /* Signals meant for the application must never land on the library's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t io;
    int rc = pthread_create(&io, &attr, io_main, NULL);
    if (rc == 0)
        rc = pthread_create(&cbq.thread, &attr, cb_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        goto fail; /* an I/O thread started alone just waits on an empty set */
    reactor.started = 1;
    return 0;
fail:
    if (reactor.epfd >= 0)
        close(reactor.epfd);
    if (reactor.timerfd >= 0)
        close(reactor.timerfd);
    if (reactor.wakefd >= 0)
        close(reactor.wakefd);
    if (reactor.tickfd >= 0)
        close(reactor.tickfd);
    reactor.epfd = reactor.timerfd = reactor.wakefd = reactor.tickfd = -1;
    return -1;
}

int rlk_reactor_add(struct rlock_client *c)
{
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&reactor.mu);
    int rc = reactor_start();
    if (rc == 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        rc = epoll_ctl(reactor.epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
    if (rc == 0) {
        c->epoll_in = 1;
        c->epoll_rd = 1;
        c->epoll_out = 0;
        c->registered = 1;
        c->heap_idx = 0;
    }
    pthread_mutex_unlock(&reactor.mu);
    pthread_mutex_unlock(&c->mu);
    return rc == 0 ? 0 : -1;
}

void rlk_reactor_remove(struct rlock_client *c)
{
    pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&reactor.mu);
    int was = c->registered;
    if (was) {
        c->registered = 0;
        heap_remove(c);
        timer_rearm();
        lazy_unlink(c);
        c->rd_lazy = 0;
        if (c->epoll_in)
            epoll_ctl(reactor.epfd, EPOLL_CTL_DEL, c->fd, NULL);
        c->epoll_in = c->epoll_out = c->epoll_rd = 0;
    }
    pthread_mutex_unlock(&c->mu);
    if (was) {
        /* Wait for the I/O thread's next turn: then it holds no pointer to c. */
        uint64_t target = reactor.turn + 1;
        uint64_t one = 1;
        ssize_t n = write(reactor.wakefd, &one, sizeof one);
        (void)n;
        while (reactor.turn < target)
            pthread_cond_wait(&reactor.turn_cv, &reactor.mu);
    }
    pthread_mutex_unlock(&reactor.mu);
}

void rlk_reactor_swap_fd(struct rlock_client *c, int old_fd)
{
    pthread_mutex_lock(&reactor.mu);
    int watched = c->registered;
    if (watched && c->epoll_in && old_fd >= 0)
        epoll_ctl(reactor.epfd, EPOLL_CTL_DEL, old_fd, NULL);
    c->epoll_in = c->epoll_out = c->epoll_rd = 0;
    lazy_unlink(c); /* the new connection is read by the I/O thread from the start */
    c->rd_lazy = 0;
    if (watched) {
        /* Writable tells a connect's end; then interest_update trims it. */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
        if (epoll_ctl(reactor.epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0)
            c->epoll_in = c->epoll_out = c->epoll_rd = 1;
    }
    pthread_mutex_unlock(&reactor.mu);
}

void rlk_reactor_want_write(struct rlock_client *c)
{
    interest_update(c);
}

void rlk_reactor_reschedule(struct rlock_client *c, int64_t wake_at)
{
    timer_update(c, wake_at);
}

/* --- callbacks ------------------------------------------------------------------------- */

void rlk_callbacks_post(struct rlock_client *c, struct rlk_note *notes)
{
    struct cb_item *it = malloc(sizeof *it);
    if (it == NULL) {
        notes_free(notes); /* the handles still say LOST */
        return;
    }
    it->next = NULL;
    it->c = c;
    it->notes = notes;
    pthread_mutex_lock(&cbq.mu);
    *cbq.tail = it;
    cbq.tail = &it->next;
    pthread_cond_signal(&cbq.work_cv);
    pthread_mutex_unlock(&cbq.mu);
}

int rlk_callbacks_forget(struct rlock_client *c)
{
    pthread_mutex_lock(&cbq.mu);
    for (struct cb_item **p = &cbq.head; *p != NULL;) {
        struct cb_item *it = *p;
        if (it->c != c) {
            p = &it->next;
            continue;
        }
        *p = it->next;
        notes_free(it->notes);
        free(it);
    }
    cbq.tail = &cbq.head;
    while (*cbq.tail != NULL)
        cbq.tail = &(*cbq.tail)->next;
    int self = cbq.current == c && rlk_in_callback;
    while (!self && cbq.current == c)
        pthread_cond_wait(&cbq.idle_cv, &cbq.mu);
    pthread_mutex_unlock(&cbq.mu);
    return self;
}

void rlk_callbacks_free_after(struct rlock_client *c)
{
    pthread_mutex_lock(&cbq.mu);
    c->free_after_cb = 1;
    pthread_mutex_unlock(&cbq.mu);
}

/* --- registry and fork ----------------------------------------------------------------- */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&registry_mu);
    for (struct rlock_client *c = registry; c != NULL; c = c->reg_next)
        pthread_mutex_lock(&c->mu);
    pthread_mutex_lock(&reactor.mu);
    pthread_mutex_lock(&cbq.mu);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&cbq.mu);
    pthread_mutex_unlock(&reactor.mu);
    for (struct rlock_client *c = registry; c != NULL; c = c->reg_next)
        pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&registry_mu);
}

static void atfork_child(void)
{
    atomic_fetch_add(&fork_gen, 1);
    /* The parent's threads do not exist here, nor do the waits on these conditions. */
    if (reactor.epfd >= 0)
        close(reactor.epfd);
    if (reactor.timerfd >= 0)
        close(reactor.timerfd);
    if (reactor.wakefd >= 0)
        close(reactor.wakefd);
    if (reactor.tickfd >= 0)
        close(reactor.tickfd);
    reactor.epfd = reactor.timerfd = reactor.wakefd = reactor.tickfd = -1;
    reactor.tick_armed = 0;
    reactor.lazy = NULL;
    reactor.started = 0;
    reactor.armed = -1;
    reactor.n = 0;
    pthread_cond_init(&reactor.turn_cv, NULL);
    struct cb_item *it;
    while ((it = cbq.head) != NULL) {
        cbq.head = it->next;
        notes_free(it->notes);
        free(it);
    }
    cbq.tail = &cbq.head;
    cbq.current = NULL;
    pthread_cond_init(&cbq.work_cv, NULL);
    pthread_cond_init(&cbq.idle_cv, NULL);
    for (struct rlock_client *c = registry; c != NULL; c = c->reg_next) {
        c->registered = 0;
        c->heap_idx = 0;
        c->epoll_in = c->epoll_out = c->epoll_rd = 0;
        c->leader_call = NULL; /* its thread stayed in the parent */
        c->rd_lazy = 0;
        c->lazy_listed = 0;
        c->lazy_next = NULL;
        c->lazy_pprev = NULL;
        c->calls_active = 0; /* their threads stayed in the parent */
        pthread_cond_init(&c->idle_cv, NULL);
    }
    pthread_mutex_unlock(&cbq.mu);
    pthread_mutex_unlock(&reactor.mu);
    for (struct rlock_client *c = registry; c != NULL; c = c->reg_next)
        pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&registry_mu);
}

static void atfork_install(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int rlk_registry_add(struct rlock_client *c)
{
    if (pthread_once(&atfork_once, atfork_install) != 0)
        return -1;
    pthread_mutex_lock(&registry_mu);
    c->fork_gen = rlk_fork_gen();
    c->reg_prev = NULL;
    c->reg_next = registry;
    if (registry != NULL)
        registry->reg_prev = c;
    registry = c;
    pthread_mutex_unlock(&registry_mu);
    return 0;
}

void rlk_registry_remove(struct rlock_client *c)
{
    pthread_mutex_lock(&registry_mu);
    if (c->reg_prev != NULL)
        c->reg_prev->reg_next = c->reg_next;
    else if (registry == c)
        registry = c->reg_next;
    if (c->reg_next != NULL)
        c->reg_next->reg_prev = c->reg_prev;
    c->reg_prev = c->reg_next = NULL;
    pthread_mutex_unlock(&registry_mu);
}
