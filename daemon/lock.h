/*
 * lock.h — acquire, release and extend semantics, leases and local waiting.
 *
 * A lease is a lock held by a session of this daemon. It is HELD while it is
 * on its session's and the server's lists; releasing or losing it takes it
 * off both (lease_forget) and it is freed once no renew in flight refers to
 * it. Validity is measured on CLOCK_MONOTONIC from the *send* time of the
 * last successful acquire/renew: once valid_until passes the lock is lost.
 *
 * Waiting: waiters for a resource queue FIFO on the resource and only the
 * head tries Redis; it is woken by a release through this daemon, by a timer
 * at the holder's remaining lease, or when the head before it leaves.
 */
#ifndef RLOCKD_LOCK_H
#define RLOCKD_LOCK_H

#include <stdint.h>
#include <sys/queue.h>

#include "rlock.pb-c.h"
#include "session.h"
#include "watchdog.h"

struct lease {
    struct server *srv;
    struct session *sess;
    struct resource *res; /* counted reference */
    char token[UTIL_UUID_LEN + 1];
    uint64_t fence;
    uint64_t owner; /* who in the session holds it (Acquire.owner) */
    uint32_t ttl_ms;
    uint32_t holds; /* re-entry count of that owner */
    int watchdog;
    int64_t valid_until_ms;
    int64_t next_renew_ms;
    int renewing;  /* a renew is in Redis */
    int extending; /* an Extend is in Redis (one at a time bounds a client's Redis load) */
    int forgotten; /* released or lost; only in-flight renews still point here */
    uint32_t refs;
    TAILQ_ENTRY(lease) sess_link;
    TAILQ_ENTRY(lease) srv_link;
};

/* Request handlers (the session is ACTIVE). Each answers exactly once. */
void lock_acquire(struct session *s, uint64_t id, const Rlock__V1__Acquire *a);
void lock_release(struct session *s, uint64_t id, const Rlock__V1__Release *r);
void lock_extend(struct session *s, uint64_t id, const Rlock__V1__Extend *e);
void lock_cancel(struct session *s, uint64_t id, const Rlock__V1__Cancel *c);

/*
 * How long every watchdog lease of s stays valid, at least, counted from
 * from_ms (the arrival of a request), with the loss margin taken off; 0 when
 * s holds none. The client adds it to the send time of that request.
 */
uint32_t lock_session_valid_ms(const struct session *s, int64_t from_ms);

/* The session ends: release its leases by token, drop its waiters, orphan the rest. */
void lock_session_end(struct session *s);

/* The lease is lost: push LockLost to its session and forget it. */
void lease_lose(struct lease *l, Rlock__V1__LostReason reason, const char *why);
/*
 * Safety margin taken off a lease's validity: Redis expires keys by its own
 * clock, which may run a little fast against ours.
 */
#define LEASE_DRIFT_MS(ttl_ms) ((int64_t)(ttl_ms) / 100 + 2)
/*
 * A lease is treated as lost this long before its validity ends: the drift
 * margin plus one watchdog tick, so that the loss is never noticed late.
 */
#define LEASE_MARGIN_MS(ttl_ms) (WATCHDOG_TICK_MS + LEASE_DRIFT_MS(ttl_ms))

/*
 * A renew (or the acquire) carrying ttl_ms was sent at sent_ms and succeeded:
 * the key is ours until at least sent_ms + ttl_ms. The ttl must be the one
 * sent, not the lease's current one, which an Extend may have changed since.
 */
void lease_renewed(struct lease *l, int64_t sent_ms, uint32_t ttl_ms);
void lease_ref(struct lease *l);
void lease_unref(struct lease *l);

/*
 * Compare-and-delete token on res with nobody to answer (session end,
 * reconciliation). If Redis does not confirm, the delete is retried (see
 * cleanup.h) while a key with a ttl_ms lease could still exist.
 */
void lock_release_token(struct server *srv, struct resource *res, const char *token,
                        uint32_t ttl_ms);

#endif
