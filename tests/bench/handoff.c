/* SPDX-License-Identifier: BSD-3-Clause */
/* handoff.c — see handoff.h. */
#include "handoff.h"

#include <pthread.h>
#include <stdlib.h>

#define HANDOFF_STRIPES 256

struct handoff_slot {
    int64_t released_ns;      /* latest release completion; 0: none yet */
    int64_t pending_grant_ns; /* a grant seen before its predecessor's completion; 0: none */
    uint32_t holders;         /* grants not yet matched by a release completion */
    uint32_t releasing;       /* of those, the ones whose release was sent */
};

struct handoff {
    uint64_t n;
    struct handoff_slot *slot;
    pthread_mutex_t stripe[HANDOFF_STRIPES];
};

struct handoff *handoff_new(uint64_t n)
{
    struct handoff *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->slot = calloc(n ? n : 1, sizeof *h->slot);
    if (h->slot == NULL) {
        free(h);
        return NULL;
    }
    h->n = n;
    for (int i = 0; i < HANDOFF_STRIPES; i++)
        pthread_mutex_init(&h->stripe[i], NULL);
    return h;
}

void handoff_free(struct handoff *h)
{
    if (h == NULL)
        return;
    for (int i = 0; i < HANDOFF_STRIPES; i++)
        pthread_mutex_destroy(&h->stripe[i]);
    free(h->slot);
    free(h);
}

static pthread_mutex_t *stripe_of(struct handoff *h, uint64_t i)
{
    return &h->stripe[i % HANDOFF_STRIPES];
}

struct handoff_event handoff_granted(struct handoff *h, uint64_t i, int64_t t_start,
                                     int64_t t_grant)
{
    struct handoff_event ev = {-1, 0, 0};
    struct handoff_slot *s = &h->slot[i];
    pthread_mutex_lock(stripe_of(h, i));
    if (s->holders > 0) {
        ev.overlap = s->releasing < s->holders;
        s->pending_grant_ns = t_grant;
    } else if (s->released_ns > t_start) {
        ev.ns = t_grant - s->released_ns;
    }
    s->holders++;
    pthread_mutex_unlock(stripe_of(h, i));
    return ev;
}

void handoff_releasing(struct handoff *h, uint64_t i)
{
    pthread_mutex_lock(stripe_of(h, i));
    h->slot[i].releasing++;
    pthread_mutex_unlock(stripe_of(h, i));
}

struct handoff_event handoff_released(struct handoff *h, uint64_t i, int64_t t_done)
{
    struct handoff_event ev = {-1, 0, 0};
    struct handoff_slot *s = &h->slot[i];
    pthread_mutex_lock(stripe_of(h, i));
    if (s->holders > 0)
        s->holders--;
    if (s->releasing > 0)
        s->releasing--;
    s->released_ns = t_done;
    if (s->pending_grant_ns != 0) {
        ev.ns = s->pending_grant_ns > t_done ? s->pending_grant_ns - t_done : 0;
        ev.early = s->pending_grant_ns <= t_done;
        s->pending_grant_ns = 0;
    }
    pthread_mutex_unlock(stripe_of(h, i));
    return ev;
}
