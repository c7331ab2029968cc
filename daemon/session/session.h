/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * session.h — one client connection and the session it carries.
 *
 * State: ACCEPTED (until Hello) -> ACTIVE -> CLOSING, then freed by the
 * server's reaper after the loop turn. session_set_state is the only place
 * the state changes. Ending a session is the lock logic's to finish (the
 * server's on_session_end hook): it releases the session's locks (token
 * compare), cancels its waiters and orphans its requests still in Redis.
 */
#ifndef RLOCKD_SESSION_H
#define RLOCKD_SESSION_H

#include <stdint.h>
#include <sys/queue.h>
#include <event2/util.h>

#include "iobuf.h"
#include "rlock.pb-c.h"
#include "server.h"
#include "minbag.h"
#include "util.h"


struct resource;
struct event;

enum session_state { SESSION_ACCEPTED, SESSION_ACTIVE, SESSION_CLOSING };

struct request;
struct lease;
TAILQ_HEAD(request_list, request); /* struct request is the lock logic's (request.h) */
TAILQ_HEAD(lease_list, lease);     /* struct lease likewise (lease.h) */

struct ssl_st;

struct session {
    struct server *srv;
    int fd;
    struct ssl_st *ssl;    /* a TLS session (tls.h); NULL on a plain socket */
    uint8_t tls_read_wants_write; /* a TLS read waits for the socket to take its output */
    uint8_t tls_write_wants_read; /* a TLS write waits for the peer's next message */
    uint8_t tls_failed;           /* a TLS error: no close_notify at the end */
    uint8_t tls_sniffed;          /* the first byte was looked at (TLS or not) */
    uint8_t plain_on_tls;         /* the plain protocol on a TLS listener: refused at Hello */
    struct event *rev;     /* readable (persistent); also activated to close a slow reader */
    struct event *wev;     /* writable, added only while output waits for the socket */
    int wev_armed;
    struct iobuf rx;       /* a partial frame, or frames left over by the per-event cap */
    struct iobuf tx;       /* replies not yet written */
    int flush_queued;      /* on srv->flushq */
    TAILQ_ENTRY(session) flush_link;
    int resume_queued;     /* on srv->resumeq: frames left by the per-event cap */
    uint64_t resume_turn;  /* srv->resume_turn when queued */
    TAILQ_ENTRY(session) resume_link;
    int ending;            /* on srv->ending: closed, leases still being let go of */
    int end_clean;         /* how they go (lock_session_end's clean) */
    TAILQ_ENTRY(session) end_link;
    enum session_state state;
    char id[UTIL_UUID_LEN + 1];
    char peer[128];
    uint8_t peer_ip[16];     /* the peer's address (IPv4 mapped into IPv6); unix: peer_tcp 0 */
    int peer_tcp;
    int peer_counted;        /* counted in srv->peers while pending */
    TAILQ_ENTRY(session) pending_link; /* in srv->pending while SESSION_ACCEPTED */
    char name[129];
    uint32_t timeout_ms;
    int64_t opened_ms;
    int64_t last_frame_ms;
    int64_t last_frame_us; /* the same instant in µs: requests are timed from it */
    struct event *timer;  /* Hello deadline, then keepalive deadline */
    struct request_list requests; /* in Redis or waiting */
    struct lease_list leases;     /* held locks */
    LIST_HEAD(observer_list, observer) observing; /* elections it observes (election.c) */
    uint32_t nobserving;
    uint32_t nleases;
    /* Its watchdog leases counted by the bucket their validity ends in (validity.h). */
    struct minbag valid;
    int valid_broken;          /* out of memory: walk every lease instead, until none is left */
    uint32_t nrequests;
    int flush_then_close; /* closing, but the last reply is still being written */
    int goodbye;          /* the client said Goodbye: its end is clean (no lock_delay) */
    int overflow;         /* output passed max_output_bytes: close from resume_ev */
    TAILQ_ENTRY(session) link;
    /* admin requests and authentication */
    uint64_t serial;               /* connection order, never reused (sessidx.h) */
    struct session *id_next;       /* sessidx's hash chain */
    int indexed;                   /* in srv->sessidx */
    int role;                      /* enum auth_role: set by Hello, followed at reloads */
    uint8_t token_fp[16];          /* keyed hash of its Hello's token: which one, at reloads */
    struct quota *quota;           /* its token's account (quota.h); NULL with auth off */
    uint32_t requested_timeout_ms; /* Hello.session_timeout_ms as sent */
    /* resume (hello.h) */
    int resumed; /* opened by a Resume: the session came from another connection */
    int moved;   /* its client carries it on elsewhere: its end leaves the keys alone */
};

