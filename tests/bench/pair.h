/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pair.h — the bookkeeping of one acquire/release pair, the same for the
 * threaded workers (pairs.c) and the asynchronous ones (async_pairs.c):
 * which resource it takes, and what is recorded at its grant and at its
 * release completion.
 */
#ifndef BENCH_PAIR_H
#define BENCH_PAIR_H

#include <pthread.h>
#include <stdint.h>

#include "bench.h"
#include "handoff.h"
#include "stats.h"
#include "window.h"

/* What every worker of a run shares. */
struct pair_run {
    const struct bench_opts *o;
    struct window win;
    struct handoff *handoff;
};

/* The next value of a worker's generator (never seeded with 0). */
uint64_t pair_random(uint64_t *rng);
/* A resource index chosen uniformly at random with the worker's generator. */
uint64_t pair_pick(const struct pair_run *pr, uint64_t *rng);
/* A generator seed that differs between workers and between runs. */
uint64_t pair_seed(unsigned worker);
/* "bench/<i>" into buf. */
void pair_name(uint64_t i, char *buf, size_t len);

/* The pair's acquire, first tried at t_start, was granted at t_grant. */
void pair_granted(struct pair_run *pr, struct wstats *st, uint64_t res, int64_t t_start,
                  int64_t t_grant);
/* The holder is about to send its release. */
void pair_releasing(struct pair_run *pr, uint64_t res);
/* The release completed at t_done. Returns 1 when the pair counts (inside the window). */
int pair_done(struct pair_run *pr, struct wstats *st, uint64_t res, int64_t t_start,
              int64_t t_done, unsigned attempts);

/*
 * Where workers report that they are connected (or why they are not) and the
 * main thread waits before it starts the window, so that connecting is never
 * measured.
 */
struct pair_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned settled;
    unsigned failed;
    char err[256]; /* the first failure */
};

void pair_gate_init(struct pair_gate *g);
void pair_gate_destroy(struct pair_gate *g);
/* A worker is ready (err NULL) or failed for the reason err. */
void pair_gate_settle(struct pair_gate *g, const char *err);
/*
 * Wait until the started workers have settled; when all expected workers
 * started and are ready, run the window (warm-up, measure), else stop it at
 * once after printing the first failure. 0 when the window ran.
 */
int pair_gate_run(struct pair_gate *g, struct pair_run *pr, unsigned started,
                  unsigned expected);

#endif
