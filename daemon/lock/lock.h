/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock.h — what Acquire, Release, Extend and Cancel mean, in terms of
 * leases (lease.h), resources, local wait queues and the Lua scripts.
 *
 * Waiting: waiters for a resource queue FIFO on the resource and only the
 * head tries Redis; it is woken by a release through this daemon, by a
 * release notice from another daemon (pubsub.h), by a timer at the holder's
 * remaining lease, or when the head before it leaves.
 * Re-entry is per owner within a session.
 */
#ifndef RLOCKD_LOCK_H
#define RLOCKD_LOCK_H

#include <stdint.h>

#include "lease.h"
#include "rlock.pb-c.h"
#include "session.h"

struct config;
struct resource;

/*
 * The field checks the handlers make before touching any state (pure).
 * lock_check_resource: NULL when name may be locked, else the message of the
 * INVALID answer. lock_check_ttl: a ttl of 0 becomes the default; 0 when it is
 * within [limits], else -1.
 */
const char *lock_check_resource(const struct config *cfg, const char *name);
int lock_check_ttl(const struct config *cfg, uint32_t *ttl);
/* lock_check_kind: NULL when mode, limit and permits go together, else the INVALID message. */
#define LOCK_LIMIT_MAX 1000000u
#define LOCK_LIMIT_MAX_TEXT "1000000"
/* The longest campaign value (Acquire.value), in bytes. */
#define LOCK_VALUE_MAX 1024
#define LOCK_VALUE_MAX_TEXT "1024"
const char *lock_check_kind(const Rlock__V1__Acquire *a);
/* NULL when trace ("" = none) is a trace id the daemon logs as it is, else the INVALID message. */
const char *lock_check_trace(const char *trace);

/*
 * Request handlers (the session is ACTIVE). Each answers exactly once: at
 * once (they return 0), or later, from the struct request they made for it
 * (they return 1: the request is timed when it ends, request_free).
 */
int lock_acquire(struct session *s, uint64_t id, const Rlock__V1__Acquire *a);
int lock_release(struct session *s, uint64_t id, const Rlock__V1__Release *r);
int lock_extend(struct session *s, uint64_t id, const Rlock__V1__Extend *e);
void lock_cancel(struct session *s, uint64_t id, const Rlock__V1__Cancel *c);

/*
 * The session ends: drop its waiters, orphan its requests in Redis, and free
 * up to *budget of its leases (taken off *budget) — released by token when
 * clean, tombstoned for their lock_delay when not (a connection lost without
 * Goodbye, a keepalive timeout). Returns the leases left (lock_session_closed
 * lets go of them over the next loop turns).
 */
uint32_t lock_session_end(struct session *s, int clean, uint32_t *budget);

/*
 * s has ended (the server's on_session_end hook): let go of its leases,
 * LOCK_END_BATCH now and as many on each later loop turn (all at once while
 * stopping). A session ending with a hundred thousand locks would otherwise
 * hold the loop for a tenth of a second or more: keepalives, renewals and
 * loss notices of every other session wait behind it, and a notice sent late
 * is a notice sent after the key is gone.
 */
void lock_session_closed(struct session *s);
/* Let go of up to budget leases of ended sessions now, oldest session first. */
void lock_end_some(struct server *srv, uint32_t budget);
/* The ending sessions' list and event (lock_start fails, -1, only when out of memory). */
int lock_start(struct server *srv);
void lock_stop(struct server *srv);

/*
 * How long every watchdog lease of s stays valid, at least, counted from
 * from_ms (the arrival of a request), with the loss margin taken off; 0 when
 * s holds none. The client adds it to the send time of that request.
 */
uint32_t lock_session_valid_ms(struct session *s, int64_t from_ms);

/* The session's lease on name, if it holds one that is still valid. */
struct lease *lock_session_lease(struct session *s, const char *name);
/* Finish req (after its reply, if any, was sent) and free it. */
struct request;
void lock_request_done(struct request *req);

/*
 * Adopt (after a Resume): take over a lock the session held on another
 * daemon (adopt.c). Answers later (returns 1) or at once (0), as the handlers
 * above.
 */
int lock_adopt(struct session *s, uint64_t id, const Rlock__V1__Adopt *a);

/* The head of res's queue may have a chance now: let it try. */
void lock_kick(struct resource *res);
/*
 * A notice from outside (pubsub.c): res's key may have been freed by another
 * daemon. The head tries at once; if its try is in Redis already, a busy
 * answer to it is retried at once instead of sleeping (the notice and the
 * answer come on different connections, in no set order). Nothing happens
 * while res is held here.
 */
void lock_wake(struct resource *res);

/*
 * Compare-and-delete token on res (shared: give up its shared place) with
 * nobody to answer (session end, reconciliation). If Redis does not confirm,
 * the delete is retried (see cleanup.h) until the key, whose longest possible life ends at
 * max_expiry_ms, surely cannot hold the token any more.
 */
void lock_release_token(struct server *srv, struct resource *res, const char *token, int shared,
                        int64_t max_expiry_ms);

#endif
