/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock_internal.h — the pieces of librlock shared between its source files.
 * Nothing here is installed; applications see only rlock.h.
 *
 *   rlock.c     names, versions, per-thread errors and owners
 *   holder.c    who holds the lock of a refused acquire, kept and said in words
 *   conn.c      sockets, clocks, futex waits
 *   engine.c    the protocol engine: one session's frames, pending requests,
 *               keepalives and end; single-threaded (c->mu held)
 *   move.c      a session that moves: its connection lost or the daemon asking
 *               it to move, the reconnect, Resume and the Adopt of its locks
 *   locks.c     lock objects and handles: grants, releases, losses, getters
 *   client.c    a client's life: creation, c->mu (rlk_client_lock/unlock, which
 *               hands the engine's outputs on when released), shutdown, close
 *   reactor.c   the process's two threads: socket I/O + keepalives for every
 *               blocking client, and the callback thread; fork handling
 *   blocking.c  the blocking API, a thin layer over the engine
 *   async.c     the asynchronous API, the engine driven by the application
 *   admin.c     the operators' requests (blocking), their replies unpacked by
 *               the calling thread
 *   elect.c     leader elections: Leader and Observe (blocking), the elections
 *               a session observes, their LeaderChanged events
 *
 * Who calls whom. The API layers (blocking.c, async.c, admin.c) call down into
 * the engine and locks under c->mu. The engine and locks.c call above them only
 * client.c's lock and unlock and, in reactor.c, the fork generation
 * (rlk_fork_gen) and the wake-up of a blocking call's I/O leader
 * (rlk_reactor_wake_leader); client.c, on unlock, gives the engine's
 * outputs to the mode of the client: the callback thread (reactor.c) for a
 * blocking client, the application's next rlock_async_process for an
 * asynchronous one. reactor.c drives the engine of every blocking client from
 * its I/O thread. Those hand-overs are the circle engine/locks <-> client <->
 * reactor/async: it stays inside librlock/, on purpose, with one lock order.
 *
 * Locking. c->mu guards the client's engine, lock objects and handles. The
 * process-wide locks are taken only after it, in this order:
 *     registry (reactor.c) -> c->mu -> reactor -> callback queue -> cancel token
 * (the registry is taken first only by fork's prepare handler and by client
 * creation and removal). No lock is held while a user callback runs, and no
 * thread blocks on the network while holding one.
 *
 * Internal names carry the rlk_ prefix; the static library localises them.
 */
#ifndef RLOCK_INTERNAL_H
#define RLOCK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "iobuf.h"
#include "rlock.h"
#include "wire.h"

struct ssl_st;
struct ssl_ctx_st;

/* Mark the public entry points; everything else stays hidden. */
#define RLOCK_API __attribute__((visibility("default")))

/* Longest frame accepted from the daemon; a longer length means a broken stream. */
#define RLK_MAX_FRAME_BYTES (16u * 1024u * 1024u)
/* Output queued to the daemon beyond which the session is given up (it does not read). */
#define RLK_MAX_TX_BYTES (32u * 1024u * 1024u)
/* Ping interval when the daemon does not suggest one and grants no timeout. */
#define RLK_FALLBACK_KEEPALIVE_MS 3000u
/* Shortest keepalive interval, whatever the locks' ttls. */
#define RLK_MIN_KEEPALIVE_MS 10u
#define RLK_SESSION_ID_BYTES 64
#define RLK_TOKEN_BYTES 64
#define RLK_SEAL_BYTES 40 /* a seal or a session secret: 32 hex characters */
#define RLK_REASON_BYTES 256

#if defined(__GNUC__)
#define RLK_MUST_CHECK __attribute__((warn_unused_result))
#define RLK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define RLK_MUST_CHECK
#define RLK_PRINTF(f, a)
#endif

struct rlk_lock;

/* --- calls -------------------------------------------------------------------- */

/* What a pending request is for; decides how its response is taken. */
enum rlk_call_kind {
    RLK_CALL_HELLO,
    RLK_CALL_ACQUIRE,
    RLK_CALL_RELEASE,
    RLK_CALL_EXTEND,
    RLK_CALL_PING,
    RLK_CALL_STATS,
    RLK_CALL_KEEPALIVE, /* the engine's own Ping: its valid_ms vouches for watchdog locks */
    RLK_CALL_CANCEL,    /* the engine's own Cancel: the answer is not needed */
    RLK_CALL_FORGET,    /* the engine's own Release of a grant nobody wanted */
    RLK_CALL_KEEP,      /* an operator's request: the OK response is kept, packed, in
                           call->kept for the caller to unpack on its own thread */
    RLK_CALL_RESUME,    /* the engine's Resume of a moving session (move.c) */
    RLK_CALL_ADOPT,     /* the engine's Adopt of one lock after a Resume (move.c) */
    RLK_CALL_LEADER,    /* Leader: the answer goes to call->leader (elect.c) */
    RLK_CALL_OBSERVE,   /* Observe: likewise, and call->name is observed from then on */
    RLK_CALL_UNOBSERVE, /* Observe with stop */
    RLK_CALL_REOBSERVE, /* the engine's own Observe of an observed election after a resume:
                           a change since is reported (elect.c) */
};

