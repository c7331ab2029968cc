/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * async_pairs.c — rlockd's async mode: --conns asynchronous clients spread
 * over min(--threads, --conns) libevent loops, one thread each; every client
 * keeps --inflight pairs going at once. A pair is a small state machine on
 * its slot: acquire -> (hold timer) -> release -> next pair. Each slot is
 * its own owner, so two slots of one client that pick the same resource
 * exclude each other instead of re-entering.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "bench.h"
#include "pair.h"
#include "rlock.h"
#include "rlock_event.h"

#define CONNECT_TIMEOUT_MS 10000
#define TICK_MS 20
#define STOP_GRACE_NS 5000000000LL /* pairs still out this long after the window are abandoned */

struct aloop;
struct aconn;

struct aslot {
    struct aconn *conn;
    uint64_t owner;
    uint64_t res;
    int64_t t0;
    unsigned tries;
    int busy;              /* a pair is under way */
    int timer_releases;    /* what the timer does: 1 release (hold over), 0 try again */
    struct rlock_lock *lock;
    struct event *timer;
    uint64_t pairs;        /* completed inside the window */
};

struct aconn {
    struct aloop *loop;
    struct rlock_client *c;
    struct rlock_libevent *bridge;
    struct aslot *slots;
    int closed;
};

struct aloop {
    struct pair_run *pr;
    struct event_base *base;
    struct event *tick;
    pthread_t tid;
    struct aconn *conns;
    unsigned nconns;
    unsigned ready, failed;
    unsigned active;       /* slots with a pair under way */
    int running;           /* 0 while connecting, 1 while pairs run */
    int closing;           /* completions of the final close are ignored */
    int64_t connect_ns;    /* when connecting started */
    int64_t stop_seen_ns;  /* when the loop first saw the window closed; 0 before */
    struct wstats st;
    uint64_t rng;
    uint64_t owner_base;   /* slots' owners are owner_base + 1 onwards, unique in the run */
    char err[256];
    struct pair_gate *gate;
};

static void slot_start(struct aslot *s);

static void count_error(struct aloop *lp, enum rlock_err e, const char *msg)
{
    if (!lp->closing)
        wstats_error(&lp->st, bench_err_of_rlock(e), msg);
}

static void slot_idle(struct aslot *s)
{
    if (s->busy) {
        s->busy = 0;
        s->conn->loop->active--;
    }
}

static void arm(struct aslot *s, int releases, uint32_t us)
{
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    s->timer_releases = releases;
    evtimer_add(s->timer, &tv);
}

static void on_released(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct aslot *s = arg;
    struct aloop *lp = s->conn->loop;
    int64_t t1 = bench_now_ns();
    rlock_lock_free(s->lock);
    s->lock = NULL;
    if (lp->closing)
        return;
    if (r->err == RLOCK_OK) {
        s->pairs += (uint64_t)pair_done(lp->pr, &lp->st, s->res, s->t0, t1, s->tries);
    } else {
        count_error(lp, r->err, r->error->message);
        handoff_released(lp->pr->handoff, s->res, t1);
    }
    slot_start(s);
}

static void slot_release(struct aslot *s)
{
    struct aloop *lp = s->conn->loop;
    pair_releasing(lp->pr, s->res);
    enum rlock_err e = rlock_async_release(s->lock, on_released, s, NULL);
    if (e != RLOCK_OK) {
        count_error(lp, e, rlock_last_error()->message);
        rlock_lock_free(s->lock);
        s->lock = NULL;
        handoff_released(lp->pr->handoff, s->res, bench_now_ns());
        slot_start(s);
    }
}

static void slot_try(struct aslot *s);

static void on_acquired(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct aslot *s = arg;
    struct aloop *lp = s->conn->loop;
    if (lp->closing) {
        rlock_lock_free(r->lock);
        return;
    }
    if (r->err == RLOCK_OK) {
        s->lock = r->lock;
        pair_granted(lp->pr, &lp->st, s->res, s->t0, bench_now_ns());
        if (lp->pr->o->hold_us > 0)
            arm(s, 1, lp->pr->o->hold_us);
        else
            slot_release(s);
    } else if (r->err == RLOCK_ERR_NOT_ACQUIRED && lp->pr->o->wait_ms == 0) {
        if (window_phase(&lp->pr->win) == WINDOW_STOP)
            slot_idle(s);
        else
            arm(s, 0, lp->pr->o->retry_us);
    } else {
        count_error(lp, r->err, r->error->message);
        if (rlock_client_alive(s->conn->c))
            slot_start(s);
        else
            slot_idle(s);
    }
}

static void slot_try(struct aslot *s)
{
    struct aloop *lp = s->conn->loop;
    const struct bench_opts *o = lp->pr->o;
    char name[64];
    pair_name(s->res, name, sizeof name);
    struct rlock_acquire_opts ao = {.ttl_ms = o->ttl_ms, .wait_ms = o->wait_ms, .owner = s->owner};
    s->tries++;
    enum rlock_err e = rlock_async_acquire(s->conn->c, name, &ao, on_acquired, s, NULL);
    if (e != RLOCK_OK) {
        count_error(lp, e, rlock_last_error()->message);
        slot_idle(s);
    }
}

