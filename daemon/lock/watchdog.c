/* SPDX-License-Identifier: BSD-3-Clause */
/* watchdog.c — see watchdog.h. */
#include "watchdog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "calls.h"
#include "lease.h"
#include "log.h"
#include "pool.h"
#include "reply.h"
#include "resource.h"
#include "server.h"
#include "session.h"
#include "validity.h"

#define WATCHDOG_RETRY_MS 100 /* after a failed renew; validity keeps counting down */
/* Leases handled per firing before the loop serves other events again. */
#define WATCHDOG_FIRE_MAX 4096

/* The leases due for renewal on one Redis connection, waiting for room in flight. */
struct renewq {
    struct server *srv;
    TAILQ_HEAD(, lease) due; /* each holds a reference; renewing is set */
    uint32_t inflight;       /* renew calls in Redis */
};

struct renew_batch {
    struct renewq *q;
    int64_t sent_ms;
    uint32_t n;
    struct lease *leases[WATCHDOG_BATCH_MAX];
    uint32_t ttls[WATCHDOG_BATCH_MAX]; /* as sent: an Extend may change the lease meanwhile */
};

static void renewq_pump(struct renewq *q);

#define LEASE_OF(node) ((struct lease *)((char *)(node) - offsetof(struct lease, timer)))

static void renew_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct renew_batch *b = arg;
    struct renewq *q = b->q;
    int8_t result[WATCHDOG_BATCH_MAX];
    const char *text = reply_error_text(reply);
    if (reply_renew(reply, b->n, result) != 0)
        log_warn("renew of %u lock%s failed: %s", b->n, b->n == 1 ? "" : "s",
                 reply == NULL ? err : text != NULL ? text : "unexpected reply");
    int64_t now = util_now_ms();
    validity_prefetch(b->leases, b->n);
    for (uint32_t i = 0; i < b->n; i++) {
        struct lease *l = b->leases[i];
        l->renewing = 0;
        int8_t v = result[i];
        if (l->forgotten) {
            /* Released or lost meanwhile: its key's deletion is handled elsewhere. */
        } else if (v == REPLY_RENEW_OK && b->ttls[i] == 0) {
            l->verify = 0; /* a check only (a lease without watchdog): still ours */
            lease_schedule(l);
        } else if (v == REPLY_RENEW_OK) {
            b->q->srv->mx.renewals++;
            l->verify = 0;
            lease_confirmed(l, b->sent_ms, b->ttls[i]);
            lease_schedule(l);
        } else if (v == REPLY_RENEW_MISSING) {
            lease_lose(l, RLOCK__V1__LOST_REASON__LOST_MISSING, "the key is gone");
        } else if (v == REPLY_RENEW_STOLEN) {
            lease_lose(l, RLOCK__V1__LOST_REASON__LOST_STOLEN, "the key holds another token");
        } else {
            b->q->srv->mx.renew_failures++;
            if (lease_trace(l) != NULL)
                log_trace_msg(LOG_LEVEL_INFO, "trace %s: session %s: renew of %s (fence %llu) "
                              "failed: %s; retried", lease_trace(l), l->sess->id, l->res->name,
                              (unsigned long long)l->fence,
                              reply == NULL ? err : text != NULL ? text : "no usable answer");
            lease_unconfirmed(l, b->ttls[i]);
            l->next_renew_ms = now + WATCHDOG_RETRY_MS;
            lease_schedule(l);
        }
        lease_unref(l);
    }
    free(b);
    q->inflight--;
    renewq_pump(q);
}

static void batch_send(struct renew_batch *b)
{
    b->sent_ms = util_now_ms();
    b->q->inflight++;
    calls_renew(b->q->srv, b->leases, b->ttls, b->n, renew_reply_cb, b);
}

