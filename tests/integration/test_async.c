/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_async.c — the asynchronous API of librlock (rlock_async_*) and its
 * libevent bridge (rlock_event.h) against a real rlockd.
 *
 *  - stream_libevent: one asynchronous client on a libevent loop runs 10,000
 *    acquire/release pairs over 256 resources, keeping 64 requests in flight,
 *    while a blocking client of the same daemon holds a few of the resources
 *    now and then (so that acquires wait and completions come out of order).
 *    Every acquire is granted and its release confirmed; nothing fails.
 *  - lost_midstream: while such a stream runs, the Redis key of a lock the
 *    client holds is deleted: on_lost is called once for it, on the loop's
 *    thread inside rlock_async_process, the handle reads LOST, and the stream
 *    goes on.
 *  - cancel: rlock_async_cancel of a waiting acquire completes it with
 *    RLOCK_ERR_CANCELLED; 200 cancels racing a grant leave no lock behind,
 *    neither in Redis nor in the daemon's Stats.
 *  - stream_poll: the stream driven by a plain poll() loop instead.
 *  - shutdown_in_completion_{libevent,poll}: rlock_shutdown from inside a
 *    completion completes every request still in flight with
 *    RLOCK_ERR_CLOSED, exactly once, and the loop learns that the session
 *    ended.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

/*
 * The contract says completions and lost-lock callbacks run inside
 * rlock_async_process, and that it returns RLOCK_OK while the session is
 * open and RLOCK_ERR_CLOSED once it has ended. To see both, every call of it
 * — the test's own and the bridge's, which is header-only — goes through
 * t_process, which counts how deep the thread is in it and checks what it
 * returned against rlock_client_alive. Loops run on the test's thread only
 * (and each test in a process of its own), hence plain counters.
 */
static int process_depth;
static int process_ok_after_end; /* calls that said RLOCK_OK of an ended session */

static enum rlock_err t_process(struct rlock_client *c, int revents)
{
    process_depth++;
    enum rlock_err e = rlock_async_process(c, revents);
    process_depth--;
    /* (After RLOCK_ERR_CLOSED c may be freed: a completion may have closed it.) */
    if (e == RLOCK_OK && !rlock_client_alive(c))
        process_ok_after_end++;
    return e;
}

#define rlock_async_process(c, revents) t_process((c), (revents))
#include "rlock_event.h"

#define T_RES 256              /* resources of the stream */
#define T_WINDOW 64            /* stream requests in flight at any time */
#define T_WAIT_MS 20000u       /* an acquire may queue behind the blocker and the window */
#define T_STREAM_DEADLINE_MS 120000
#define T_AFTER_LOST 500       /* pairs the lost-lock stream runs on after the loss */
#define T_VICTIM_TTL_MS 1500u  /* short, so that the daemon's watchdog finds the key gone soon */
#define T_CANCEL_ROUNDS 200

static uint32_t rnd(uint32_t *x)
{
    /* xorshift32: cheap, and reproducible from the printed seed */
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* --- driving a client: libevent (through the bridge) or poll() --------------- */

struct loop {
    struct rlock_client *c;
    int libevent;
    struct event_base *base;
    struct event *tick;
    struct rlock_libevent *bridge;
    int closed; /* libevent: on_closed calls; poll: rlock_async_process said CLOSED */
};

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void bridge_closed(struct rlock_client *c, void *arg)
{
    struct loop *L = arg;
    ck_assert_ptr_eq(c, L->c);
    L->closed++;
}

static void loop_open(struct loop *L, struct rlock_client *c, int libevent)
{
    memset(L, 0, sizeof *L);
    L->c = c;
    L->libevent = libevent;
    if (!libevent)
        return;
    L->base = event_base_new();
    ck_assert_ptr_nonnull(L->base);
    /* EVLOOP_ONCE sleeps until some event: a tick lets the driver look at its deadline. */
    L->tick = event_new(L->base, -1, EV_PERSIST, tick_cb, NULL);
    ck_assert_ptr_nonnull(L->tick);
    struct timeval tv = {0, 20000};
    ck_assert_int_eq(event_add(L->tick, &tv), 0);
    L->bridge = rlock_libevent_attach(L->base, c, bridge_closed, L);
    ck_assert_ptr_nonnull(L->bridge);
}

static void loop_close(struct loop *L)
{
    if (!L->libevent)
        return;
    rlock_libevent_detach(L->bridge);
    event_free(L->tick);
    event_base_free(L->base);
    L->bridge = NULL;
}

/*
 * One turn of a plain poll() loop, waiting at most max_ms: poll what the
 * client asks for, up to its own timeout, and process what came (or the
 * timeout). Once the session has ended nothing is polled any more.
 */
static void poll_turn(struct loop *L, int max_ms)
{
    if (L->closed) {
        h_sleep_ms(max_ms < 5 ? max_ms : 5);
        return;
    }
    struct pollfd p = {.fd = rlock_async_fd(L->c), .events = (short)rlock_async_events(L->c)};
    int64_t t = rlock_async_timeout_ms(L->c);
    int client_timer = t >= 0 && t <= max_ms;
    int n = poll(&p, 1, client_timer ? (int)t : max_ms);
    ck_assert_msg(n >= 0 || errno == EINTR, "poll: %s", strerror(errno));
    if (n < 0 || (n == 0 && !client_timer))
        return; /* interrupted, or only the driver's own tick */
    if (rlock_async_process(L->c, n > 0 ? p.revents : 0) != RLOCK_OK)
        L->closed = 1;
}

/* Run L until done(arg) or for timeout_ms; 1 when done. */
static int loop_until(struct loop *L, int (*done)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (!done(arg)) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return 0;
        if (L->libevent)
            ck_assert_int_ge(event_base_loop(L->base, EVLOOP_ONCE), 0);
        else
            poll_turn(L, left < 20 ? (int)left : 20);
    }
    return 1;
}

