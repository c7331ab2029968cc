/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tombstone.h — keep a lock taken, by nobody, until a promise is over.
 *
 * When Redis loses a held key (a restart without persistence, FLUSHALL, an
 * eviction), its holder was still promised the lock until its valid-until
 * and may not have read its LockLost yet. A tombstone — the key set to
 * "tombstone:TOKEN", which no holder has, expiring at that time — keeps
 * everyone off meanwhile: waiters of any daemon and applications using the
 * classic SET NX alike. The calls go out on the resource's connection before
 * any try that follows them, and are retried every 100 ms while Redis does
 * not answer and the promise runs; the daemon's shutdown waits for them
 * like for releases. From the start until Redis has answered, this daemon's
 * own tries of the resource are answered busy until the promise ends
 * without going to Redis (resource.h: tombstones_unsent).
 */
#ifndef RLOCKD_TOMBSTONE_H
#define RLOCKD_TOMBSTONE_H

#include <stdint.h>

struct server;
struct resource;

/* The key vanished: set the tombstone unless someone took the key meanwhile (SET NX). */
void tombstone_set(struct server *srv, struct resource *res, const char *token,
                   int64_t until_ms);
/*
 * The key holds token — a grant nobody may use, or a lease lost while its
 * holder's promise runs (MAX_HOLD) — and must stay taken until until_ms,
 * even if Redis has lost it meanwhile: replace token by the tombstone (by
 * token); when the key no longer holds token, set the tombstone (SET NX).
 */
void tombstone_swap(struct server *srv, struct resource *res, const char *token,
                    int64_t until_ms);

#endif
