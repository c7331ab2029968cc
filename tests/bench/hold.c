/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hold.c — what rlockd costs while nothing happens: many locks held by many
 * sessions with the watchdog renewing them (--hold-locks), or many sessions
 * doing nothing but keepalives (--idle-sessions). Memory is the daemon's
 * VmRSS against its own idle figure read before the sessions connected; CPU
 * is read over --duration once everything is in place.
 */
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "bench.h"
#include "procinfo.h"
#include "spool.h"
#include "stats.h"
#include "window.h"

/* Settling time after setup, so that its bursts are not counted as steady. */
#define SETTLE_S 1.0
/* Acquires each session keeps out while taking its share (shared by all sessions). */
#define ACQUIRE_INFLIGHT_TOTAL 1024
#define ACQUIRE_TIMEOUT_S 600.0

static uint64_t rss_kb(pid_t pid)
{
    uint64_t kb = 0;
    if (pid > 0)
        proc_rss_kb(pid, &kb);
    return kb;
}

/* Per-unit growth of a process's RSS above its idle figure, in bytes. */
static double per_unit(uint64_t now_kb, uint64_t idle_kb, uint64_t units)
{
    return units && now_kb > idle_kb ? (double)(now_kb - idle_kb) * 1024.0 / (double)units : 0.0;
}

static void report_errors(struct report *r, const struct spool *p)
{
    uint64_t errors[BERR_COUNT];
    spool_errors(p, errors);
    bench_report_errors(r, errors, spool_first_error(p));
}

/* Read idle memory, open n sessions; NULL after printing why. */
static struct spool *open_sessions(const struct bench_opts *o, struct window *w, size_t n,
                                   uint64_t *idle_kb, uint64_t *idle_redis_kb)
{
    window_init(w, o);
    if (w->rlockd_pid <= 0)
        fprintf(stderr, "rlock-bench: rlockd's pid not found: its memory and CPU are not "
                        "measured (give --rlockd-pid)\n");
    *idle_kb = rss_kb(w->rlockd_pid);
    *idle_redis_kb = rss_kb(w->redis_pid);
    char err[256];
    struct spool *p = spool_open(o, n, err, sizeof err);
    if (p == NULL)
        fprintf(stderr, "rlock-bench: %s\n", err);
    return p;
}

static void measure_steady(const struct bench_opts *o, struct window *w, struct spool *p)
{
    spool_run_for(p, SETTLE_S);
    window_begin(w);
    spool_run_for(p, o->duration_s);
    window_end(w);
}

int hold_run(const struct bench_opts *o, struct report *r)
{
    struct window w;
    uint64_t idle_kb, idle_redis_kb;
    struct spool *p = open_sessions(o, &w, o->sessions, &idle_kb, &idle_redis_kb);
    if (p == NULL)
        return -1;
    uint64_t sessions_kb = rss_kb(w.rlockd_pid);
    char tag[64];
    snprintf(tag, sizeof tag, "hold/%d-%" PRId64, (int)getpid(), bench_now_ns());
    unsigned per = (unsigned)(ACQUIRE_INFLIGHT_TOTAL / o->sessions);
    int64_t t0 = bench_now_ns();
    uint64_t held = spool_acquire_all(p, o->hold_locks, per ? per : 1, tag, ACQUIRE_TIMEOUT_S);
    double acquire_s = (double)(bench_now_ns() - t0) / 1e9;
    uint64_t held_kb = rss_kb(w.rlockd_pid);
    uint64_t held_redis_kb = rss_kb(w.redis_pid);
    measure_steady(o, &w, p);
    uint64_t end_kb = rss_kb(w.rlockd_pid);
    uint64_t top_kb = end_kb > held_kb ? end_kb : held_kb;

    report_u64(r, "locks_held", held);
    report_real(r, "acquire_s", acquire_s, 2);
    report_real(r, "acquires_per_s", acquire_s > 0 ? (double)held / acquire_s : 0.0, 0);
    report_u64(r, "acquires_unavailable", spool_retries(p));
    report_real(r, "seconds", window_seconds(&w), 3);
    report_u64(r, "rlockd_rss_idle_kb", idle_kb);
    report_u64(r, "rlockd_rss_sessions_kb", sessions_kb);
    report_u64(r, "rlockd_rss_held_kb", held_kb);
    report_u64(r, "rlockd_rss_end_kb", end_kb);
    report_real(r, "rlockd_bytes_per_lock", per_unit(top_kb, idle_kb, held), 1);
    report_real(r, "rlockd_bytes_per_session", per_unit(sessions_kb, idle_kb, o->sessions), 1);
    report_real(r, "redis_bytes_per_lock", per_unit(held_redis_kb, idle_redis_kb, held), 1);
    window_report_cpu(&w, r, 0, NULL);
    report_errors(r, p);
    spool_close(p);
    return 0;
}

int idle_run(const struct bench_opts *o, struct report *r)
{
    struct window w;
    uint64_t idle_kb, idle_redis_kb;
    int64_t t0 = bench_now_ns();
    struct spool *p = open_sessions(o, &w, o->idle_sessions, &idle_kb, &idle_redis_kb);
    if (p == NULL)
        return -1;
    double connect_s = (double)(bench_now_ns() - t0) / 1e9;
    uint64_t sessions_kb = rss_kb(w.rlockd_pid);
    measure_steady(o, &w, p);
    uint64_t end_kb = rss_kb(w.rlockd_pid);
    uint64_t top_kb = end_kb > sessions_kb ? end_kb : sessions_kb;

    report_u64(r, "sessions", o->idle_sessions);
    report_real(r, "connect_s", connect_s, 2);
    report_real(r, "seconds", window_seconds(&w), 3);
    report_u64(r, "rlockd_rss_idle_kb", idle_kb);
    report_u64(r, "rlockd_rss_sessions_kb", sessions_kb);
    report_u64(r, "rlockd_rss_end_kb", end_kb);
    report_real(r, "rlockd_bytes_per_session", per_unit(top_kb, idle_kb, o->idle_sessions), 1);
    window_report_cpu(&w, r, 0, NULL);
    report_errors(r, p);
    spool_close(p);
    return 0;
}