/* Bits of rlk_call.state, the futex word a blocking caller sleeps on. */
#define RLK_CALL_DONE 1u      /* completed: the result fields are final */
#define RLK_CALL_CANCEL_REQ 2u /* its cancellation token fired */

/*
 * One request waiting for its response. A blocking call lives on its caller's
 * stack and the engine never touches it after setting RLK_CALL_DONE (but for
 * the futex wake, which writes nothing). Calls of the asynchronous API and the
 * engine's own are on the heap (owned = 1) and freed by the engine after
 * their completion ran.
 */
struct rlk_call {
    struct rlk_call *hnext;   /* pending table chain */
    struct rlk_call *cnext;   /* completion list (owned calls only) */
    struct rlk_call *kprev, *knext; /* watchers of a cancellation token */
    struct rlock_cancel *cancel;
    uint64_t id;
    enum rlk_call_kind kind;
    int owned;                /* on the heap, the engine frees it */
    int cancelled;            /* acquire withdrawn: a grant is released, CANCELLED reported */
    int64_t sent_ms;          /* rlk_alive_ms() when queued: validity counts from here */
    uint64_t tx_end;          /* c->tx_queued just after this request: written once tx_sent >= it */
    uint8_t *held_frame;      /* held back behind a cancelled acquire (engine.c): the frame */
    size_t held_len;
    struct rlk_call *hnext_held; /* c->held_back, in submission order */
    struct rlock_lock *handle; /* acquire: filled in on grant; release/extend: the handle */
    struct rlk_lock *lock;    /* adopt: the lock object (one reference) */
    uint64_t acq_id;          /* forget: the Acquire whose grant this releases (0 = none) */
    char *acq_resource;       /* forget by acquire_id: its resource (owned) */
    rlock_done_fn done_fn;    /* asynchronous completion */
    void *done_arg;
    atomic_uint state;        /* RLK_CALL_* bits */
    atomic_int lead_fd1;      /* its caller reads the socket itself (reactor.c): that
                                 client's leader eventfd + 1, to interrupt its poll; 0 not */
    /* the result */
    enum rlock_err err;
    struct rlock_error detail; /* when err != RLOCK_OK */
    struct rlock_holder holder; /* acquire refused (NOT_ACQUIRED, TIMEOUT): who holds it */
    int has_holder;
    uint32_t hold_count;
    uint32_t ttl_ms;
    uint64_t server_time_ms;
    struct rlock_stats *stats; /* stats: filled in on completion */
    Rlock__V1__Response__BodyCase keep_body; /* keep: the reply body expected */
    uint8_t *kept;            /* keep: the packed Response (malloc'd; the caller frees it) */
    size_t kept_len;
    const char *name;         /* leader, observe: the election (owned calls: acq_resource) */
    struct rlock_leader *leader; /* leader, observe: filled in on completion (owned calls:
                                    malloc'd, freed with the call) */
    int superseded;           /* observe, reobserve: a stop of its election was queued after
                                 it, so the daemon does not observe it whatever this answers */
};

/* What a note reports: a lost lock (on_lost), or a change of an observed election (on_leader). */
enum rlk_note_kind { RLK_NOTE_LOST, RLK_NOTE_LEADER };

/* A lost lock or an election's change to report to the application, in order. */
struct rlk_note {
    struct rlk_note *next;
    enum rlk_note_kind kind;
    uint64_t fence;  /* lost: the lock's fence; leader: the term */
    enum rlock_lost_reason reason; /* lost */
    int elected;     /* leader */
    char *token;     /* lost: the lock's token; leader: the value */
    char resource[]; /* NUL-terminated */
};

/*
 * An election the session observes (elect.c): the latest leader reported for it, and,
 * while the daemon refuses to observe it again after a move (retrying), when to ask next.
 */
struct rlk_observed {
    struct rlk_observed *next;
    uint64_t term;
    int elected;
    int retrying;          /* an Observe of it is to be sent at retry_at */
    int64_t retry_at;      /* rlk_alive_ms() */
    uint32_t backoff_ms;   /* the pause before the latest try (0: none yet) */
    int64_t limited_since; /* rlk_alive_ms() of the first of a run of LIMIT_EXCEEDED, or 0 */
    char name[];           /* NUL-terminated */
};

/* --- the client ----------------------------------------------------------------- */

enum rlk_mode { RLK_MODE_BLOCKING, RLK_MODE_ASYNC };

/*
 * OPEN -> ENDED, once, by rlk_eng_end(); OPEN <-> MOVING while a session that
 * can be resumed changes connection (move.c). New calls are taken only while
 * OPEN.
 */
enum rlk_session_state { RLK_SESSION_OPEN, RLK_SESSION_MOVING, RLK_SESSION_ENDED };

/* The connection under the session: frames flow only while UP. */
enum rlk_link { RLK_LINK_DOWN, RLK_LINK_CONNECTING, RLK_LINK_UP };

