/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_peer.h — a raw-protocol session (harness_raw.h) with numbered
 * requests and assertions on its answers, for tests that must see each
 * response and event as the daemon sent it: which status, in which order,
 * with what message, what valid_ms.
 *
 * Every function fails the running test when an answer that must come does
 * not come within H_PEER_DEADLINE_MS, or is not what was asked for.
 */
#ifndef RLOCK_ITEST_HARNESS_PEER_H
#define RLOCK_ITEST_HARNESS_PEER_H

#include <stdint.h>

#include "harness.h"
#include "harness_raw.h"

/* Deadline for any answer that must come. */
#define H_PEER_DEADLINE_MS 5000

/* A status value by its bare name: H_ST(OK), H_ST(NOT_HELD). */
#define H_ST(name) RLOCK__V1__STATUS__STATUS_##name

/* A raw session: its connection, a name for messages and its last request id (Hello is 1). */
struct h_peer {
    struct h_raw raw;
    const char *name;
    uint64_t last_id;
};

/* What an Acquire asks for (zero: the field is not sent). */
struct h_acq {
    const char *resource;
    uint32_t ttl_ms;
    uint32_t wait_ms;
    uint64_t owner;
    int no_reentry;
    int watchdog_off;
    uint32_t max_hold_ms;
    uint32_t lock_delay_ms;
    int shared;     /* Acquire.mode SHARED */
    uint32_t limit; /* a semaphore's; permits: */
    uint32_t permits;
};

/* What an OK AcquireReply said. */
struct h_grant {
    char token[64];
    uint64_t fence;
    uint32_t ttl_ms;
    uint32_t hold_count;
    uint32_t valid_ms;
    int watchdog;
    char seal[64];              /* for Adopt ("" without a resume key) */
    uint64_t max_hold_until_ms; /* wall clock; 0 = none */
    uint32_t lock_delay_ms;
};

/* Connect and say Hello (id 1) with the daemon's default session timeout. */
void h_peer_open(struct h_peer *p, const struct h_env *e, const char *name);
/* The same asking for session_timeout_ms; returns what the HelloReply granted. */
uint32_t h_peer_open_timeout(struct h_peer *p, const struct h_env *e, const char *name,
                             uint32_t session_timeout_ms);
/* The next request id of p. */
uint64_t h_peer_next_id(struct h_peer *p);

/* The Acquire message for a (its strings point into a). */
Rlock__V1__Acquire h_acquire_msg(const struct h_acq *a);
/* Send b (one write); the daemon must not have closed the connection. */
void h_peer_send_batch(struct h_peer *p, struct h_raw_batch *b);
/* Send one request with the next id of p; returns that id. */
uint64_t h_peer_send(struct h_peer *p, Rlock__V1__Request__BodyCase body_case, void *body);
uint64_t h_peer_acquire(struct h_peer *p, const struct h_acq *a);
uint64_t h_peer_release(struct h_peer *p, const char *resource, const char *token);
uint64_t h_peer_extend(struct h_peer *p, const char *resource, uint32_t ttl_ms,
                       const char *token);

/* A one-line description of m for failure messages (a static buffer). */
const char *h_msg_describe(const Rlock__V1__ServerMessage *m);
/* The next message on p; the caller frees it (h_raw_free). */
Rlock__V1__ServerMessage *h_peer_next(struct h_peer *p, const char *what);
/* The next message on p, which must be the response to id; the caller frees it. */
Rlock__V1__ServerMessage *h_peer_response(struct h_peer *p, uint64_t id, const char *what);
/* The next message must answer id with status st (and, when st is not OK, carry no body). */
void h_peer_expect_status(struct h_peer *p, uint64_t id, Rlock__V1__Status st, const char *what);
/* The same, and its message must contain text. */
void h_peer_expect_error(struct h_peer *p, uint64_t id, Rlock__V1__Status st, const char *text,
                         const char *what);
/* The next message must be a LockLost of resource with reason. */
void h_peer_expect_lost(struct h_peer *p, const char *resource, Rlock__V1__LostReason reason,
                        const char *what);
/* The daemon must close the connection (EOF) within H_PEER_DEADLINE_MS, sending nothing more. */
void h_peer_expect_eof(struct h_peer *p, const char *what);

void h_grant_copy(const Rlock__V1__AcquireReply *a, struct h_grant *g);
/* The next message must be an OK AcquireReply to id, copied into *g. */
void h_peer_expect_grant(struct h_peer *p, uint64_t id, struct h_grant *g, const char *what);
/* Acquire on its own and expect a grant. */
void h_peer_acquire_ok(struct h_peer *p, const struct h_acq *a, struct h_grant *g,
                       const char *what);
/* Release on its own and expect OK with hold_count holds. */
void h_peer_release_ok(struct h_peer *p, const char *resource, const char *token, uint32_t holds,
                       const char *what);
/* Nothing at all may arrive on p for ms milliseconds. */
void h_peer_expect_quiet(struct h_peer *p, int ms, const char *what);
/* Ping and expect its answer next (so all p sent before was handled); returns its valid_ms. */
uint32_t h_peer_ping(struct h_peer *p, const char *what);
/* Stats from the daemon: waiters and held locks of all sessions. */
void h_peer_stats(struct h_peer *p, uint64_t *waiters, uint64_t *held, const char *what);
void h_peer_expect_stats(struct h_peer *p, uint64_t waiters, uint64_t held, const char *what);

#endif
