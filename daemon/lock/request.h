/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * request.h — an acquire, release or extend that outlives its frame: it
 * waits in a resource's queue or talks to Redis.
 *
 * State: NEW -> IN_REDIS <-> WAITING -> DONE, changed by request_set_state
 * only. A request whose session ended is orphaned: it still completes, with
 * nobody to answer (an orphaned acquire that was granted is released at once),
 * and counts as background work the shutdown waits for.
 */
#ifndef RLOCKD_REQUEST_H
#define RLOCKD_REQUEST_H

#include <stdint.h>
#include <sys/queue.h>

#include "session.h"
#include "util.h"

struct resource;
struct event;

enum request_state { REQUEST_NEW, REQUEST_IN_REDIS, REQUEST_WAITING, REQUEST_DONE };

/* An acquire, release or extend that outlives its frame (it waits or talks to Redis). */
struct request {
    struct server *srv;
    struct session *sess; /* NULL once orphaned */
    uint64_t id;
    int op; /* Rlock__V1__Request__BodyCase */
    enum request_state state;
    struct resource *res; /* counted reference */
    char token[UTIL_UUID_LEN + 1];
    uint32_t ttl_ms;
    int watchdog;
    uint64_t owner;      /* acquire: who in the session asks (re-entry is per owner) */
    int no_reentry;      /* acquire: refuse rather than re-enter */
    uint8_t shared;      /* acquire, release: a shared hold (group_*.lua) */
    uint8_t claiming;    /* acquire: exclusive, behind shared holds: claim the resource */
    uint8_t granted;     /* acquire: Redis granted a try (which cleared the claim) */
    uint32_t claim_ms;   /* acquire: the claim's PX, from the last busy answer */
    uint32_t limit;      /* acquire: a semaphore's permits in all (0: a lock; shared is set) */
    uint32_t permits;    /* acquire: the permits asked of it */
    char *value;         /* acquire: a campaign's value (NULL: not a campaign); owned */
    size_t value_len;
    int cancelled;       /* acquire: withdrawn by a Cancel while its try was in Redis */
    uint32_t max_hold_ms;   /* acquire: the lease's max_hold (0 = none) */
    uint32_t lock_delay_ms; /* acquire: the lease's lock_delay; tombstone: its delay */
    int64_t max_expiry_ms;  /* release, tombstone: the longest the key may live */
    int64_t arrival_ms;  /* when the request's frame was read (valid_ms counts from here) */
    int64_t arrival_us;  /* the same, in µs, for the latency histogram */
    int64_t deadline_ms; /* end of the wait; 0 = try once */
    int64_t sent_ms;     /* when the current Redis call was sent (validity starts here) */
    int expired;         /* the wait ran out while a try was in Redis */
    /* acquire: it found the lock taken (a busy answer, or a queue before it), and how
     * that ended was counted (contention.h) */
    uint8_t contended;
    uint8_t contention_counted;
    uint8_t contention_began; /* its start was counted (contention_began) */
    uint8_t wait_traced; /* acquire: its wait's line was written (trace) */
    char *trace;         /* acquire, release, extend: the client's trace id; NULL = none; owned */
    /* acquire: Redis's latest busy answer (holder.h): when the key's PTTL ends on
     * util_now_ms()'s clock (-1: no expiry; 0: no answer yet), and who held it
     * (REPLY_HELD_BY_*), for the holder a TIMEOUT reports */
    int64_t busy_until_ms;
    uint8_t busy_by;
    uint64_t fence;      /* acquire: the grant's fence while its WAIT for replicas runs */
    /* adopt: the claim's terms that a grant does not have */
    uint32_t holds;
    uint64_t max_hold_wall_ms;
    char old_token[UTIL_UUID_LEN + 1];
    int in_queue;        /* on res->waiters */
    struct quota *quota; /* acquire, adopt: the token's account it is charged to (quota.h) */
    struct event *deadline_ev;
    TAILQ_ENTRY(request) sess_link;
    TAILQ_ENTRY(request) wait_link;
};

/* s may be NULL: a request nobody awaits (a release by token), counted as background work. */
struct request *request_new(struct server *srv, struct session *s, uint64_t id, int op);
/* The session ended while r is in Redis: r completes with nobody to answer. */
void request_orphan(struct request *r);
void request_free(struct request *r);

/* The one place a request's state changes. */
void request_set_state(struct request *r, enum request_state st);

#endif