/* The number of locks the client reports through rlock_foreach_lock. */
static int visit_count(const struct rlock_lock_info *info, void *arg)
{
    (void)info;
    (*(size_t *)arg)++;
    return 0;
}

static size_t locks_of(struct rlock_client *c)
{
    size_t n = 0;
    size_t visited = rlock_foreach_lock(c, visit_count, &n);
    ck_assert_uint_eq(visited, n);
    return n;
}

static int never(void *arg)
{
    (void)arg;
    return 0;
}

/* --- a single request's completion ---------------------------------------------- */

struct one {
    int calls;
    enum rlock_err err;
    uint64_t id;
    struct rlock_lock *lock;
    char msg[256];
};

static void on_one(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct one *o = arg;
    ck_assert_int_gt(process_depth, 0);
    o->calls++;
    o->err = r->err;
    o->id = r->id;
    o->lock = r->lock;
    snprintf(o->msg, sizeof o->msg, "%s", r->error != NULL ? r->error->message : "");
}

static int one_done(void *arg)
{
    return ((struct one *)arg)->calls > 0;
}

/* An asynchronous client of e's rlockd, driven by L, with its Hello answered. */
static struct rlock_client *async_client(struct h_env *e, const struct rlock_options *o,
                                         struct loop *L, int libevent)
{
    struct rlock_client *c = NULL;
    char err[256] = "";
    struct one ready = {0};
    enum rlock_err rc = rlock_async_connect(e->rlockd_addr, o, on_one, &ready, &c, err,
                                            sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "rlock_async_connect: %s: %s", rlock_strerror(rc), err);
    loop_open(L, c, libevent);
    ck_assert_msg(loop_until(L, one_done, &ready, 5000), "no answer to the Hello within 5 s");
    ck_assert_msg(ready.calls == 1 && ready.err == RLOCK_OK, "Hello: %s: %s",
                  rlock_strerror(ready.err), ready.msg);
    ck_assert_str_ne(rlock_session_id(c), "");
    return c;
}

/* --- the stream ------------------------------------------------------------------- */

enum pair_state { PAIR_ACQUIRING = 1, PAIR_RELEASING, PAIR_DONE };

struct stream;

/* One acquire/release pair of the stream. */
struct pair {
    struct stream *s;
    int res;
    enum pair_state state;
    uint64_t acq_id, rel_id;
    struct rlock_lock *l;
    int ok; /* acquire and release both succeeded */
};

struct stream {
    struct rlock_client *c;
    int total;          /* pairs to run (the lost-lock stream extends it) */
    int cap;            /* pairs allocated */
    struct pair *pairs;
    int started, finished;
    int inflight, max_inflight;
    uint64_t max_done_id;
    long out_of_order;  /* completions of an id below one completed earlier */
    long acq_ok, rel_ok, errors;
    char first_error[320];
    uint32_t rng;
    /* the blocking client's holds, for the statistics */
    atomic_int held[T_RES];
    long on_held;       /* acquires submitted while the blocking client held the resource */
    /* lost-lock stream: the victim lock and what on_lost saw */
    redisContext *r;
    const struct h_env *e;
    int del_after;      /* delete the victim's key when this many pairs finished; 0: no victim */
    struct one victim;
    int deleted;
    int lost_calls, lost_in_process, lost_on_loop;
    enum rlock_lost_reason lost_reason;
    enum rlock_lock_state lost_state;
    char lost_res[64], lost_token[128];
    int lost_at_finished;
    int64_t deleted_ms, lost_ms;
    pthread_t loop_thread;
};

static void res_name(int res, char *buf, size_t len)
{
    snprintf(buf, len, "async/r%03d", res);
}

static void stream_error(struct stream *s, const char *what, const struct pair *p,
                         const struct rlock_result *r)
{
    if (s->errors++ > 0)
        return;
    snprintf(s->first_error, sizeof s->first_error, "%s of async/r%03d (request %llu): %s: %s",
             what, p->res, (unsigned long long)r->id, rlock_strerror(r->err),
             r->error != NULL ? r->error->message : "");
}

/*
 * What every completion of the stream checks and counts first: it is the
 * one expected for p, now (state and id), inside rlock_async_process.
 * Returns p's stream.
 */
