/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_proxy.h — a fault-injecting proxy between two unix sockets, run by
 * a thread of the test process: between rlockd and Redis (late answers, held
 * commands, connections cut while their commands are still on the way) or
 * between a client and rlockd.
 *
 * Every connection accepted on the listening path is paired with a new
 * connection to the target path, and the bytes of each direction pass
 * through a queue. Faults are set per direction on a selection of the
 * connections:
 *
 *   delay    each chunk read is passed on delay_ms after it was read (order kept)
 *   hold     chunks are kept, not passed on, until released
 *   release  what is held goes on at once (and the direction passes again)
 *   cut      the client side is closed (its owner sees the connection lost) while
 *            the server side stays open with what it still holds: released later,
 *            commands reach Redis after their sender gave up on them
 *   drop     both sides closed, anything held discarded
 *
 * A connection is a pub/sub one once its client has sent SUBSCRIBE or
 * PSUBSCRIBE (rlockd's release-notice connection); the others are command
 * connections. A selection names which connections a call affects: those open
 * now and those accepted later (ALL, COMMANDS, PUBSUB), or those open now only
 * (OPEN, OPEN_COMMANDS, OPEN_PUBSUB), so that a reconnect gets a clean line.
 * Every function is safe from any thread of the test.
 */
#ifndef RLOCK_ITEST_HARNESS_PROXY_H
#define RLOCK_ITEST_HARNESS_PROXY_H

#include <stdint.h>

struct h_proxy;

enum h_proxy_dir {
    H_PROXY_UP = 0,   /* client -> target (rlockd's commands to Redis) */
    H_PROXY_DOWN = 1, /* target -> client (Redis's answers to rlockd) */
};

enum h_proxy_sel {
    H_PROXY_ALL,
    H_PROXY_COMMANDS,
    H_PROXY_PUBSUB,
    H_PROXY_OPEN,
    H_PROXY_OPEN_COMMANDS,
    H_PROXY_OPEN_PUBSUB,
};

/* Listen on listen_path and pass connections on to target_path. NULL (and a message) on failure. */
struct h_proxy *h_proxy_start(const char *listen_path, const char *target_path);
/* Stop the thread, close every connection, free. NULL is fine. */
void h_proxy_free(struct h_proxy *p);

/* Chunks read from now on in direction dir wait delay_ms before they go on (0: pass at once). */
void h_proxy_delay(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir, int delay_ms);
/* Keep what is read in direction dir (and what waits for its delay) until h_proxy_release. */
void h_proxy_hold(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir);
/* Pass on everything held in direction dir now, and pass (without delay) from now on. */
void h_proxy_release(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir);
/* Close the client side of the selected connections; their server side keeps what it holds. */
void h_proxy_cut(struct h_proxy *p, enum h_proxy_sel sel);
/* Close both sides of the selected connections and discard what they hold. */
void h_proxy_drop(struct h_proxy *p, enum h_proxy_sel sel);

/* The number of selected connections whose client side is open. */
int h_proxy_count(struct h_proxy *p, enum h_proxy_sel sel);
/* Bytes held (not passed on) in direction dir over the selected connections. */
uint64_t h_proxy_held(struct h_proxy *p, enum h_proxy_sel sel, enum h_proxy_dir dir);
/* Connections accepted since the start. */
uint64_t h_proxy_accepted(struct h_proxy *p);

#endif