/* An Acquire whose answer was lost with a connection: released by its id after a Resume. */
struct rlk_unanswered {
    struct rlk_unanswered *next;
    uint64_t id;
    char resource[]; /* NUL-terminated */
};

/* What a moving session needs (move.c). */
struct rlk_move {
    int64_t since;            /* rlk_alive_ms() when the move began */
    int64_t give_up_at;       /* the session ends if it has not resumed by then */
    int64_t next_try;         /* when to connect next (backoff) */
    int64_t try_until;        /* the current try (connect, then Resume) fails at this time */
    uint32_t backoff_ms;
    unsigned tries;           /* connection attempts of this move */
    unsigned batch;           /* Resume and Adopt answers still due on this connection */
    struct rlk_lock *adopt_next; /* the next held lock to adopt on it (NULL: all sent) */
    int resumed;              /* the Resume of this connection was accepted */
    int keep_old;             /* the connection left is kept open until the resume */
    struct rlk_unanswered *unanswered;
    char why[RLK_REASON_BYTES];  /* why the session moves */
    char last[RLK_REASON_BYTES]; /* why the latest try failed */
};
/* What a call refused while a session moves suggests as retry_after_ms. */
#define RLK_MOVE_RETRY_MS 100u

struct rlk_calltab {
    struct rlk_call **b;
    size_t nb; /* power of two */
    size_t n;
};

struct rlk_locktab {
    struct rlk_lock **b;
    size_t nb; /* power of two */
    size_t n;
};

struct rlock_client {
    pthread_mutex_t mu;
    enum rlk_mode mode;
    unsigned fork_gen;       /* rlk_fork_gen() when created: another value = inherited */
    rlock_lost_fn on_lost;   /* immutable */
    void *on_lost_arg;
    rlock_leader_fn on_leader; /* immutable */
    void *on_leader_arg;
    int fd;

    /* TLS (tls.c): the options kept from rlock_options, the context made from them when an
     * address is tls://, and the connection on fd when it is a TLS one. Guarded by mu. */
    char *tls_ca_file, *tls_cert_file, *tls_key_file, *tls_server_name;
    struct ssl_ctx_st *tls_ctx;
    struct ssl_st *ssl;
    int tls_read_wants_write;  /* a TLS read must first send (poll for writing) */
    int tls_write_wants_read;  /* a TLS write must first receive (do not poll for writing) */

    /* guarded by mu */
    enum rlk_session_state state;
    enum rlk_link link;
    int old_fd;              /* the connection a move left, kept open until it resumed
                                (a live daemon must not see its end before the adopts), or -1 */
    int fd_changed;          /* the fd was replaced: the application's loop must re-aim */
    int corked;              /* queue without writing: the move's requests go out in one write */
    struct rlk_addr_list *addrs; /* the daemons to (re)connect to */
    unsigned addr_used;      /* the index of the current (or last) one */
    char *hello_name, *hello_auth; /* what a Resume repeats of the Hello */
    uint32_t hello_timeout_ms;
    struct rlk_move move;
    uint64_t resumes;        /* sessions resumed so far */
    int quiet;               /* the application ended the session: no lost-lock callbacks */
    int closing;             /* rlock_close has begun */
    char end_reason[RLK_REASON_BYTES];
    char session_id[RLK_SESSION_ID_BYTES]; /* set by the HelloReply */
    char session_secret[RLK_SEAL_BYTES];   /* likewise; "" = the daemon cannot resume it */
    uint32_t session_timeout_ms;
    uint32_t keepalive_ms;
    uint64_t next_id;
    struct rlk_calltab pending;
    uint32_t ncancelled;            /* pending acquires withdrawn, answer still due */
    struct rlk_call *held_back;     /* acquires waiting for those answers (engine.c) */
    struct iobuf tx, rx;
    uint64_t tx_queued, tx_sent;    /* bytes queued / written since the start */
    int64_t last_tx_ms;      /* rlk_alive_ms() before the write that emptied tx */
    int64_t last_rx_ms;      /* ... when the last frame was read */
    int64_t last_ping_ms;    /* ... when the engine last queued a keepalive */
    int64_t answered_sent_ms; /* ... the send time of the latest request that got an answer */
    int keepalive_inflight;
    /* locks */
    struct rlk_locktab locks;       /* held locks by token */
    struct rlk_lock *held;          /* list of held locks */
    uint64_t nheld;
    struct rlock_lock *handles;     /* every handle not yet freed */
    uint32_t min_wd_ttl_ms;         /* smallest ttl of a watchdog lock since none was held */
    uint64_t ping_seq;              /* keepalive answers applied so far */
    int64_t wd_valid_until;         /* what the latest of them vouched for (rlk_alive_ms) */
    int lost_fd;                    /* eventfd, or -1 */
    /* outputs of the engine, handed over by the driver once mu is released */
    struct rlk_call *done_head, **done_tail; /* owned calls completed, with a done_fn */
    struct rlk_note *notes, **notes_tail;    /* lost locks and elections' changes to report */
    struct rlk_observed *observed;           /* the elections observed (elect.c) */
    unsigned observed_gen;                   /* ... bumped whenever one leaves the list */
    unsigned observed_retrying;              /* ... how many of them have retrying set */
    /* blocking mode */
    uint32_t calls_active;          /* blocking calls between entry and return */
    pthread_cond_t idle_cv;         /* signalled when calls_active drops to 0 */
    int epoll_out;                  /* EPOLLOUT is armed (mu) */
    int epoll_in;                   /* the fd is in the reactor's epoll set (mu) */
    int epoll_rd;                   /* ... with EPOLLIN: off while a leader reads (mu) */
    struct rlk_call *leader_call;   /* a blocking caller reading the socket itself (mu) */
    int rd_lazy;                    /* EPOLLIN left off after a leader, for the next (mu) */
    int64_t lazy_since;             /* rlk_mono_ms() when the last leader ended (mu) */
    int lazy_listed;                /* on the reactor's lazy list (set: mu and reactor lock) */
    struct rlock_client *lazy_next, **lazy_pprev; /* its links (reactor lock: a neighbour's
                                                     unlink changes them) */
    int leader_reading;             /* the leader is in the engine now (mu) */
    int64_t wake_at;                /* its key in the reactor's timer heap (reactor lock) */
    size_t heap_idx;                /* position in the heap + 1; 0 = not in it (reactor lock) */
    int registered;                 /* watched by the reactor (reactor lock) */
    atomic_int cb_closed;           /* rlock_close began: deliver no further callbacks */
    int free_after_cb;              /* closed from its own callback (callback queue lock) */
    struct rlock_client *reg_prev, *reg_next; /* the registry (registry lock) */
    /* asynchronous mode */
    rlock_change_fn change_fn;
    void *change_arg;
    int64_t async_wake;             /* rlk_alive_ms() of the next timer, -1 none (mu) */
    int in_process;                 /* inside rlock_async_process */
    int free_after_process;         /* rlock_close ran inside a completion */
};

