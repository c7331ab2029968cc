/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lease.h — a lock held by a session of this daemon, and what the daemon
 * believes about its key in Redis.
 *
 * Two times bound the key of a lease, both on util_now_ms()'s clock:
 *
 *   valid_until  the key holds our token at least until then: the send time
 *                of the last acquire, renew or Extend Redis confirmed plus
 *                the ttl it carried. Renewals never shorten a key
 *                (renew.lua), so a confirmed one raises it and one whose
 *                outcome is unknown leaves it as it is.
 *   max_expiry   the key cannot outlive it: the reply time of the last
 *                confirmed command plus its ttl, plus the ttl of every
 *                command since whose outcome is unknown (it may run late,
 *                but only while the key still exists), plus Redis's drift.
 *
 * A lease is declared lost LEASE_MARGIN_MS before valid_until, and when it is
 * forgotten while its key may still exist the key is deleted by token,
 * retried until Redis confirms (cleanup.h). Every lease sits in the
 * watchdog's timing wheel at the earliest of its next renewal, its loss time
 * and its max_hold; nothing walks all leases.
 *
 * HELD while on its session's and the server's lists; forgetting takes it
 * off both, and it is freed once no renew in flight refers to it.
 */
#ifndef RLOCKD_LEASE_H
#define RLOCKD_LEASE_H

#include <stdint.h>
#include <sys/queue.h>

#include "rlock.pb-c.h"
#include "twheel.h"
#include "util.h"

struct session;
struct server;
struct resource;

/*
 * How late the loop may run a due timer, at most, under the load the limits
 * allow (max_locks): the loss of a lease is declared this much early.
 */
#define LEASE_LATENESS_MS 50
/*
 * Redis expires keys by its own clock, which may run a little fast against
 * ours: 1% of the ttl plus 2 ms.
 */
#define LEASE_DRIFT_MS(ttl_ms) ((int64_t)(ttl_ms) / 100 + 2)
/* A lease is treated as lost this long before its validity ends. */
#define LEASE_MARGIN_MS(ttl_ms) (LEASE_LATENESS_MS + LEASE_DRIFT_MS(ttl_ms))

/* The longest trace id a client may attach to an operation (docs/protocol.md §6.12). */
#define LEASE_TRACE_MAX 128

/* What few leases have, kept out of every lease's bytes: a max_hold deadline, a trace id. */
struct lease_extra {
    int64_t max_hold_at_ms;    /* on util_now_ms()'s clock; 0 = no max_hold */
    uint64_t max_hold_wall_ms; /* the same on the wall clock, as sealed (seal.h) */
    char trace[];              /* the acquire's trace id; "" = none */
};

/*
 * One per held lock: with a million locks held, each byte here is a megabyte.
 * Keep it at 216 bytes or less (lease.c asserts it): glibc serves it a
 * 224-byte chunk then. Chunk sizes matter more than bytes: at 248 bytes the
 * daemon measured 62 bytes more per lock than at 232, not 16 (P4 at 20,000
 * locks, padding alone).
 */
struct lease {
    struct session *sess;
    struct resource *res; /* counted reference (its srv is the server) */
    char token[UTIL_UUID_LEN + 1];
    uint8_t watchdog;
    uint8_t renewing;  /* a renew is queued (watchdog.c) or in Redis */
    uint8_t extending; /* an Extend is in Redis (one at a time bounds a client's Redis load) */
    uint8_t forgotten; /* released or lost; only in-flight renews still point here */
    uint8_t verify;    /* the master moved: confirm the key is still ours (watchdog.c) */
    uint8_t shared;    /* a shared hold: a place in the holders ZSET (group_*.lua), not the key */
    uint8_t owners_mixed; /* shared: owners other than `owner` added holds */
    uint8_t leader;       /* an election's leader: renewals keep its record (renew.lua) */
    uint8_t valid_counted; /* in its session's validity bag (validity.h) */
    uint8_t lost;          /* forgotten by a LockLost (contention.h counts it) */
    uint64_t fence;
    uint64_t owner;       /* who in the session holds it (Acquire.owner) */
    uint32_t ttl_ms;      /* the lease renewals carry */
    uint32_t holds;       /* re-entry count of that owner */
    uint32_t lock_delay_ms; /* tombstone time if the session ends uncleanly; 0 = none */
    uint32_t refs;
    uint32_t limit;       /* shared: a semaphore's permits in all; 0 = a read-write lock */
    uint32_t permits;     /* a semaphore's permits this lease holds */
    int64_t granted_ms;
    int64_t valid_until_ms;
    int64_t max_expiry_ms;
    int64_t next_renew_ms;
    struct lease_extra *extra; /* NULL = no max_hold and no trace id (most leases) */
    struct twheel_node timer; /* in srv->lease_timers while held */
    TAILQ_ENTRY(lease) renew_link; /* on its connection's renew queue (watchdog.c) */
    TAILQ_ENTRY(lease) sess_link;
    LIST_ENTRY(lease) res_link; /* on res->shared (shared only) */
};

