/* SPDX-License-Identifier: BSD-3-Clause */
/* tombstone.c — see tombstone.h. */
#include "tombstone.h"

#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "config.h"
#include "lease.h"
#include "log.h"
#include "pool.h"
#include "reply.h"
#include "resource.h"
#include "server.h"
#include "util.h"

#define TOMBSTONE_RETRY_MS 100

struct tombstone {
    struct server *srv;
    struct resource *res; /* counted reference */
    char token[UTIL_UUID_LEN + 1];
    int64_t until_ms;
    int swap;             /* this step replaces token (release_many.lua), else SET NX (acquire.lua) */
    struct event *retry_ev;
};

static void tombstone_send(struct tombstone *t);

/* Until t is in Redis, the key may be free there: keep this daemon's acquires off it. */
static void tombstone_guard(struct tombstone *t)
{
    struct resource *res = t->res;
    res->tombstones_unsent++;
    if (t->until_ms > res->promised_until_ms)
        res->promised_until_ms = t->until_ms;
}

static void tombstone_free(struct tombstone *t)
{
    struct server *srv = t->srv;
    if (--t->res->tombstones_unsent == 0)
        t->res->promised_until_ms = 0; /* guarded in Redis now, or the promise is over */
    if (t->retry_ev != NULL)
        event_free(t->retry_ev);
    resource_unref(t->res);
    free(t);
    server_background_done(srv);
}

/* 1 when Redis answered the call (whatever it found): nothing to retry. */
static int answered(const struct tombstone *t, const redisReply *reply)
{
    if (reply == NULL)
        return 0;
    if (!t->swap) {
        uint64_t fence;
        long long pttl;
        int foreign;
        enum reply_acquire_kind k = reply_acquire(reply, &fence, &pttl, &foreign);
        /* WRONG_KIND: a semaphore's group holds the key, which keeps it taken. */
        return k == REPLY_ACQUIRE_GRANTED || k == REPLY_ACQUIRE_BUSY ||
               k == REPLY_ACQUIRE_WRONG_KIND;
    }
    return reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
           reply->element[0]->type == REDIS_REPLY_INTEGER;
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    tombstone_send(arg);
}

static void reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct tombstone *t = arg;
    if (t->swap && answered(t, reply) && reply->element[0]->integer == 0 &&
        !t->srv->freeing) {
        /* The key no longer held token (Redis lost it, or its ttl ran out while
         * Redis was away): set the tombstone from scratch, unless someone has the key. */
        t->swap = 0;
        tombstone_send(t);
        return;
    }
    if (answered(t, reply) || t->srv->freeing || util_now_ms() >= t->until_ms) {
        if (!answered(t, reply))
            log_warn("tombstone for %s not confirmed: %s; the lock may be taken before its "
                     "last holder's validity ends", t->res->name,
                     reply == NULL ? err : "unexpected reply from Redis");
        tombstone_free(t);
        return;
    }
    if (t->retry_ev == NULL)
        t->retry_ev = evtimer_new(t->srv->base, retry_cb, t);
    if (t->retry_ev == NULL) {
        tombstone_free(t);
        return;
    }
    struct timeval tv = util_tv_ms(TOMBSTONE_RETRY_MS);
    evtimer_add(t->retry_ev, &tv);
}

static void tombstone_send(struct tombstone *t)
{
    struct resource *res = t->res;
    int64_t left = t->until_ms - util_now_ms();
    if (left <= 0) {
        tombstone_free(t);
        return;
    }
    /* Redis counts PX on its own clock, which may run a little fast. */
    left += LEASE_DRIFT_MS(left);
    char value[UTIL_UUID_LEN + 16], ttl[24], fence_ttl[16];
    char fence_key[res->key_len + sizeof RESOURCE_FENCE_SUFFIX];
    size_t ttl_len = (size_t)snprintf(ttl, sizeof ttl, "%lld", (long long)left);
    if (t->swap) {
        /* release_many.lua: KEYS[1], then token and delay: the tombstone replaces token. */
        const char *args[3] = {res->key, t->token, ttl};
        size_t lens[3] = {res->key_len, UTIL_UUID_LEN, ttl_len};
        rpool_eval(t->srv->pool, res->route, SCRIPT_RELEASE_MANY, 1, 3, args, lens, reply_cb, t);
        return;
    }
    /* acquire.lua is SET NX PX: a key someone set meanwhile is left alone. */
    const char *args[5] = {res->key, fence_key, value, ttl, fence_ttl};
    size_t lens[5] = {res->key_len, resource_fence_key(res, fence_key, sizeof fence_key), 0,
                      ttl_len, 0};
    lens[2] = (size_t)snprintf(value, sizeof value, "tombstone:%s", t->token);
    lens[4] = (size_t)snprintf(fence_ttl, sizeof fence_ttl, "%u", t->srv->cfg->fence_ttl_ms);
    rpool_eval(t->srv->pool, res->route, SCRIPT_ACQUIRE, 2, 5, args, lens, reply_cb, t);
}

static void tombstone_start(struct server *srv, struct resource *res, const char *token,
                            int64_t until_ms, int swap)
{
    if (until_ms <= util_now_ms())
        return;
    struct tombstone *t = calloc(1, sizeof *t);
    if (t == NULL) {
        log_error("out of memory: no tombstone for %s", res->name);
        return;
    }
    t->srv = srv;
    t->res = res;
    resource_ref(res);
    snprintf(t->token, sizeof t->token, "%s", token);
    t->until_ms = until_ms;
    t->swap = swap;
    tombstone_guard(t);
    srv->background++; /* shutdown waits for it, as for a release */
    tombstone_send(t);
}

void tombstone_set(struct server *srv, struct resource *res, const char *token,
                   int64_t until_ms)
{
    tombstone_start(srv, res, token, until_ms, 0);
}

void tombstone_swap(struct server *srv, struct resource *res, const char *token,
                    int64_t until_ms)
{
    tombstone_start(srv, res, token, until_ms, 1);
}
