/* watchdog.c — see watchdog.h. */
#include "watchdog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cleanup.h"
#include "config.h"
#include "lock.h"
#include "log.h"
#include "redis_pool.h"
#include "resource.h"
#include "server.h"

#define WATCHDOG_RETRY_MS 100 /* after a failed renew; validity keeps counting down */
#define RENEW_BATCH_MAX 64

struct renew_batch {
    struct server *srv;
    int64_t sent_ms;
    uint32_t route;
    uint32_t n;
    struct lease *leases[RENEW_BATCH_MAX];
    uint32_t ttls[RENEW_BATCH_MAX]; /* as sent: an Extend may change the lease meanwhile */
};

static void renew_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    struct renew_batch *b = arg;
    int ok = reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements == b->n;
    if (!ok)
        log_warn("renew of %u lock%s failed: %s", b->n, b->n == 1 ? "" : "s",
                 reply == NULL ? err
                 : reply->type == REDIS_REPLY_ERROR ? reply->str
                                                    : "unexpected reply");
    int64_t now = util_now_ms();
    for (uint32_t i = 0; i < b->n; i++) {
        struct lease *l = b->leases[i];
        l->renewing = 0;
        long long v = ok && reply->element[i]->type == REDIS_REPLY_INTEGER
                          ? reply->element[i]->integer
                          : 2; /* unknown */
        if (l->forgotten) {
            /* Released or declared lost meanwhile; if this renew still
             * extended our key, take it back so it does not linger. */
            if (v == 1)
                lock_release_token(b->srv, l->res, l->token, b->ttls[i]);
        } else if (v == 1) {
            lease_renewed(l, b->sent_ms, b->ttls[i]);
        } else if (v == 0) {
            lease_lose(l, RLOCK__V1__LOST_REASON__LOST_MISSING, "the key is gone");
        } else if (v == -1) {
            lease_lose(l, RLOCK__V1__LOST_REASON__LOST_STOLEN, "the key holds another token");
        } else {
            l->next_renew_ms = now + WATCHDOG_RETRY_MS;
        }
        lease_unref(l);
    }
    free(b);
}

static void batch_send(struct renew_batch *b)
{
    uint32_t nargs = b->n * 3;
    const char **args = malloc(nargs * sizeof *args);
    size_t *lens = malloc(nargs * sizeof *lens);
    char (*ttls)[16] = malloc(b->n * sizeof *ttls);
    if (args == NULL || lens == NULL || ttls == NULL) {
        /* Out of memory: complete the batch as a failed renew. */
        free(args);
        free(lens);
        free(ttls);
        renew_reply_cb(NULL, "out of memory", b);
        return;
    }
    for (uint32_t i = 0; i < b->n; i++) {
        const struct lease *l = b->leases[i];
        args[i] = l->res->key;
        lens[i] = l->res->key_len;
        args[b->n + 2 * i] = l->token;
        lens[b->n + 2 * i] = UTIL_UUID_LEN;
        lens[b->n + 2 * i + 1] = (size_t)snprintf(ttls[i], sizeof ttls[i], "%u", b->ttls[i]);
        args[b->n + 2 * i + 1] = ttls[i];
    }
    b->sent_ms = util_now_ms();
    rpool_eval(b->srv->pool, b->route, SCRIPT_RENEW, (int)b->n, (int)nargs, args, lens,
               renew_reply_cb, b);
    free(args);
    free(lens);
    free(ttls);
}

static void watchdog_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    uint32_t nroutes = rpool_size(srv->pool);
    struct renew_batch *batches[nroutes];
    memset(batches, 0, sizeof batches);
    int64_t now = util_now_ms();

    struct lease *l, *next;
    for (l = TAILQ_FIRST(&srv->leases); l != NULL; l = next) {
        next = TAILQ_NEXT(l, srv_link);
        if (now + LEASE_MARGIN_MS(l->ttl_ms) >= l->valid_until_ms) {
            lease_lose(l, RLOCK__V1__LOST_REASON__LOST_EXPIRED,
                       "the lease ran out before a renew succeeded");
            continue;
        }
        if (!l->watchdog || l->renewing || now < l->next_renew_ms)
            continue;
        if (!rpool_route_ready(srv->pool, l->res->route))
            continue; /* nothing to send on; validity keeps counting down */
        uint32_t route = l->res->route % nroutes;
        struct renew_batch *b = batches[route];
        if (b == NULL) {
            b = batches[route] = calloc(1, sizeof *b);
            if (b == NULL)
                continue;
            b->srv = srv;
            b->route = route;
        }
        l->renewing = 1;
        lease_ref(l);
        b->ttls[b->n] = l->ttl_ms;
        b->leases[b->n++] = l;
        if (b->n == RENEW_BATCH_MAX) {
            batch_send(b);
            batches[route] = NULL;
        }
    }
    for (uint32_t r = 0; r < nroutes; r++)
        if (batches[r] != NULL)
            batch_send(batches[r]);
    cleanup_tick(srv);
}

int watchdog_start(struct server *srv)
{
    srv->watchdog_ev = event_new(srv->base, -1, EV_PERSIST, watchdog_tick, srv);
    if (srv->watchdog_ev == NULL)
        return -1;
    struct timeval tv = util_tv_ms(WATCHDOG_TICK_MS);
    return event_add(srv->watchdog_ev, &tv);
}