/* --- rlock.c ---------------------------------------------------------------------- */

/* Record the detail of a failed call for this thread (rlock_last_error) and return e. */
enum rlock_err rlk_fail(enum rlock_err e, const char *fmt, ...) RLK_PRINTF(2, 3);
/* Make err (with its detail) this thread's last error; returns its code. */
enum rlock_err rlk_fail_with(const struct rlock_error *err);
/*
 * The thread's latest failed call was an acquire refused with holder h (NULL:
 * none): rlock_last_holder reports it. rlk_fail and rlk_fail_with forget it.
 */
void rlk_holder_keep(const struct rlock_holder *h);
/*
 * An acquire's NOT_ACQUIRED or TIMEOUT came with h: kept on call, and said in
 * words at the end of call->detail.message (holder.c).
 */
void rlk_holder_take(struct rlk_call *call, const Rlock__V1__Holder *h);
/* The daemon's Holder m as the API's struct. */
void rlk_holder_copy(struct rlock_holder *h, const Rlock__V1__Holder *m);
/* Fill an error struct. */
void rlk_error_set(struct rlock_error *out, enum rlock_err e, uint32_t retry_after_ms,
                   const char *fmt, ...) RLK_PRINTF(4, 5);
/* 1 on the library's callback thread (set by reactor.c). */
extern _Thread_local int rlk_in_callback;

/* --- conn.c ----------------------------------------------------------------------- */

/* Milliseconds on CLOCK_MONOTONIC: deadlines of calls. */
int64_t rlk_mono_ms(void);
/*
 * Milliseconds on CLOCK_BOOTTIME: session liveness and lock validity. It keeps
 * counting while the machine is suspended, which the daemon on another host
 * also sees.
 */
int64_t rlk_alive_ms(void);
/* A CLOCK_BOOTTIME time as CLOCK_MONOTONIC, for the public valid-until value. */
int64_t rlk_alive_to_mono(int64_t alive_ms);
/* A daemon's addresses: "HOST:PORT", "[V6]:PORT" or "unix:/path" each. */
#define RLK_MAX_ADDRESSES 16
#define RLK_ADDRESS_BYTES 256
struct rlk_addr_list {
    unsigned n;
    char a[RLK_MAX_ADDRESSES][RLK_ADDRESS_BYTES];
};
/*
 * Parse a comma-separated list (spaces around commas ignored) of well-formed
 * addresses. 0, or -1 with the reason in err.
 */
int rlk_addr_list_parse(const char *list, struct rlk_addr_list *out, char *err, size_t errlen);
/* Where to start in a list of n addresses: at random, so that clients spread over them. */
unsigned rlk_addr_start(unsigned n);
/*
 * Open a non-blocking, close-on-exec stream socket to the first address of l
 * that accepts, trying them in turn from start within timeout_ms (each gets an
 * equal share of what is left; a host name resolving to several addresses
 * tries them in order; name resolution is not bounded). Returns the fd (*used
 * = its index), or -1 (none accepted) or -2 (an address is malformed) with a
 * message in err.
 */
RLK_MUST_CHECK int rlk_conn_open_list(const struct rlk_addr_list *l, unsigned start,
                                      uint32_t timeout_ms, unsigned *used, char *err,
                                      size_t errlen);
