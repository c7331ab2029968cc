/* SPDX-License-Identifier: BSD-3-Clause */
/* spool.c — see spool.h. */
#include "spool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "rlock.h"
#include "rlock_event.h"
#include "stats.h"

#define SPOOL_BATCH 256
#define CONNECT_TIMEOUT_MS 10000
/* Pause of a session whose acquire was refused as UNAVAILABLE (the daemon's Redis is behind):
 * setting up many locks is not what is measured, so it is retried, and counted. */
#define RETRY_PAUSE_US 50000

struct spool_client {
    struct spool *p;
    struct rlock_client *c;
    struct rlock_libevent *bridge;
    size_t index;
    uint64_t todo;      /* acquires still to submit */
    uint64_t next;      /* number of the next one */
    unsigned out;       /* acquires submitted, not answered */
    int paused;         /* an UNAVAILABLE answer came: submit again when retry fires */
    struct event *retry;
};

struct spool {
    const struct bench_opts *o;
    struct event_base *base;
    struct spool_client *cl;
    size_t n;
    size_t answered;    /* Hellos answered (any result) */
    size_t failed;
    uint64_t closed;
    uint64_t lost;
    int closing;
    uint64_t acq_pending; /* acquires not yet answered, whole pool */
    const char *tag;
    unsigned inflight;  /* acquires each session keeps out */
    uint64_t granted;
    uint64_t retries;   /* acquires answered UNAVAILABLE and submitted again */
    uint64_t errors[BERR_COUNT];
    char first_error[160]; /* the first failure's class and message */
    char err[256];
};

static void on_retry(evutil_socket_t fd, short what, void *arg);

static void on_ready(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct spool_client *sc = arg;
    struct spool *p = sc->p;
    p->answered++;
    if (r->err != RLOCK_OK) {
        p->failed++;
        snprintf(p->err, sizeof p->err, "session %zu: Hello: %s", sc->index,
                 rlock_strerror(r->err));
    }
}

static void note_error(struct spool *p, int e, const char *msg)
{
    if (p->first_error[0] == '\0')
        snprintf(p->first_error, sizeof p->first_error, "%s: %.140s", bench_err_name(e), msg);
}

static void on_closed(struct rlock_client *c, void *arg)
{
    struct spool_client *sc = arg;
    if (!sc->p->closing) {
        sc->p->closed++;
        note_error(sc->p, BERR_CLOSED, bench_session_end_reason(c));
    }
}

static void on_lost(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)resource, (void)token, (void)fence;
    struct spool_client *sc = arg;
    if (!sc->p->closing) {
        sc->p->lost++;
        note_error(sc->p, BERR_LOST, rlock_lost_reason_str(reason));
    }
}

/* Run the loop until done(p) or timeout_s; the deadline is checked every few ms. */
static void run_until(struct spool *p, int (*done)(struct spool *p), double timeout_s)
{
    int64_t end = bench_now_ns() + (int64_t)(timeout_s * 1e9);
    struct timeval slice = {0, 5000};
    while ((done == NULL || !done(p)) && bench_now_ns() < end) {
        event_base_loopexit(p->base, &slice);
        event_base_dispatch(p->base);
    }
}

static int hellos_answered(struct spool *p)
{
    return p->answered == p->n || p->failed > 0;
}

struct spool *spool_open(const struct bench_opts *o, size_t n, char *err, size_t errlen)
{
    struct spool *p = calloc(1, sizeof *p);
    if (p == NULL || (p->cl = calloc(n ? n : 1, sizeof *p->cl)) == NULL ||
        (p->base = event_base_new()) == NULL) {
        snprintf(err, errlen, "out of memory");
        spool_close(p);
        return NULL;
    }
    p->o = o;
    struct rlock_options opts = {
        .client_name = "rlock-bench",
        .session_timeout_ms = o->session_timeout_ms,
        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
        .on_lost = on_lost,
    };
    bench_tls(&opts);
    while (p->n < n && p->failed == 0) {
        size_t end = p->n + SPOOL_BATCH < n ? p->n + SPOOL_BATCH : n;
        for (; p->n < end; p->n++) {
            struct spool_client *sc = &p->cl[p->n];
            sc->p = p;
            sc->index = p->n;
            opts.on_lost_arg = sc;
            if (rlock_async_connect(o->server, &opts, on_ready, sc, &sc->c, p->err,
                                    sizeof p->err) != RLOCK_OK)
                goto fail;
            sc->bridge = rlock_libevent_attach(p->base, sc->c, on_closed, sc);
            sc->retry = evtimer_new(p->base, on_retry, sc);
            if (sc->bridge == NULL || sc->retry == NULL) {
                snprintf(p->err, sizeof p->err, "out of memory");
                p->n++;
                goto fail;
            }
        }
        run_until(p, hellos_answered, CONNECT_TIMEOUT_MS / 1000.0);
        if (p->answered < p->n && p->failed == 0)
            snprintf(p->err, sizeof p->err, "Hellos not answered within %d ms",
                     CONNECT_TIMEOUT_MS);
        if (p->answered < p->n)
            goto fail;
    }
    if (p->failed == 0)
        return p;
fail:
    snprintf(err, errlen, "%s", p->err);
    spool_close(p);
    return NULL;
}