/* Take over an accepted socket. NULL (socket closed) on failure. */
/* Largest frame a connection may send before its Hello (Hello and Resume are far smaller). */
#define SESSION_HELLO_FRAME_MAX 4096

/*
 * Before accepting one more connection: when max_pending connections are before their Hello,
 * the one silent the longest is closed (after its waiting bytes, if any, are read: they may
 * hold its Hello). A client says Hello within a round trip of connecting, so a flood of
 * silent connections only evicts itself; refusing newcomers instead would lock clients out.
 */
void session_make_room(struct server *srv);

struct session *session_new(struct server *srv, int fd, const char *peer, const uint8_t *ip,
                            struct ssl_st *ssl);

/* Send a Response. body may be NULL; body_case selects the reply field. */
void session_respond(struct session *s, uint64_t id, Rlock__V1__Status status, const char *msg,
                     Rlock__V1__Response__BodyCase body_case, void *body);
/* Send a Response with status st (an error) and message msg, and no body. */
void session_respond_error(struct session *s, uint64_t id, Rlock__V1__Status st, const char *msg);
/* The same with Response.holder (NULL: none): who holds what an Acquire did not get. */
void session_respond_refused(struct session *s, uint64_t id, Rlock__V1__Status st,
                             const char *msg, Rlock__V1__Holder *holder);
/* Send an Event. */
void session_push_event(struct session *s, Rlock__V1__Event *ev);
/* Have s's output written at the end of this loop turn (server flush). */
void session_queue_flush(struct session *s);
/* Write s's output now, as far as the socket takes it. */
void session_flush(struct session *s);

/*
 * End the session: release its locks, cancel its waiters, orphan its
 * requests. flush: send what is queued first (after an error reply). Safe to
 * call more than once and from any callback; the memory goes to the reaper.
 */
void session_close(struct session *s, const char *reason, int flush);

/*
 * A Resume proved s to be session id: s takes that id (and a new place in the
 * connection order). 0, or -1 when out of memory (s keeps its id).
 */
int session_take_id(struct session *s, const char *id);

/* Hello accepted: the session is ACTIVE with this keepalive timeout. */
void session_activate(struct session *s, uint32_t timeout_ms);

/* Give up writing a closing session's last reply (at exit); it goes to the reaper. */
void session_abandon_flush(struct session *s);

/* srv->resume_ev: go on reading the sessions the per-event frame cap stopped. */
void session_resume_cb(evutil_socket_t fd, short what, void *arg);

/* Free a closed session (called by the reaper only). */
void session_free(struct session *s);

/*
 * The server's sessions: lists, the session index and the events that free
 * closed sessions after the loop turn (reap), write output once per turn
 * (flush) and go on reading after the frame cap (resume). session_start fails
 * (-1) only when out of memory; session_stop frees what is left closed.
 */
int session_start(struct server *srv);
void session_stop(struct server *srv);
/* Have the sessions on srv->flushq written once the current callbacks are done. */
void session_schedule_flush(struct server *srv);
/* Have closed sessions freed after the current loop turn. */
void session_schedule_reap(struct server *srv);
/* Free the closed sessions now (those whose leases are all let go of). */
void session_reap_now(struct server *srv);

#endif
