/*
 * watchdog.h — the server-side renewal of held locks.
 *
 * A periodic tick walks the server's leases: a lease whose validity ran out
 * is lost (EXPIRED); a watchdog lease due for renewal (about ttl/3 after the
 * send time of its last successful renew) joins a batch for its Redis
 * connection, and each batch is one renew.lua call, pipelined with the rest.
 */
#ifndef RLOCKD_WATCHDOG_H
#define RLOCKD_WATCHDOG_H

struct server;

/* Period of the renewal and expiry scan. */
#define WATCHDOG_TICK_MS 50

/* Start the periodic tick on srv's loop; 0 or -1. */
int watchdog_start(struct server *srv);

#endif
