/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * metrics.h — every number rlockd reports, declared once.
 *
 * METRIC_LIST names each metric with its Prometheus type, help text and the
 * function that reads its samples from the server. The /metrics endpoint
 * (http.c) and the Stats reply (dispatch.c) both walk that one list through
 * metrics_walk, so they cannot disagree. Names follow Prometheus's naming
 * guide: rlockd_ prefix, base units (seconds), _total for counters.
 *
 * The counters behind the labelled metrics live in struct metrics
 * (counters.h), one per server, kept by the code that counts: the lock logic
 * and the sessions count without knowing of this list.
 */
#ifndef RLOCKD_METRICS_H
#define RLOCKD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "counters.h"

struct server;

/*
 * One sample: name (with a suffix for histograms: _bucket, _sum, _count),
 * labels as Prometheus text ('' or 'k="v",...'), value.
 */
struct metric_sample {
    const char *name;
    const char *suffix;
    const char *labels;
    double value;
};

/* A metric as METRIC_LIST declares it. */
struct metric_def {
    const char *name;
    const char *type; /* "counter", "gauge" or "histogram" */
    const char *help;
    void (*read)(const struct server *srv, const struct metric_def *m,
                 void (*sample)(void *ctx, const struct metric_sample *s), void *ctx);
};

/*
 * Call head(ctx, def) for each metric, then sample(ctx, ...) for each of its
 * samples, in METRIC_LIST's order.
 */
void metrics_walk(const struct server *srv, void (*head)(void *ctx, const struct metric_def *m),
                  void (*sample)(void *ctx, const struct metric_sample *s), void *ctx);

/* The Prometheus text exposition (format 0.0.4) of every metric, malloc'd; NULL when OOM. */
char *metrics_render(const struct server *srv, size_t *len);

#endif
