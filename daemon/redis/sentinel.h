/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel.h — find the Redis master through Redis Sentinel and follow it
 * across failovers ([redis] sentinels and master_name).
 *
 * rlockd talks to one sentinel at a time, over two connections: one asks
 * SENTINEL get-master-addr-by-name (at start, then every SENTINEL_POLL_MS),
 * the other is subscribed to +switch-master, so that a failover is followed
 * the moment the sentinels announce it. Any failure of either (refused, lost,
 * an error, no answer within command_timeout, a sentinel that does not know
 * the master) drops both and tries the next sentinel of the list, with the
 * usual reconnect backoff; the poll also catches a failover announced while
 * no subscription was live.
 *
 * When the answer names a new address, the pool moves there
 * (rpool_set_master), whose connections check role:master and load the
 * scripts afresh, and the on_master hook is told: the top moves the pub/sub
 * connection too and, after a switch (not the first discovery), has every
 * held lock re-verified on the new master at once (a key the replica never
 * received is a LockLost).
 */
#ifndef RLOCKD_SENTINEL_H
#define RLOCKD_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct redisReply;

/* Time between two asks of the current sentinel. */
#define SENTINEL_POLL_MS 1000

/*
 * The master is at addr (the pool moved there already): first found
 * (switched 0), or after a failover (switched 1). The top moves the pub/sub
 * connection there and, after a switch, has every held lock re-verified.
 */
struct config_address;
typedef void sentinel_master_fn(void *arg, const struct config_address *addr, int switched);

/*
 * Start when the config names sentinels (srv->sentinel stays NULL otherwise);
 * on_master(arg, ...) whenever the master is found at a new address. 0 or -1.
 */
int sentinel_start(struct server *srv, sentinel_master_fn *on_master, void *arg);
/* Close both connections and free. Accepts srv->sentinel NULL. */
void sentinel_stop(struct server *srv);

/* For Stats and the metrics: 1 while a sentinel answers; failovers followed. */
int sentinel_connected(const struct server *srv);
uint64_t sentinel_switches(const struct server *srv);

/*
 * Parse a +switch-master message's text, "NAME OLDIP OLDPORT NEWIP NEWPORT":
 * 0 and the new master as "IP:PORT" (IPv6 in brackets) in addr when NAME is
 * master_name; -1 otherwise (another master, or malformed). Pure.
 */
int sentinel_parse_switch(const char *text, const char *master_name, char *addr, size_t len);

enum sentinel_master {
    SENTINEL_MASTER_OK,      /* addr holds "IP:PORT" (IPv6 in brackets) */
    SENTINEL_MASTER_UNKNOWN, /* nil: the sentinel does not know master_name */
    SENTINEL_MASTER_BAD,     /* an error or a reply of another shape */
};
/*
 * What a reply to SENTINEL get-master-addr-by-name says (reply not NULL). The
 * port is not checked here: config_parse_address does that, as for any address.
 * Pure.
 */
enum sentinel_master sentinel_parse_master(const struct redisReply *reply, char *addr,
                                           size_t len);

#endif
