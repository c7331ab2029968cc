/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * validity.h — a session's watchdog leases in order of the end of their
 * validity, for the keepalive answer's valid_ms (the minimum over them).
 *
 * Renewals come in order: the watchdog renews a session's leases of one ttl
 * in the order their validity ends, and each confirmed renewal moves a lease
 * to the latest end. So the leases of one (session, ttl) are kept in a list
 * sorted by validity, and a renewal moves one from the head to the tail: O(1),
 * touching the lease renewed just before it and the one renewed next, both
 * warm. A confirmation that arrives out of order (another connection's batch
 * was faster) walks back from the tail, at most VALIDITY_WALK_MAX leases. The
 * minimum is the least of the lists' heads: one per ttl the session uses.
 * (Replaced a per-session heap whose moves were 30% of the daemon's samples
 * with a million locks, P4 of docs/benchmarks.md.)
 *
 * A lease whose place is further back than that walk (an adopted lock, whose
 * key had any ttl left; a burst of late confirmations) goes to the session's
 * heap of exceptions instead, whose keys may lag behind renewals (they are
 * lower bounds, corrected when they reach the top; see lheap.h). An entry
 * there holds a reference to its lease and is dead once the lease left the
 * heap (renewed into a list, or forgotten): dropped at the top, or all at once
 * when the entries are more than twice the leases they stand for.
 *
 * Every key a list or the heap holds is at or below its lease's own, so the
 * answer is never later than the true minimum.
 */
#ifndef RLOCKD_VALIDITY_H
#define RLOCKD_VALIDITY_H

#include <stdint.h>

struct lease;
struct session;

/* The most leases a renewal walks back past to find its place in its list. */
#define VALIDITY_WALK_MAX 16

/* Where a lease is ordered (lease.valid_in). */
enum { VALID_NONE = 0, VALID_LIST, VALID_HEAP };

/* A new watchdog lease of its session. */
void validity_add(struct lease *l);
/* l was confirmed by Redis: its validity may have been raised. */
void validity_raised(struct lease *l);
/* l's ttl becomes ttl_ms (an Extend): it moves to that ttl's list. */
void validity_ttl_change(struct lease *l, uint32_t ttl_ms);
/* l is being forgotten (its session still set). */
void validity_forget(struct lease *l);
/* s holds no lease any more: drop every entry and list. */
void validity_drain(struct session *s);
/* How many lists (ttls) order s's leases. */
uint32_t validity_lists(const struct session *s);
/* The keepalive answer: see lock_session_valid_ms. */
uint32_t validity_session_ms(struct session *s, int64_t from_ms);

#endif
