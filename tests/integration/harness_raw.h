/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_raw.h — a client that speaks rlock.v1 frame by frame, for tests that
 * need what librlock hides or never sends: hostile bytes, exact bytes of a
 * field, several requests in one write, and the exact order of responses and
 * events.
 *
 * Framing comes from wire.h. Every read has a deadline; a connection the
 * daemon closed reads as EOF, never as a hang. Helpers that cannot go wrong
 * unless the test is broken (socket, connect, oversized frames) fail the
 * running test themselves.
 */
#ifndef RLOCK_ITEST_HARNESS_RAW_H
#define RLOCK_ITEST_HARNESS_RAW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "wire.h"

/* Largest frame accepted from the daemon (its replies are a few KiB at most). */
#define H_RAW_MAX_FRAME 65536u
/* Room for the requests of one write (h_raw_batch). */
#define H_RAW_BATCH_BYTES 8192u

/* One connection to the env's rlockd, with the bytes received and not yet parsed. */
struct h_raw {
    int fd;
    size_t len;
    uint8_t buf[WIRE_HEADER_BYTES + H_RAW_MAX_FRAME];
};

/* Requests framed back to back, to reach the daemon in a single write. */
struct h_raw_batch {
    size_t len;
    uint8_t buf[H_RAW_BATCH_BYTES];
};

/* Connect c to e's rlockd (unix socket); fails the test when that is impossible. */
void h_raw_open(struct h_raw *c, const struct h_env *e);
/* Close our end (c->fd becomes -1; accepts a closed c). */
void h_raw_close(struct h_raw *c);

/* Send len bytes as they are: 0, or -1 when the daemon has already closed the connection. */
int h_raw_send_bytes(const struct h_raw *c, const void *buf, size_t len);
/* Frame a raw Request body (hand-encoded bytes) with its length prefix and send it. */
int h_raw_send_body(const struct h_raw *c, const uint8_t *body, size_t len);
/* Encode and send one request; 0 or -1 as h_raw_send_bytes. */
int h_raw_send(const struct h_raw *c, const Rlock__V1__Request *req);

/*
 * Requests as encoders that write every field encode them (protobufjs does):
 * each field of m, at any depth, written even when it holds its default (0,
 * "", false), in field order; only the oneof member set. Into out, or only
 * sized when out is NULL; the number of bytes (harness_encode.c).
 */
size_t h_encode_explicit(const ProtobufCMessage *m, uint8_t *out);
/* Send req encoded so, as one frame. 0, or -1. */
int h_raw_send_explicit(const struct h_raw *c, const Rlock__V1__Request *req);

/* Append req, framed, to b (fails the test when b is full). */
void h_raw_batch_add(struct h_raw_batch *b, const Rlock__V1__Request *req);
/* Append Request{id, body}, where body_case names the oneof member body points to. */
void h_raw_batch_add_body(struct h_raw_batch *b, uint64_t id,
                          Rlock__V1__Request__BodyCase body_case, void *body);
/* Send all of b with one send call and empty it; 0 or -1 as h_raw_send_bytes. */
int h_raw_batch_send(const struct h_raw *c, struct h_raw_batch *b);

/*
 * The next message from the daemon, waiting until deadline (an h_now_ms()
 * time): 1 with *out set (free it with h_raw_free), 0 at EOF or reset, -1 when
 * the deadline passed first. An undecodable frame fails the test.
 */
int h_raw_read(struct h_raw *c, int64_t deadline, Rlock__V1__ServerMessage **out);
/* Free a message from h_raw_read (accepts NULL). */
void h_raw_free(Rlock__V1__ServerMessage *m);

/* The response inside m, or NULL when m is an event. */
const Rlock__V1__Response *h_raw_response(const Rlock__V1__ServerMessage *m);

/* Send Hello (client_name name, protocol 1, session_timeout_ms as given) and nothing more. */
void h_raw_send_hello(const struct h_raw *c, uint64_t id, const char *name,
                      uint32_t session_timeout_ms);
/*
 * Send Hello (client_name name, protocol 1, session_timeout_ms as given: 0 =
 * the daemon's default) with id, assert an OK HelloReply within 5 s and
 * return its session_timeout_ms.
 */
uint32_t h_raw_hello(struct h_raw *c, uint64_t id, const char *name, uint32_t session_timeout_ms);
/* h_raw_open followed by h_raw_hello with id 1 and the default session timeout. */
void h_raw_session(struct h_raw *c, const struct h_env *e, const char *name);

/*
 * A pinger: a thread of its own that sends Ping on a raw session every
 * every_ms and records each round trip, to measure the daemon's latency while
 * a test loads it. It speaks the protocol on a plain blocking socket, so what
 * it measures is the daemon, not this process's library threads, which may
 * be busy with thousands of other clients.
 */
struct h_pinger {
    struct h_env *e;
    int every_ms;
    atomic_int stop;
    int64_t *us; /* round trips in microseconds */
    size_t n, cap;
    int failures;
    struct h_thread thread;
};
struct h_ping_figures {
    size_t n;
    int64_t p50_us, p99_us, max_us;
};
/* Start pinging e's rlockd (p must stay in place until h_pinger_stop). */
void h_pinger_start(struct h_pinger *p, struct h_env *e, int every_ms);
/*
 * Stop the pinger and return its figures, after printing them as
 * "what: N pings, p50 .. us, p99 .. us, max .. us". Fails the test when a
 * Ping failed or fewer than 10 were answered.
 */
struct h_ping_figures h_pinger_stop(struct h_pinger *p, const char *what);

#endif
