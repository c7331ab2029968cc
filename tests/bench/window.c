/* SPDX-License-Identifier: BSD-3-Clause */
/* window.c — see window.h. */
#include "window.h"

#include <errno.h>
#include <stdio.h>

#include "procinfo.h"

void bench_sleep_until(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000), (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static pid_t resolve(pid_t given, const char *address)
{
    if (given > 0)
        return given;
    pid_t p = proc_find_listener(address);
    return p > 0 ? p : -1;
}

void window_init(struct window *w, const struct bench_opts *o)
{
    atomic_init(&w->phase, WINDOW_WARMUP);
    if (o->target == BENCH_DIRECT) {
        w->rlockd_pid = -1;
        w->redis_pid = resolve(o->redis_pid, o->server);
    } else {
        w->rlockd_pid = resolve(o->rlockd_pid, o->server);
        w->redis_pid = resolve(o->redis_pid, o->redis);
    }
    w->begin_ns = w->end_ns = 0;
}

static void read_cpu(const struct window *w, struct window_cpu *c)
{
    c->self_us = proc_self_cpu_us();
    c->rlockd_us = c->redis_us = 0;
    if (w->rlockd_pid > 0)
        proc_cpu_us(w->rlockd_pid, &c->rlockd_us);
    if (w->redis_pid > 0)
        proc_cpu_us(w->redis_pid, &c->redis_us);
}

void window_begin(struct window *w)
{
    read_cpu(w, &w->begin);
    w->begin_ns = bench_now_ns();
    atomic_store_explicit(&w->phase, WINDOW_MEASURE, memory_order_release);
}

void window_end(struct window *w)
{
    atomic_store_explicit(&w->phase, WINDOW_STOP, memory_order_release);
    w->end_ns = bench_now_ns();
    read_cpu(w, &w->end);
}

void window_stop(struct window *w)
{
    atomic_store_explicit(&w->phase, WINDOW_STOP, memory_order_release);
}

void window_run(struct window *w, const struct bench_opts *o)
{
    bench_sleep_until(bench_now_ns() + (int64_t)(o->warmup_s * 1e9));
    window_begin(w);
    bench_sleep_until(w->begin_ns + (int64_t)(o->duration_s * 1e9));
    window_end(w);
}

double window_seconds(const struct window *w)
{
    return (double)(w->end_ns - w->begin_ns) / 1e9;
}

static void report_one(const struct window *w, struct report *r, const char *who, int known,
                       uint64_t before, uint64_t after, uint64_t units, const char *unit)
{
    char key[48];
    double us = known && after >= before ? (double)(after - before) : 0.0;
    double secs = window_seconds(w);
    snprintf(key, sizeof key, "cpu_%s_pct", who);
    report_real(r, key, secs > 0 ? us / (secs * 1e4) : 0.0, 1);
    if (units > 0) {
        snprintf(key, sizeof key, "cpu_%s_us_per_%s", who, unit);
        report_real(r, key, us / (double)units, 2);
    }
}

void window_report_cpu(const struct window *w, struct report *r, uint64_t units,
                       const char *unit)
{
    report_one(w, r, "client", 1, w->begin.self_us, w->end.self_us, units, unit);
    report_one(w, r, "rlockd", w->rlockd_pid > 0, w->begin.rlockd_us, w->end.rlockd_us, units,
               unit);
    report_one(w, r, "redis", w->redis_pid > 0, w->begin.redis_us, w->end.redis_us, units, unit);
    report_u64(r, "rlockd_pid", w->rlockd_pid > 0 ? (uint64_t)w->rlockd_pid : 0);
    report_u64(r, "redis_pid", w->redis_pid > 0 ? (uint64_t)w->redis_pid : 0);
}
