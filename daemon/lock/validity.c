/* SPDX-License-Identifier: BSD-3-Clause */
/* validity.c — see validity.h. */
#include "validity.h"

#include "lease.h"
#include "minbag.h"
#include "session.h"

/* The bucket of the time l is treated as lost (a validity end is never negative). */
static int64_t bucket(const struct lease *l)
{
    int64_t key = l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
    return key < 0 ? 0 : key >> VALIDITY_BUCKET_SHIFT;
}

/* Count l in s's bag; out of memory, s answers by walking its leases from now on. */
static void count(struct session *s, struct lease *l)
{
    if (s->valid_broken)
        return;
    if (minbag_add(&s->valid, bucket(l)) != 0) {
        s->valid_broken = 1;
        return;
    }
    l->valid_counted = 1;
}

static void uncount(struct session *s, struct lease *l)
{
    if (!l->valid_counted)
        return;
    minbag_remove(&s->valid, bucket(l));
    l->valid_counted = 0;
}

void validity_prefetch(struct lease *const *leases, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (leases[i]->sess != NULL)
            __builtin_prefetch(&leases[i]->sess->valid);
    for (uint32_t i = 0; i < n; i++)
        if (leases[i]->valid_counted)
            minbag_prefetch(&leases[i]->sess->valid, bucket(leases[i]));
}

void validity_add(struct lease *l)
{
    struct session *s = l->sess;
    if (l->watchdog && s != NULL && !l->forgotten)
        count(s, l);
}

void validity_raise(struct lease *l, int64_t until_ms)
{
    struct session *s = l->sess;
    int counted = l->valid_counted;
    if (counted)
        uncount(s, l);
    l->valid_until_ms = until_ms;
    if (counted)
        count(s, l);
}

void validity_ttl_change(struct lease *l, uint32_t ttl_ms)
{
    struct session *s = l->sess;
    int counted = l->valid_counted;
    if (counted)
        uncount(s, l);
    l->ttl_ms = ttl_ms;
    if (counted)
        count(s, l);
}

void validity_forget(struct lease *l)
{
    if (l->sess != NULL)
        uncount(l->sess, l);
}

void validity_drain(struct session *s)
{
    minbag_clear(&s->valid);
    s->valid_broken = 0; /* nothing is counted: every lease from now on will be */
}

uint32_t validity_session_ms(struct session *s, int64_t from_ms)
{
    int64_t min = INT64_MAX, b;
    if (!s->valid_broken) {
        if (minbag_min(&s->valid, VALIDITY_DROP_MAX, &b))
            min = b << VALIDITY_BUCKET_SHIFT;
    } else {
        const struct lease *l;
        TAILQ_FOREACH(l, &s->leases, sess_link) {
            int64_t key = l->valid_until_ms - LEASE_MARGIN_MS(l->ttl_ms);
            if (l->watchdog && key < min)
                min = key;
        }
    }
    if (min == INT64_MAX)
        return 0;
    int64_t left = min - from_ms;
    return left <= 0 ? 0 : left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
}