static struct stream *pair_completed(struct rlock_client *c, const struct rlock_result *r,
                                     struct pair *p, enum pair_state want, uint64_t want_id,
                                     const char *what)
{
    struct stream *s = p->s;
    ck_assert_ptr_eq(c, s->c);
    ck_assert_int_gt(process_depth, 0);
    ck_assert_msg(p->state == want && r->id == want_id,
                  "%s completion for request %llu: pair state %d, its %s is request %llu", what,
                  (unsigned long long)r->id, p->state, what, (unsigned long long)want_id);
    s->inflight--;
    if (r->id < s->max_done_id)
        s->out_of_order++;
    else
        s->max_done_id = r->id;
    return s;
}

static int stream_may_start(const struct stream *s)
{
    if (s->started >= s->cap)
        return 0;
    if (s->started < s->total)
        return 1;
    /* The lost-lock stream runs on until the loss has come. */
    return s->deleted && s->lost_calls == 0;
}

static void on_acquired(struct rlock_client *c, const struct rlock_result *r, void *arg);
static void on_released(struct rlock_client *c, const struct rlock_result *r, void *arg);

static void pair_start(struct stream *s)
{
    struct pair *p = &s->pairs[s->started];
    p->s = s;
    p->res = (int)(rnd(&s->rng) % T_RES);
    char name[32];
    res_name(p->res, name, sizeof name);
    /*
     * An owner per pair: pairs of this one session that meet on a resource
     * exclude each other (they queue) instead of re-entering.
     */
    struct rlock_acquire_opts o = {.wait_ms = T_WAIT_MS, .owner = (uint64_t)s->started + 1};
    if (atomic_load(&s->held[p->res]))
        s->on_held++;
    enum rlock_err rc = rlock_async_acquire(s->c, name, &o, on_acquired, p, &p->acq_id);
    ck_assert_msg(rc == RLOCK_OK, "rlock_async_acquire %s: %s: %s", name, rlock_strerror(rc),
                  rlock_last_error()->message);
    p->state = PAIR_ACQUIRING;
    s->started++;
    if (++s->inflight > s->max_inflight)
        s->max_inflight = s->inflight;
}

static void stream_fill(struct stream *s)
{
    while (s->inflight < T_WINDOW && stream_may_start(s))
        pair_start(s);
}

static void on_acquired(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    struct pair *p = arg;
    struct stream *s = pair_completed(c, r, p, PAIR_ACQUIRING, p->acq_id, "acquire");
    if (r->err != RLOCK_OK) {
        ck_assert_ptr_null(r->lock);
        stream_error(s, "acquire", p, r);
        p->state = PAIR_DONE;
        s->finished++;
        stream_fill(s);
        return;
    }
    ck_assert_ptr_nonnull(r->lock);
    char name[32];
    res_name(p->res, name, sizeof name);
    ck_assert_str_eq(rlock_lock_resource(r->lock), name);
    ck_assert_int_eq(rlock_lock_state(r->lock), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_hold_count(r->lock), 1);
    s->acq_ok++;
    p->l = r->lock;
    p->state = PAIR_RELEASING;
    enum rlock_err rc = rlock_async_release(p->l, on_released, p, &p->rel_id);
    ck_assert_msg(rc == RLOCK_OK, "rlock_async_release %s: %s: %s", name, rlock_strerror(rc),
                  rlock_last_error()->message);
    s->inflight++;
}

static void stream_delete_victim(struct stream *s)
{
    char key[256];
    h_lock_key(s->e, rlock_lock_resource(s->victim.lock), key, sizeof key);
    long long n = h_redis_int(s->r, "DEL %s", key);
    ck_assert_msg(n == 1, "DEL %s removed %lld keys", key, n);
    s->deleted = 1;
    s->deleted_ms = h_now_ms();
}

static void on_released(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    struct pair *p = arg;
    struct stream *s = pair_completed(c, r, p, PAIR_RELEASING, p->rel_id, "release");
    if (r->err != RLOCK_OK) {
        stream_error(s, "release", p, r);
    } else {
        ck_assert_uint_eq(r->hold_count, 0);
        ck_assert_int_eq(rlock_lock_state(p->l), RLOCK_RELEASED);
        s->rel_ok++;
        p->ok = 1;
    }
    rlock_lock_free(p->l);
    p->l = NULL;
    p->state = PAIR_DONE;
    s->finished++;
    if (s->del_after > 0 && !s->deleted && s->finished >= s->del_after && s->victim.lock != NULL)
        stream_delete_victim(s);
    stream_fill(s);
}

static void stream_on_lost(struct rlock_client *c, const char *resource, const char *token,
                           uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)fence;
    struct stream *s = arg;
    ck_assert_ptr_eq(c, s->c);
    s->lost_calls++;
    s->lost_in_process = process_depth > 0;
    s->lost_on_loop = pthread_equal(pthread_self(), s->loop_thread);
    s->lost_reason = reason;
    s->lost_state = s->victim.lock != NULL ? rlock_lock_state(s->victim.lock) : RLOCK_HELD;
    snprintf(s->lost_res, sizeof s->lost_res, "%s", resource);
    snprintf(s->lost_token, sizeof s->lost_token, "%s", token);
    s->lost_at_finished = s->finished;
    s->lost_ms = h_now_ms();
    /* Go on for a while after the loss: the stream must not have noticed. */
    int more = s->started + T_AFTER_LOST;
    s->total = more < s->cap ? more : s->cap;
}

