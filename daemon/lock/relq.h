/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * relq.h — releases nobody awaits, batched and paced.
 *
 * When a session ends, its leases are freed by token (or tombstoned for
 * their lock_delay); so are grants nobody can receive and keys whose outcome
 * is unknown. A session may hold a hundred thousand locks: sent one script
 * call each, all at once, they would flood its Redis connections past the
 * command deadline, and the releases would end unconfirmed. Here they wait
 * in a queue per Redis connection and leave in release_many.lua (or
 * group_release.lua) calls of up to RELQ_BATCH_MAX keys, with at most RELQ_INFLIGHT_MAX calls in flight per
 * connection; each answer sends the next batch. A key whose release Redis did
 * not confirm goes to the cleanup list. Until the queue is empty, shutdown
 * waits (srv->background counts every key queued or in flight).
 */
#ifndef RLOCKD_RELQ_H
#define RLOCKD_RELQ_H

#include <stdint.h>

struct server;
struct resource;

#define RELQ_BATCH_MAX 64
#define RELQ_INFLIGHT_MAX 4

/* Create one queue per Redis connection; 0 or -1. */
int relq_init(struct server *srv);
/* Drop what is still queued (at exit; the keys expire by their ttl). */
void relq_free(struct server *srv);

/*
 * Free res's key if it holds token: delete it (delay_ms 0), or replace the
 * token by a tombstone for delay_ms. shared: give up token's place among the
 * shared holders instead (group_release.lua), or keep it for delay_ms. A batch
 * holds one of the two kinds. max_expiry_ms bounds the key's life, for the
 * cleanup retries if Redis does not confirm.
 */
void relq_add(struct server *srv, struct resource *res, const char *token, int shared,
              uint32_t delay_ms, int64_t max_expiry_ms);

/* Keys queued or in flight, for Stats and logs. */
uint64_t relq_pending(const struct server *srv);

#endif