static void slot_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct aslot *s = arg;
    if (s->timer_releases)
        slot_release(s);
    else
        slot_try(s);
}

static void slot_start(struct aslot *s)
{
    struct aloop *lp = s->conn->loop;
    if (window_phase(&lp->pr->win) == WINDOW_STOP || s->conn->closed) {
        slot_idle(s);
        return;
    }
    if (!s->busy) {
        s->busy = 1;
        lp->active++;
    }
    s->res = pair_pick(lp->pr, &lp->rng);
    s->t0 = bench_now_ns();
    s->tries = 0;
    slot_try(s);
}

static void on_ready(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct aconn *cn = arg;
    struct aloop *lp = cn->loop;
    if (r->err == RLOCK_OK) {
        lp->ready++;
    } else {
        lp->failed++;
        snprintf(lp->err, sizeof lp->err, "Hello: %s", rlock_strerror(r->err));
    }
    if (lp->ready + lp->failed == lp->nconns)
        event_base_loopbreak(lp->base);
}

static void on_closed(struct rlock_client *c, void *arg)
{
    struct aconn *cn = arg;
    cn->closed = 1;
    if (!cn->loop->closing && window_phase(&cn->loop->pr->win) != WINDOW_STOP)
        wstats_error(&cn->loop->st, BERR_CLOSED, bench_session_end_reason(c));
}

static void on_lost(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)resource, (void)token, (void)fence;
    struct aconn *cn = arg;
    if (!cn->loop->closing)
        wstats_error(&cn->loop->st, BERR_LOST, rlock_lost_reason_str(reason));
}

/* While connecting: give up after the connect timeout. While running: end once the window
 * is over and every pair is back (or the grace is over). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct aloop *lp = arg;
    int64_t now = bench_now_ns();
    if (!lp->running) {
        if (now - lp->connect_ns > (int64_t)CONNECT_TIMEOUT_MS * 1000000) {
            snprintf(lp->err, sizeof lp->err, "Hello not answered in time");
            lp->failed = lp->nconns;
            event_base_loopbreak(lp->base);
        }
        return;
    }
    if (window_phase(&lp->pr->win) != WINDOW_STOP)
        return;
    if (lp->stop_seen_ns == 0)
        lp->stop_seen_ns = now;
    if (lp->active == 0 || now - lp->stop_seen_ns > STOP_GRACE_NS)
        event_base_loopbreak(lp->base);
}

static int loop_connect(struct aloop *lp)
{
    const struct bench_opts *o = lp->pr->o;
    struct rlock_options opts = {
        .client_name = "rlock-bench",
        .session_timeout_ms = o->session_timeout_ms,
        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
        .on_lost = on_lost,
    };
    bench_tls(&opts);
    for (unsigned i = 0; i < lp->nconns; i++) {
        struct aconn *cn = &lp->conns[i];
        cn->loop = lp;
        opts.on_lost_arg = cn;
        if (rlock_async_connect(o->server, &opts, on_ready, cn, &cn->c, lp->err,
                                sizeof lp->err) != RLOCK_OK)
            return -1;
        cn->bridge = rlock_libevent_attach(lp->base, cn->c, on_closed, cn);
        cn->slots = calloc(o->inflight, sizeof *cn->slots);
        if (cn->bridge == NULL || cn->slots == NULL) {
            snprintf(lp->err, sizeof lp->err, "out of memory");
            return -1;
        }
        for (unsigned k = 0; k < o->inflight; k++) {
            struct aslot *s = &cn->slots[k];
            s->conn = cn;
            /* Distinct owners across the whole run, below the thread bit. */
            s->owner = lp->owner_base + (uint64_t)i * o->inflight + k + 1;
            s->timer = evtimer_new(lp->base, slot_timer, s);
            if (s->timer == NULL) {
                snprintf(lp->err, sizeof lp->err, "out of memory");
                return -1;
            }
        }
    }
    event_base_dispatch(lp->base);
    return lp->failed == 0 ? 0 : -1;
}

static void loop_close(struct aloop *lp)
{
    lp->closing = 1;
    for (unsigned i = 0; i < lp->nconns; i++) {
        struct aconn *cn = &lp->conns[i];
        rlock_libevent_detach(cn->bridge);
        rlock_close(cn->c); /* pending completions run here, and are ignored */
        for (unsigned k = 0; cn->slots != NULL && k < lp->pr->o->inflight; k++) {
            if (cn->slots[k].timer != NULL)
                event_free(cn->slots[k].timer);
            cn->slots[k].timer = NULL;
        }
    }
}