/* rlk_conn_open_list of the comma-separated list address, from a random start. */
RLK_MUST_CHECK int rlk_conn_open(const char *address, uint32_t timeout_ms, char *err,
                                 size_t errlen);
/*
 * Sleep while *word == expect, at most until deadline_ms (rlk_mono_ms; < 0:
 * no limit). Returns when woken, when the word differs, or at the deadline;
 * the caller re-checks.
 */
void rlk_futex_wait(atomic_uint *word, unsigned expect, int64_t deadline_ms);
/* Wake one sleeper on word. word may already be gone: only its address is used. */
void rlk_futex_wake(atomic_uint *word);

/* --- tls.c ------------------------------------------------------------------------ */

/* 1 when address is written tls://...; the address without that prefix. */
int rlk_addr_tls(const char *address);
const char *rlk_addr_plain(const char *address);
/* Copy the TLS options of o into c. 0, or -1 when out of memory. */
int rlk_tls_keep_opts(struct rlock_client *c, const struct rlock_options *o);
/* Make c's TLS context when an address of c->addrs is tls://. 0, or -1 with err. */
int rlk_tls_setup(struct rlock_client *c, char *err, size_t errlen);
/* c->fd is a new connection to address: a TLS one on it if address says so. 0 or -1. */
int rlk_tls_attach(struct rlock_client *c, const char *address);
/* Drop the TLS connection of c->fd (the socket stays); accepts none. */
void rlk_tls_detach(struct rlock_client *c);
/* Free everything TLS of c. */
void rlk_tls_free(struct rlock_client *c);
/*
 * Read or write c->fd, through TLS on a TLS connection: like read(2) / send(2)
 * (EAGAIN when it would block), with a message in why on an error.
 */
ssize_t rlk_sock_read(struct rlock_client *c, void *buf, size_t len, char *why, size_t whylen);
ssize_t rlk_sock_write(struct rlock_client *c, const void *buf, size_t len, char *why,
                       size_t whylen);
/* 1 when TLS holds decrypted bytes not read yet (the socket does not show them). */
int rlk_sock_pending(const struct rlock_client *c);

/* --- engine.c ----------------------------------------------------------------------- */
/* Every function here runs with c->mu held (or on a client no other thread sees). */

/* Set up an engine around a connected fd. 0, or -1 when out of memory. */
RLK_MUST_CHECK int rlk_eng_init(struct rlock_client *c, int fd);
/* 1 while the fd should be watched (connected or connecting). */
int rlk_eng_linked(const struct rlock_client *c);
/* Queue an engine-owned request (nobody awaits its answer). 0, or -1 (the call is freed). */
int rlk_eng_submit_own(struct rlock_client *c, Rlock__V1__Request *req, struct rlk_call *call);
/* Complete a pending call taken off the table: its waiter wakes, an owned one is queued or freed. */
void rlk_eng_complete(struct rlock_client *c, struct rlk_call *call);
/* Take every pending call off the table and hand each to fn. */
void rlk_eng_drain_pending(struct rlock_client *c,
                           void (*fn)(struct rlock_client *c, struct rlk_call *call));
/* Queue the Release of a grant nobody wants, by token or (token NULL) by acquire id. */
void rlk_eng_forget(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t acq_id);
/* Adopt the timeouts and the secret of a HelloReply (Hello or Resume). */
void rlk_eng_take_hello(struct rlock_client *c, const Rlock__V1__HelloReply *h);
/* Free the engine: fd closed (not shut down), owned calls freed, notes dropped. */
void rlk_eng_free(struct rlock_client *c);
/*
 * Queue req (its id is assigned here and stored in call->id) and try to
 * write it. call->kind, handle, owned and done_fn are set by the caller. On
 * RLOCK_OK the call is pending and completes exactly once; otherwise it is
 * not (the detail is in call->detail).
 */
RLK_MUST_CHECK enum rlock_err rlk_eng_submit(struct rlock_client *c, Rlock__V1__Request *req,
                                             struct rlk_call *call);
/* Read what the socket has and act on each frame; then write what is queued. */
void rlk_eng_read(struct rlock_client *c);
/* Write what is queued (the socket became writable). */
void rlk_eng_flush(struct rlock_client *c);
/* 1 while output is queued (poll for writing). */
int rlk_eng_want_write(const struct rlock_client *c);
/*
 * Keepalives and liveness at now (rlk_alive_ms): ends a session the daemon
 * may have given up on, queues a Ping when one is due. Returns when to call
 * again (rlk_alive_ms), or -1 when never (the session is over).
 */
int64_t rlk_eng_timers(struct rlock_client *c, int64_t now);
/*
 * 1 while the session is open. A session the daemon has surely given up on
 * by now is ended here first (every getter goes through this, so that a
 * resumed process never reads a stale HELD).
 */
int rlk_eng_check(struct rlock_client *c);
/*
 * End the session (no-op once ended): every pending call completes with
 * RLOCK_ERR_CLOSED, every held lock becomes LOST (reason SESSION) and is
 * reported unless quiet, and the socket is shut down (unless inherited
 * across fork). The first reason sticks.
 */
