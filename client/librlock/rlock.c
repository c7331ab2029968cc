/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock.c — names, versions, the per-thread error detail and thread owners.
 * See rlock.h for the contracts.
 */
#include "rlock_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef RLOCK_VERSION
#define RLOCK_VERSION "unknown"
#endif

/* Every result with its text; drives rlock_strerror. */
#define RLK_ERRORS(X)                                                                         \
    X(RLOCK_OK, "success")                                                                    \
    X(RLOCK_ERR_NOT_ACQUIRED, "lock held by another owner")                                   \
    X(RLOCK_ERR_TIMEOUT, "wait timed out")                                                    \
    X(RLOCK_ERR_NOT_HELD, "lock not held")                                                    \
    X(RLOCK_ERR_INVALID, "request refused as invalid")                                        \
    X(RLOCK_ERR_UNAUTHENTICATED, "not authenticated")                                         \
    X(RLOCK_ERR_PERMISSION_DENIED, "permission denied")                                       \
    X(RLOCK_ERR_LIMIT_EXCEEDED, "limit exceeded")                                             \
    X(RLOCK_ERR_UNAVAILABLE, "daemon cannot reach Redis")                                     \
    X(RLOCK_ERR_SHUTTING_DOWN, "daemon shutting down")                                        \
    X(RLOCK_ERR_INTERNAL, "internal daemon error")                                            \
    X(RLOCK_ERR_CANCELLED, "cancelled")                                                       \
    X(RLOCK_ERR_ALREADY_HELD, "already held by this owner")                                   \
    X(RLOCK_ERR_NOT_FOUND, "not found")                                                       \
    X(RLOCK_ERR_WRONG_KIND, "held in another mode or kind")                                   \
    X(RLOCK_ERR_DEADLOCK, "deadlock")                                                         \
    X(RLOCK_ERR_ARG, "bad argument")                                                          \
    X(RLOCK_ERR_NOMEM, "out of memory")                                                       \
    X(RLOCK_ERR_CONNECT, "could not connect")                                                 \
    X(RLOCK_ERR_CLOSED, "session closed")                                                     \
    X(RLOCK_ERR_DEADLINE, "no answer in time; session closed")                                \
    X(RLOCK_ERR_PROTOCOL, "protocol error")                                                   \
    X(RLOCK_ERR_IN_CALLBACK, "blocking call from a library callback")

RLOCK_API const char *rlock_strerror(enum rlock_err e)
{
    switch (e) {
#define RLK_ERR_CASE(name, text)                                                              \
    case name:                                                                                \
        return text;
        RLK_ERRORS(RLK_ERR_CASE)
#undef RLK_ERR_CASE
    }
    return "unknown error";
}

RLOCK_API const char *rlock_lost_reason_str(enum rlock_lost_reason r)
{
    static const char *const names[] = {
        [RLOCK_LOST_UNSPECIFIED] = "unspecified", [RLOCK_LOST_EXPIRED] = "expired",
        [RLOCK_LOST_STOLEN] = "stolen",           [RLOCK_LOST_MISSING] = "missing",
        [RLOCK_LOST_FORCED] = "forced",           [RLOCK_LOST_SESSION] = "session",
        [RLOCK_LOST_MAX_HOLD] = "max_hold",
    };
    if ((int)r < 0 || (size_t)r >= sizeof names / sizeof names[0])
        return "unknown";
    return names[r];
}

RLOCK_API const char *rlock_version(void)
{
    return RLOCK_VERSION;
}

/* --- per-thread error detail ----------------------------------------------------- */

static _Thread_local struct rlock_error tls_error;
/* The holder named by the failed call in tls_error (an acquire), if any. */
static _Thread_local struct rlock_holder tls_holder;
static _Thread_local int tls_has_holder;
_Thread_local int rlk_in_callback;

static void error_vset(struct rlock_error *out, enum rlock_err e, uint32_t retry_after_ms,
                       const char *fmt, va_list ap)
{
    out->code = e;
    out->retry_after_ms = retry_after_ms;
    vsnprintf(out->message, sizeof out->message, fmt, ap);
}

void rlk_holder_keep(const struct rlock_holder *h)
{
    tls_has_holder = h != NULL;
    if (h != NULL)
        tls_holder = *h;
}

RLOCK_API int rlock_last_holder(struct rlock_holder *out)
{
    if (!tls_has_holder || out == NULL)
        return -1;
    *out = tls_holder;
    return 0;
}

void rlk_error_set(struct rlock_error *out, enum rlock_err e, uint32_t retry_after_ms,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(out, e, retry_after_ms, fmt, ap);
    va_end(ap);
}

enum rlock_err rlk_fail(enum rlock_err e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(&tls_error, e, 0, fmt, ap);
    va_end(ap);
    tls_has_holder = 0;
    return e;
}

enum rlock_err rlk_fail_with(const struct rlock_error *err)
{
    tls_error = *err;
    tls_has_holder = 0;
    return err->code;
}

RLOCK_API const struct rlock_error *rlock_last_error(void)
{
    return &tls_error;
}

RLOCK_API void rlock_errmsg(struct rlock_client *c, char *buf, size_t len)
{
    (void)c;
    if (buf != NULL && len > 0)
        snprintf(buf, len, "%s", tls_error.message);
}

/* --- owners ------------------------------------------------------------------------ */

/*
 * A thread's owner id: the next number of a process-wide counter, with
 * RLOCK_OWNER_THREAD_BIT set so that it never equals an explicit owner.
 * Unlike a tid, it is never reused by a later thread.
 */
static atomic_uint_fast64_t next_thread_owner = 1;
static _Thread_local uint64_t tls_owner;

RLOCK_API uint64_t rlock_thread_owner(void)
{
    if (tls_owner == 0)
        tls_owner = RLOCK_OWNER_THREAD_BIT | atomic_fetch_add(&next_thread_owner, 1);
    return tls_owner;
}
