/* SPDX-License-Identifier: BSD-3-Clause */
/* cleanup.c — see cleanup.h. Entries wait in a timer heap keyed by their next attempt. */
#include "cleanup.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "calls.h"
#include "lock.h"
#include "log.h"
#include "pubsub.h"
#include "pool.h"
#include "reply.h"
#include "resource.h"
#include "server.h"
#include "theap.h"
#include "util.h"

#define CLEANUP_MAX 65536
#define CLEANUP_FIRST_MS 200
#define CLEANUP_BACKOFF_MAX_MS 5000

struct cleanup {
    struct cleanup_list *list; /* NULL once the list is gone */
    struct resource *res;      /* counted reference: its key, route and waiters */
    char token[UTIL_UUID_LEN + 1];
    int64_t give_up_ms;
    int64_t answered_ms; /* when Redis first answered an attempt; 0 = not yet */
    uint32_t backoff_ms;
    uint8_t shared;      /* a place among the shared holders, not the key */
    uint8_t sending;     /* a call is in flight; its callback owns the entry */
    struct theap_node timer;
};

struct cleanup_list {
    struct server *srv;
    struct theap due;    /* entries not in flight, by next attempt */
    struct event *ev;    /* fires at the earliest attempt */
    int64_t armed_ms;    /* what ev is set for; -1 none */
    uint32_t n;          /* entries, in flight included */
    int stopping;        /* the daemon is shutting down: one attempt each, no new entries */
};

static void cleanup_fire(evutil_socket_t fd, short what, void *arg);

struct cleanup_list *cleanup_new(struct server *srv)
{
    struct cleanup_list *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return NULL;
    cl->srv = srv;
    theap_init(&cl->due);
    cl->armed_ms = -1;
    cl->ev = evtimer_new(srv->base, cleanup_fire, cl);
    if (cl->ev == NULL) {
        free(cl);
        return NULL;
    }
    return cl;
}

static void entry_free(struct cleanup *e)
{
    resource_unref(e->res);
    free(e);
}

#define ENTRY_OF(node) ((struct cleanup *)((char *)(node) - offsetof(struct cleanup, timer)))

void cleanup_free(struct cleanup_list *cl)
{
    if (cl == NULL)
        return;
    struct theap_node *node;
    while ((node = theap_first(&cl->due)) != NULL) {
        theap_remove(&cl->due, node);
        entry_free(ENTRY_OF(node));
    }
    /* Entries in flight are not in the heap: rpool_free, which rlockd_free runs
     * first, has already answered (and so freed) them. */
    theap_free(&cl->due);
    event_free(cl->ev);
    free(cl);
}

uint32_t cleanup_count(const struct cleanup_list *cl)
{
    return cl->n;
}

/* Aim the event at the earliest attempt. */
static void cleanup_rearm(struct cleanup_list *cl)
{
    struct theap_node *first = theap_first(&cl->due);
    int64_t at = first != NULL ? first->at : -1;
    if (at == cl->armed_ms)
        return;
    cl->armed_ms = at;
    if (at < 0) {
        evtimer_del(cl->ev);
        return;
    }
    struct timeval tv = util_tv_ms(at - util_now_ms());
    evtimer_add(cl->ev, &tv);
}

/* The list has delta entries more: srv->ncleanups follows (the stop gate waits for them). */
static void entries_changed(struct cleanup_list *cl, int delta)
{
    cl->n = (uint32_t)((int64_t)cl->n + delta);
    cl->srv->ncleanups = cl->n;
}

static void entry_at(struct cleanup_list *cl, struct cleanup *e, int64_t at)
{
    if (theap_set(&cl->due, &e->timer, at) != 0) {
        log_warn("cleanup: out of memory: %s is left to expire by its ttl", e->res->key);
        entries_changed(cl, -1);
        entry_free(e);
    }
}

void cleanup_add(struct server *srv, struct resource *res, const char *token, int shared,
                 int64_t not_before_ms, int64_t give_up_ms)
{
    struct cleanup_list *cl = srv->cleanups;
    if (cl->stopping) {
        /* What fails while stopping had its attempt; its key expires by its ttl. */
        log_debug("cleanup: shutting down: %s is left to expire by its ttl", res->key);
        return;
    }
    if (cl->n >= CLEANUP_MAX) {
        log_warn("cleanup list full: %s is left to expire by its ttl", res->key);
        return;
    }
    struct cleanup *e = calloc(1, sizeof *e);
    if (e == NULL) {
        log_warn("cleanup: out of memory: %s is left to expire by its ttl", res->key);
        return;
    }
    e->res = res;
    resource_ref(res);
    snprintf(e->token, sizeof e->token, "%s", token);
    e->give_up_ms = give_up_ms;
    e->shared = shared != 0;
    e->backoff_ms = CLEANUP_FIRST_MS;
    e->list = cl;
    entries_changed(cl, 1);
    entry_at(cl, e, not_before_ms);
    cleanup_rearm(cl);
    log_debug("cleanup: will delete %s by token (%u pending)", res->key, cl->n);
}

