/*
 * metrics.h — every number rlockd reports, declared once.
 *
 * METRIC_LIST names each metric with its Prometheus type, help text and the
 * function that reads its samples from the server. The /metrics endpoint
 * (http.c) and the Stats reply (dispatch.c) both walk that one list through
 * metrics_walk, so they cannot disagree. Names follow Prometheus's naming
 * guide: rlockd_ prefix, base units (seconds), _total for counters.
 *
 * The counters behind the labelled metrics live in struct metrics, one per
 * server; the code that counts calls the small metrics_* functions below.
 */
#ifndef RLOCKD_METRICS_H
#define RLOCKD_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct server;

/* Why a frame or a connection was refused. */
#define METRIC_FRAME_REASONS(X)                                                                  \
    X(TOO_LARGE, "too_large")                                                                   \
    X(MALFORMED, "malformed")                                                                   \
    X(NON_CANONICAL, "non_canonical")                                                           \
    X(BEFORE_HELLO, "before_hello")                                                             \
    X(UNKNOWN_OP, "unknown_op")
#define METRIC_CONN_REASONS(X)                                                                   \
    X(MAX_SESSIONS, "max_sessions")                                                             \
    X(SHUTTING_DOWN, "shutting_down")                                                           \
    X(SLOW_READER, "slow_reader")

enum metric_frame_reason {
#define METRIC_ENUM(id, name) METRIC_FRAME_##id,
    METRIC_FRAME_REASONS(METRIC_ENUM)
#undef METRIC_ENUM
    METRIC_FRAME_COUNT
};
enum metric_conn_reason {
#define METRIC_ENUM(id, name) METRIC_CONN_##id,
    METRIC_CONN_REASONS(METRIC_ENUM)
#undef METRIC_ENUM
    METRIC_CONN_COUNT
};

#define METRIC_STATUSES 13   /* rlock.v1 Status values 0..12 */
#define METRIC_REASONS 7     /* LostReason values 0..6 */
#define METRIC_OPS 16        /* Request oneof cases below this are timed */
#define METRIC_BUCKETS 12    /* latency histogram buckets, +Inf included */

struct metric_histogram {
    uint64_t buckets[METRIC_BUCKETS]; /* not cumulative: one count per bucket */
    uint64_t count;
    double sum; /* seconds */
};

struct metrics {
    uint64_t acquires[METRIC_STATUSES]; /* Acquire answers, by status */
    uint64_t lost[METRIC_REASONS];      /* LockLost pushed, by reason */
    uint64_t releases;                  /* locks freed by their holder's Release */
    uint64_t renewals;                  /* keys a renew confirmed */
    uint64_t renew_failures;            /* keys a renew got no usable answer for */
    uint64_t replica_ack_failures;      /* grants given back: too few replicas acknowledged */
    uint64_t frames_rejected[METRIC_FRAME_COUNT];
    uint64_t conns_rejected[METRIC_CONN_COUNT];
    struct metric_histogram latency[METRIC_OPS]; /* request arrival to answer, per op */
};

void metrics_acquire_answered(struct server *srv, int status);
void metrics_observe(struct server *srv, int op, int64_t ms);

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
