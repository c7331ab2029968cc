/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder.c — who holds the lock an acquire did not get (rlock_last_holder).
 *
 * The daemon's Holder is copied onto the call and said in words at the end
 * of the call's error message, so that every program that prints
 * rlock_last_error() (rlockctl among them) shows who is in the way without
 * knowing of the structure. The client name is cut in the words (the
 * message has 256 bytes), never in the structure.
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* "held by session ID (client "NAME", owner N) since T, N ms left", or held outside. */
static void holder_words(const struct rlock_holder *h, char *buf, size_t len)
{
    if (!h->here) {
        const char *who = h->foreign ? " (not by rlockd)" : "";
        if (h->ttl_left_ms > 0)
            snprintf(buf, len, "held outside this daemon%s, ttl left %u ms", who,
                     h->ttl_left_ms);
        else
            snprintf(buf, len, "held outside this daemon%s, ttl left not known", who);
        return;
    }
    char since[32] = "an unknown time";
    time_t t = (time_t)(h->since_ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) != NULL)
        strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char kind[48] = "";
    if (h->limit > 0)
        snprintf(kind, sizeof kind, ", %u of %u permits", h->permits, h->limit);
    else if (h->shared)
        snprintf(kind, sizeof kind, ", shared");
    char more[40] = "";
    if (h->holders > 1)
        snprintf(more, sizeof more, ", first of %u sessions here", h->holders);
    snprintf(buf, len, "held by session %s (client \"%.48s\", owner %llu%s%s) since %s, %u ms left",
             h->session_id, h->client_name, (unsigned long long)h->owner, kind, more, since,
             h->ttl_left_ms);
}

static void copy_text(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src != NULL ? src : "");
}

void rlk_holder_copy(struct rlock_holder *h, const Rlock__V1__Holder *m)
{
    memset(h, 0, sizeof *h);
    h->here = m->here != 0;
    copy_text(h->session_id, sizeof h->session_id, m->session_id);
    copy_text(h->client_name, sizeof h->client_name, m->client_name);
    h->owner = m->owner;
    h->shared = m->mode == RLOCK__V1__LOCK_MODE__MODE_SHARED;
    h->limit = m->limit;
    h->permits = m->permits;
    h->since_ms = m->since_ms;
    h->holders = m->holders;
    h->ttl_left_ms = m->ttl_left_ms;
    h->foreign = m->foreign != 0;
}

void rlk_holder_take(struct rlk_call *call, const Rlock__V1__Holder *m)
{
    struct rlock_holder *h = &call->holder;
    rlk_holder_copy(h, m);
    call->has_holder = 1;
    char *msg = call->detail.message;
    size_t n = strlen(msg);
    if (n + 2 < sizeof call->detail.message) {
        memcpy(msg + n, "; ", 3);
        holder_words(h, msg + n + 2, sizeof call->detail.message - n - 2);
    }
}
