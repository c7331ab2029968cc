/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * multi.c — rlock_acquire_all(_kinds): several locks, all or none (rlock.h).
 *
 * The locks are taken one at a time in one global order, the byte order of
 * their names, each through its own queue on the daemon. Ordered acquisition
 * is what keeps two callers naming {A, B} and {B, A} from each holding one and
 * waiting for the other: both wait for A first. It needs nothing of the daemon
 * or of Redis beyond the exclusive lock, so it works on every topology (on a
 * Redis Cluster the names live on any masters) and every lock keeps what a
 * lock has: the daemon's renewals, its fence, FIFO waiting, release at the
 * session's end. A failure part-way releases what was taken, in reverse, so
 * the caller never holds part of the set. docs/design-kinds.md says why this
 * rather than one script over every key.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* qsort over indexes into the caller's names (qsort passes no argument through). */
static _Thread_local const char *const *tls_sort_names;

static int by_name(const void *a, const void *b)
{
    const char *const *names = tls_sort_names;
    return strcmp(names[*(const size_t *)a], names[*(const size_t *)b]);
}

/*
 * Release l for roll_back. While the session moves to another daemon (its daemon
 * died, restarted or handed it over) calls are refused UNAVAILABLE until it has
 * resumed there, and the lock moves with it: ask again until the move is over
 * (a resume, or the session's end, which frees the lock anyway) or until end.
 */
static void release_settled(struct rlock_lock *l, uint32_t timeout_ms, int64_t end)
{
    for (;;) {
        enum rlock_err e = rlock_release(l, timeout_ms);
        if (e != RLOCK_ERR_UNAVAILABLE || rlock_lock_state(l) == RLOCK_LOST || mono_ms() >= end)
            return;
        uint32_t pause = rlock_last_error()->retry_after_ms;
        if (pause == 0 || pause > 200)
            pause = 50;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)pause * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* Release what was taken (order[0..taken-1]), last first, keeping the caller's error. */
static void roll_back(struct rlock_client *c, struct rlock_lock **out, const size_t *order,
                      size_t taken, uint32_t timeout_ms)
{
    struct rlock_error kept = *rlock_last_error();
    /* A move ends within a session timeout: resumed, or the session is over. */
    int64_t st = rlock_session_timeout_ms(c);
    int64_t end = mono_ms() + (st > 5000 ? 2 * st : 10000);
    while (taken > 0) {
        struct rlock_lock *l = out[order[--taken]];
        /* The daemon answers a release at once, Redis or not (protocol.md §6.3); one that
         * fails here for good ended the session (RLOCK_ERR_DEADLINE, CLOSED), which frees
         * every lock anyway. */
        release_settled(l, timeout_ms, end);
        rlock_lock_free(l);
        out[order[taken]] = NULL;
    }
    rlk_fail_with(&kept);
}

/* Prefix the thread's last error with the resource it was about. */
static enum rlock_err about(const char *resource, enum rlock_err e)
{
    struct rlock_error err = *rlock_last_error();
    char msg[sizeof err.message];
    snprintf(msg, sizeof msg, "'%.64s': %.180s", resource, err.message);
    memcpy(err.message, msg, sizeof msg);
    err.code = e;
    return rlk_fail_with(&err);
}

RLOCK_API enum rlock_err rlock_acquire_all(struct rlock_client *c, const char *const *resources,
                                           size_t n, const struct rlock_acquire_opts *opts,
                                           uint32_t timeout_ms, struct rlock_lock **out)
{
    return rlock_acquire_all_kinds(c, resources, NULL, n, opts, timeout_ms, out);
}

RLOCK_API enum rlock_err rlock_acquire_all_kinds(struct rlock_client *c,
                                                 const char *const *resources,
                                                 const struct rlock_kind *kinds, size_t n,
                                                 const struct rlock_acquire_opts *opts,
                                                 uint32_t timeout_ms, struct rlock_lock **out)
{
    if (out == NULL || resources == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "resources and out must not be NULL");
    if (n == 0 || n > RLOCK_ACQUIRE_ALL_MAX)
        return rlk_fail(RLOCK_ERR_ARG, "between 1 and %d resources, not %zu",
                        RLOCK_ACQUIRE_ALL_MAX, n);
    /* out[] all NULL on every failure from here on, an argument's included. */
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (opts != NULL && opts->campaign_value != NULL)
        return rlk_fail(RLOCK_ERR_ARG, "rlock_acquire_all takes no campaign_value: an "
                                       "election is campaigned for on its own");
    size_t order[RLOCK_ACQUIRE_ALL_MAX];
    for (size_t i = 0; i < n; i++) {
        if (resources[i] == NULL || resources[i][0] == '\0')
            return rlk_fail(RLOCK_ERR_ARG, "resource %zu: the name is empty", i);
        order[i] = i;
    }
    tls_sort_names = resources;
    qsort(order, n, sizeof order[0], by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(resources[order[i - 1]], resources[order[i]]) == 0)
            return rlk_fail(RLOCK_ERR_ARG, "'%.64s' is named twice", resources[order[i]]);

    struct rlock_acquire_opts one = {0};
    if (opts != NULL)
        one = *opts;
    uint32_t wait = one.wait_ms;
    int64_t deadline = mono_ms() + wait;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        if (wait > 0) {
            /* One budget for the whole set; a spent one still asks (a free lock is
             * granted), with the shortest wait, so that a busy one times out. */
            int64_t left = deadline - mono_ms();
            one.wait_ms = left > 1 ? (uint32_t)left : 1;
        }
        if (kinds != NULL) {
            one.shared = kinds[i].shared;
            one.limit = kinds[i].limit;
            one.permits = kinds[i].permits;
        }
        enum rlock_err e = rlock_acquire(c, resources[i], &one, timeout_ms, &out[i]);
        if (e != RLOCK_OK) {
            struct rlock_holder h; /* who held it, past the roll-back's own calls */
            int known = rlock_last_holder(&h) == 0;
            about(resources[i], e);
            roll_back(c, out, order, k, timeout_ms);
            rlk_holder_keep(known ? &h : NULL);
            return e;
        }
    }
    /* A lock taken early may have been lost while a later one was awaited. */
    for (size_t k = 0; k < n; k++) {
        struct rlock_lock *l = out[order[k]];
        if (rlock_lock_state(l) == RLOCK_LOST) {
            rlk_fail(RLOCK_ERR_NOT_ACQUIRED,
                     "'%.64s' was lost while the others were awaited (reason %d)",
                     resources[order[k]], (int)rlock_lock_lost_reason(l));
            roll_back(c, out, order, n, timeout_ms);
            return RLOCK_ERR_NOT_ACQUIRED;
        }
    }
    return RLOCK_OK;
}