void rlk_eng_end(struct rlock_client *c, const char *why, int quiet);
/*
 * The application ends the session: tell the daemon (Goodbye, written if the
 * socket takes it now) so that it frees the locks at once, without the
 * lock_delay of an unclean end. rlk_eng_end follows.
 */
void rlk_eng_goodbye(struct rlock_client *c);
/*
 * The blocking caller of call gives up on it: on a deadline (the session is
 * then ended, since the outcome is unknown) or, for an acquire, on its
 * cancellation (the engine takes over: the daemon is asked to withdraw it,
 * and a grant that comes anyway is released). Returns 1 if the call had
 * completed meanwhile (its result stands), else 0.
 */
int rlk_eng_abandon(struct rlock_client *c, struct rlk_call *call, int cancel,
                    const char *why);
/* Withdraw the pending acquire with id; 0, or -1 when there is none. */
int rlk_eng_cancel_id(struct rlock_client *c, uint64_t id);
/* Complete call with err and a detail message (the engine's own failures). */
void rlk_eng_complete_err(struct rlock_client *c, struct rlk_call *call, enum rlock_err err,
                          const char *fmt, ...) RLK_PRINTF(4, 5);
/* Queue a note of kind about resource, with text (lost: the token; leader: the value) and
 * every other field 0, for the application; NULL when out of memory. */
struct rlk_note *rlk_note_add(struct rlock_client *c, enum rlk_note_kind kind,
                              const char *resource, const char *text);
/* Record a lost lock for the application: the lost fd, and the callback unless quiet. */
void rlk_eng_note_lost(struct rlock_client *c, const char *resource, const char *token,
                       uint64_t fence, enum rlock_lost_reason reason, int quiet);
/* 1 when c was inherited from the parent across fork(). */
int rlk_inherited(const struct rlock_client *c);

/* --- move.c -------------------------------------------------------------------------- */
/* Every function here runs with c->mu held. */

/*
 * The connection is lost or must be left (why): move the session when it can
 * be resumed (1), else return 0 and the caller ends it. keep_old: the daemon
 * may be alive and must not see the connection end before the adopts (it
 * would release the locks); else the connection is shut down now.
 */
int rlk_move_begin(struct rlock_client *c, const char *why, int keep_old);
/* A moving session's timers: connect, give up, lose what expired. Next wake, or -1. */
int64_t rlk_move_timers(struct rlock_client *c, int64_t now);
/* The connection of a moving session is writable or has an error: did it connect? */
void rlk_move_connect_done(struct rlock_client *c);
/* The answer r to a Resume or Adopt call of the move. */
void rlk_move_answer(struct rlock_client *c, struct rlk_call *call, const Rlock__V1__Response *r);
/* A pending call at the loss of the connection: complete it (or keep it for the next one). */
void rlk_move_settle(struct rlock_client *c, struct rlk_call *call);
/* Free what a move keeps (the session ended). */
void rlk_move_free(struct rlock_client *c);
/* c->mu held, blocking clients: the engine replaced c->fd (old still open); watch the new one. */
void rlk_reactor_swap_fd(struct rlock_client *c, int old_fd);
/*
 * Start a non-blocking connect to address (its pick-th resolved address, for a
 * host name with several). The fd, with *done = 1 if already connected; or -1
 * with a message in err.
 */
int rlk_conn_start(const char *address, unsigned pick, int *done, char *err, size_t errlen);
/* A connect started by rlk_conn_start ended: 0 connected, or the errno. */
int rlk_conn_result(int fd);

/* --- elect.c ------------------------------------------------------------------------ */
/* Every function here but rlk_note_deliver runs with c->mu held. */

/* Fill a Leader or Observe request for call (kind LEADER, OBSERVE or UNOBSERVE; name set). */
void rlk_elect_fill(const struct rlk_call *call, Rlock__V1__Request *req, Rlock__V1__Leader *l,
                    Rlock__V1__Observe *o);
/*
 * An UNOBSERVE call of name is being submitted (engine.c, in the critical section that
 * queues it): its election is no longer observed, no change reported. The caller marks
 * the Observes of it still pending superseded first.
 */
void rlk_elect_unobserve(struct rlock_client *c, const char *name);
/* The OK answer r to call (LEADER, OBSERVE, UNOBSERVE, REOBSERVE); returns the call's error. */
enum rlock_err rlk_elect_answer(struct rlock_client *c, struct rlk_call *call,
                                const Rlock__V1__LeaderReply *r);
/* A LeaderChanged event: reported when its election is observed and it is news. */
void rlk_elect_changed(struct rlock_client *c, const Rlock__V1__LeaderChanged *ev);
/*
 * The daemon refused a REOBSERVE call (call->err, call->detail): try again later (a
 * backoff), or, for an error that trying again does not cure, stop observing the election
 * and report it to on_leader (elected 0, term 0, the error as the value).
 */
