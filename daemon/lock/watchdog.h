/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.h — the timers of held locks: renewal, loss, max_hold.
 *
 * Every lease sits in srv->lease_timers (a timing wheel, twheel.h) at its next
 * event; one timerfd on CLOCK_BOOTTIME, watched by the loop, fires at the
 * earliest. A firing pops only the leases that are due, so its cost follows
 * the work due, not the number of locks held, and the clock is read afresh
 * as it goes. A lease whose loss is due is lost (EXPIRED, or MAX_HOLD); a
 * watchdog lease due for renewal (a third of its ttl after the send time of
 * its last confirmed renew) joins a batch for its Redis connection, and each
 * batch is one renew.lua call (group_renew.lua for shared holds: a batch is
 * of one kind) of up to WATCHDOG_BATCH_MAX locks (calls.h).
 */
#ifndef RLOCKD_WATCHDOG_H
#define RLOCKD_WATCHDOG_H

struct server;

#define WATCHDOG_BATCH_MAX 64
/*
 * Renew calls in flight per Redis connection. Leases due beyond that wait in
 * the connection's queue: a read of Redis's answers then never brings more
 * than this many batches to handle at once, which bounds how late the loop
 * can run the next timer (and a loss notice with it).
 */
#define WATCHDOG_INFLIGHT_MAX 4

/* Create the timer and the renew queues (after the pool); 0 or -1. */
int watchdog_start(struct server *srv);
void watchdog_stop(struct server *srv);
/* The earliest lease timer may have changed: aim the timerfd at it. */
void watchdog_rearm(struct server *srv);
/*
 * The Redis master changed (Sentinel): every held lease is checked on the
 * new master at once, as soon as its connection is ready — a watchdog lease
 * by renewing it, any other by renew.lua with ttl 0, which checks the token
 * and changes nothing. A key that did not survive the switch is a LockLost
 * (MISSING, or STOLEN when another token holds it).
 */
void watchdog_verify_all(struct server *srv);

#endif