/* Send the queue's leases in batches, as far as the in-flight bound allows. */
static void renewq_pump(struct renewq *q)
{
    if (q->srv->freeing)
        return;
    int64_t now = util_now_ms();
    while (q->inflight < WATCHDOG_INFLIGHT_MAX && !TAILQ_EMPTY(&q->due)) {
        struct renew_batch *b = calloc(1, sizeof *b);
        if (b == NULL)
            return; /* the next answer tries again; validity keeps counting down */
        b->q = q;
        struct lease *l;
        struct rpool *pool = q->srv->pool;
        while (b->n < WATCHDOG_BATCH_MAX && (l = TAILQ_FIRST(&q->due)) != NULL) {
            /* One call, one hash slot: a Redis Cluster refuses others (CROSSSLOT). One
             * script: exclusive keys and shared places are renewed differently. */
            if (b->n > 0 && (rpool_route_slot(pool, l->res->route) !=
                                 rpool_route_slot(pool, b->leases[0]->res->route) ||
                             l->shared != b->leases[0]->shared))
                break;
            TAILQ_REMOVE(&q->due, l, renew_link);
            if (l->forgotten || !rpool_route_ready(pool, l->res->route)) {
                /* Released meanwhile, or nothing to send on: try again later. */
                l->renewing = 0;
                if (!l->forgotten) {
                    l->next_renew_ms = now + WATCHDOG_RETRY_MS;
                    lease_schedule(l);
                }
                lease_unref(l);
                continue;
            }
            /* ttl 0: renew.lua only checks the token (the client owns this lease's length). */
            b->ttls[b->n] = l->watchdog ? l->ttl_ms : 0;
            b->leases[b->n++] = l;
        }
        if (b->n == 0) {
            free(b);
            return;
        }
        batch_send(b);
    }
}

static void renew_queue(struct server *srv, struct lease *l)
{
    l->renewing = 1;
    lease_ref(l);
    TAILQ_INSERT_TAIL(&srv->renewqs[l->res->route % srv->nrenewqs].due, l, renew_link);
}

/* l's timer fired at now: lose it, queue it for renewal, or just re-aim its timer. */
static void lease_due(struct server *srv, struct lease *l, int64_t now)
{
    if (lease_max_hold_at(l) != 0 && now >= lease_max_hold_at(l)) {
        lease_lose(l, RLOCK__V1__LOST_REASON__LOST_MAX_HOLD, "held for its max_hold");
        return;
    }
    if (lease_expired(l, now)) {
        lease_lose_expired(l, now);
        return;
    }
    if ((l->watchdog || l->verify) && !l->renewing && now >= l->next_renew_ms) {
        if (!rpool_route_ready(srv->pool, l->res->route))
            l->next_renew_ms = now + WATCHDOG_RETRY_MS; /* validity keeps counting down */
        else
            renew_queue(srv, l);
    }
    lease_schedule(l);
}

void watchdog_verify_all(struct server *srv)
{
    /* One pass over every lease, in one loop turn: a failover is rare. A
     * lease whose connection is ready joins a renew queue (O(1), the replies
     * pace the rest); the others are re-aimed in the timing wheel (O(1)
     * each) — the usual case right after a Sentinel switch, when every
     * connection is being reset. At a million locks that turn is estimated
     * at some hundreds of milliseconds (not measured); pacing it as session
     * ends are paced is the known next step. */
    int64_t now = util_now_ms();
    struct session *s;
    TAILQ_FOREACH(s, &srv->sessions, link) {
        struct lease *l;
        TAILQ_FOREACH(l, &s->leases, sess_link) {
            l->verify = 1;
            if (l->renewing)
                continue; /* its renew went to the old master and fails; the retry checks */
            l->next_renew_ms = now;
            if (rpool_route_ready(srv->pool, l->res->route))
                renew_queue(srv, l);
            else
                lease_schedule(l); /* due now: queued once the new master is ready */
        }
    }
    for (uint32_t r = 0; r < srv->nrenewqs; r++)
        renewq_pump(&srv->renewqs[r]);
}

/*
 * The loss margin assumes the loop runs a due timer at most LEASE_LATENESS_MS
 * late. When it did not (an overloaded host, a stopped or swapped-out
 * process), a LockLost may have reached its holder after the key expired:
 * counted, and said at most once every LATE_WARN_EVERY_MS.
 */