void rlk_elect_refused(struct rlock_client *c, const struct rlk_call *call);
/* The session resumed on a new connection: observe every observed election there again. */
void rlk_elect_resumed(struct rlock_client *c);
/*
 * An open session's timers (engine.c): send the Observes due again at now. Returns when
 * the next is due (rlk_alive_ms), or INT64_MAX when none waits.
 */
int64_t rlk_elect_timers(struct rlock_client *c, int64_t now);
/* Forget every observed election (the client is freed). */
void rlk_elect_free(struct rlock_client *c);
/* Run the application's callback for note n (mu not held; on the callback's thread). */
void rlk_note_deliver(struct rlock_client *c, const struct rlk_note *n);

/* --- locks.c ------------------------------------------------------------------------ */

/* Create a handle for an acquire of resource (not yet granted). NULL when out of memory. */
struct rlock_lock *rlk_handle_new(struct rlock_client *c, const char *resource);
/* c->mu held: free a handle (and its lock object when nothing else refers to it). */
void rlk_handle_destroy(struct rlock_client *c, struct rlock_lock *h);
const char *rlk_handle_resource(const struct rlock_lock *h);
struct rlock_client *rlk_handle_client(const struct rlock_lock *h);
uint64_t rlk_handle_owner(const struct rlock_lock *h);
/* The lock object of a granted handle, or NULL. */
struct rlk_lock *rlk_handle_lock(const struct rlock_lock *h);
/* 1 if this hold was released. */
int rlk_handle_released(const struct rlock_lock *h);
/* Set the owner the acquire of h is sent with. */
void rlk_handle_set_owner(struct rlock_lock *h, uint64_t owner);
/*
 * c->mu held: RLOCK_OK if release/extend may be sent for h, else
 * RLOCK_ERR_NOT_HELD with the reason in detail. Fills the token to send.
 */
enum rlock_err rlk_handle_usable(struct rlock_client *c, const struct rlock_lock *h,
                                 struct rlock_error *detail, const char **token);
/*
 * c->mu held: the daemon granted h's acquire (sent at sent_ms): fill the handle,
 * creating the lock object or sharing the one of a re-entry.
 */
RLK_MUST_CHECK enum rlock_err rlk_lock_granted(struct rlock_client *c, struct rlock_lock *h,
                                               const Rlock__V1__AcquireReply *r,
                                               int64_t sent_ms);
/* c->mu held: h's hold was released; holds_left as the daemon says. */
void rlk_lock_released(struct rlock_client *c, struct rlock_lock *h, uint32_t holds_left);
/* c->mu held: h's lock was extended to ttl_ms, valid for valid_ms from sent_ms, with seal. */
void rlk_lock_extended(struct rlock_client *c, struct rlock_lock *h, uint32_t ttl_ms,
                       uint32_t valid_ms, int64_t sent_ms, const char *seal);
/* c->mu held: the lock with token was lost; reported unless quiet. */
void rlk_lock_lost_token(struct rlock_client *c, const char *token,
                         enum rlock_lost_reason reason, int quiet);
/* c->mu held: the lock of handle h is no longer known to the daemon (NOT_HELD). */
void rlk_lock_forget(struct rlock_client *c, struct rlock_lock *h);
/* c->mu held: every held lock lost (session end). */
void rlk_lock_lose_all(struct rlock_client *c, int quiet);
/* c->mu held: a keepalive sent at sent_ms vouched for every watchdog lock for valid_ms. */
void rlk_lock_vouched(struct rlock_client *c, int64_t sent_ms, uint32_t valid_ms);
/* c->mu held: the first held lock, and the next (for the move's Adopts). */
struct rlk_lock *rlk_lock_first(struct rlock_client *c);
struct rlk_lock *rlk_lock_next(struct rlk_lock *lk);
/* c->mu held: take a reference to lk, and drop it. */
void rlk_lock_ref(struct rlk_lock *lk);
void rlk_lock_unref(struct rlk_lock *lk);
/* c->mu held: fill an Adopt of lk (strings point into lk). */
void rlk_lock_adopt_fill(const struct rlk_lock *lk, Rlock__V1__Adopt *a);
/* c->mu held: the Adopt of lk (sent at sent_ms) succeeded with r. */
void rlk_lock_adopted(struct rlock_client *c, struct rlk_lock *lk, const Rlock__V1__AdoptReply *r,
                      int64_t sent_ms);
/* c->mu held: lk, if still HELD, is lost; reported unless quiet. */
void rlk_lock_lose(struct rlock_client *c, struct rlk_lock *lk, enum rlock_lost_reason reason);
/* c->mu held: lose every held lock whose validity ended by now (a session that moves). */
void rlk_lock_expire(struct rlock_client *c, int64_t now);
/* c->mu held: the earliest valid-until of the held locks, or INT64_MAX. */
int64_t rlk_lock_earliest_end(const struct rlock_client *c);
/* c->mu held: free every handle and lock object (rlock_close). */
void rlk_lock_free_all(struct rlock_client *c);
/* c->mu held: the keepalive interval the held locks need (0: no requirement). */
uint32_t rlk_lock_keepalive_need(const struct rlock_client *c);
/*
 * Check the options of an acquire (RLOCK_ERR_ARG with the thread's error set, as for a
 * campaign value too long or a campaign that is shared), and fill its request for
 * resource and owner (strings point into resource and o).
 */