static int stream_done(void *arg)
{
    const struct stream *s = arg;
    return s->inflight == 0 && !stream_may_start(s) && (s->del_after == 0 || s->victim.calls > 0);
}

/* --- the blocking client that holds resources now and then ------------------------ */

#define BLOCKER_HOLD 4      /* resources held at once */
#define BLOCKER_HOLD_MS 5

struct blocker {
    struct rlock_client *c;
    struct stream *s;
    atomic_int stop;
    long rounds, errors;
    uint64_t max_waiters; /* the most waiters the daemon reported while the blocker held */
    char first_error[320];
    uint32_t rng;
};

static void blocker_error(struct blocker *b, const char *what, const char *res, enum rlock_err rc)
{
    if (b->errors++ == 0)
        snprintf(b->first_error, sizeof b->first_error, "%s %s: %s: %s", what, res,
                 rlock_strerror(rc), rlock_last_error()->message);
}

static void *blocker_main(void *arg)
{
    struct blocker *b = arg;
    while (!atomic_load(&b->stop) && b->errors == 0) {
        int res[BLOCKER_HOLD];
        struct rlock_lock *l[BLOCKER_HOLD] = {0};
        for (int i = 0; i < BLOCKER_HOLD; i++) {
            res[i] = (int)(rnd(&b->rng) % T_RES);
            for (int j = 0; j < i; j++)
                if (res[j] == res[i])
                    res[i] = -1; /* a re-entry would not block anyone: skip it */
            if (res[i] < 0)
                continue;
            char name[32];
            res_name(res[i], name, sizeof name);
            struct rlock_acquire_opts o = {.wait_ms = 5000};
            enum rlock_err rc = rlock_acquire(b->c, name, &o, 5000, &l[i]);
            if (rc != RLOCK_OK) {
                blocker_error(b, "acquire", name, rc);
                res[i] = -1;
                continue;
            }
            atomic_store(&b->s->held[res[i]], 1);
        }
        /* While it holds them, acquires of the stream that meet them wait in the daemon. */
        struct rlock_stats st;
        enum rlock_err rc = rlock_stats(b->c, 5000, &st);
        if (rc != RLOCK_OK)
            blocker_error(b, "stats", "", rc);
        else if (st.waiters > b->max_waiters)
            b->max_waiters = st.waiters;
        h_sleep_ms(BLOCKER_HOLD_MS);
        for (int i = 0; i < BLOCKER_HOLD; i++) {
            if (res[i] < 0)
                continue;
            atomic_store(&b->s->held[res[i]], 0);
            rc = rlock_release(l[i], 5000);
            if (rc != RLOCK_OK)
                blocker_error(b, "release", rlock_lock_resource(l[i]), rc);
            rlock_lock_free(l[i]);
        }
        b->rounds++;
    }
    return NULL;
}

/* --- one stream, with its checks ---------------------------------------------------- */

struct stream_cfg {
    const char *label;
    int libevent;
    int pairs;
    int blocker;
    int del_after; /* > 0: the lost-lock stream */
};