static void entry_done(struct cleanup_list *cl, struct cleanup *e)
{
    entries_changed(cl, -1);
    entry_free(e);
}

void cleanup_stop(struct cleanup_list *cl, int64_t deadline_ms)
{
    cl->stopping = 1;
    /* Collect first, remove after: removing reorders the heap's array. */
    size_t late = 0;
    for (size_t i = 0; i < cl->due.n; i++)
        late += theap_at(&cl->due, i)->at > deadline_ms;
    struct theap_node **drop = late > 0 ? malloc(late * sizeof *drop) : NULL;
    uint32_t dropped = 0;
    if (drop != NULL) {
        size_t k = 0;
        for (size_t i = 0; i < cl->due.n; i++)
            if (theap_at(&cl->due, i)->at > deadline_ms)
                drop[k++] = theap_at(&cl->due, i);
        for (size_t i = 0; i < k; i++) {
            theap_remove(&cl->due, drop[i]);
            entry_done(cl, ENTRY_OF(drop[i]));
            dropped++;
        }
        free(drop);
    } else {
        /* Out of memory: take the latest one at a time (each pass re-reads the heap). */
        for (;;) {
            struct theap_node *late_one = NULL;
            for (size_t i = 0; i < cl->due.n; i++)
                if (theap_at(&cl->due, i)->at > deadline_ms)
                    late_one = theap_at(&cl->due, i);
            if (late_one == NULL)
                break;
            theap_remove(&cl->due, late_one);
            entry_done(cl, ENTRY_OF(late_one));
            dropped++;
        }
    }
    if (dropped > 0)
        log_warn("%u delete%s by token not yet due (a lost lock's validity still runs) left "
                 "undone at shutdown; those keys expire by ttl",
                 dropped, dropped == 1 ? "" : "s");
    if (cl->n > 0)
        log_info("%u delete%s by token to try before exiting", cl->n, cl->n == 1 ? "" : "s");
    cleanup_rearm(cl);
}

/* What a confirmed cleanup did: an exclusive key deleted, or one holder's place given up. */
static void log_done(const struct cleanup *e)
{
    if (e->shared)
        log_info("cleanup: gave up a place in %s left by an unconfirmed operation", e->res->key);
    else
        log_info("cleanup: deleted %s left by an unconfirmed operation", e->res->key);
}

static void cleanup_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    (void)err;
    struct cleanup *e = arg;
    struct cleanup_list *cl = e->list;
    e->sending = 0;
    if (cl == NULL) { /* the list was freed meanwhile */
        entry_free(e);
        return;
    }
    int64_t now = util_now_ms();
    enum reply_delete_kind kind = reply_delete(reply);
    if (cl->stopping) {
        /* One attempt each at shutdown: there is no time to settle or retry. */
        if (kind == REPLY_DELETE_DONE)
            log_done(e);
        else if (kind == REPLY_DELETE_UNKNOWN)
            log_warn("cleanup: delete of %s not confirmed at shutdown; it expires by ttl",
                     e->res->key);
        entry_done(cl, e);
        server_check_stopped(cl->srv);
        return;
    }
    if (kind != REPLY_DELETE_UNKNOWN) {
        if (kind == REPLY_DELETE_DONE) {
            log_done(e);
            /* A local waiter may have seen the key's old (perhaps lengthened)
             * PTTL and sleep until then: the lock is free now. */
            lock_kick(e->res);
        }
        if (e->answered_ms == 0)
            e->answered_ms = now;
        if (now - e->answered_ms >= CLEANUP_SETTLE_MS) {
            entry_done(cl, e); /* nothing sent before can set it again now */
            return;
        }
        entry_at(cl, e, e->answered_ms + CLEANUP_SETTLE_MS);
    } else {
        e->backoff_ms = e->backoff_ms * 2 > CLEANUP_BACKOFF_MAX_MS ? CLEANUP_BACKOFF_MAX_MS
                                                                   : e->backoff_ms * 2;
        entry_at(cl, e, now + e->backoff_ms);
    }
    cleanup_rearm(cl);
}

static void cleanup_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct cleanup_list *cl = arg;
    struct server *srv = cl->srv;
    int64_t now = util_now_ms();
    cl->armed_ms = -1;
    struct theap_node *node;
    while ((node = theap_first(&cl->due)) != NULL && node->at <= now) {
        struct cleanup *e = ENTRY_OF(node);
        theap_remove(&cl->due, node);
        if (now >= e->give_up_ms) {
            log_warn("cleanup: gave up deleting %s: Redis did not answer in time", e->res->key);
            entry_done(cl, e);
            continue;
        }
        struct resource *res = e->res;
        if (!rpool_route_ready(srv->pool, res->route)) {
            if (cl->stopping) {
                entry_done(cl, e);
                continue;
            }
            entry_at(cl, e, now + e->backoff_ms);
            continue;
        }
        e->sending = 1;
        calls_release(srv, res, e->token, e->shared, cleanup_reply_cb, e);
    }
    cleanup_rearm(cl);
    if (cl->stopping)
        server_check_stopped(srv);
}

