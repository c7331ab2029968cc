/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_move.h — the check of session resume, for any topology: clients
 * given the list "A,B" hold locks through A; A is killed or told to hand over; every
 * session must resume on B with every lock, same fence, no LockLost, and no
 * key may be missing at any poll (every 10 ms) while it happens.
 */
#ifndef RLOCK_ITEST_HARNESS_MOVE_H
#define RLOCK_ITEST_HARNESS_MOVE_H

#include "harness.h"

/* How many of the n keys exist now (the topology decides how to ask). */
typedef long long (*h_keys_count_fn)(void *ctx, const char *const *keys, int n);

/*
 * a and b: two started daemons on one Redis (or Sentinel, or Cluster) with the same key
 * prefix and resume key. b is stopped while nclients clients (the list "a,b") take nlocks
 * locks each through a, then started again; a is sent sig and reaped (and left down:
 * a->rlockd_pid 0): SIGKILL (a crash: the clients find the connection gone) or SIGTERM
 * (a handover: SessionClosing{resume}, and b answers at the first try). Fails the test
 * unless every session resumes on b within 20 s with every lock HELD, same fence and
 * token, no LockLost, count() never below nclients * nlocks, the keys still there past
 * the ttl, and every key gone after the releases. Prints the figures.
 */
void h_move_check(struct h_env *a, struct h_env *b, int sig, int nclients, int nlocks,
                  h_keys_count_fn count, void *ctx);

/* count for a single Redis: one EXISTS over all the keys (ctx: the redisContext). */
long long h_keys_count_exists(void *ctx, const char *const *keys, int n);

/* Give b's daemon a's key prefix (it is restarted with it). */
void h_env_share_prefix(struct h_env *b, const struct h_env *a);

#endif