static void run_stream(const struct stream_cfg *cfg)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct stream *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    s->total = cfg->pairs;
    /* The lost-lock stream may run on until the loss arrives: room for that. */
    s->cap = cfg->del_after > 0 ? cfg->pairs + 200000 : cfg->pairs;
    s->pairs = calloc((size_t)s->cap, sizeof *s->pairs);
    ck_assert_ptr_nonnull(s->pairs);
    s->rng = (uint32_t)h_now_ms() | 1u;
    s->r = f.r;
    s->e = &f.e;
    s->del_after = cfg->del_after;
    s->loop_thread = pthread_self();
    printf("%s: seed %u\n", cfg->label, s->rng);

    struct rlock_options o = {.client_name = "itest-async", .on_lost = stream_on_lost,
                              .on_lost_arg = s};
    struct loop L;
    s->c = async_client(&f.e, &o, &L, cfg->libevent);

    if (cfg->del_after > 0) {
        struct rlock_acquire_opts vo = {.ttl_ms = T_VICTIM_TTL_MS};
        h_assert_ok(NULL, rlock_async_acquire(s->c, "async/victim", &vo, on_one, &s->victim,
                                              NULL));
    }
    struct blocker b = {.c = f.c, .s = s, .rng = s->rng * 2654435761u | 1u};
    struct h_thread bt;
    if (cfg->blocker)
        h_thread_start(&bt, blocker_main, &b);

    int64_t t0 = h_now_ms();
    stream_fill(s);
    int done = loop_until(&L, stream_done, s, T_STREAM_DEADLINE_MS);
    int64_t ms = h_now_ms() - t0;
    if (cfg->blocker) {
        atomic_store(&b.stop, 1);
        h_thread_join(&bt, h_now_ms() + 15000, "the blocking client's thread did not stop");
    }

    printf("%s: %d pairs (%ld completions) in %lld ms: %.0f pairs/s; %ld completions came "
           "after a larger id had completed; at most %d requests in flight\n",
           cfg->label, s->finished, s->acq_ok + s->rel_ok, (long long)ms,
           ms > 0 ? 1000.0 * s->finished / (double)ms : 0.0, s->out_of_order, s->max_inflight);
    if (cfg->blocker)
        printf("%s: the blocking client held resources %ld times; %ld acquires were submitted "
               "on a resource it held; the daemon reported up to %llu waiters\n",
               cfg->label, b.rounds, s->on_held, (unsigned long long)b.max_waiters);

    ck_assert_msg(done, "the stream did not finish within %d ms: %d of %d pairs finished, "
                  "%d requests in flight, %ld errors (%s)",
                  T_STREAM_DEADLINE_MS, s->finished, s->total, s->inflight, s->errors,
                  s->first_error);
    ck_assert_msg(s->errors == 0, "%ld requests failed; the first: %s", s->errors,
                  s->first_error);
    ck_assert_int_eq(s->finished, s->total);
    ck_assert_int_eq(s->acq_ok, s->total);
    ck_assert_int_eq(s->rel_ok, s->total);
    for (int i = 0; i < s->total; i++)
        ck_assert_msg(s->pairs[i].state == PAIR_DONE && s->pairs[i].ok,
                      "pair %d: state %d, ok %d", i, s->pairs[i].state, s->pairs[i].ok);
    ck_assert_int_le(s->max_inflight, T_WINDOW);
    if (s->total >= T_WINDOW)
        ck_assert_int_eq(s->max_inflight, T_WINDOW);
    ck_assert_msg(s->out_of_order > 0,
                  "every completion came in the order of the request ids (%d pairs)", s->total);
    if (cfg->blocker) {
        ck_assert_msg(b.errors == 0, "blocking client: %ld errors; the first: %s", b.errors,
                      b.first_error);
        ck_assert_msg(b.rounds > 0, "the blocking client never held anything");
        ck_assert_msg(b.max_waiters > 0, "no acquire ever waited in the daemon (%ld rounds)",
                      b.rounds);
    }

    if (cfg->del_after > 0) {
        printf("%s: key of %s deleted after %d pairs; on_lost came %lld ms later (reason %s), "
               "after %d pairs; the stream ran %d pairs after it\n",
               cfg->label, "async/victim", cfg->del_after,
               (long long)(s->lost_ms - s->deleted_ms), rlock_lost_reason_str(s->lost_reason),
               s->lost_at_finished, s->finished - s->lost_at_finished);
        ck_assert_msg(s->victim.calls == 1 && s->victim.err == RLOCK_OK, "victim acquire: %s: %s",
                      rlock_strerror(s->victim.err), s->victim.msg);
        ck_assert_msg(s->deleted, "the stream ended before the victim's key was deleted");
        ck_assert_msg(s->lost_calls == 1, "on_lost was called %d times", s->lost_calls);
        ck_assert_msg(s->lost_on_loop, "on_lost ran on another thread than the loop's");
        ck_assert_msg(s->lost_in_process, "on_lost ran outside rlock_async_process");
        ck_assert_str_eq(s->lost_res, "async/victim");
        ck_assert_str_eq(s->lost_token, rlock_lock_token(s->victim.lock));
        ck_assert_msg(s->lost_reason == RLOCK_LOST_MISSING, "lost reason %s (want missing)",
                      rlock_lost_reason_str(s->lost_reason));
        ck_assert_msg(s->lost_state == RLOCK_LOST, "state during on_lost: %d (want LOST)",
                      s->lost_state);
        ck_assert_int_eq(rlock_lock_state(s->victim.lock), RLOCK_LOST);
        ck_assert_int_eq(rlock_lock_lost_reason(s->victim.lock), RLOCK_LOST_MISSING);
        ck_assert_int_ge(s->finished - s->lost_at_finished, T_AFTER_LOST);
        ck_assert_int_eq(rlock_client_alive(s->c), 1);
        rlock_lock_free(s->victim.lock);
    }

    /* Nothing is left anywhere: in the client, in the daemon, in Redis. */
    ck_assert_uint_eq(locks_of(s->c), 0);
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats_of(f.c, 0, 0, 5000, &st) >= 0, "locks or waiters left in the daemon");
    /* The victim's deleted key gets a tombstone until its promise is over. */
    ck_assert_int_eq(h_count_held_keys(f.r, &f.e, NULL, 0), 0);
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);

    ck_assert_int_eq(process_ok_after_end, 0);
    int calls = s->lost_calls;
    loop_close(&L);
    rlock_close(s->c);
    ck_assert_int_eq(s->lost_calls, calls);
    free(s->pairs);
    free(s);
    h_fixture_stop(&f);
}

START_TEST(test_stream_libevent)
{
    struct stream_cfg cfg = {.label = "stream (libevent)", .libevent = 1, .pairs = 10000,
                             .blocker = 1};
    run_stream(&cfg);
}
END_TEST

START_TEST(test_lost_midstream)
{
    struct stream_cfg cfg = {.label = "lost mid-stream", .libevent = 1, .pairs = 2000,
                             .del_after = 300};
    run_stream(&cfg);
}
END_TEST

START_TEST(test_stream_poll)
{
    struct stream_cfg cfg = {.label = "stream (poll)", .libevent = 0, .pairs = 4000,
                             .blocker = 1};
    run_stream(&cfg);
}
END_TEST

/* --- cancellation -------------------------------------------------------------------- */

