/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * counters.h — the counters behind rlockd's labelled metrics.
 *
 * The parts that count (sessions, the lock logic, the watchdog) update
 * struct metrics in the server directly or through the two functions below;
 * the list that reports them (METRIC_LIST, metrics.c) reads it. Kept apart
 * from that list so that counting needs nothing of what reports.
 */
#ifndef RLOCKD_COUNTERS_H
#define RLOCKD_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

struct server;

/* Why a frame or a connection was refused. */
#define METRIC_FRAME_REASONS(X)                                                                  \
    X(TOO_LARGE, "too_large")                                                                   \
    X(MALFORMED, "malformed")                                                                   \
    X(NUL_STRING, "nul_in_string")                                                             \
    X(BEFORE_HELLO, "before_hello")                                                             \
    X(UNKNOWN_OP, "unknown_op")
#define METRIC_CONN_REASONS(X)                                                                   \
    X(MAX_SESSIONS, "max_sessions")                                                             \
    X(SHUTTING_DOWN, "shutting_down")                                                           \
    X(SLOW_READER, "slow_reader")                                                               \
    X(DESCRIPTORS, "descriptors")                                                               \
    X(MAX_PENDING, "max_pending")                                                               \
    X(PEER_PENDING, "max_pending_per_peer")

#define METRIC_HTTP_REASONS(X)                                                                   \
    X(MAX_CONNECTIONS, "max_connections")                                                       \
    X(DESCRIPTORS, "descriptors")                                                               \
    X(TIMEOUT, "timeout")                                                                       \
    X(TOO_LARGE, "too_large")                                                                   \
    X(BAD_REQUEST, "bad_request")                                                               \
    X(METHOD, "method")                                                                         \
    X(VERSION, "version")                                                                       \
    X(UNAUTHORIZED, "unauthorized")

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
enum metric_http_reason {
#define METRIC_ENUM(id, name) METRIC_HTTP_##id,
    METRIC_HTTP_REASONS(METRIC_ENUM)
#undef METRIC_ENUM
    METRIC_HTTP_COUNT
};

#define METRIC_STATUSES 16   /* rlock.v1 Status values 0..15 */
#define METRIC_REASONS 7     /* LostReason values 0..6 */
#define METRIC_OPS 20        /* Request oneof cases below this are timed */
#define METRIC_BUCKETS 21    /* latency histogram buckets, +Inf included */

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
    uint64_t timers_late;               /* lease timer firings later than LEASE_LATENESS_MS */
    uint64_t replica_ack_failures;      /* grants given back: too few replicas acknowledged */
    uint64_t foreign_rechecks;          /* tries again of a key held outside rlockd (lock.c) */
    uint64_t frames_rejected[METRIC_FRAME_COUNT];
    uint64_t conns_rejected[METRIC_CONN_COUNT];
    uint64_t http_refused[METRIC_HTTP_COUNT]; /* metrics endpoint requests refused, by reason */
    struct metric_histogram latency[METRIC_OPS]; /* request arrival to answer, per op */
    struct metric_histogram lock_wait; /* acquires that found the lock taken: their wait */
    struct metric_histogram lock_hold; /* holds that ended: how long */
};

void counters_acquire_answered(struct server *srv, int status);
/* Count a value of us microseconds in h, whose bucket bounds are bounds. */
void counters_histogram_add(struct metric_histogram *h, const double bounds[METRIC_BUCKETS - 1],
                            uint64_t us);
/* A request of op answered us microseconds after its frame was read. */
void counters_observe(struct server *srv, int op, int64_t us);

/* Upper bounds of the latency buckets, in seconds; the last bucket is +Inf. They start
 * at 5 µs: a ping or a refused request is answered within microseconds of its frame, a
 * request that goes to Redis within tens to hundreds. */
extern const double counters_latency_bounds[METRIC_BUCKETS - 1];
/* Those of the lock wait and hold histograms, in seconds: from 1 ms to an hour. */
extern const double counters_lock_time_bounds[METRIC_BUCKETS - 1];

#endif
