/*
 * rlock_internal.h — the pieces of librlock shared between its source files.
 * Nothing here is installed; applications see only rlock.h.
 *
 *   rlock.c    public entry points: connect, close, ping, stats, errors
 *   lock.c     lock handles: acquire, release, extend, state and accessors
 *   call.c     one generic request/response exchange (pending-call table)
 *   session.c  the background thread: reads frames, dispatches responses and
 *              events, sends keepalives, notices the session's end
 *   conn.c     sockets and clocks
 *
 * Locking: c->mu guards every mutable field of the client, the pending-call
 * list and every lock handle's mutable fields. c->write_mu serialises writes
 * to the socket; it may be taken before c->mu, never after it. The lost-lock
 * callback is always called with neither mutex held.
 *
 * Internal names carry the rlk_ prefix so that they cannot collide with an
 * application linking the static library.
 */
#ifndef RLOCK_INTERNAL_H
#define RLOCK_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rlock.h"
#include "wire.h"

/* Mark the public entry points; everything else stays hidden in librlock.so. */
#if defined(RLOCK_BUILDING)
#define RLOCK_API __attribute__((visibility("default")))
#else
#define RLOCK_API
#endif

/* Longest frame accepted from the daemon; a longer length means a broken stream. */
#define RLK_MAX_FRAME_BYTES (16u * 1024u * 1024u)
/* Ping interval when the daemon does not suggest one and grants no timeout. */
#define RLK_FALLBACK_KEEPALIVE_MS 3000u
#define RLK_ERRMSG_BYTES 256
#define RLK_SESSION_ID_BYTES 64

#if defined(__GNUC__)
#define RLK_MUST_CHECK __attribute__((warn_unused_result))
#define RLK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RLK_MUST_CHECK
#define RLK_PRINTF(f, a)
#endif

/*
 * OPEN -> ENDED, once, by session_over() in session.c: from the background
 * thread (EOF, error, silence, SessionClosing), from a caller that gave up on
 * the stream, or from any call that finds the session stale (rlk_session_check).
 */
enum rlk_session_state {
    RLK_SESSION_OPEN,
    RLK_SESSION_ENDED,
};

/* One unpacked ServerMessage; the budget must outlive the message. */
struct rlk_frame {
    struct wire_budget budget;
    Rlock__V1__ServerMessage *msg;
};

/*
 * One request waiting for its response. Lives on the caller's stack; linked
 * into c->calls from before the request is written until the background
 * thread completes it (done = 1) or the caller gives up.
 */
struct rlk_call {
    struct rlk_call *next;
    uint64_t id;
    Rlock__V1__Response__BodyCase expect; /* reply body required with STATUS_OK */
    struct rlock_lock *grant;             /* acquire: handle filled in and listed on grant */
    int done;
    enum rlock_err err;  /* RLOCK_OK: frame holds the response */
    const char *why;     /* static detail when err != RLOCK_OK */
    struct rlk_frame *frame;
};

struct rlock_lock {
    struct rlock_client *client;
    struct rlock_lock *prev, *next; /* c->locks while listed */
    int listed;
    int notify;                     /* session ended: on_lost still to be called */
    char *resource;                 /* immutable */
    char *token;                    /* immutable once granted */
    uint64_t fence;                 /* immutable once granted */
    /* guarded by client->mu */
    uint32_t ttl_ms;
    uint32_t hold_count;
    enum rlock_lock_state state;
    enum rlock_lost_reason lost_reason;
};

struct rlock_client {
    int fd;
    int timer_fd;            /* CLOCK_BOOTTIME timerfd of the background thread, or -1 */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cond;     /* a call completed; CLOCK_MONOTONIC for timed waits */
    pthread_mutex_t write_mu;

    rlock_lost_fn on_lost;   /* immutable */
    void *on_lost_arg;

    /* guarded by mu */
    enum rlk_session_state state;
    int closing;             /* rlock_close is running: no callbacks */
    int free_on_exit;        /* rlock_close ran on the background thread: it frees c */
    uint64_t next_id;
    struct rlk_call *calls;
    struct rlock_lock *locks;
    int64_t last_tx_ms;      /* rlk_alive_ms() when the last frame was written */
    int64_t last_rx_ms;      /* ... and when the last frame was read */
    int64_t last_ping_ms;    /* ... and when the background thread last pinged */
    uint32_t session_timeout_ms; /* 0 until the HelloReply */
    uint32_t keepalive_ms;
    char session_id[RLK_SESSION_ID_BYTES]; /* set by the HelloReply, then immutable */
    char errmsg[RLK_ERRMSG_BYTES];
    char end_reason[RLK_ERRMSG_BYTES];

    /* background thread only */
    uint8_t *rx;
    size_t rx_len, rx_cap;
};

/* --- rlock.c ------------------------------------------------------------ */

