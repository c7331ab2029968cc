/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * contention.h — where acquires wait: per resource, how long they waited and
 * how long the lock was held, for the most contended resources only, and the
 * daemon-wide wait and hold histograms (metrics, no label per resource).
 *
 * The resources are ranked by their contention weight: the microseconds
 * their acquires waited, plus one for each acquire that found the lock taken
 * (so a try refused at once counts too). That one is added when the wait
 * starts, its microseconds when it ends: a resource whose holder does not let
 * go is followed while its queue grows, not only once a wait is over; the
 * counts (contended, grants, timeouts, ...) are kept when a wait ends. A
 * weighted Space-Saving summary of
 * metrics.top_resources counters (topk.h) keeps them: every resource whose
 * weight exceeds W / K (W: the weight of all resources since start, K: the
 * counters) is followed, and a followed resource's weight is overstated by at
 * most its error (<= W / K), the weight of the resources it displaced.
 * The statistics of a followed resource (counts, histograms, maxima) are exact
 * since it was taken in; a resource nobody waits for costs nothing here.
 * Memory: fixed by K (topk_bytes), whatever the number of resources.
 */
#ifndef RLOCKD_CONTENTION_H
#define RLOCKD_CONTENTION_H

#include <stdint.h>

struct server;
struct resource;
struct topk_entry;

/* Log2 buckets of microseconds: bucket b holds [2^b, 2^(b+1)) (b = 0 also 0 and 1);
 * the last also everything longer (2^31 us: about 36 minutes). */
#define CONTENTION_BUCKETS 32

/* How an acquire that found its lock taken ended. */
enum contention_end {
    CONTENTION_GRANTED,   /* granted after its wait */
    CONTENTION_TIMEOUT,   /* its wait ran out */
    CONTENTION_REFUSED,   /* a try, refused at once (NOT_ACQUIRED) */
    CONTENTION_CANCELLED, /* withdrawn, or its session ended */
};

struct contention_stats {
    uint64_t contended;     /* acquires that found the lock taken */
    uint64_t grants;        /* of them: granted after waiting */
    uint64_t timeouts;
    uint64_t refusals;
    uint64_t cancels;
    uint64_t wait_us;       /* waited in all (ended waits) */
    uint64_t wait_max_us;
    uint64_t holds;         /* holds that ended (release, loss, session end) */
    uint64_t hold_us;
    uint64_t hold_max_us;
    uint64_t losses;        /* LockLost of its holders here */
    uint32_t queue_max;     /* most acquires queued on it here at once */
    uint32_t wait_hist[CONTENTION_BUCKETS];
    uint32_t hold_hist[CONTENTION_BUCKETS];
};

/* The summary of srv->cfg->top_resources counters (none when 0). 0, or -1 when out of memory. */
int contention_start(struct server *srv);
void contention_stop(struct server *srv);

/* An acquire on res that found it taken starts to wait: its weight's 1 is added now, so that
 * a resource whose waits have not ended (a holder that does not let go) is followed too. */
void contention_began(struct server *srv, const struct resource *res);
/* An acquire on res that found it taken ended after waiting wait_us (from its arrival); began:
 * contention_began counted its start. */
void contention_waited(struct server *srv, const struct resource *res, int64_t wait_us,
                       enum contention_end end, int began);
/* A hold of res ended after hold_us (lost: by a LockLost). */
void contention_held(struct server *srv, const struct resource *res, int64_t hold_us, int lost);
/* res's queue of this daemon grew to res->nwaiters. */
void contention_queued(struct server *srv, const struct resource *res);

/* The bucket of us (CONTENTION_BUCKETS). */
unsigned contention_bucket(uint64_t us);
/*
 * The q-quantile (0 < q <= 1) of n values counted in hist, as the upper end of
 * the bucket that holds it (at most twice the true value), capped at max_us.
 * 0 when n is 0.
 */
uint64_t contention_quantile(const uint32_t hist[CONTENTION_BUCKETS], uint64_t n, double q,
                             uint64_t max_us);
/* The statistics of a counter of srv's summary. */
struct contention_stats *contention_of(struct topk_entry *e);

#endif
