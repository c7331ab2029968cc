/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder.h — who is in the way of an Acquire answered NOT_ACQUIRED or
 * TIMEOUT: the Response's Holder (docs/protocol.md §6.1).
 *
 * A session of this daemon holding the resource is named (its session id,
 * client name, owner, kind, grant time and validity left); else the answer
 * tells what Redis said of the key at the latest try of the request, or of
 * the head of the resource's queue (which tries for the waiters behind it):
 * its PTTL, counted down since, and whether rlockd made its value.
 *
 * Nothing is allocated: the Holder lives on the caller's stack and points
 * into the session and the lease, which outlive the packing of the answer.
 * Shared holders are not walked: the first is named, with their count.
 */
#ifndef RLOCKD_HOLDER_H
#define RLOCKD_HOLDER_H

#include <stdint.h>

#include "rlock.pb-c.h"

struct lease;
struct request;
struct resource;

/* Keep Redis's busy answer on req (pttl: its PTTL, -1 without expiry; held_by: REPLY_HELD_BY_*). */
void holder_seen(struct request *req, long long pttl, int held_by, int64_t now);

/* Fill h from l, one of holders sessions of this daemon holding its resource; returns h. */
Rlock__V1__Holder *holder_of_lease(Rlock__V1__Holder *h, const struct lease *l, uint32_t holders,
                                   int64_t now);

/*
 * Fill h for an Acquire of res that is refused or timed out at now: from
 * res's holder here, else from req's latest busy answer (req may be NULL),
 * else from that of the head of res's queue. Returns h, or NULL when nothing
 * is known (no Response.holder then).
 */
Rlock__V1__Holder *holder_fill(Rlock__V1__Holder *h, const struct resource *res,
                               const struct request *req, int64_t now);

#endif
