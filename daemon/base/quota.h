/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * quota.h — what the sessions of one auth token hold and wait for, against that
 * token's quota.
 *
 * limits.max_locks bounds the whole daemon; without a bound per token one
 * client token could take every lock. With authentication on, every session
 * is charged to the account of the token it presented in Hello (or Resume),
 * found by the token's keyed fingerprint: sessions of one token share one
 * account, and an account outlives reloads that keep its token.
 *
 *     locks    leases held, plus acquires being tried or waiting (the same
 *              count as limits.max_locks: a burst of tries could all succeed)
 *     waiters  acquires queued on a resource
 *
 * A quota of 0 is no quota. Each item charged (a request, a lease) holds a
 * reference to the account it was charged to and gives its charge back to that
 * same account, so a reload or a session's end can never move a count.
 *
 * Pure bookkeeping: no sockets, no server state. Accounts are at most one per
 * configured token plus the removed ones still referenced, so a fixed array of
 * hash chains keeps each lookup short.
 */
#ifndef RLOCKD_QUOTA_H
#define RLOCKD_QUOTA_H

#include <stdint.h>

#define QUOTA_SLOTS 1024

struct quota {
    uint8_t fp[16];       /* keyed hash of the token */
    uint32_t max_locks;   /* 0: none */
    uint32_t max_waiters; /* 0: none */
    uint32_t locks;
    uint32_t waiters;
    uint32_t refs; /* sessions, requests and leases charged to it */
    struct quota *next;
};

struct quota_table {
    struct quota *slot[QUOTA_SLOTS];
    uint32_t n;
};

/* The account of fp, created with no quota if new; a reference for the caller.
 * NULL when out of memory (the session then goes uncharged: the daemon-wide
 * limits still hold). */
struct quota *quota_get(struct quota_table *t, const uint8_t fp[16]);
/* The account of fp, or NULL; no reference taken. */
struct quota *quota_find(struct quota_table *t, const uint8_t fp[16]);
/* Another reference to q (which may be NULL). */
struct quota *quota_ref(struct quota *q);
/* Drop a reference; the last one frees the account. Accepts NULL. */
void quota_put(struct quota_table *t, struct quota *q);

/*
 * Which quota an acquire would pass: NULL, or the name of the one reached
 * ("max_locks", "max_waiters"). waits: the acquire would join a queue.
 * q may be NULL (no account: nothing to pass).
 */
const char *quota_check(const struct quota *q, int waits);

#endif
