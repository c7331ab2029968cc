/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spool.h — a pool of asynchronous rlockd clients on one libevent loop in
 * the calling thread: many sessions for the runs that hold locks or just
 * stay connected (hold, idle, mass). The loop runs only inside the calls
 * below; between them the sessions' keepalives wait, so callers keep the
 * gaps short (a session timeout is seconds).
 */
#ifndef BENCH_SPOOL_H
#define BENCH_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

struct spool;

/*
 * Connect n sessions to o->server, a batch at a time (each batch's Hellos
 * answered before the next connects, so none waits past the daemon's hello
 * timeout). NULL with err when any fails.
 */
struct spool *spool_open(const struct bench_opts *o, size_t n, char *err, size_t errlen);
/*
 * Acquire total locks spread evenly over the sessions, named
 * "bench/<tag>/<session>/<i>", each session keeping up to inflight acquires
 * out; the lock handles are freed at once (the sessions keep the locks).
 * An acquire answered UNAVAILABLE is submitted again after a pause (see
 * spool_retries). Gives up after timeout_s. Returns the number granted;
 * other failures are counted in the pool's errors.
 */
uint64_t spool_acquire_all(struct spool *p, uint64_t total, unsigned inflight,
                           const char *tag, double timeout_s);
/* Run the loop (keepalives, lost-lock notices) for seconds. */
void spool_run_for(struct spool *p, double seconds);
/* Acquires answered UNAVAILABLE and submitted again, so far. */
uint64_t spool_retries(const struct spool *p);
/*
 * Errors by class so far: failed acquires, sessions that ended on their own
 * (BERR_CLOSED) and locks reported lost (BERR_LOST). Copied into errors.
 */
void spool_errors(const struct spool *p, uint64_t errors[BERR_COUNT]);
/* "class: message" of the first of those, or "". */
const char *spool_first_error(const struct spool *p);
/* End every session cleanly and free the pool. Accepts NULL. */
void spool_close(struct spool *p);

#endif