#define LATE_WARN_EVERY_MS 10000
static void watchdog_lateness(struct server *srv, int64_t now)
{
    if (srv->watchdog_armed_ms < 0)
        return; /* not armed: nothing was due */
    int64_t late = now - srv->watchdog_due_ms;
    if (late <= LEASE_LATENESS_MS)
        return;
    srv->mx.timers_late++;
    if (srv->watchdog_late_warned_ms != 0 &&
        now - srv->watchdog_late_warned_ms < LATE_WARN_EVERY_MS)
        return;
    srv->watchdog_late_warned_ms = now;
    log_warn("lease timers ran %lld ms late, more than the %d ms the loss margin allows: the "
             "daemon was held up (host overloaded, process stopped or swapped out); a LockLost "
             "may have come after its lock's key expired (rlockd_lease_timers_late_total)",
             (long long)late, LEASE_LATENESS_MS);
}

static void watchdog_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct server *srv = arg;
    uint64_t ticks;
    if (fd >= 0) {
        ssize_t got = read(fd, &ticks, sizeof ticks);
        (void)got; /* only the wake-up matters */
    }
    watchdog_lateness(srv, util_now_ms());
    srv->watchdog_armed_ms = -1;
    /* Each lease handled re-arms its own timer: the timerfd is set once, at
     * the end, not once per lease (up to WATCHDOG_FIRE_MAX system calls). */
    srv->watchdog_firing = 1;
    struct twheel_node *node;
    int handled = 0;
    int64_t now;
    /* The clock is read afresh for each: handling many leases takes time. */
    while (handled < WATCHDOG_FIRE_MAX &&
           (node = twheel_due(&srv->lease_timers, now = util_now_ms())) != NULL) {
        lease_due(srv, LEASE_OF(node), now);
        handled++;
    }
    for (uint32_t r = 0; r < srv->nrenewqs; r++)
        renewq_pump(&srv->renewqs[r]);
    /* When more is due already, this arms the timerfd in the past: it fires
     * at the next poll, behind the I/O that poll finds. (event_active from
     * here would run this callback again in the same pass, before any
     * socket is looked at.) */
    srv->watchdog_firing = 0;
    watchdog_rearm(srv);
}

void watchdog_rearm(struct server *srv)
{
    int64_t at = twheel_next(&srv->lease_timers);
    if (at == srv->watchdog_armed_ms || srv->watchdog_fd < 0 || srv->watchdog_firing)
        return;
    struct itimerspec its = {0};
    if (at >= 0) {
        if (at < 1)
            at = 1; /* all zero would disarm it */
        its.it_value.tv_sec = at / 1000;
        its.it_value.tv_nsec = (long)(at % 1000) * 1000000L;
    }
    if (timerfd_settime(srv->watchdog_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0) {
        int64_t now = util_now_ms();
        srv->watchdog_armed_ms = at;
        srv->watchdog_due_ms = at > now ? at : now;
    }
}

int watchdog_start(struct server *srv)
{
    if (twheel_init(&srv->lease_timers, util_now_ms()) != 0)
        return -1;
    uint32_t n = rpool_size(srv->pool);
    srv->renewqs = calloc(n, sizeof *srv->renewqs);
    if (srv->renewqs == NULL)
        return -1;
    srv->nrenewqs = n;
    for (uint32_t i = 0; i < n; i++) {
        srv->renewqs[i].srv = srv;
        TAILQ_INIT(&srv->renewqs[i].due);
    }
    srv->watchdog_armed_ms = -1;
    srv->watchdog_fd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (srv->watchdog_fd < 0)
        return -1;
    srv->watchdog_ev =
        event_new(srv->base, srv->watchdog_fd, EV_READ | EV_PERSIST, watchdog_fire, srv);
    if (srv->watchdog_ev == NULL)
        return -1;
    return event_add(srv->watchdog_ev, NULL);
}

void watchdog_stop(struct server *srv)
{
    if (srv->watchdog_ev != NULL)
        event_free(srv->watchdog_ev);
    srv->watchdog_ev = NULL;
    if (srv->watchdog_fd >= 0)
        close(srv->watchdog_fd);
    srv->watchdog_fd = -1;
    twheel_free(&srv->lease_timers);
    for (uint32_t i = 0; i < srv->nrenewqs; i++) {
        struct lease *l;
        while ((l = TAILQ_FIRST(&srv->renewqs[i].due)) != NULL) {
            TAILQ_REMOVE(&srv->renewqs[i].due, l, renew_link);
            lease_unref(l);
        }
    }
    free(srv->renewqs);
    srv->renewqs = NULL;
    srv->nrenewqs = 0;
}