/* Free everything c owns and c itself; the background thread is gone or is the caller. */
void rlk_client_free(struct rlock_client *c);

/* --- conn.c ------------------------------------------------------------- */

/* Milliseconds on CLOCK_MONOTONIC: deadlines of calls (the clock of c->cond). */
int64_t rlk_mono_ms(void);
/*
 * Milliseconds on CLOCK_BOOTTIME: session liveness. It keeps counting while
 * the machine is suspended, which the daemon on another host also sees.
 */
int64_t rlk_alive_ms(void);
/*
 * Open a non-blocking, close-on-exec stream socket to address ("HOST:PORT",
 * "[V6]:PORT" or "unix:/path") within timeout_ms (name resolution is not
 * bounded). Returns the fd, or -1 (connect failed) or -2 (address
 * malformed) with a message in err.
 */
RLK_MUST_CHECK int rlk_conn_open(const char *address, uint32_t timeout_ms, char *err,
                                 size_t errlen);
/*
 * Write all len bytes to the non-blocking fd before deadline (rlk_mono_ms).
 * Returns 0, or -1 with errno (ETIMEDOUT when the deadline passed).
 * *written tells how much went out either way.
 */
RLK_MUST_CHECK int rlk_conn_write(int fd, const uint8_t *buf, size_t len, int64_t deadline,
                                  size_t *written);

/* --- call.c ------------------------------------------------------------- */

/* Record a message for rlock_errmsg and return e. Takes c->mu. */
enum rlock_err rlk_fail(struct rlock_client *c, enum rlock_err e, const char *fmt, ...)
    RLK_PRINTF(3, 4);
/*
 * Send req (its id is assigned here) and wait up to extra_ms + timeout_ms
 * (0 = RLOCK_DEFAULT_TIMEOUT_MS) for the matching response. call must be zeroed except for expect and grant.
 * Returns RLOCK_OK when the daemon answered STATUS_OK with the expected body
 * (read it with rlk_call_response); otherwise the error, with rlock_errmsg
 * set. Either way the caller ends with rlk_call_done(call).
 */
RLK_MUST_CHECK enum rlock_err rlk_call(struct rlock_client *c, Rlock__V1__Request *req,
                                       struct rlk_call *call, uint32_t extra_ms,
                                       uint32_t timeout_ms);
const Rlock__V1__Response *rlk_call_response(const struct rlk_call *call);
void rlk_call_done(struct rlk_call *call);
void rlk_frame_free(struct rlk_frame *f);

/* --- session.c ---------------------------------------------------------- */

/* Start the background thread (all signals blocked in it). 0 or -1. */
RLK_MUST_CHECK int rlk_session_start(struct rlock_client *c);
/*
 * Write one framed message before deadline (rlk_mono_ms), serialised with
 * other writers. On failure the session is broken, since a partial frame
 * corrupts the stream: returns RLOCK_ERR_DEADLINE or RLOCK_ERR_CLOSED.
 */
RLK_MUST_CHECK enum rlock_err rlk_session_send(struct rlock_client *c, const uint8_t *buf,
                                               size_t len, int64_t deadline);
/*
 * End the session from any thread: remember why, fail pending calls, mark
 * held handles LOST, shut the socket down (the background thread then
 * exits and calls on_lost). No-op once ended.
 */
void rlk_session_break(struct rlock_client *c, const char *fmt, ...) RLK_PRINTF(2, 3);
/*
 * c->mu held: 1 while the session is open. A session the daemon has surely
 * given up on by now (nothing written or heard for a session timeout, e.g.
 * after the process was stopped) is ended here, as rlk_session_break would,
 * and the background thread is woken to deliver on_lost. Every getter that
 * reports liveness goes through this, so a resumed process never reads a
 * stale HELD.
 */
int rlk_session_check(struct rlock_client *c);

/* --- lock.c ------------------------------------------------------------- */

/*
 * The only place a handle's state changes (c->mu held). LOST records
 * reason; leaving HELD clears a pending notification.
 */
void rlk_lock_set_state(struct rlock_lock *l, enum rlock_lock_state st,
                        enum rlock_lost_reason reason);
/*
 * Background thread, c->mu held: fill l from a granting AcquireReply and
 * list it. Returns RLOCK_OK, RLOCK_ERR_PROTOCOL or RLOCK_ERR_NOMEM.
 */
RLK_MUST_CHECK enum rlock_err rlk_lock_grant(struct rlock_client *c, struct rlock_lock *l,
                                             const Rlock__V1__AcquireReply *r);
/* c->mu held: 1 if l is a handle of the lock (resource, token). */
int rlk_lock_same(const struct rlock_lock *l, const char *resource, const char *token);
/* c->mu held: unlink and free every listed handle (rlock_close). */
void rlk_lock_free_all(struct rlock_client *c);

#endif