static void *loop_main(void *arg)
{
    struct aloop *lp = arg;
    struct timeval tick = {0, TICK_MS * 1000};
    lp->connect_ns = bench_now_ns();
    event_add(lp->tick, &tick);
    int ok = loop_connect(lp) == 0;
    pair_gate_settle(lp->gate, ok ? NULL : lp->err);
    if (ok) {
        lp->running = 1;
        for (unsigned i = 0; i < lp->nconns; i++)
            for (unsigned k = 0; k < lp->pr->o->inflight; k++)
                slot_start(&lp->conns[i].slots[k]);
        event_base_dispatch(lp->base);
    }
    loop_close(lp);
    return NULL;
}

/* Slowest and fastest slot, and how many completed no pair in the window. */
static void report_fairness(const struct aloop *loops, unsigned nloops, unsigned inflight,
                            struct report *r)
{
    uint64_t lo = UINT64_MAX, hi = 0, starved = 0, n = 0;
    for (unsigned l = 0; l < nloops; l++)
        for (unsigned i = 0; i < loops[l].nconns; i++)
            for (unsigned k = 0; k < inflight; k++) {
                uint64_t p = loops[l].conns[i].slots ? loops[l].conns[i].slots[k].pairs : 0;
                lo = p < lo ? p : lo;
                hi = p > hi ? p : hi;
                starved += p == 0;
                n++;
            }
    report_u64(r, "worker_pairs_min", n ? lo : 0);
    report_u64(r, "worker_pairs_max", hi);
    report_u64(r, "workers_starved", starved);
}

static int loop_init(struct aloop *lp, struct pair_run *pr, unsigned nconns, uint64_t owner_base)
{
    lp->pr = pr;
    lp->nconns = nconns;
    lp->owner_base = owner_base;
    lp->rng = pair_seed((unsigned)owner_base);
    wstats_init(&lp->st);
    /* Hold times are microseconds: ask for timers finer than epoll's milliseconds. */
    struct event_config *cfg = event_config_new();
    if (cfg != NULL)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    lp->base = cfg != NULL ? event_base_new_with_config(cfg) : NULL;
    event_config_free(cfg);
    lp->conns = calloc(nconns, sizeof *lp->conns);
    lp->tick = lp->base != NULL ? event_new(lp->base, -1, EV_PERSIST, on_tick, lp) : NULL;
    return lp->base != NULL && lp->conns != NULL && lp->tick != NULL ? 0 : -1;
}

static void loop_free(struct aloop *lp)
{
    if (lp->tick != NULL)
        event_free(lp->tick);
    for (unsigned i = 0; lp->conns != NULL && i < lp->nconns; i++)
        free(lp->conns[i].slots);
    free(lp->conns);
    if (lp->base != NULL)
        event_base_free(lp->base);
}

int async_pairs_run(const struct bench_opts *o, struct report *r)
{
    unsigned nloops = o->threads < o->conns ? o->threads : o->conns;
    struct pair_run pr = {.o = o};
    struct pair_gate gate;
    unsigned started = 0;
    pair_gate_init(&gate);
    int rv = -1;
    window_init(&pr.win, o);
    pr.handoff = handoff_new(o->resources);
    struct aloop *loops = calloc(nloops, sizeof *loops);
    if (pr.handoff == NULL || loops == NULL)
        goto out;
    uint64_t owner_base = 0;
    for (unsigned l = 0; l < nloops; l++) {
        /* Clients dealt round-robin: loop l gets conns/nloops, the first ones one more. */
        unsigned n = o->conns / nloops + (l < o->conns % nloops);
        if (loop_init(&loops[l], &pr, n, owner_base) != 0)
            goto out;
        loops[l].gate = &gate;
        owner_base += (uint64_t)n * o->inflight;
    }
    for (; started < nloops; started++)
        if (pthread_create(&loops[started].tid, NULL, loop_main, &loops[started]) != 0)
            break;
    int failed = pair_gate_run(&gate, &pr, started, nloops) != 0;
    for (unsigned l = 0; l < started; l++)
        pthread_join(loops[l].tid, NULL);
    if (!failed) {
        struct wstats *sum = malloc(sizeof *sum);
        if (sum != NULL) {
            wstats_init(sum);
            for (unsigned l = 0; l < nloops; l++)
                wstats_merge(sum, &loops[l].st);
            report_real(r, "seconds", window_seconds(&pr.win), 3);
            wstats_report(sum, window_seconds(&pr.win), r);
            report_fairness(loops, nloops, o->inflight, r);
            window_report_cpu(&pr.win, r, sum->pairs, "pair");
            free(sum);
            rv = 0;
        }
    }
out:
    for (unsigned l = 0; loops != NULL && l < nloops; l++)
        loop_free(&loops[l]);
    free(loops);
    handoff_free(pr.handoff);
    pair_gate_destroy(&gate);
    if (rv != 0 && !started)
        fprintf(stderr, "rlock-bench: cannot set up the async run\n");
    return rv;
}