/* Run L until the daemon reports `waiters` waiters (asked through blocking client b). */
static int run_until_waiters(struct loop *L, struct rlock_client *b, uint64_t waiters,
                             int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        struct rlock_stats st;
        h_assert_ok(b, rlock_stats(b, 5000, &st));
        if (st.waiters == waiters)
            return 1;
        if (h_now_ms() >= deadline)
            return 0;
        loop_until(L, never, NULL, 10);
    }
}

START_TEST(test_cancel)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_lost lost = {0};
    struct rlock_options o = {.client_name = "itest-async-cancel", .on_lost = h_lost_cb,
                              .on_lost_arg = &lost};
    struct loop L;
    struct rlock_client *c = async_client(&f.e, &o, &L, 0);
    char key[256];

    /* A waiting acquire, cancelled: CANCELLED, and the holder is untouched. */
    struct rlock_lock *hb = h_acquire_ok(f.c, "cancel/wait", NULL);
    struct one a = {0};
    uint64_t id = 0;
    struct rlock_acquire_opts wait = {.wait_ms = 30000};
    h_assert_ok(NULL, rlock_async_acquire(c, "cancel/wait", &wait, on_one, &a, &id));
    ck_assert_msg(run_until_waiters(&L, f.c, 1, 5000), "the acquire never waited in the daemon");
    ck_assert_int_eq(a.calls, 0);
    h_assert_ok(NULL, rlock_async_cancel(c, id));
    ck_assert_msg(loop_until(&L, one_done, &a, 5000), "no completion within 5 s of the cancel");
    ck_assert_msg(a.err == RLOCK_ERR_CANCELLED, "cancelled acquire completed with %s: %s",
                  rlock_strerror(a.err), a.msg);
    ck_assert_uint_eq(a.id, id);
    ck_assert_ptr_null(a.lock);
    ck_assert_int_eq(rlock_async_cancel(c, id), RLOCK_ERR_NOT_HELD);
    ck_assert_int_eq(rlock_async_cancel(c, id + 1000), RLOCK_ERR_NOT_HELD);
    loop_until(&L, never, NULL, 100);
    ck_assert_int_eq(a.calls, 1);
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats_of(f.c, 1, 0, 5000, &st) >= 0, "after the cancel");
    h_assert_key_token(f.r, h_lock_key(&f.e, "cancel/wait", key, sizeof key),
                       rlock_lock_token(hb));
    ck_assert_int_eq(rlock_lock_state(hb), RLOCK_HELD);
    h_release_gone(&f, f.c, hb);
    rlock_lock_free(hb);

    /*
     * Cancels racing grants: the blocking client releases the resource the
     * asynchronous acquire waits for, and the cancel goes out before, right
     * after, or a little after that release (the grant may then be on its way
     * or read already). A cancel accepted means CANCELLED, whatever the
     * daemon did; a grant the client read first makes the cancel NOT_HELD.
     * The daemon's grants counter tells the rounds in which the grant reached
     * the client although the cancel was accepted: the library had to give
     * it back (the other race, a cancel reaching the daemon while its Redis
     * try is out, is settled there and not counted).
     */
    uint32_t rng = (uint32_t)h_now_ms() | 1u;
    printf("cancel: seed %u\n", rng);
    int cancelled = 0, granted_first = 0, given_back = 0;
    for (int i = 0; i < T_CANCEL_ROUNDS; i++) {
        struct rlock_acquire_opts bo = {.wait_ms = 10000};
        hb = h_acquire_ok(f.c, "cancel/race", &bo);
        struct rlock_stats st0;
        h_assert_ok(f.c, rlock_stats(f.c, 5000, &st0));
        struct one r = {0};
        h_assert_ok(NULL, rlock_async_acquire(c, "cancel/race", &wait, on_one, &r, &id));
        enum rlock_err rc;
        int variant = i % 4;
        if (variant == 0) {
            rc = rlock_async_cancel(c, id);
            h_assert_ok(f.c, rlock_release(hb, 5000));
        } else {
            h_assert_ok(f.c, rlock_release(hb, 5000));
            if (variant >= 2)
                sleep_us((long)(rnd(&rng) % 1500));
            if (variant == 3)
                poll_turn(&L, 0); /* may read the grant first */
            rc = rlock_async_cancel(c, id);
        }
        if (rc == RLOCK_ERR_NOT_HELD) {
            /* Only when the completion had run already, with the grant. */
            ck_assert_msg(variant == 3 && r.calls == 1,
                          "round %d: cancel said NOT_HELD, completion calls %d", i, r.calls);
            ck_assert_msg(r.err == RLOCK_OK, "round %d: %s: %s", i, rlock_strerror(r.err), r.msg);
            granted_first++;
            struct one rel = {0};
            h_assert_ok(NULL, rlock_async_release(r.lock, on_one, &rel, NULL));
            ck_assert_msg(loop_until(&L, one_done, &rel, 5000), "round %d: no release", i);
            ck_assert_msg(rel.err == RLOCK_OK, "round %d: release: %s", i, rel.msg);
            rlock_lock_free(r.lock);
        } else {
            ck_assert_msg(rc == RLOCK_OK, "round %d: rlock_async_cancel: %s", i,
                          rlock_strerror(rc));
            ck_assert_msg(r.calls == 0, "round %d: completion ran before the cancel", i);
            ck_assert_msg(loop_until(&L, one_done, &r, 5000), "round %d: no completion", i);
            ck_assert_msg(r.err == RLOCK_ERR_CANCELLED,
                          "round %d (variant %d): an accepted cancel completed with %s: %s", i,
                          variant, rlock_strerror(r.err), r.msg);
            ck_assert_ptr_null(r.lock);
            cancelled++;
            struct rlock_stats st1;
            h_assert_ok(f.c, rlock_stats(f.c, 5000, &st1));
            given_back += st1.grants > st0.grants;
        }
        ck_assert_int_eq(r.calls, 1);
        rlock_lock_free(hb);
    }
    printf("cancel: %d rounds: %d cancelled (in %d of them the grant had reached the client "
           "and was given back), %d granted before the cancel\n",
           T_CANCEL_ROUNDS, cancelled, given_back, granted_first);
    ck_assert_msg(given_back > 0, "no cancel ever raced a grant that reached the client");

    /*
     * Grants that raced a cancel were given back: nothing held, nothing waits,
     * no key. (Each give-back Release went out as its grant was read.)
     */
    ck_assert_msg(h_wait_stats_of(f.c, 0, 0, 5000, &st) >= 0, "after %d cancels", T_CANCEL_ROUNDS);
    ck_assert_int_eq(h_count_lock_keys(f.r, &f.e, NULL, 0), 0);
    ck_assert_uint_eq(locks_of(c), 0);
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    ck_assert_int_eq(rlock_client_alive(c), 1);
    ck_assert_int_eq(process_ok_after_end, 0);

    loop_close(&L);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/* --- rlock_shutdown from a completion ----------------------------------------------- */

