/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c — the life of a client, blocking or asynchronous: creation,
 * the hand-over of the engine's outputs when c->mu is released, shutdown,
 * close, and the session getters.
 *
 * Closing is where threads meet, so it goes in a fixed order: end the
 * session (every pending call completes, no callback is queued any more),
 * wait until every blocking call on c has returned, take c off the reactor
 * (waiting until its I/O thread holds no reference), drop c's queued
 * callbacks and wait for a running one, then free. From inside c's own
 * callback the last step is left to the callback thread; from inside an
 * asynchronous completion, to rlock_async_process.
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rlock_client *rlk_client_new(const struct rlock_options *opts, enum rlk_mode mode)
{
    struct rlock_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->idle_cv, NULL);
    c->mode = mode;
    c->fd = -1;
    c->lost_fd = -1;
    c->async_wake = -1;
    c->state = RLK_SESSION_ENDED; /* until the engine has a connection */
    c->done_tail = &c->done_head;
    c->notes_tail = &c->notes;
    c->on_lost = opts->on_lost;
    c->on_lost_arg = opts->on_lost_arg;
    c->on_leader = opts->on_leader;
    c->on_leader_arg = opts->on_leader_arg;
    c->old_fd = -1;
    /* What a Resume repeats of the Hello. */
    c->hello_name = strdup(opts->client_name ? opts->client_name : "librlock");
    c->hello_auth = opts->auth_token ? strdup(opts->auth_token) : NULL;
    c->hello_timeout_ms = opts->session_timeout_ms;
    if ((opts->auth_token != NULL && c->hello_auth == NULL) || c->hello_name == NULL ||
        rlk_tls_keep_opts(c, opts) != 0 || rlk_registry_add(c) != 0) {
        free(c->hello_name);
        free(c->hello_auth);
        rlk_tls_free(c);
        pthread_cond_destroy(&c->idle_cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

void rlk_hello_fill(Rlock__V1__Hello *h, const struct rlock_options *opts)
{
    rlock__v1__hello__init(h);
    h->client_name = (char *)(opts->client_name ? opts->client_name : "librlock");
    h->protocol_version = WIRE_PROTOCOL_VERSION;
    h->session_timeout_ms = opts->session_timeout_ms;
    if (opts->auth_token != NULL)
        h->auth_token = (char *)opts->auth_token;
}

void rlk_client_free(struct rlock_client *c)
{
    rlk_registry_remove(c);
    pthread_mutex_lock(&c->mu);
    rlk_lock_free_all(c);
    rlk_eng_free(c);
    rlk_elect_free(c);
    pthread_mutex_unlock(&c->mu);
    free(c->addrs);
    free(c->hello_name);
    free(c->hello_auth);
    pthread_cond_destroy(&c->idle_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int rlk_client_open(struct rlock_client *c, const char *address, unsigned start,
                    uint32_t timeout_ms, char *err, size_t errlen)
{
    c->addrs = malloc(sizeof *c->addrs);
    if (c->addrs == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (rlk_addr_list_parse(address, c->addrs, err, errlen) < 0 ||
        rlk_tls_setup(c, err, errlen) < 0)
        return -2;
    if (start == RLK_ADDR_RANDOM)
        start = rlk_addr_start(c->addrs->n);
    return rlk_conn_open_list(c->addrs, start % c->addrs->n, timeout_ms, &c->addr_used, err,
                              errlen);
}

void rlk_client_lock(struct rlock_client *c)
{
    pthread_mutex_lock(&c->mu);
}

void rlk_client_unlock(struct rlock_client *c)
{
    /* Blocking calls were woken as they completed; only the notes travel on. */
    struct rlk_note *notes = NULL;
    if (c->mode == RLK_MODE_BLOCKING && c->notes != NULL) {
        notes = c->notes;
        c->notes = NULL;
        c->notes_tail = &c->notes;
    }
    pthread_mutex_unlock(&c->mu);
    if (notes != NULL)
        rlk_callbacks_post(c, notes);
}

RLOCK_API void rlock_shutdown(struct rlock_client *c)
{
    if (c == NULL)
        return;
    rlk_client_lock(c);
    rlk_eng_goodbye(c);
    rlk_eng_end(c, "shut down by the application", 1);
    rlk_client_unlock(c);
    if (c->mode == RLK_MODE_ASYNC && !c->in_process)
        rlk_async_deliver(c); /* the CLOSED completions, now */
}

RLOCK_API void rlock_close(struct rlock_client *c)
{
    if (c == NULL)
        return;
    rlk_client_lock(c);
    c->closing = 1;
    atomic_store(&c->cb_closed, 1);
    rlk_eng_goodbye(c);
    rlk_eng_end(c, "closed by the application", 1);
    while (c->mode == RLK_MODE_BLOCKING && c->calls_active > 0)
        pthread_cond_wait(&c->idle_cv, &c->mu);
    rlk_client_unlock(c);
    if (c->mode == RLK_MODE_ASYNC) {
        if (c->in_process) {
            c->free_after_process = 1; /* rlock_async_process frees it on its way out */
            return;
        }
        rlk_async_deliver(c);
        rlk_client_free(c);
        return;
    }
    rlk_reactor_remove(c);
    if (rlk_callbacks_forget(c)) {
        rlk_callbacks_free_after(c); /* we are inside c's own callback */
        return;
    }
    rlk_client_free(c);
}

RLOCK_API const char *rlock_session_id(const struct rlock_client *c)
{
    return c != NULL ? c->session_id : "";
}

RLOCK_API uint32_t rlock_session_timeout_ms(const struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    struct rlock_client *m = (struct rlock_client *)c; /* the mutex is not part of the value */
    rlk_client_lock(m);
    uint32_t v = c->session_timeout_ms;
    rlk_client_unlock(m);
    return v;
}

RLOCK_API uint64_t rlock_session_resumes(struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    rlk_client_lock(c);
    uint64_t n = c->resumes;
    rlk_client_unlock(c);
    return n;
}

RLOCK_API int rlock_client_alive(struct rlock_client *c)
{
    if (c == NULL)
        return 0;
    rlk_client_lock(c);
    int alive = rlk_eng_check(c) && !rlk_inherited(c);
    rlk_client_unlock(c);
    return alive;
}
