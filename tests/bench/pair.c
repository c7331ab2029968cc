/* SPDX-License-Identifier: BSD-3-Clause */
/* pair.c — see pair.h. */
#include "pair.h"

#include <stdio.h>
#include <unistd.h>

/* xorshift64*: fast, and good enough to spread picks uniformly. */
uint64_t pair_random(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint64_t pair_pick(const struct pair_run *pr, uint64_t *rng)
{
    return pair_random(rng) % pr->o->resources;
}

uint64_t pair_seed(unsigned worker)
{
    uint64_t s = (uint64_t)bench_now_ns() ^ ((uint64_t)getpid() << 32) ^
                 ((uint64_t)worker * 0x9E3779B97F4A7C15ULL);
    return s ? s : 1;
}

void pair_name(uint64_t i, char *buf, size_t len)
{
    snprintf(buf, len, "bench/%llu", (unsigned long long)i);
}

static void note(struct wstats *st, struct handoff_event ev, int measuring)
{
    if (!measuring)
        return;
    if (ev.ns >= 0)
        hist_add(&st->handoff, (uint64_t)ev.ns);
    st->handoff_early += (uint64_t)ev.early;
    st->overlaps += (uint64_t)ev.overlap;
}

void pair_granted(struct pair_run *pr, struct wstats *st, uint64_t res, int64_t t_start,
                  int64_t t_grant)
{
    struct handoff_event ev = handoff_granted(pr->handoff, res, t_start, t_grant);
    int measuring = window_phase(&pr->win) == WINDOW_MEASURE;
    note(st, ev, measuring);
    if (measuring && (uint64_t)(t_grant - t_start) > st->acquire_max_ns)
        st->acquire_max_ns = (uint64_t)(t_grant - t_start);
}

void pair_releasing(struct pair_run *pr, uint64_t res)
{
    handoff_releasing(pr->handoff, res);
}

int pair_done(struct pair_run *pr, struct wstats *st, uint64_t res, int64_t t_start,
              int64_t t_done, unsigned attempts)
{
    struct handoff_event ev = handoff_released(pr->handoff, res, t_done);
    int measuring = window_phase(&pr->win) == WINDOW_MEASURE;
    note(st, ev, measuring);
    if (!measuring)
        return 0;
    hist_add(&st->lat, (uint64_t)(t_done - t_start));
    st->pairs++;
    st->attempts += attempts;
    return 1;
}

void pair_gate_init(struct pair_gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->settled = g->failed = 0;
    g->err[0] = '\0';
}

void pair_gate_destroy(struct pair_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

void pair_gate_settle(struct pair_gate *g, const char *err)
{
    pthread_mutex_lock(&g->mu);
    if (err != NULL && g->failed++ == 0)
        snprintf(g->err, sizeof g->err, "%s", err);
    g->settled++;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

int pair_gate_run(struct pair_gate *g, struct pair_run *pr, unsigned started,
                  unsigned expected)
{
    pthread_mutex_lock(&g->mu);
    while (g->settled < started)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    if (started < expected || g->failed > 0) {
        fprintf(stderr, "rlock-bench: %s\n",
                g->failed ? g->err : "cannot start the worker threads");
        window_stop(&pr->win);
        return -1;
    }
    window_run(&pr->win, pr->o);
    return 0;
}