/* What a new lease is made of: a grant Redis confirmed. */
struct lease_grant {
    const char *token;
    uint64_t fence;
    uint64_t owner;
    uint32_t ttl_ms;
    int watchdog;
    int64_t sent_ms;      /* when acquire.lua was sent */
    uint32_t max_hold_ms; /* 0 = none */
    uint32_t lock_delay_ms;
    /* An adopted lock (Adopt) carries on what its grant set: */
    uint32_t holds;             /* 0 = 1 */
    uint64_t max_hold_wall_ms;  /* its max_hold deadline (wall clock); then max_hold_ms is 0 */
    uint32_t key_ttl_ms;        /* the key's PTTL Redis answered (0: ttl_ms, a grant's) */
    int shared;                 /* a shared hold (group_acquire.lua granted it) */
    uint32_t limit, permits;    /* a semaphore's (shared is set); 0 = a read-write lock */
    int leader;                 /* a campaign's grant: the lock leads an election */
    const char *trace;          /* the acquire's trace id (NULL = none) */
};

/* l's max_hold deadline on util_now_ms()'s clock, and on the wall clock; 0 = none. */
static inline int64_t lease_max_hold_at(const struct lease *l)
{
    return l->extra != NULL ? l->extra->max_hold_at_ms : 0;
}
static inline uint64_t lease_max_hold_wall(const struct lease *l)
{
    return l->extra != NULL && l->extra->max_hold_at_ms != 0 ? l->extra->max_hold_wall_ms : 0;
}
/* l's trace id, or NULL when its acquire had none. */
static inline const char *lease_trace(const struct lease *l)
{
    return l->extra != NULL && l->extra->trace[0] != '\0' ? l->extra->trace : NULL;
}

/* The group marker of a shared lease or request: "group:rw" or "group:sem:N" (limit N). */
#define LEASE_MARKER_MAX 24
size_t lease_marker(uint32_t limit, char out[LEASE_MARKER_MAX]);

/*
 * A new lease of session s on res, now its holder (or one of its shared
 * holders). Leases the daemon still believed valid there that this grant
 * excludes are lost first (MISSING): an exclusive grant means Redis found
 * the key free, so every local place is gone; a shared one, that no
 * exclusive token is there. NULL when out of memory.
 */
struct lease *lease_new(struct session *s, struct resource *res, const struct lease_grant *g);

/*
 * Redis granted a hold of this kind on res (shared; limit: a semaphore's): lose,
 * as MISSING with why, the local leases it excludes (lease_new does so).
 */
void lease_lose_excluded(struct resource *res, int shared, uint32_t limit, const char *why);

/* A renew or Extend with ttl_ms, sent at sent_ms, was confirmed by Redis. */
void lease_confirmed(struct lease *l, int64_t sent_ms, uint32_t ttl_ms);
/* A renew or Extend with ttl_ms had no answer: it may still run, and lengthen the key. */
void lease_unconfirmed(struct lease *l, uint32_t ttl_ms);

/* 1 when l may no longer be counted on at now (its loss is due). */
int lease_expired(const struct lease *l, int64_t now);
/*
 * How long l's lease stays valid after from_ms with the loss margin taken off;
 * never negative. It speaks of the lease only: a client also bounds a lock by
 * its session's timeout (docs/protocol.md §6.5).
 */
uint32_t lease_valid_ms(const struct lease *l, int64_t from_ms);

/*
 * l is lost: push LockLost to its session and forget it. The key, if it may
 * still hold our token, is deleted by token once the lease's validity is
 * over (EXPIRED, MAX_HOLD) — not earlier, so that the holder, told just
 * now, has that margin to stop — or at once (FORCED: an operator's order).
 * Local waiters are woken.
 */
void lease_lose(struct lease *l, Rlock__V1__LostReason reason, const char *why);
/*
 * l's validity ran out at now (lease_expired): lose it as EXPIRED. When the
 * loss is noticed more than LEASE_LATENESS_MS after it was due, the daemon
 * was held up past what the margin allows, and the notice may come after
 * the key's expiry: the message says by how much, for the log and the holder.
 */
void lease_lose_expired(struct lease *l, int64_t now);
/* Push LockLost for a lock of s (counted as a loss). */
void lease_push_lost(struct session *s, const char *resource, const char *token, uint64_t fence,
                     Rlock__V1__LostReason reason, const char *why);
/*
 * l leaves its session without a loss (released, or the session ended).
 * Returns nothing to do with the key: the caller releases or tombstones it.
 */
void lease_forget(struct lease *l);
/*
 * l's seal (seal.h) as it stands now, into out; "" when the daemon has no
 * resume key. Sent with every reply that sets or changes a sealed term.
 */
void lease_seal(const struct lease *l, char *out);

/* Re-aim l's timer at its next event (renewal, loss, max_hold). */
void lease_schedule(struct lease *l);

void lease_ref(struct lease *l);
void lease_unref(struct lease *l);

#endif