#define SHUT_HELD 8     /* acquires that wait on the blocking client's locks */
#define SHUT_FREE 24    /* acquires that are granted at once */
#define SHUT_PINGS 16
#define SHUT_AT 12      /* the completion that calls rlock_shutdown */

struct shut;
struct sreq {
    struct shut *sh;
    const char *kind;
    uint64_t id;
    int calls;
    enum rlock_err err;
    int after;          /* completed after the shutdown */
    int held_res;       /* an acquire of a resource the blocking client holds */
};

struct shut {
    struct rlock_client *c;
    struct sreq reqs[SHUT_HELD + SHUT_FREE + SHUT_PINGS];
    int n;
    int completions;
    int shut_done;
    int depth_at_shutdown;
    enum rlock_err ping_after; /* a submission right after the shutdown */
    int stray;                 /* completions of a refused submission */
    struct rlock_lock *locks[SHUT_FREE];
    int nlocks;
    int live_after;            /* handles delivered after the shutdown that did not read LOST */
    struct loop *L;
};

static void on_stray(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    (void)r;
    ((struct shut *)arg)->stray++;
}

static void on_sreq(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    struct sreq *q = arg;
    struct shut *sh = q->sh;
    ck_assert_ptr_eq(c, sh->c);
    ck_assert_uint_eq(r->id, q->id);
    q->calls++;
    q->err = r->err;
    q->after = sh->shut_done;
    sh->completions++;
    if (r->lock != NULL) {
        ck_assert_int_lt(sh->nlocks, SHUT_FREE);
        sh->locks[sh->nlocks++] = r->lock;
        if (sh->shut_done && rlock_lock_state(r->lock) != RLOCK_LOST)
            sh->live_after++;
    }
    if (!sh->shut_done && sh->completions == SHUT_AT) {
        sh->depth_at_shutdown = process_depth;
        rlock_shutdown(c);
        sh->shut_done = 1;
        sh->ping_after = rlock_async_ping(c, on_stray, sh, NULL);
    }
}

static int shut_all_completed(const struct shut *sh)
{
    for (int i = 0; i < sh->n; i++)
        if (sh->reqs[i].calls == 0)
            return 0;
    return 1;
}

static int shut_done(void *arg)
{
    const struct shut *sh = arg;
    return shut_all_completed(sh) && sh->L->closed > 0;
}

static void shut_submit(struct shut *sh, const char *kind, const char *res,
                        const struct rlock_acquire_opts *o)
{
    struct sreq *q = &sh->reqs[sh->n++];
    q->sh = sh;
    q->kind = kind;
    q->held_res = o != NULL && o->wait_ms > 0;
    enum rlock_err rc = res != NULL ? rlock_async_acquire(sh->c, res, o, on_sreq, q, &q->id)
                                    : rlock_async_ping(sh->c, on_sreq, q, &q->id);
    ck_assert_msg(rc == RLOCK_OK, "submitting %s %s: %s", kind, res ? res : "",
                  rlock_strerror(rc));
}