static void submit(struct spool_client *sc);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct spool_client *sc = arg;
    sc->paused = 0;
    submit(sc);
}

static void on_acquired(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct spool_client *sc = arg;
    struct spool *p = sc->p;
    sc->out--;
    if (p->closing) {
        rlock_lock_free(r->lock);
        return;
    }
    if (r->err == RLOCK_ERR_UNAVAILABLE && sc->retry != NULL) {
        p->retries++;
        sc->todo++;
        if (!sc->paused) {
            struct timeval tv = {0, RETRY_PAUSE_US};
            sc->paused = 1;
            evtimer_add(sc->retry, &tv);
        }
        return;
    }
    p->acq_pending--;
    if (r->err == RLOCK_OK) {
        p->granted++;
        rlock_lock_free(r->lock); /* the session keeps the lock */
    } else {
        p->errors[bench_err_of_rlock(r->err)]++;
        note_error(p, bench_err_of_rlock(r->err), r->error->message);
    }
    submit(sc);
}

static void submit(struct spool_client *sc)
{
    struct spool *p = sc->p;
    const struct bench_opts *o = p->o;
    struct rlock_acquire_opts ao = {.ttl_ms = o->ttl_ms};
    char name[160];
    while (!sc->paused && sc->todo > 0 && sc->out < p->inflight) {
        snprintf(name, sizeof name, "bench/%s/%zu/%llu", p->tag, sc->index,
                 (unsigned long long)sc->next);
        enum rlock_err e = rlock_async_acquire(sc->c, name, &ao, on_acquired, sc, NULL);
        sc->todo--;
        sc->next++;
        if (e != RLOCK_OK) {
            p->errors[bench_err_of_rlock(e)]++;
            note_error(p, bench_err_of_rlock(e), rlock_last_error()->message);
            p->acq_pending--;
            continue;
        }
        sc->out++;
    }
}

static int acquires_answered(struct spool *p)
{
    return p->acq_pending == 0;
}

uint64_t spool_acquire_all(struct spool *p, uint64_t total, unsigned inflight,
                           const char *tag, double timeout_s)
{
    p->tag = tag;
    p->inflight = inflight ? inflight : 1;
    p->acq_pending = total;
    uint64_t before = p->granted;
    for (size_t i = 0; i < p->n; i++) {
        struct spool_client *sc = &p->cl[i];
        sc->todo = total / p->n + (i < total % p->n);
        sc->next = 0;
    }
    for (size_t i = 0; i < p->n; i++)
        submit(&p->cl[i]);
    run_until(p, acquires_answered, timeout_s);
    return p->granted - before;
}

void spool_run_for(struct spool *p, double seconds)
{
    run_until(p, NULL, seconds);
}

uint64_t spool_retries(const struct spool *p)
{
    return p->retries;
}

const char *spool_first_error(const struct spool *p)
{
    return p->first_error;
}

void spool_errors(const struct spool *p, uint64_t errors[BERR_COUNT])
{
    memcpy(errors, p->errors, sizeof p->errors);
    errors[BERR_CLOSED] += p->closed;
    errors[BERR_LOST] += p->lost;
}

void spool_close(struct spool *p)
{
    if (p == NULL)
        return;
    p->closing = 1;
    for (size_t i = 0; p->cl != NULL && i < p->n; i++) {
        rlock_libevent_detach(p->cl[i].bridge);
        rlock_close(p->cl[i].c);
        if (p->cl[i].retry != NULL)
            event_free(p->cl[i].retry);
    }
    free(p->cl);
    if (p->base != NULL)
        event_base_free(p->base);
    free(p);
}
