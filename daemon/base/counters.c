/* SPDX-License-Identifier: BSD-3-Clause */
/* counters.c — see counters.h. */
#include "counters.h"

#include "server.h"

const double counters_latency_bounds[METRIC_BUCKETS - 1] = {
    0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
    0.01,     0.025,   0.05,     0.1,     0.25,   0.5,     1,      2.5,   5,      10,
};

const double counters_lock_time_bounds[METRIC_BUCKETS - 1] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5,   5,      10,    30,   60,    120,  300, 600,  1800, 3600,
};

void counters_acquire_answered(struct server *srv, int status)
{
    if (status >= 0 && status < METRIC_STATUSES)
        srv->mx.acquires[status]++;
}

void counters_histogram_add(struct metric_histogram *h, const double bounds[METRIC_BUCKETS - 1],
                            uint64_t us)
{
    double s = (double)us / 1e6;
    size_t b = 0;
    while (b < METRIC_BUCKETS - 1 && s > bounds[b])
        b++;
    h->buckets[b]++;
    h->count++;
    h->sum += s;
}

void counters_observe(struct server *srv, int op, int64_t us)
{
    if (op <= 0 || op >= METRIC_OPS)
        return;
    counters_histogram_add(&srv->mx.latency[op], counters_latency_bounds,
                           us > 0 ? (uint64_t)us : 0);
}
