/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.h — what one worker counts while it runs: pair latencies, handoffs,
 * tries and errors. Each worker owns one (no locking on the hot path); the
 * run merges them at the end and reports the percentiles.
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdint.h>

#include "bench.h"
#include "hist.h"
#include "report.h"

struct wstats {
    struct hist lat;         /* pair: first acquire try -> release completion */
    struct hist handoff;     /* previous holder's release completion -> this grant */
    uint64_t pairs;          /* pairs completed inside the measuring window */
    uint64_t attempts;       /* acquire tries of those pairs (more than pairs when busy) */
    uint64_t handoff_early;  /* grants seen before the previous holder saw its release done */
    uint64_t overlaps;       /* grants while the previous holder had not even sent its release */
    uint64_t acquire_max_ns; /* longest first try -> grant inside the window */
    uint64_t errors[BERR_COUNT]; /* whole run, warm-up included */
    char first_error[160];       /* the message of the first error, to tell what happened */
};

struct rlock_client;
/* Why the session of an asynchronous client that just ended ended (the library's detail). */
const char *bench_session_end_reason(struct rlock_client *c);

void wstats_init(struct wstats *s);
void wstats_merge(struct wstats *dst, const struct wstats *src);
/* Count an error of class e, keeping msg (may be NULL) if it is the first. */
void wstats_error(struct wstats *s, int e, const char *msg);
uint64_t wstats_errors(const struct wstats *s);
/* errors (the sum), errors_<name> for every class that occurred, and first_error (msg)
 * when there was any. */
void bench_report_errors(struct report *r, const uint64_t errors[BERR_COUNT], const char *msg);
/* pairs, attempts, latency and handoff percentiles (µs), errors and errors_<name>. */
void wstats_report(const struct wstats *s, double seconds, struct report *r);

#endif