static void run_shutdown_in_completion(int libevent)
{
    const char *label = libevent ? "shutdown in completion (libevent)"
                                 : "shutdown in completion (poll)";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *held[SHUT_HELD];
    char name[64];
    for (int i = 0; i < SHUT_HELD; i++) {
        snprintf(name, sizeof name, "shut/held%d", i);
        held[i] = h_acquire_ok(f.c, name, NULL);
    }

    struct shut *sh = calloc(1, sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    struct h_lost lost = {0};
    struct rlock_options o = {.client_name = "itest-async-shutdown", .on_lost = h_lost_cb,
                              .on_lost_arg = &lost};
    struct loop L;
    sh->c = async_client(&f.e, &o, &L, libevent);
    sh->L = &L;

    struct rlock_acquire_opts waits = {.wait_ms = 30000};
    for (int i = 0; i < SHUT_HELD; i++) {
        snprintf(name, sizeof name, "shut/held%d", i);
        shut_submit(sh, "acquire (waits)", name, &waits);
    }
    for (int i = 0; i < SHUT_FREE || i < SHUT_PINGS; i++) {
        if (i < SHUT_FREE) {
            snprintf(name, sizeof name, "shut/free%02d", i);
            struct rlock_acquire_opts now = {.wait_ms = 0};
            shut_submit(sh, "acquire", name, &now);
        }
        if (i < SHUT_PINGS)
            shut_submit(sh, "ping", NULL, NULL);
    }

    int done = loop_until(&L, shut_done, sh, 10000);
    int before = 0, after = 0, after_closed = 0, held_closed = 0;
    for (int i = 0; i < sh->n; i++) {
        const struct sreq *q = &sh->reqs[i];
        if (q->calls > 0 && !q->after)
            before++;
        if (q->calls > 0 && q->after) {
            after++;
            after_closed += q->err == RLOCK_ERR_CLOSED;
        }
        held_closed += q->held_res && q->calls > 0 && q->err == RLOCK_ERR_CLOSED;
    }
    printf("%s: %d requests; %d completed before rlock_shutdown, %d after it (%d of them "
           "CLOSED, the others answered already); loop told of the end %d times\n",
           label, sh->n, before, after, after_closed, L.closed);

    ck_assert_msg(sh->shut_done, "fewer than %d completions came", SHUT_AT);
    ck_assert_int_gt(sh->depth_at_shutdown, 0);
    ck_assert_msg(shut_all_completed(sh), "not every request completed within 10 s");
    for (int i = 0; i < sh->n; i++) {
        const struct sreq *q = &sh->reqs[i];
        ck_assert_msg(q->calls == 1, "%s (request %llu) completed %d times", q->kind,
                      (unsigned long long)q->id, q->calls);
        if (q->held_res)
            ck_assert_msg(q->err == RLOCK_ERR_CLOSED, "%s (request %llu) completed with %s",
                          q->kind, (unsigned long long)q->id, rlock_strerror(q->err));
        if (!q->after)
            ck_assert_msg(q->err == RLOCK_OK, "%s (request %llu) completed with %s before the "
                          "shutdown", q->kind, (unsigned long long)q->id,
                          rlock_strerror(q->err));
    }
    ck_assert_int_eq(held_closed, SHUT_HELD);
    ck_assert_msg(sh->ping_after == RLOCK_ERR_CLOSED, "a ping submitted after the shutdown: %s",
                  rlock_strerror(sh->ping_after));
    ck_assert_int_eq(sh->stray, 0);
    ck_assert_msg(sh->live_after == 0, "%d lock handles delivered after the shutdown still "
                  "read HELD", sh->live_after);
    for (int i = 0; i < sh->nlocks; i++)
        ck_assert_int_eq(rlock_lock_state(sh->locks[i]), RLOCK_LOST);
    ck_assert_int_eq(atomic_load(&lost.count), 0); /* the application ended it: no callbacks */
    ck_assert_int_eq(rlock_client_alive(sh->c), 0);
    ck_assert_msg(process_ok_after_end == 0,
                  "%s: rlock_async_process returned RLOCK_OK %d times after the session had "
                  "ended (the call in which a completion called rlock_shutdown says OK)%s",
                  label, process_ok_after_end,
                  libevent ? "; the bridge then stops watching without calling on_closed" : "");
    ck_assert_msg(done, "%s: every request completed, but the loop was never told that the "
                  "session ended (%s)", label,
                  libevent ? "the bridge did not call on_closed"
                           : "rlock_async_process never returned RLOCK_ERR_CLOSED");
    ck_assert_int_eq(L.closed, 1);

    int completions = sh->completions;
    loop_close(&L);
    rlock_close(sh->c); /* frees the handles too */
    ck_assert_int_eq(sh->completions, completions);

    /* The daemon released what the ended session held; the blocking client's locks remain. */
    struct rlock_stats st;
    ck_assert_msg(h_wait_stats_of(f.c, SHUT_HELD, 0, 5000, &st) >= 0, "after the shutdown");
    for (int i = 0; i < SHUT_HELD; i++) {
        h_release_gone(&f, f.c, held[i]);
        rlock_lock_free(held[i]);
    }
    ck_assert_int_eq(h_count_lock_keys(f.r, &f.e, NULL, 0), 0);
    free(sh);
    h_fixture_stop(&f);
}

START_TEST(test_shutdown_in_completion_libevent)
{
    run_shutdown_in_completion(1);
}
END_TEST

START_TEST(test_shutdown_in_completion_poll)
{
    run_shutdown_in_completion(0);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_stream_libevent, test_lost_midstream, test_cancel,
                            test_stream_poll, test_shutdown_in_completion_libevent,
                            test_shutdown_in_completion_poll};
    return h_run_tests("async", 180, tests, H_LEN(tests));
}
