/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c — see stats.h; also the names of the error classes. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

#include "rlock.h"

const char *bench_err_name(enum bench_err e)
{
    switch (e) {
#define X(id, name)                                                                           \
    case BERR_##id:                                                                           \
        return name;
        BENCH_ERRORS(X)
#undef X
    default:
        return "none";
    }
}

enum bench_err bench_err_of_rlock(int rlock_err)
{
    switch ((enum rlock_err)rlock_err) {
    case RLOCK_OK: return BERR_NONE;
    case RLOCK_ERR_NOT_ACQUIRED: return BERR_NOT_ACQUIRED;
    case RLOCK_ERR_TIMEOUT: return BERR_TIMEOUT;
    case RLOCK_ERR_NOT_HELD: return BERR_NOT_HELD;
    case RLOCK_ERR_INVALID: return BERR_INVALID;
    case RLOCK_ERR_UNAUTHENTICATED: return BERR_UNAUTHENTICATED;
    case RLOCK_ERR_PERMISSION_DENIED: return BERR_PERMISSION_DENIED;
    case RLOCK_ERR_LIMIT_EXCEEDED: return BERR_LIMIT_EXCEEDED;
    case RLOCK_ERR_UNAVAILABLE: return BERR_UNAVAILABLE;
    case RLOCK_ERR_SHUTTING_DOWN: return BERR_SHUTTING_DOWN;
    case RLOCK_ERR_INTERNAL: return BERR_INTERNAL;
    case RLOCK_ERR_CANCELLED: return BERR_CANCELLED;
    case RLOCK_ERR_ALREADY_HELD: return BERR_ALREADY_HELD;
    case RLOCK_ERR_NOT_FOUND: return BERR_OTHER;
    case RLOCK_ERR_WRONG_KIND: return BERR_OTHER;
    case RLOCK_ERR_DEADLOCK: return BERR_OTHER;
    case RLOCK_ERR_ARG: return BERR_ARG;
    case RLOCK_ERR_NOMEM: return BERR_NOMEM;
    case RLOCK_ERR_CONNECT: return BERR_CONNECT;
    case RLOCK_ERR_CLOSED: return BERR_CLOSED;
    case RLOCK_ERR_DEADLINE: return BERR_DEADLINE;
    case RLOCK_ERR_PROTOCOL: return BERR_PROTOCOL;
    case RLOCK_ERR_IN_CALLBACK: return BERR_IN_CALLBACK;
    }
    return BERR_OTHER;
}

static void ignore_done(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c, (void)r, (void)arg;
}

const char *bench_session_end_reason(struct rlock_client *c)
{
    /* A request on an ended session fails at once, and its error detail says why it ended. */
    if (rlock_async_ping(c, ignore_done, NULL, NULL) == RLOCK_OK)
        return "the session ended";
    return rlock_last_error()->message;
}

void wstats_init(struct wstats *s)
{
    memset(s, 0, sizeof *s);
    hist_init(&s->lat);
    hist_init(&s->handoff);
}

void wstats_merge(struct wstats *dst, const struct wstats *src)
{
    hist_merge(&dst->lat, &src->lat);
    hist_merge(&dst->handoff, &src->handoff);
    dst->pairs += src->pairs;
    dst->attempts += src->attempts;
    dst->handoff_early += src->handoff_early;
    dst->overlaps += src->overlaps;
    if (src->acquire_max_ns > dst->acquire_max_ns)
        dst->acquire_max_ns = src->acquire_max_ns;
    for (int i = 0; i < BERR_COUNT; i++)
        dst->errors[i] += src->errors[i];
    if (dst->first_error[0] == '\0')
        memcpy(dst->first_error, src->first_error, sizeof dst->first_error);
}

void wstats_error(struct wstats *s, int e, const char *msg)
{
    s->errors[e]++;
    if (s->first_error[0] == '\0')
        snprintf(s->first_error, sizeof s->first_error, "%s: %.140s", bench_err_name(e),
                 msg != NULL ? msg : "");
}

uint64_t wstats_errors(const struct wstats *s)
{
    uint64_t n = 0;
    for (int i = 0; i < BERR_COUNT; i++)
        n += s->errors[i];
    return n;
}

static void report_us(struct report *r, const char *key, uint64_t ns)
{
    report_real(r, key, (double)ns / 1000.0, 1);
}

void wstats_report(const struct wstats *s, double seconds, struct report *r)
{
    report_u64(r, "pairs", s->pairs);
    report_real(r, "pairs_per_s", seconds > 0 ? (double)s->pairs / seconds : 0.0, 1);
    report_u64(r, "attempts", s->attempts);
    report_real(r, "attempts_per_pair", s->pairs ? (double)s->attempts / (double)s->pairs : 0.0,
                3);
    report_us(r, "p50_us", hist_quantile(&s->lat, 0.50));
    report_us(r, "p90_us", hist_quantile(&s->lat, 0.90));
    report_us(r, "p99_us", hist_quantile(&s->lat, 0.99));
    report_us(r, "p999_us", hist_quantile(&s->lat, 0.999));
    report_us(r, "max_us", s->lat.count ? s->lat.max : 0);
    report_real(r, "mean_us", hist_mean(&s->lat) / 1000.0, 1);
    report_us(r, "acquire_max_us", s->acquire_max_ns);
    report_u64(r, "handoffs", s->handoff.count);
    report_us(r, "handoff_p50_us", hist_quantile(&s->handoff, 0.50));
    report_us(r, "handoff_p90_us", hist_quantile(&s->handoff, 0.90));
    report_us(r, "handoff_p99_us", hist_quantile(&s->handoff, 0.99));
    report_us(r, "handoff_max_us", s->handoff.count ? s->handoff.max : 0);
    report_u64(r, "handoff_early", s->handoff_early);
    report_u64(r, "overlaps", s->overlaps);
    bench_report_errors(r, s->errors, s->first_error);
}

void bench_report_errors(struct report *r, const uint64_t errors[BERR_COUNT], const char *msg)
{
    uint64_t total = 0;
    for (int i = 1; i < BERR_COUNT; i++)
        total += errors[i];
    report_u64(r, "errors", total);
    for (int i = 1; i < BERR_COUNT; i++)
        if (errors[i] != 0)
            report_u64_2(r, "errors_", bench_err_name((enum bench_err)i), errors[i]);
    if (total != 0 && msg != NULL && msg[0] != '\0')
        report_str(r, "first_error", msg);
}
