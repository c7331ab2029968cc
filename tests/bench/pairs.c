/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pairs.c — the threaded pair run (redis-direct, and rlockd's sync and
 * shared modes): --threads workers, each taking a random resource, holding
 * it --hold µs and releasing it, in a loop, until the window closes. A busy
 * try is retried after --retry-us (the classic scripts' way; with --wait rlockd queues
 * instead). Workers connect before the warm-up starts; the main thread only
 * keeps the window's time.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "pair.h"
#include "target.h"

struct worker {
    struct pair_run *pr;
    const struct target_ops *ops;
    void *run;
    pthread_t tid;
    struct wstats st;
    uint64_t rng;
    struct pair_gate *gate;
};

/* One try after another until granted, an error, the wait's end, or the window's. */
static int acquire_retrying(struct worker *w, void *ctx, const char *name, int64_t t0,
                            unsigned *tries)
{
    const struct bench_opts *o = w->pr->o;
    for (;;) {
        ++*tries;
        int rc = w->ops->acquire(ctx, name);
        if (rc != TARGET_BUSY)
            return rc;
        int64_t now = bench_now_ns();
        if (o->wait_ms > 0 && now - t0 >= (int64_t)o->wait_ms * 1000000)
            return BERR_TIMEOUT;
        if (window_phase(&w->pr->win) == WINDOW_STOP)
            return TARGET_BUSY;
        bench_sleep_until(now + (int64_t)o->retry_us * 1000);
    }
}

static void work(struct worker *w, void *ctx)
{
    struct pair_run *pr = w->pr;
    char name[64];
    while (window_phase(&pr->win) != WINDOW_STOP) {
        uint64_t res = pair_pick(pr, &w->rng);
        pair_name(res, name, sizeof name);
        unsigned tries = 0;
        int64_t t0 = bench_now_ns();
        int rc = acquire_retrying(w, ctx, name, t0, &tries);
        if (rc == TARGET_BUSY)
            break; /* the window closed while busy */
        if (rc != TARGET_GRANTED) {
            wstats_error(&w->st, rc, w->ops->last_error(ctx));
            if (!w->ops->usable(ctx))
                return;
            continue;
        }
        int64_t tg = bench_now_ns();
        pair_granted(pr, &w->st, res, t0, tg);
        if (pr->o->hold_us > 0)
            bench_sleep_until(tg + (int64_t)pr->o->hold_us * 1000);
        pair_releasing(pr, res);
        rc = w->ops->release(ctx);
        int64_t t1 = bench_now_ns();
        if (rc != 0) {
            wstats_error(&w->st, rc, w->ops->last_error(ctx));
            handoff_released(pr->handoff, res, t1);
            if (!w->ops->usable(ctx))
                return;
            continue;
        }
        pair_done(pr, &w->st, res, t0, t1, tries);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char err[256];
    void *ctx = w->ops->open_worker(w->pr->o, w->run, err, sizeof err);
    pair_gate_settle(w->gate, ctx != NULL ? NULL : err);
    if (ctx == NULL)
        return NULL;
    work(w, ctx);
    w->ops->close_worker(ctx);
    return NULL;
}

/* Slowest and fastest worker, and how many completed no pair at all in the window. */
static void report_fairness(const struct worker *ws, unsigned n, struct report *r)
{
    uint64_t lo = UINT64_MAX, hi = 0, starved = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t p = ws[i].st.pairs;
        lo = p < lo ? p : lo;
        hi = p > hi ? p : hi;
        starved += p == 0;
    }
    report_u64(r, "worker_pairs_min", n ? lo : 0);
    report_u64(r, "worker_pairs_max", hi);
    report_u64(r, "workers_starved", starved);
}

int pairs_run_threads(const struct bench_opts *o, struct report *r)
{
    const struct target_ops *ops =
        o->target == BENCH_DIRECT ? &target_direct_ops : &target_rlockd_ops;
    struct pair_run pr = {.o = o};
    struct pair_gate gate;
    pair_gate_init(&gate);
    window_init(&pr.win, o);
    pr.handoff = handoff_new(o->resources);
    struct worker *ws = calloc(o->threads, sizeof *ws);
    void *run = NULL;
    char err[256] = "";
    int rv = -1;
    unsigned started = 0;
    if (pr.handoff == NULL || ws == NULL) {
        fprintf(stderr, "rlock-bench: out of memory\n");
        goto out;
    }
    if (ops->open_run(o, &run, err, sizeof err) != 0) {
        fprintf(stderr, "rlock-bench: %s\n", err);
        goto out;
    }
    for (; started < o->threads; started++) {
        struct worker *w = &ws[started];
        *w = (struct worker){.pr = &pr, .ops = ops, .run = run, .gate = &gate,
                             .rng = pair_seed(started)};
        wstats_init(&w->st);
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0)
            break;
    }
    int failed = pair_gate_run(&gate, &pr, started, o->threads) != 0;
    for (unsigned i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    if (failed)
        goto out;

    struct wstats *sum = malloc(sizeof *sum);
    if (sum == NULL)
        goto out;
    wstats_init(sum);
    for (unsigned i = 0; i < started; i++)
        wstats_merge(sum, &ws[i].st);
    report_real(r, "seconds", window_seconds(&pr.win), 3);
    wstats_report(sum, window_seconds(&pr.win), r);
    report_fairness(ws, started, r);
    window_report_cpu(&pr.win, r, sum->pairs, "pair");
    free(sum);
    rv = 0;
out:
    if (run != NULL)
        ops->close_run(run);
    free(ws);
    handoff_free(pr.handoff);
    pair_gate_destroy(&gate);
    return rv;
}
