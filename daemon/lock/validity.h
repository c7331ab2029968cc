/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * validity.h — the least end of validity over a session's watchdog leases,
 * for the keepalive answer's valid_ms.
 *
 * Each session counts its watchdog leases by the VALIDITY_BUCKET_MS bucket
 * their validity ends in (valid_until less the loss margin) in a bag
 * (base/minbag.h) that answers its least bucket. A confirmed renewal moves
 * one count from one bucket to another: two lookups in the session's own
 * small table, which the session's other renewals keep warm. It touches no
 * other lease: with a million locks every lease is a cache miss, and the
 * orders of leases this replaced (a heap of leases, then a sorted list per
 * ttl, whose moves touch the neighbours) were a quarter of rlockd's samples
 * (P4 of docs/benchmarks.md). Out-of-order confirmations, adopted locks
 * with any ttl left and Extends that change the ttl are the same move.
 *
 * The answer is the start of the least bucket in use: at or below the true
 * minimum, by less than VALIDITY_BUCKET_MS, so valid_ms is never later than
 * a lease's end; a keepalive drops at most VALIDITY_DROP_MAX emptied buckets
 * (a bounded cost per question; a lower bound still when it stops early).
 */
#ifndef RLOCKD_VALIDITY_H
#define RLOCKD_VALIDITY_H

#include <stdint.h>

struct lease;
struct session;

/* The width of a bucket, a power of two: valid_ms is at most this much short. */
#define VALIDITY_BUCKET_SHIFT 6
#define VALIDITY_BUCKET_MS (1 << VALIDITY_BUCKET_SHIFT)
/* Emptied buckets a keepalive drops at most (each was counted once). */
#define VALIDITY_DROP_MAX 4096

/* A new watchdog lease of its session. */
void validity_add(struct lease *l);
/* l's validity ends later: valid_until becomes until_ms (lease_confirmed). */
void validity_raise(struct lease *l, int64_t until_ms);
/* l's ttl becomes ttl_ms (an Extend), and with it its loss margin. */
void validity_ttl_change(struct lease *l, uint32_t ttl_ms);
/* l is being forgotten (its session still set). */
void validity_forget(struct lease *l);
/* s holds no lease any more: its bag is emptied (and freed when large). */
void validity_drain(struct session *s);
/*
 * The n leases of a renewal's answer are about to be confirmed: start loading
 * their sessions' counts, then the buckets their confirmation takes a count
 * from, so that the misses overlap instead of one after another.
 */
void validity_prefetch(struct lease *const *leases, uint32_t n);
/* The keepalive answer: see lock_session_valid_ms. */
uint32_t validity_session_ms(struct session *s, int64_t from_ms);

#endif
