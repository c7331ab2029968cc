/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * deadlock.h — a wait that would close a cycle among this daemon's sessions
 * (docs/protocol.md §6.13), found the way databases find theirs: in the
 * wait-for graph, when the wait starts.
 *
 * A node is a session and an owner in it (a session's shared hold taken by
 * several owners stands for all of them). A queued Acquire of node W on
 * resource R waits for every local lease of R that excludes it: an exclusive
 * Acquire for the holder and every shared holder, a shared one for an
 * exclusive holder. Semaphores wait for any of several holders to give
 * permits back, which is no cycle of necessity: they add no edge. Before an
 * Acquire joins a queue, the graph is walked from the holders it would wait
 * for; reaching W again is a deadlock, and the new wait — the youngest of the
 * cycle — is refused with DEADLOCK, its message naming the cycle.
 *
 * The walk is bounded: at most DEADLOCK_MAX_STEPS edges and DEADLOCK_MAX_DEPTH
 * sessions deep, whatever the graph (a longer cycle is left to the waits'
 * timeouts). Only this daemon's sessions are seen: a cycle through a lock
 * held via another daemon, or by the copied SET NX code, is not found here
 * either (the waits' timeouts end it).
 *
 * A cycle can also close when a lock is granted while its new holder already
 * waits elsewhere; a node waits for one lock at a time unless its client
 * queues several acquires of one owner at once (the asynchronous API), so
 * that case is left to the timeouts too.
 */
#ifndef RLOCKD_DEADLOCK_H
#define RLOCKD_DEADLOCK_H

#include <stddef.h>
#include <stdint.h>

struct request;

#define DEADLOCK_MAX_STEPS 256
#define DEADLOCK_MAX_DEPTH 16

/*
 * 1 when acquire req (not yet queued) waiting for its resource would close a
 * cycle; then msg (len bytes) names it: the resources and the sessions.
 */
int deadlock_find(const struct request *req, char *msg, size_t len);

#endif
