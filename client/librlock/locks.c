/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * locks.c — lock objects and handles.
 *
 * A lock object stands for one grant the daemon made to this client (one
 * token): resource, fence, owner, hold count, lease and state. A handle
 * (struct rlock_lock, what the application holds) stands for one hold of it;
 * the handles of a re-entered lock share its object. The client finds its
 * objects by token in a hash table — grants, re-entries and LockLost events
 * cost O(1) whatever the number of locks held — and keeps the held ones on a
 * list for the session's end and for rlock_foreach_lock. It keeps every
 * handle on another list so that rlock_close can free what the application
 * did not.
 *
 * States of an object: HELD -> LOST (event, session end, or the daemon no
 * longer knows it) or HELD -> RELEASED (its last hold released). It leaves
 * the table and the held list then, and is freed when its last handle goes.
 * A handle adds RELEASED for its own hold, and reads UNCERTAIN while HELD
 * past its valid-until time, or while its session moves to another daemon.
 *
 * Tokens: `token` is the one the grant gave, what the application sees, and
 * never changes. `wire` is the key's token now, which a daemon adopting the
 * lock after a resume replaces: Release and Extend name it, LockLost events
 * carry it, and the table is keyed by it.
 *
 * Validity: every answer that vouches for a lock (its grant, an extend, a
 * keepalive answered with valid_ms for the session's watchdog locks) gives a
 * time until which it is surely held, counted from the request's send time
 * on the client's own clock. The latest such answer counts, not the largest
 * time: the daemon may have shortened a lease since an earlier one.
 */
#include "rlock_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define LOCKTAB_INITIAL 16u

struct rlk_lock {
    struct rlk_lock *hnext;       /* token table chain */
    struct rlk_lock *prev, *next; /* c->held, while listed */
    char *resource;
    char token[RLK_TOKEN_BYTES];  /* as granted: the application's (immutable) */
    char wire[RLK_TOKEN_BYTES];   /* the key's token now (changed by an adopt) */
    uint64_t fence;
    uint64_t owner;
    uint32_t ttl_ms;
    uint32_t holds;
    int watchdog;
    int listed;                   /* in c->locks and c->held */
    enum rlock_lock_state state;  /* HELD, LOST or RELEASED */
    enum rlock_lost_reason reason;
    int64_t valid_until;          /* rlk_alive_ms(), from the latest answer about this lock */
    uint64_t vouch_seq;           /* c->ping_seq when valid_until was set */
    uint32_t refs;                /* handles, plus one while listed */
    /* what a resume needs to adopt it (docs/protocol.md §10) */
    char seal[RLK_SEAL_BYTES];    /* the latest seal; "" = the daemon cannot resume */
    uint64_t max_hold_until_ms;   /* wall clock; 0 = none */
    uint32_t lock_delay_ms;
};

struct rlock_lock {
    struct rlock_client *client;
    struct rlock_lock *prev, *next; /* c->handles */
    struct rlk_lock *lk;            /* NULL until granted */
    char *resource;
    uint64_t owner;                 /* as sent with the acquire */
    int released;                   /* this hold was given back */
};

/* --- token table ------------------------------------------------------------------ */

static uint64_t token_hash(const char *s)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static size_t locktab_slot(const struct rlk_locktab *t, const char *token)
{
    return (size_t)token_hash(token) & (t->nb - 1);
}

static void locktab_grow(struct rlk_locktab *t)
{
    size_t nb = t->nb ? t->nb * 2 : LOCKTAB_INITIAL;
    struct rlk_lock **b = calloc(nb, sizeof *b);
    if (b == NULL)
        return; /* longer chains, still correct */
    struct rlk_locktab nt = {.b = b, .nb = nb, .n = t->n};
    for (size_t i = 0; i < t->nb; i++) {
        struct rlk_lock *lk = t->b[i], *next;
        for (; lk != NULL; lk = next) {
            next = lk->hnext;
            size_t k = locktab_slot(&nt, lk->wire);
            lk->hnext = b[k];
            b[k] = lk;
        }
    }
    free(t->b);
    *t = nt;
}

static struct rlk_lock *locktab_find(const struct rlk_locktab *t, const char *token)
{
    if (t->nb == 0)
        return NULL;
    for (struct rlk_lock *lk = t->b[locktab_slot(t, token)]; lk != NULL; lk = lk->hnext)
        if (strcmp(lk->wire, token) == 0)
            return lk;
    return NULL;
}

/* --- objects ----------------------------------------------------------------------- */

void rlk_lock_ref(struct rlk_lock *lk)
{
    lk->refs++;
}

void rlk_lock_unref(struct rlk_lock *lk)
{
    if (--lk->refs > 0)
        return;
    free(lk->resource);
    free(lk);
}

/* Put lk in the table and on the held list (one reference). 0, or -1 out of memory. */
static int lock_list(struct rlock_client *c, struct rlk_lock *lk)
{
    struct rlk_locktab *t = &c->locks;
    if (t->n >= t->nb)
        locktab_grow(t);
    if (t->nb == 0)
        return -1;
    size_t k = locktab_slot(t, lk->wire);
    lk->hnext = t->b[k];
    t->b[k] = lk;
    t->n++;
    lk->prev = NULL;
    lk->next = c->held;
    if (c->held != NULL)
        c->held->prev = lk;
    c->held = lk;
    c->nheld++;
    lk->listed = 1;
    lk->refs++;
    return 0;
}

/* Take lk off the table and the held list: it is no longer held. */
static void lock_unlist(struct rlock_client *c, struct rlk_lock *lk)
{
    if (!lk->listed)
        return;
    if (c->move.adopt_next == lk) /* a resume's adopts go on with the rest of the list */
        c->move.adopt_next = lk->next;
    struct rlk_lock **p = &c->locks.b[locktab_slot(&c->locks, lk->wire)];
    while (*p != lk)
        p = &(*p)->hnext;
    *p = lk->hnext;
    c->locks.n--;
    if (lk->prev != NULL)
        lk->prev->next = lk->next;
    else
        c->held = lk->next;
    if (lk->next != NULL)
        lk->next->prev = lk->prev;
    lk->prev = lk->next = lk->hnext = NULL;
    lk->listed = 0;
    if (--c->nheld == 0)
        c->min_wd_ttl_ms = 0; /* the keepalive need starts afresh with the next grant */
    rlk_lock_unref(lk);
}

/* The only place an object's state changes. */
static void lock_set_state(struct rlock_client *c, struct rlk_lock *lk,
                           enum rlock_lock_state st, enum rlock_lost_reason reason)
{
    lk->state = st;
    lk->reason = st == RLOCK_LOST ? reason : RLOCK_LOST_UNSPECIFIED;
    if (st != RLOCK_HELD)
        lock_unlist(c, lk);
}

/* HELD lk is lost: record it and tell the application (unless quiet). */
static void lock_lose(struct rlock_client *c, struct rlk_lock *lk, enum rlock_lost_reason reason,
                      int quiet)
{
    lk->refs++; /* unlisting must not free it before the note is written */
    lock_set_state(c, lk, RLOCK_LOST, reason);
    rlk_eng_note_lost(c, lk->resource, lk->token, lk->fence, reason, quiet);
    rlk_lock_unref(lk);
}

static int64_t lock_valid_until(const struct rlock_client *c, const struct rlk_lock *lk)
{
    /* A keepalive answered after the lock's own latest answer speaks for a watchdog lock. */
    int64_t lease = lk->watchdog && c->ping_seq > lk->vouch_seq ? c->wd_valid_until
                                                                 : lk->valid_until;
    /*
     * And the lock ends with its session, which the daemon keeps a session
     * timeout past the arrival of the latest frame: the latest request that
     * got an answer arrived after it was sent.
     */
    int64_t session = c->answered_sent_ms + c->session_timeout_ms;
    return c->session_timeout_ms != 0 && session < lease ? session : lease;
}

/* The state a caller sees, at now (rlk_alive_ms). */
static enum rlock_lock_state lock_view_state(const struct rlock_client *c,
                                             const struct rlk_lock *lk, int64_t now)
{
    if (lk->state != RLOCK_HELD)
        return lk->state;
    if (rlk_inherited(c))
        return RLOCK_LOST;
    if (c->state == RLK_SESSION_MOVING)
        return RLOCK_UNCERTAIN; /* held only if the resume adopts it */
    return now > lock_valid_until(c, lk) ? RLOCK_UNCERTAIN : RLOCK_HELD;
}

enum rlock_err rlk_lock_granted(struct rlock_client *c, struct rlock_lock *h,
                                const Rlock__V1__AcquireReply *r, int64_t sent_ms)
{
    if (r->token == NULL || r->token[0] == '\0' || strlen(r->token) >= RLK_TOKEN_BYTES)
        return RLOCK_ERR_PROTOCOL;
    struct rlk_lock *lk = locktab_find(&c->locks, r->token);
    if (lk == NULL) {
        lk = calloc(1, sizeof *lk);
        if (lk == NULL || (lk->resource = strdup(h->resource)) == NULL) {
            free(lk);
            return RLOCK_ERR_NOMEM;
        }
        strcpy(lk->token, r->token);
        strcpy(lk->wire, r->token);
        lk->fence = r->fence;
        lk->owner = h->owner;
        lk->watchdog = r->watchdog;
        lk->state = RLOCK_HELD;
        lk->max_hold_until_ms = r->max_hold_until_ms;
        lk->lock_delay_ms = r->lock_delay_ms;
        if (lock_list(c, lk) < 0) {
            free(lk->resource);
            free(lk);
            return RLOCK_ERR_NOMEM;
        }
        if (lk->watchdog && (c->min_wd_ttl_ms == 0 || r->ttl_ms < c->min_wd_ttl_ms))
            c->min_wd_ttl_ms = r->ttl_ms;
    }
    lk->holds = r->hold_count ? r->hold_count : lk->holds + 1;
    lk->ttl_ms = r->ttl_ms;
    if (r->seal != NULL && strlen(r->seal) < sizeof lk->seal)
        strcpy(lk->seal, r->seal);
    lk->valid_until = sent_ms + r->valid_ms;
    lk->vouch_seq = c->ping_seq;
    h->lk = lk;
    lk->refs++;
    return RLOCK_OK;
}

void rlk_lock_released(struct rlock_client *c, struct rlock_lock *h, uint32_t holds_left)
{
    struct rlk_lock *lk = h->lk;
    h->released = 1;
    if (lk == NULL || lk->state != RLOCK_HELD)
        return;
    lk->holds = holds_left;
    if (holds_left == 0)
        lock_set_state(c, lk, RLOCK_RELEASED, RLOCK_LOST_UNSPECIFIED);
}

void rlk_lock_extended(struct rlock_client *c, struct rlock_lock *h, uint32_t ttl_ms,
                       uint32_t valid_ms, int64_t sent_ms, const char *seal)
{
    struct rlk_lock *lk = h->lk;
    if (lk == NULL || lk->state != RLOCK_HELD)
        return;
    lk->ttl_ms = ttl_ms;
    if (seal != NULL && strlen(seal) < sizeof lk->seal)
        strcpy(lk->seal, seal);
    lk->valid_until = sent_ms + valid_ms;
    lk->vouch_seq = c->ping_seq;
}

void rlk_lock_lost_token(struct rlock_client *c, const char *token,
                         enum rlock_lost_reason reason, int quiet)
{
    struct rlk_lock *lk = locktab_find(&c->locks, token);
    if (lk != NULL && lk->state == RLOCK_HELD)
        lock_lose(c, lk, reason, quiet);
}

void rlk_lock_forget(struct rlock_client *c, struct rlock_lock *h)
{
    struct rlk_lock *lk = h->lk;
    if (lk != NULL && lk->state == RLOCK_HELD)
        lock_set_state(c, lk, RLOCK_LOST, RLOCK_LOST_UNSPECIFIED);
}

void rlk_lock_lose_all(struct rlock_client *c, int quiet)
{
    while (c->held != NULL)
        lock_lose(c, c->held, RLOCK_LOST_SESSION, quiet);
}

void rlk_lock_vouched(struct rlock_client *c, int64_t sent_ms, uint32_t valid_ms)
{
    c->ping_seq++;
    c->wd_valid_until = sent_ms + valid_ms;
}

uint32_t rlk_lock_keepalive_need(const struct rlock_client *c)
{
    if (c->nheld == 0 || c->min_wd_ttl_ms == 0)
        return 0;
    /* Only a keepalive's answer vouches for watchdog locks, however busy the session is. */
    uint32_t need = c->min_wd_ttl_ms / 3;
    return need < RLK_MIN_KEEPALIVE_MS ? RLK_MIN_KEEPALIVE_MS : need;
}

/* --- a session that moves (move.c) ---------------------------------------------------- */

struct rlk_lock *rlk_lock_first(struct rlock_client *c)
{
    return c->held;
}

struct rlk_lock *rlk_lock_next(struct rlk_lock *lk)
{
    return lk->next;
}

void rlk_lock_adopt_fill(const struct rlk_lock *lk, Rlock__V1__Adopt *a)
{
    rlock__v1__adopt__init(a);
    a->resource = lk->resource;
    a->token = (char *)lk->wire;
    a->fence = lk->fence;
    a->ttl_ms = lk->ttl_ms;
    a->watchdog_off = !lk->watchdog;
    a->owner = lk->owner;
    a->hold_count = lk->holds;
    a->max_hold_until_ms = lk->max_hold_until_ms;
    a->lock_delay_ms = lk->lock_delay_ms;
    a->seal = (char *)lk->seal;
}

void rlk_lock_lose(struct rlock_client *c, struct rlk_lock *lk, enum rlock_lost_reason reason)
{
    if (lk->state == RLOCK_HELD)
        lock_lose(c, lk, reason, c->quiet);
}

void rlk_lock_adopted(struct rlock_client *c, struct rlk_lock *lk, const Rlock__V1__AdoptReply *r,
                      int64_t sent_ms)
{
    if (lk->state != RLOCK_HELD)
        return;
    if (r->token == NULL || r->token[0] == '\0' || strlen(r->token) >= RLK_TOKEN_BYTES) {
        rlk_lock_lose(c, lk, RLOCK_LOST_UNSPECIFIED); /* a reply we cannot use */
        return;
    }
    /* Keyed by the wire token: take it out under the old one, back under the new. */
    lk->refs++;
    lock_unlist(c, lk);
    strcpy(lk->wire, r->token);
    if (r->seal != NULL && strlen(r->seal) < sizeof lk->seal)
        strcpy(lk->seal, r->seal);
    if (r->ttl_ms > 0)
        lk->ttl_ms = r->ttl_ms;
    lk->valid_until = sent_ms + r->valid_ms;
    lk->vouch_seq = c->ping_seq;
    if (lock_list(c, lk) < 0) {
        /* Cannot track it: give it back rather than hold it unseen. */
        lk->state = RLOCK_LOST;
        rlk_eng_forget(c, lk->resource, lk->wire, 0);
        rlk_eng_note_lost(c, lk->resource, lk->token, lk->fence, RLOCK_LOST_UNSPECIFIED,
                          c->quiet);
    } else if (lk->watchdog && (c->min_wd_ttl_ms == 0 || lk->ttl_ms < c->min_wd_ttl_ms)) {
        c->min_wd_ttl_ms = lk->ttl_ms;
    }
    rlk_lock_unref(lk);
}

void rlk_lock_expire(struct rlock_client *c, int64_t now)
{
    struct rlk_lock *lk = c->held, *next;
    for (; lk != NULL; lk = next) {
        next = lk->next;
        if (now > lock_valid_until(c, lk))
            rlk_lock_lose(c, lk, RLOCK_LOST_EXPIRED);
    }
}

int64_t rlk_lock_earliest_end(const struct rlock_client *c)
{
    int64_t end = INT64_MAX;
    for (const struct rlk_lock *lk = c->held; lk != NULL; lk = lk->next) {
        int64_t v = lock_valid_until(c, lk);
        if (v < end)
            end = v;
    }
    return end;
}

/* --- handles ------------------------------------------------------------------------- */

struct rlock_lock *rlk_handle_new(struct rlock_client *c, const char *resource)
{
    struct rlock_lock *h = calloc(1, sizeof *h);
    if (h == NULL || (h->resource = strdup(resource)) == NULL) {
        free(h);
        return NULL;
    }
    h->client = c;
    h->next = c->handles;
    if (c->handles != NULL)
        c->handles->prev = h;
    c->handles = h;
    return h;
}

void rlk_handle_destroy(struct rlock_client *c, struct rlock_lock *h)
{
    if (h->prev != NULL)
        h->prev->next = h->next;
    else
        c->handles = h->next;
    if (h->next != NULL)
        h->next->prev = h->prev;
    if (h->lk != NULL)
        rlk_lock_unref(h->lk);
    free(h->resource);
    free(h);
}

struct rlock_client *rlk_handle_client(const struct rlock_lock *h)
{
    return h->client;
}

uint64_t rlk_handle_owner(const struct rlock_lock *h)
{
    return h->owner;
}

const char *rlk_handle_resource(const struct rlock_lock *h)
{
    return h->resource;
}

struct rlk_lock *rlk_handle_lock(const struct rlock_lock *h)
{
    return h->lk;
}

int rlk_handle_released(const struct rlock_lock *h)
{
    return h->released;
}

void rlk_handle_set_owner(struct rlock_lock *h, uint64_t owner)
{
    h->owner = owner;
}

enum rlock_err rlk_handle_usable(struct rlock_client *c, const struct rlock_lock *h,
                                 struct rlock_error *detail, const char **token)
{
    (void)rlk_eng_check(c);
    const struct rlk_lock *lk = h->lk;
    if (h->released || (lk != NULL && lk->state == RLOCK_RELEASED)) {
        rlk_error_set(detail, RLOCK_ERR_NOT_HELD, 0, "this handle was already released");
        return RLOCK_ERR_NOT_HELD;
    }
    if (lk == NULL || lk->state != RLOCK_HELD) {
        rlk_error_set(detail, RLOCK_ERR_NOT_HELD, 0, "the lock was lost (%s)",
                      rlock_lost_reason_str(lk != NULL ? lk->reason : RLOCK_LOST_UNSPECIFIED));
        return RLOCK_ERR_NOT_HELD;
    }
    *token = lk->wire;
    return RLOCK_OK;
}

void rlk_lock_free_all(struct rlock_client *c)
{
    while (c->handles != NULL)
        rlk_handle_destroy(c, c->handles);
    while (c->held != NULL)
        lock_unlist(c, c->held);
    free(c->locks.b);
    memset(&c->locks, 0, sizeof c->locks);
}

/* --- getters --------------------------------------------------------------------------- */

/* The guarded fields of a handle, read together under its client's mutex. */
struct lock_view {
    enum rlock_lock_state state;
    enum rlock_lost_reason reason;
    uint32_t ttl_ms;
    uint32_t hold_count;
    int64_t valid_until; /* rlk_alive_ms; 0 when not held */
};

static struct lock_view lock_view(const struct rlock_lock *h)
{
    struct lock_view v = {.state = RLOCK_LOST};
    if (h == NULL)
        return v;
    struct rlock_client *c = h->client;
    rlk_client_lock(c);
    /* A resumed process may ask before any thread of the library has looked at the clock. */
    (void)rlk_eng_check(c);
    const struct rlk_lock *lk = h->lk;
    if (lk != NULL) {
        v.state = h->released ? RLOCK_RELEASED : lock_view_state(c, lk, rlk_alive_ms());
        v.reason = lk->reason;
        v.ttl_ms = lk->ttl_ms;
        v.hold_count = lk->state == RLOCK_HELD ? lk->holds : 0;
        if (v.state == RLOCK_HELD || v.state == RLOCK_UNCERTAIN)
            v.valid_until = lock_valid_until(c, lk);
    }
    rlk_client_unlock(c);
    return v;
}

RLOCK_API enum rlock_lock_state rlock_lock_state(const struct rlock_lock *l)
{
    return lock_view(l).state;
}

RLOCK_API enum rlock_lost_reason rlock_lock_lost_reason(const struct rlock_lock *l)
{
    return lock_view(l).reason;
}

RLOCK_API uint32_t rlock_lock_ttl_ms(const struct rlock_lock *l)
{
    return lock_view(l).ttl_ms;
}

RLOCK_API uint32_t rlock_lock_hold_count(const struct rlock_lock *l)
{
    return lock_view(l).hold_count;
}

RLOCK_API int64_t rlock_lock_valid_until(const struct rlock_lock *l)
{
    struct lock_view v = lock_view(l);
    return v.valid_until ? rlk_alive_to_mono(v.valid_until) : 0;
}

RLOCK_API const char *rlock_lock_resource(const struct rlock_lock *l)
{
    return l != NULL ? l->resource : NULL;
}

/* Token, fence and owner never change once granted: no lock needed. */
RLOCK_API const char *rlock_lock_token(const struct rlock_lock *l)
{
    return l != NULL && l->lk != NULL ? l->lk->token : NULL;
}

RLOCK_API uint64_t rlock_lock_fence(const struct rlock_lock *l)
{
    return l != NULL && l->lk != NULL ? l->lk->fence : 0;
}

RLOCK_API uint64_t rlock_lock_owner(const struct rlock_lock *l)
{
    return l != NULL ? l->owner : 0;
}

RLOCK_API void rlock_lock_free(struct rlock_lock *l)
{
    if (l == NULL)
        return;
    struct rlock_client *c = l->client;
    rlk_client_lock(c);
    rlk_handle_destroy(c, l);
    rlk_client_unlock(c);
}

RLOCK_API size_t rlock_foreach_lock(struct rlock_client *c,
                                    int (*visit)(const struct rlock_lock_info *info, void *arg),
                                    void *arg)
{
    if (c == NULL || visit == NULL)
        return 0;
    rlk_client_lock(c);
    (void)rlk_eng_check(c);
    int64_t now = rlk_alive_ms();
    size_t n = rlk_inherited(c) ? 0 : (size_t)c->nheld, strings = 0;
    for (const struct rlk_lock *lk = c->held; lk != NULL && n > 0; lk = lk->next)
        strings += strlen(lk->resource) + strlen(lk->token) + 2;
    struct rlock_lock_info *infos = n ? malloc(n * sizeof *infos + strings) : NULL;
    size_t i = 0;
    if (infos != NULL) {
        char *arena = (char *)(infos + n);
        for (const struct rlk_lock *lk = c->held; lk != NULL && i < n; lk = lk->next, i++) {
            struct rlock_lock_info *in = &infos[i];
            size_t rl = strlen(lk->resource) + 1, tl = strlen(lk->token) + 1;
            in->resource = memcpy(arena, lk->resource, rl);
            arena += rl;
            in->token = memcpy(arena, lk->token, tl);
            arena += tl;
            in->fence = lk->fence;
            in->owner = lk->owner;
            in->ttl_ms = lk->ttl_ms;
            in->hold_count = lk->holds;
            in->watchdog = lk->watchdog;
            in->state = lock_view_state(c, lk, now);
            in->valid_until = rlk_alive_to_mono(lock_valid_until(c, lk));
        }
    }
    rlk_client_unlock(c);
    size_t visited = 0;
    while (visited < i) {
        int stop = visit(&infos[visited], arg);
        visited++;
        if (stop)
            break;
    }
    free(infos);
    return visited;
}

RLOCK_API int rlock_lost_fd(struct rlock_client *c)
{
    if (c == NULL)
        return -1;
    rlk_client_lock(c);
    if (c->lost_fd < 0) {
        c->lost_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        /* Created after the fact: what has happened already must show too. */
        if (c->lost_fd >= 0 && !rlk_eng_check(c)) {
            uint64_t one = 1;
            ssize_t n = write(c->lost_fd, &one, sizeof one);
            (void)n;
        }
    }
    int fd = c->lost_fd;
    rlk_client_unlock(c);
    return fd;
}

/* --- acquire requests ----------------------------------------------------------------- */

enum rlock_err rlk_acquire_check(const struct rlock_acquire_opts *o)
{
    const char *bad = o->trace_id != NULL ? wire_check_trace_id(o->trace_id) : NULL;
    if (bad != NULL)
        return rlk_fail(RLOCK_ERR_ARG, "%s", bad);
    if (o->campaign_value == NULL)
        return RLOCK_OK;
    size_t len = strlen(o->campaign_value);
    if (len > RLOCK_VALUE_MAX)
        return rlk_fail(RLOCK_ERR_ARG,
                        "campaign value of %zu bytes: at most RLOCK_VALUE_MAX (%u) bytes", len,
                        RLOCK_VALUE_MAX);
    if (o->shared || o->limit > 0 || o->permits > 0)
        return rlk_fail(RLOCK_ERR_ARG,
                        "a campaign is an exclusive lock: shared, limit and permits must be 0");
    return RLOCK_OK;
}

void rlk_acquire_fill(Rlock__V1__Acquire *a, const char *resource,
                      const struct rlock_acquire_opts *o, uint64_t owner)
{
    rlock__v1__acquire__init(a);
    a->resource = (char *)resource;
    a->ttl_ms = o->ttl_ms;
    a->wait_ms = o->wait_ms;
    a->watchdog_off = o->watchdog_off != 0;
    a->owner = owner;
    a->no_reentry = o->no_reentry != 0;
    a->max_hold_ms = o->max_hold_ms;
    a->lock_delay_ms = o->lock_delay_ms;
    a->mode = o->shared ? RLOCK__V1__LOCK_MODE__MODE_SHARED : RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE;
    a->limit = o->limit;
    a->permits = o->permits;
    if (o->campaign_value != NULL) {
        a->campaign = 1;
        a->value = (char *)o->campaign_value;
    }
    if (o->trace_id != NULL)
        a->trace_id = (char *)o->trace_id;
}
