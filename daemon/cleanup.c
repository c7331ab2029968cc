/* cleanup.c — see cleanup.h. */
#include "cleanup.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "log.h"
#include "redis_pool.h"
#include "server.h"
#include "util.h"

#define CLEANUP_MAX 65536
#define CLEANUP_FIRST_MS 200
#define CLEANUP_BACKOFF_MAX_MS 5000

struct cleanup {
    struct cleanup_list *list; /* NULL once the list is gone */
    char *key;
    size_t key_len;
    char token[UTIL_UUID_LEN + 1];
    uint32_t route;
    int64_t until_ms;
    int64_t next_ms;
    uint32_t backoff_ms;
    int sending; /* a call is in flight; its callback owns the entry */
    TAILQ_ENTRY(cleanup) link;
};

struct cleanup_list {
    TAILQ_HEAD(, cleanup) entries;
    uint32_t n;
};

struct cleanup_list *cleanup_new(void)
{
    struct cleanup_list *cl = calloc(1, sizeof *cl);
    if (cl != NULL)
        TAILQ_INIT(&cl->entries);
    return cl;
}

static void entry_free(struct cleanup *e)
{
    free(e->key);
    free(e);
}

static void entry_remove(struct cleanup *e)
{
    if (e->list != NULL) {
        TAILQ_REMOVE(&e->list->entries, e, link);
        e->list->n--;
        e->list = NULL;
    }
}

void cleanup_free(struct cleanup_list *cl)
{
    if (cl == NULL)
        return;
    struct cleanup *e;
    while ((e = TAILQ_FIRST(&cl->entries)) != NULL) {
        entry_remove(e);
        if (!e->sending)
            entry_free(e);
    }
    free(cl);
}

uint32_t cleanup_count(const struct cleanup_list *cl)
{
    return cl->n;
}

void cleanup_add(struct server *srv, const char *key, size_t key_len, uint32_t route,
                 const char *token, int64_t until_ms)
{
    struct cleanup_list *cl = srv->cleanups;
    if (cl->n >= CLEANUP_MAX) {
        log_warn("cleanup list full: %.*s is left to expire by its ttl", (int)key_len, key);
        return;
    }
    struct cleanup *e = calloc(1, sizeof *e);
    if (e == NULL || (e->key = malloc(key_len)) == NULL) {
        free(e);
        return;
    }
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    snprintf(e->token, sizeof e->token, "%s", token);
    e->route = route;
    e->until_ms = until_ms;
    e->backoff_ms = CLEANUP_FIRST_MS;
    e->next_ms = util_now_ms() + e->backoff_ms;
    e->list = cl;
    TAILQ_INSERT_TAIL(&cl->entries, e, link);
    cl->n++;
    log_debug("cleanup: will delete %.*s by token (%u pending)", (int)key_len, key, cl->n);
}

static void cleanup_reply_cb(const redisReply *reply, const char *err, void *arg)
{
    (void)err;
    struct cleanup *e = arg;
    e->sending = 0;
    if (e->list == NULL) { /* the list was freed meanwhile */
        entry_free(e);
        return;
    }
    int64_t now = util_now_ms();
    if ((reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) ||
        now >= e->until_ms) {
        if (reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1)
            log_info("cleanup: deleted %.*s left by an unconfirmed operation", (int)e->key_len,
                     e->key);
        entry_remove(e);
        entry_free(e);
        return;
    }
    e->backoff_ms = e->backoff_ms * 2 > CLEANUP_BACKOFF_MAX_MS ? CLEANUP_BACKOFF_MAX_MS
                                                               : e->backoff_ms * 2;
    e->next_ms = now + e->backoff_ms;
}

void cleanup_tick(struct server *srv)
{
    struct cleanup_list *cl = srv->cleanups;
    int64_t now = util_now_ms();
    struct cleanup *e, *next;
    for (e = TAILQ_FIRST(&cl->entries); e != NULL; e = next) {
        next = TAILQ_NEXT(e, link);
        if (e->sending || now < e->next_ms)
            continue;
        if (now >= e->until_ms) { /* the lease has run out in Redis too */
            entry_remove(e);
            entry_free(e);
            continue;
        }
        if (!rpool_route_ready(srv->pool, e->route))
            continue;
        const char *args[3] = {e->key, e->token, ""};
        size_t lens[3] = {e->key_len, strlen(e->token), 0};
        e->sending = 1;
        rpool_eval(srv->pool, e->route, SCRIPT_RELEASE, 1, 3, args, lens, cleanup_reply_cb, e);
    }
}
