/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pubsub.h — release notices between the rlockd instances that share one
 * Redis, so that a waiter here is woken at once when a lock is freed through
 * another instance, not at the holder's remaining ttl.
 *
 * Every path that frees a lock's key (release.lua, release_many.lua) also
 * publishes the key on the resource's channel, PREFIX{resource}:free. Each
 * daemon keeps one dedicated pub/sub connection, subscribed only to the
 * channels of resources where a local waiter sleeps; a notice wakes that
 * resource's head waiter (lock_wake), never the others, so a release costs
 * Redis at most one try per daemon with waiters.
 *
 * With [redis] notify = no there is no connection and nothing is published:
 * every function here does nothing, and pubsub_channel gives "".
 */
#ifndef RLOCKD_PUBSUB_H
#define RLOCKD_PUBSUB_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct resource;

/* A resource's channel is its lock key followed by this. */
#define PUBSUB_CHANNEL_SUFFIX ":free"

/* Connect when the config asks for notices (srv->pubsub stays NULL otherwise); 0 or -1. */
int pubsub_start(struct server *srv);
/* Close the connection and drop every resource reference it holds. Accepts srv->pubsub NULL. */
void pubsub_stop(struct server *srv);

/*
 * Whether a waiter of res sleeps and wants the notices (on: its head found
 * the lock busy) or none is left (off). The SUBSCRIBE or UNSUBSCRIBE goes
 * out at the end of the loop turn, batched with the others of that turn.
 * Once Redis confirms a subscription, the head is woken once: a release
 * published before that reached nobody here.
 */
void pubsub_watch(struct server *srv, struct resource *res, int on);
/*
 * Whether a session here observes the election res (election.c): its
 * channel also carries campaign grants (acquire.lua publishes the leader
 * key), and every notice or confirmation calls election_notice.
 */
void pubsub_observe(struct server *srv, struct resource *res, int on);
/* The bits of struct resource's ps_want. */
#define PUBSUB_WANT_WAITER 1u
#define PUBSUB_WANT_OBSERVER 2u

/*
 * The channel release.lua publishes res's notices on, into buf (at least
 * res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX bytes); its length, 0 (and "")
 * when notices are off.
 */
size_t pubsub_channel(const struct server *srv, const struct resource *res, char *buf,
                      size_t len);
/* The suffix release_many.lua appends to each key for its channel; "" when notices are off. */
const char *pubsub_suffix(const struct server *srv);

/*
 * The name of the resource whose channel is chan (len bytes) under
 * key_prefix: *name and *name_len point into chan. 0, or -1 when chan is no
 * resource's channel. Pure.
 */
int pubsub_channel_resource(const char *key_prefix, const char *chan, size_t len,
                            const char **name, size_t *name_len);

/*
 * Sentinel: the master moved to addr (or was found): the connection goes
 * there now. Its channels are subscribed anew, and each confirmation wakes
 * that resource's head, as after any reconnect.
 */
struct config_address;
void pubsub_set_address(struct server *srv, const struct config_address *addr);

/* For the metrics: 1 while the connection is ready; notices received; channels subscribed. */
int pubsub_connected(const struct server *srv);
uint64_t pubsub_notifications(const struct server *srv);
uint32_t pubsub_subscriptions(const struct server *srv);

#endif
