/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * window.h — the measuring window of a run: workers start in WARMUP, count
 * only what completes in MEASURE, and wind down in STOP. At the window's two
 * edges the CPU time of this process, of rlockd and of Redis is read, so
 * that every figure of a run covers the same interval.
 */
#ifndef BENCH_WINDOW_H
#define BENCH_WINDOW_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench.h"
#include "report.h"

enum window_phase { WINDOW_WARMUP, WINDOW_MEASURE, WINDOW_STOP };

struct window_cpu {
    uint64_t self_us, rlockd_us, redis_us;
};

struct window {
    atomic_int phase;
    pid_t rlockd_pid; /* -1: unknown (not reported) */
    pid_t redis_pid;
    int64_t begin_ns, end_ns;
    struct window_cpu begin, end;
};

/* Phase WARMUP; finds rlockd's and Redis's pids (given, or by their listening address). */
void window_init(struct window *w, const struct bench_opts *o);
/* Read the CPU times and enter MEASURE. */
void window_begin(struct window *w);
/* Read the CPU times and enter STOP. */
void window_end(struct window *w);
/* On the calling thread: sleep the warm-up, begin, sleep the duration, end. */
void window_run(struct window *w, const struct bench_opts *o);
void window_stop(struct window *w);
double window_seconds(const struct window *w);

static inline int window_phase(struct window *w)
{
    return atomic_load_explicit(&w->phase, memory_order_acquire);
}

/*
 * cpu_{client,rlockd,redis}_pct (of one core) and, when units > 0,
 * cpu_{client,rlockd,redis}_us_per_<unit>; pids of rlockd and Redis (0: unknown).
 */
void window_report_cpu(const struct window *w, struct report *r, uint64_t units,
                       const char *unit);

#endif
