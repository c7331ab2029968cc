/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * validity.h — a session's watchdog leases in order of the end of their
 * validity, for the keepalive answer's valid_ms (the minimum over them).
 *
 * The order is a heap whose keys may lag behind: a renewal only ever raises
 * a lease's validity (lease.h), so an entry's key stays a lower bound of its
 * lease's, and a renewal costs nothing here. Stale keys are corrected where
 * they matter, at the top: a few after each confirmed renewal or Extend, and
 * the rest when a keepalive asks. Once the top's key is its lease's own, it
 * is the minimum, since every other key is at or above it and at or below
 * its own lease's validity. (Corrected eagerly, each renewal moved its lease
 * down the session's heap writing a position into another lease at every
 * level. P4, a million locks, interleaved runs: rlockd 32.7% of a core
 * against 35.6%; reading the top's lease is now the cost, a cache miss.)
 *
 * Each entry holds a reference to its lease. A forgotten lease's entry is
 * dead: dropped when it reaches the top, or all at once when the dead are as
 * many as the living (O(1) per forget, amortized), and at the session's end.
 */
#ifndef RLOCKD_VALIDITY_H
#define RLOCKD_VALIDITY_H

#include <stdint.h>

struct lease;
struct session;

/* A new watchdog lease of its session. */
void validity_add(struct lease *l);
/* l's validity was raised (a confirmed renew or Extend). */
void validity_raised(struct lease *l);
/* A lease of s that had an entry was forgotten (after lease_forget dropped its own reference). */
void validity_forgotten(struct session *s);
/* s holds no lease any more: drop every entry. */
void validity_drain(struct session *s);
/* The keepalive answer: see lock_session_valid_ms. */
uint32_t validity_session_ms(struct session *s, int64_t from_ms);

#endif
