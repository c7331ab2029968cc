/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * calls.h — the script calls that act on held locks by token, for either
 * kind of hold: an exclusive lock's key (renew.lua, release.lua) or a shared
 * holder's place among the resource's holders (group_renew.lua,
 * group_release.lua; docs/protocol.md §6.8). Both answer alike (reply.h), so
 * the callers read the answers the same way whatever the kind.
 */
#ifndef RLOCKD_CALLS_H
#define RLOCKD_CALLS_H

#include <stdint.h>

#include "pool.h"

struct server;
struct resource;
struct lease;

/*
 * Renew (ttls[i] > 0) or check (0) the n leases, all of one kind and on one
 * Redis connection and hash slot, in one call; cb gets the array of answers.
 * When out of memory, cb runs at once with no reply.
 */
void calls_renew(struct server *srv, struct lease *const *leases, const uint32_t *ttls,
                 uint32_t n, rpool_cb *cb, void *arg);

/*
 * Release token on res (shared: its place), announcing it to other daemons'
 * waiters; cb gets an integer (release.lua) or an array of one
 * (group_release.lua): reply_delete reads both.
 */
void calls_release(struct server *srv, struct resource *res, const char *token, int shared,
                   rpool_cb *cb, void *arg);
/*
 * Give up token's shared place on res after delay_ms: it stays counted till
 * then under another name, nobody's (group_release.lua's delay); cb as above.
 */
void calls_release_later(struct server *srv, struct resource *res, const char *token,
                         uint32_t delay_ms, rpool_cb *cb, void *arg);

#endif