enum rlock_err rlk_acquire_check(const struct rlock_acquire_opts *o);
void rlk_acquire_fill(Rlock__V1__Acquire *a, const char *resource,
                      const struct rlock_acquire_opts *o, uint64_t owner);

/* --- blocking.c / async.c ------------------------------------------------------------ */

/*
 * Blocking clients: submit req as call and wait for its completion (at most
 * timeout_ms; 0 = the default). Returns its result, with the thread's error
 * detail set on failure.
 */
enum rlock_err rlk_call_simple(struct rlock_client *c, Rlock__V1__Request *req,
                               struct rlk_call *call, uint32_t timeout_ms);

/* Lock c->mu. */
void rlk_client_lock(struct rlock_client *c);
/*
 * Unlock c->mu and hand the engine's outputs over: wake completed blocking
 * calls, pass lost-lock notes to the callback thread (blocking clients) or
 * leave them, with owned completions, for rlock_async_process (async ones).
 */
void rlk_client_unlock(struct rlock_client *c);
/* The Hello a client with opts sends (its strings point into opts). */
void rlk_hello_fill(Rlock__V1__Hello *h, const struct rlock_options *opts);
/*
 * Open c's first connection to the comma-separated list address (kept for
 * the moves), trying its entries from start on (RLK_ADDR_RANDOM: a random
 * one): the fd, or -1 (none answered) / -2 (malformed) with err.
 */
#define RLK_ADDR_RANDOM (~0u)
int rlk_client_open(struct rlock_client *c, const char *address, unsigned start,
                    uint32_t timeout_ms, char *err, size_t errlen);
/* A new client of mode with opts (registered for fork handling); NULL when out of memory. */
struct rlock_client *rlk_client_new(const struct rlock_options *opts, enum rlk_mode mode);
/* Run an asynchronous client's completed calls and notes, taken from it (mu not held). */
void rlk_async_deliver(struct rlock_client *c);
/* Free the client's memory (engine, locks, handles); the last step of rlock_close. */
void rlk_client_free(struct rlock_client *c);

/* --- reactor.c ------------------------------------------------------------------------ */

/* Make sure the fork handlers are installed; registers c in the process's client list. */
RLK_MUST_CHECK int rlk_registry_add(struct rlock_client *c);
void rlk_registry_remove(struct rlock_client *c);
/* The number of forks this process is from its first use of the library. */
unsigned rlk_fork_gen(void);
/* Start the threads if needed and watch c (fd and keepalive timer). 0 or -1. */
RLK_MUST_CHECK int rlk_reactor_add(struct rlock_client *c);
/*
 * Stop watching c and wait until the I/O thread holds no reference to it.
 * Must not be called on the I/O thread.
 */
void rlk_reactor_remove(struct rlock_client *c);
/* c->mu held: output is queued; make the I/O thread write it when it can. */
void rlk_reactor_want_write(struct rlock_client *c);
/* c->mu held: c's next timer may be earlier than the reactor knows. */
void rlk_reactor_reschedule(struct rlock_client *c, int64_t wake_at);
/*
 * The blocking caller of call reads c's socket itself until call is done, its
 * cancellation is asked for or deadline (rlk_mono_ms) passes, when no other
 * caller does so already. Returns 0 at once when it could not lead (the
 * caller then sleeps until the reading thread completes the call), 1 once
 * it led, -1 when it could not poll (it gave the socket back; do not try
 * again for this call).
 */
int rlk_reactor_lead(struct rlock_client *c, struct rlk_call *call, int64_t deadline);
/*
 * The same in parts, for a caller that takes the socket before it writes its
 * request (so that the I/O thread cannot read the answer first): c->mu held,
 * begin returns 1 when call now leads; end gives the socket back (c->mu
 * held); wait (c->mu not held) reads until call is done, cancelled or late,
 * then ends (-1 when poll failed: the I/O thread reads again).
 */
int rlk_reactor_lead_begin(struct rlock_client *c, struct rlk_call *call);
void rlk_reactor_lead_end(struct rlock_client *c, struct rlk_call *call);
int rlk_reactor_lead_wait(struct rlock_client *c, struct rlk_call *call, int64_t deadline);
/* Interrupt the poll of a leading call (any thread; a spurious wake-up is harmless). */
void rlk_reactor_wake_leader(int fd);
/* Queue notes for the callback thread (takes the list). */
void rlk_callbacks_post(struct rlock_client *c, struct rlk_note *notes);
/*
 * Drop c's queued callbacks and wait until none of c's runs; returns 1 when
 * called from inside c's own callback (the caller must then leave the free to
 * the callback thread: rlk_callbacks_free_after), else 0.
 */
int rlk_callbacks_forget(struct rlock_client *c);
/* From inside c's own callback: free c (rlk_client_free) once the callback returns. */
void rlk_callbacks_free_after(struct rlock_client *c);

#endif
