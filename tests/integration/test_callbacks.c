/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_callbacks.c — what runs on the library's callback thread, what a lost
 * lock looks like from outside it, fork(), validity and per-thread errors.
 *
 * Locks are lost by deleting their key in Redis: with a ttl of 1500 ms the
 * daemon's watchdog renews every 500 ms, finds the key missing, and sends
 * LockLost (reason MISSING).
 *
 *  - A blocking call from on_lost (ping, acquire, release, extend, stats,
 *    connect) returns RLOCK_ERR_IN_CALLBACK at once; the session survives.
 *  - rlock_close from another thread does not return while on_lost runs, and
 *    drops a callback of its client still queued behind another client's.
 *  - fork(): the child sees the inherited client ended; closing it there (or
 *    just exiting, or looking at it only after the session timeout) leaves
 *    the parent's session, lock and lost fd untouched, no callback of the
 *    parent's runs in the child, and the child can open a session of its own.
 *  - rlock_lost_fd becomes readable when a lock is lost; rlock_foreach_lock
 *    lists exactly the locks still held.
 *  - RLOCK_UNCERTAIN: rlockd stopped, the lock's valid-until passes without
 *    news long before the session timeout; rlockd resumed (before the lease
 *    ran out in Redis), the lock is HELD again with a later valid-until.
 *  - rlock_last_error is per thread: Redis down gives UNAVAILABLE with a retry
 *    hint, and two threads failing differently at once each see their own.
 */
#include "harness.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ThreadSanitizer cannot start threads in the child of a threaded process (it makes the
 * child die): under it the children below skip opening a session of their own. */
#if defined(__SANITIZE_THREAD__)
#define H_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define H_TSAN 1
#endif
#endif
#ifndef H_TSAN
#define H_TSAN 0
#endif

#define CALL_TIMEOUT_MS 5000u
#define LOSE_TTL_MS 1500u       /* renewed every ttl/3: a deleted key is noticed within ~0.5 s */
#define LOST_WITHIN_MS 5000
#define IN_CALLBACK_LIMIT_MS 10 /* a refused blocking call returns within this */

/* Delete the key of resource in Redis, so that the watchdog reports the lock lost. */
static void delete_key(struct h_fixture *f, const char *resource)
{
    char key[512];
    h_lock_key(&f->e, resource, key, sizeof key);
    ck_assert_msg(h_redis_int(f->r, "DEL %s", key) == 1, "DEL %s deleted nothing", key);
}

static int count_visit(const struct rlock_lock_info *info, void *arg)
{
    (void)info;
    ++*(int *)arg;
    return 0;
}

/* --- blocking calls from on_lost ------------------------------------------------------- */

enum cb_call { CB_PING, CB_ACQUIRE, CB_RELEASE, CB_EXTEND, CB_STATS, CB_CONNECT, CB_CALLS };
static const char *const cb_call_names[CB_CALLS] = {"ping",  "acquire", "release",
                                                    "extend", "stats",  "connect"};

struct in_cb {
    const char *address;
    struct rlock_lock *kept; /* a lock that stays held; the callback must not release it */
    atomic_int calls;
    atomic_int done;         /* set (release) after the results below are written */
    enum rlock_err rc[CB_CALLS];
    enum rlock_err last_code[CB_CALLS]; /* rlock_last_error()->code right after */
    int64_t took_ms[CB_CALLS];
    int acquired_handle;     /* the refused acquire still returned a handle */
    enum rlock_lock_state kept_state;
    int foreach_count;
    char lost_resource[64];
    enum rlock_lost_reason reason;
};

static void in_cb_lost(struct rlock_client *c, const char *resource, const char *token,
                       uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)token, (void)fence;
    struct in_cb *k = arg;
    if (atomic_fetch_add(&k->calls, 1) > 0)
        return;
    snprintf(k->lost_resource, sizeof k->lost_resource, "%s", resource);
    k->reason = reason;
    for (int i = 0; i < CB_CALLS; i++) {
        int64_t t0 = h_now_ms();
        switch (i) {
        case CB_PING:
            k->rc[i] = rlock_ping(c, CALL_TIMEOUT_MS, NULL);
            break;
        case CB_ACQUIRE: {
            struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = 3000};
            struct rlock_lock *l = NULL;
            k->rc[i] = rlock_acquire(c, "cb/in-callback", &o, CALL_TIMEOUT_MS, &l);
            k->acquired_handle = l != NULL;
            rlock_lock_free(l);
            break;
        }
        case CB_RELEASE:
            k->rc[i] = rlock_release(k->kept, CALL_TIMEOUT_MS);
            break;
        case CB_EXTEND:
            k->rc[i] = rlock_extend(k->kept, 0, CALL_TIMEOUT_MS);
            break;
        case CB_STATS: {
            struct rlock_stats st;
            k->rc[i] = rlock_stats(c, CALL_TIMEOUT_MS, &st);
            break;
        }
        case CB_CONNECT: {
            struct rlock_client *nc = NULL;
            char err[256];
            k->rc[i] = rlock_connect(k->address, NULL, &nc, err, sizeof err);
            rlock_close(nc);
            break;
        }
        }
        k->took_ms[i] = h_now_ms() - t0;
        k->last_code[i] = rlock_last_error()->code;
    }
    /* Non-blocking calls are fine here. */
    k->kept_state = rlock_lock_state(k->kept);
    k->foreach_count = 0;
    rlock_foreach_lock(c, count_visit, &k->foreach_count);
    atomic_store(&k->done, 1);
}

static int in_cb_done(void *arg)
{
    return atomic_load(&((struct in_cb *)arg)->done);
}

START_TEST(test_callbacks_blocking_call_refused)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct in_cb k = {.address = f.e.rlockd_addr};
    struct rlock_options opts = {.on_lost = in_cb_lost, .on_lost_arg = &k};
    f.c = h_client_or_fail(&f.e, &opts);
    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *lost = h_acquire_ok(f.c, "cb/lost", &o);
    k.kept = h_acquire_ok(f.c, "cb/kept", &o);
    char kept_key[512];
    h_lock_key(&f.e, "cb/kept", kept_key, sizeof kept_key);

    delete_key(&f, "cb/lost");
    ck_assert_msg(h_wait_for(in_cb_done, &k, LOST_WITHIN_MS), "on_lost did not run within %d ms",
                  LOST_WITHIN_MS);
    ck_assert_str_eq(k.lost_resource, "cb/lost");
    ck_assert_int_eq(k.reason, RLOCK_LOST_MISSING);
    for (int i = 0; i < CB_CALLS; i++) {
        printf("callbacks: %s from on_lost: %s after %lld ms\n", cb_call_names[i],
               rlock_strerror(k.rc[i]), (long long)k.took_ms[i]);
        ck_assert_msg(k.rc[i] == RLOCK_ERR_IN_CALLBACK, "%s from on_lost: %s", cb_call_names[i],
                      rlock_strerror(k.rc[i]));
        ck_assert_msg(k.last_code[i] == RLOCK_ERR_IN_CALLBACK,
                      "rlock_last_error() after %s in on_lost: %s", cb_call_names[i],
                      rlock_strerror(k.last_code[i]));
        ck_assert_msg(k.took_ms[i] < IN_CALLBACK_LIMIT_MS, "%s from on_lost took %lld ms",
                      cb_call_names[i], (long long)k.took_ms[i]);
    }
    ck_assert_int_eq(k.acquired_handle, 0);
    ck_assert_int_eq(k.kept_state, RLOCK_HELD);
    ck_assert_int_eq(k.foreach_count, 1);

    /* The session survives: the other lock is held, the main thread's calls work. */
    ck_assert_int_eq(rlock_lock_state(lost), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(lost), RLOCK_LOST_MISSING);
    ck_assert_int_eq(rlock_client_alive(f.c), 1);
    h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
    ck_assert_int_eq(rlock_lock_state(k.kept), RLOCK_HELD);
    h_assert_key_token(f.r, kept_key, rlock_lock_token(k.kept));
    h_sleep_ms(2 * LOSE_TTL_MS); /* renewed meanwhile: still ours */
    ck_assert_int_eq(rlock_lock_state(k.kept), RLOCK_HELD);
    h_assert_key_token(f.r, kept_key, rlock_lock_token(k.kept));
    ck_assert_int_eq(atomic_load(&k.calls), 1);
    h_release_gone(&f, f.c, k.kept);

    rlock_lock_free(k.kept);
    rlock_lock_free(lost);
    h_fixture_stop(&f);
}
END_TEST

/* --- rlock_close waits for a running on_lost -------------------------------------------- */

#define SLOW_CALLBACK_MS 300

struct slow_cb {
    int sleep_ms;            /* 0: SLOW_CALLBACK_MS */
    atomic_int calls;
    atomic_int started;
    atomic_int finished;
    atomic_int alive_at_end; /* rlock_client_alive(c) at the callback's end: c still usable */
    _Atomic int64_t finished_ms;
};

static void slow_lost(struct rlock_client *c, const char *resource, const char *token,
                      uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)resource, (void)token, (void)fence, (void)reason;
    struct slow_cb *k = arg;
    atomic_fetch_add(&k->calls, 1);
    atomic_store(&k->started, 1);
    h_sleep_ms(k->sleep_ms ? k->sleep_ms : SLOW_CALLBACK_MS);
    /* The client must still exist here, whatever another thread's rlock_close does. */
    atomic_store(&k->alive_at_end, rlock_client_alive(c));
    int n = 0;
    rlock_foreach_lock(c, count_visit, &n);
    atomic_store(&k->finished_ms, h_now_ms());
    atomic_store(&k->finished, 1);
}

static int slow_started(void *arg)
{
    return atomic_load(&((struct slow_cb *)arg)->started);
}

struct closer {
    struct rlock_client *c;
    struct slow_cb *k;
    int64_t start_ms, end_ms;
    int finished_when_closed;
};

static void *closer_main(void *arg)
{
    struct closer *z = arg;
    z->start_ms = h_now_ms();
    rlock_close(z->c);
    z->finished_when_closed = atomic_load(&z->k->finished);
    z->end_ms = h_now_ms();
    return NULL;
}

START_TEST(test_callbacks_close_waits_for_callback)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct slow_cb k = {0};
    struct rlock_options opts = {.on_lost = slow_lost, .on_lost_arg = &k};
    struct rlock_client *c = h_client_or_fail(&f.e, &opts);
    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(c, "cb/slow", &o);
    (void)l; /* freed by rlock_close */
    delete_key(&f, "cb/slow");
    ck_assert_msg(h_wait_for(slow_started, &k, LOST_WITHIN_MS), "on_lost did not start in %d ms",
                  LOST_WITHIN_MS);
    ck_assert_int_eq(atomic_load(&k.finished), 0);

    struct closer z = {.c = c, .k = &k};
    struct h_thread t;
    h_thread_start(&t, closer_main, &z);
    h_thread_join(&t, h_now_ms() + 5000, "rlock_close did not return within 5 s");
    printf("callbacks: rlock_close took %lld ms; on_lost finished %lld ms before it returned\n",
           (long long)(z.end_ms - z.start_ms), (long long)(z.end_ms - atomic_load(&k.finished_ms)));
    ck_assert_msg(z.finished_when_closed, "rlock_close returned while on_lost was still running");
    ck_assert_int_eq(atomic_load(&k.alive_at_end), 0); /* ended by the close, not freed */
    h_sleep_ms(200);
    ck_assert_int_eq(atomic_load(&k.calls), 1);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Callbacks run one at a time for the whole process: a client's note can wait
 * behind another client's slow callback. Closing that client then drops it:
 * its callback never runs (the client is gone).
 */
#define BLOCKING_CALLBACK_MS 2000 /* longer than a lost lock takes to be noticed */

START_TEST(test_callbacks_close_drops_queued_callback)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct slow_cb ka = {.sleep_ms = BLOCKING_CALLBACK_MS};
    struct rlock_options oa = {.on_lost = slow_lost, .on_lost_arg = &ka};
    struct rlock_client *a = h_client_or_fail(&f.e, &oa);
    struct h_lost kb = {0};
    struct rlock_options ob = {.on_lost = h_lost_cb, .on_lost_arg = &kb};
    struct rlock_client *b = h_client_or_fail(&f.e, &ob);
    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *la = h_acquire_ok(a, "cb/queue-a", &o);
    struct rlock_lock *lb = h_acquire_ok(b, "cb/queue-b", &o);

    /* a's callback runs (and sleeps); then b's lock is lost and its note queues behind. */
    delete_key(&f, "cb/queue-a");
    ck_assert_msg(h_wait_for(slow_started, &ka, LOST_WITHIN_MS), "a's on_lost did not start");
    delete_key(&f, "cb/queue-b");
    int64_t deadline = h_now_ms() + LOST_WITHIN_MS;
    while (rlock_lock_state(lb) != RLOCK_LOST && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_int_eq(rlock_lock_state(lb), RLOCK_LOST);
    h_sleep_ms(20); /* the note is handed to the callback queue just after the state changes */
    int a_running = !atomic_load(&ka.finished);
    int64_t t0 = h_now_ms();
    rlock_lock_free(lb);
    rlock_close(b);
    int64_t took = h_now_ms() - t0;
    printf("callbacks: closing b took %lld ms while a's callback %s\n", (long long)took,
           atomic_load(&ka.finished) ? "had finished" : "still ran");
    ck_assert_msg(a_running, "a's callback had ended before b's lock was lost: the test did "
                  "not queue b's callback behind it");

    /* Once a's callback is over, b's (dropped) callback would run at once. */
    int64_t end = h_now_ms() + BLOCKING_CALLBACK_MS + 500;
    while (!atomic_load(&ka.finished) && h_now_ms() < end)
        h_sleep_ms(5);
    h_sleep_ms(300);
    ck_assert_msg(atomic_load(&kb.count) == 0, "on_lost of the closed client ran %d time(s)",
                  atomic_load(&kb.count));
    rlock_lock_free(la);
    rlock_close(a);
    h_fixture_stop(&f);
}
END_TEST

/* --- fork -------------------------------------------------------------------------------- */

/* Bits of the child's exit status: what it found wrong. */
#define CHILD_ALIVE 0x01       /* rlock_client_alive != 0 */
#define CHILD_STATE 0x02       /* the inherited lock not LOST */
#define CHILD_PING 0x04        /* a call on the inherited client not CLOSED */
#define CHILD_RELEASE 0x08     /* releasing the inherited lock not refused */
#define CHILD_FOREACH 0x10     /* the inherited client lists locks */
#define CHILD_OWN_SESSION 0x20 /* could not use a session of its own */

/* The child's checks, with no Check calls (it must leave by _exit). */
static int child_checks(struct rlock_client *c, struct rlock_lock *l, const char *address,
                        int do_close)
{
    int bad = 0;
    if (rlock_client_alive(c) != 0)
        bad |= CHILD_ALIVE;
    if (rlock_lock_state(l) != RLOCK_LOST)
        bad |= CHILD_STATE;
    if (rlock_ping(c, 1000, NULL) != RLOCK_ERR_CLOSED)
        bad |= CHILD_PING;
    if (rlock_release(l, 1000) != RLOCK_ERR_CLOSED)
        bad |= CHILD_RELEASE;
    int n = 0;
    if (rlock_foreach_lock(c, count_visit, &n) != 0 || n != 0)
        bad |= CHILD_FOREACH;
    if (!do_close)
        return bad;
    rlock_lock_free(l);
    rlock_close(c);
    if (H_TSAN)
        return bad;
    /* The library works in the child: a session of its own. */
    struct rlock_client *own = NULL;
    struct rlock_options o = {.connect_timeout_ms = 5000};
    char err[256];
    if (rlock_connect(address, &o, &own, err, sizeof err) != RLOCK_OK)
        return bad | CHILD_OWN_SESSION;
    struct rlock_lock *ol = NULL;
    struct rlock_acquire_opts ao = {.ttl_ms = 10000};
    if (rlock_acquire(own, "cb/fork-child", &ao, 5000, &ol) != RLOCK_OK ||
        rlock_release(ol, 5000) != RLOCK_OK)
        bad |= CHILD_OWN_SESSION;
    rlock_lock_free(ol);
    rlock_close(own);
    return bad;
}

/* Wait (15 s) for the forked child pid to exit, failing the test unless it exited; returns
 * its exit status, the bits of what it found wrong. */
static int child_findings(pid_t pid)
{
    int status = 0;
    int exited = h_wait_exit(pid, 15000, &status);
    if (exited != 0) {
        kill(pid, SIGKILL);
        h_wait_exit(pid, 5000, &status);
    }
    char st[32];
    ck_assert_msg(exited == 0, "the child did not exit within 15 s");
    ck_assert_msg(WIFEXITED(status), "the child ended with %s",
                  h_status_str(status, st, sizeof st));
    return WEXITSTATUS(status);
}

/* fork(), output flushed first so that the child does not repeat it. */
static pid_t fork_flushed(void)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    return pid;
}

static int fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    return n > 0 && (p.revents & POLLIN);
}

#define PARENT_WATCH_MS 3000

static void fork_and_check(int do_close)
{
    static const char res[] = "cb/fork";
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    int lfd = rlock_lost_fd(f.c); /* made before the fork: shared with the child */
    ck_assert_int_ge(lfd, 0);
    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, res, &o);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);
    char token[128];
    snprintf(token, sizeof token, "%s", rlock_lock_token(l));

    pid_t pid = fork_flushed();
    if (pid == 0)
        _exit(child_checks(f.c, l, f.e.rlockd_addr, do_close));
    int bad = child_findings(pid);
    ck_assert_msg(bad == 0,
                  "the child found (0x%x):%s%s%s%s%s%s%s", bad,
                  bad & CHILD_ALIVE ? " inherited client alive;" : "",
                  bad & CHILD_STATE ? " inherited lock not LOST;" : "",
                  bad & CHILD_PING ? " ping not CLOSED;" : "",
                  bad & CHILD_RELEASE ? " release not CLOSED;" : "",
                  bad & CHILD_FOREACH ? " inherited locks listed;" : "",
                  bad & CHILD_OWN_SESSION ? " no session of its own;" : "",
                  bad & ~0x3f ? " (bits this test does not set: a sanitizer's exit code?)" : "");

    /* The parent's session and lock stay as they were, for several renewals. */
    int64_t end = h_now_ms() + PARENT_WATCH_MS;
    int rounds = 0, fd_fired = 0;
    while (h_now_ms() < end) {
        ck_assert_int_eq(rlock_client_alive(f.c), 1);
        ck_assert_msg(rlock_lock_state(l) == RLOCK_HELD, "the parent's lock is in state %d",
                      (int)rlock_lock_state(l));
        h_assert_key_token(f.r, key, token);
        h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
        ck_assert_int_eq(atomic_load(&f.lost.count), 0);
        fd_fired |= fd_readable(lfd, 0);
        h_sleep_ms(100);
        rounds++;
    }
    printf("callbacks: after the child (%s), the parent's lock stayed held for %d checks over "
           "%d ms; its lost fd %s\n", do_close ? "rlock_close" : "_exit", rounds,
           PARENT_WATCH_MS, fd_fired ? "became READABLE" : "stayed quiet");
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
    /* Last, so that the checks above run whatever happens here. */
    ck_assert_msg(!fd_fired,
                  "the parent's lost fd became readable after the child %s, with no lock lost",
                  do_close ? "closed its inherited client" : "exited");
}

/*
 * A child that looks at the inherited client only after the session timeout:
 * its copy of the client heard nothing all that time, but that must not turn
 * into a lost-lock callback of the parent's (there or once the child starts a
 * client of its own, and with it the library's threads), nor into a write to
 * the parent's lost fd.
 */
#define LATE_SESSION_MS 1000u /* session.min_timeout's default */
#define CHILD_CALLBACK 0x40   /* the parent's on_lost ran in the child */

START_TEST(test_callbacks_fork_child_after_session_timeout)
{
    static const char res[] = "cb/fork-late";
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_options opts = {.session_timeout_ms = LATE_SESSION_MS, .on_lost = h_lost_cb,
                                 .on_lost_arg = &f.lost};
    f.c = h_client_or_fail(&f.e, &opts);
    int lfd = rlock_lost_fd(f.c);
    ck_assert_int_ge(lfd, 0);
    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, res, &o);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);

    pid_t pid = fork_flushed();
    if (pid == 0) {
        h_sleep_ms(LATE_SESSION_MS * 3 / 2);
        int bad = 0;
        if (rlock_client_alive(f.c) != 0)
            bad |= CHILD_ALIVE;
        if (rlock_lock_state(l) != RLOCK_LOST)
            bad |= CHILD_STATE;
        if (H_TSAN)
            _exit(bad);
        /* A client of its own starts the library's threads in the child. */
        struct rlock_client *own = NULL;
        struct rlock_options oo = {.connect_timeout_ms = 5000};
        char err[256];
        if (rlock_connect(f.e.rlockd_addr, &oo, &own, err, sizeof err) != RLOCK_OK)
            bad |= CHILD_OWN_SESSION;
        else if (rlock_ping(own, 5000, NULL) != RLOCK_OK)
            bad |= CHILD_OWN_SESSION;
        h_sleep_ms(300); /* a callback carried over would have run by now */
        if (atomic_load(&f.lost.count) != 0)
            bad |= CHILD_CALLBACK;
        rlock_close(own);
        _exit(bad);
    }
    int bad = child_findings(pid);
    int fd_fired = fd_readable(lfd, 0);
    /* The parent's session is untouched either way. */
    ck_assert_int_eq(rlock_client_alive(f.c), 1);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
    ck_assert_int_eq(atomic_load(&f.lost.count), 0);
    printf("callbacks: child past the session timeout: found 0x%x; parent's lost fd %s\n", bad,
           fd_fired ? "READABLE" : "quiet");
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
    ck_assert_msg(bad == 0, "the child found (0x%x):%s%s%s%s%s", bad,
                  bad & CHILD_ALIVE ? " inherited client alive;" : "",
                  bad & CHILD_STATE ? " inherited lock not LOST;" : "",
                  bad & CHILD_OWN_SESSION ? " no session of its own;" : "",
                  bad & CHILD_CALLBACK ? " the parent's on_lost ran in the child for the "
                                         "parent's lock;" : "",
                  bad & ~0x63 ? " (bits this test does not set: a sanitizer's exit code?)" : "");
    ck_assert_msg(!fd_fired, "the parent's lost fd became readable through the child, with no "
                  "lock lost");
}
END_TEST

START_TEST(test_callbacks_fork_child_closes)
{
    fork_and_check(1);
}
END_TEST

START_TEST(test_callbacks_fork_child_exits)
{
    fork_and_check(0);
}
END_TEST

/* --- lost fd and the list of held locks --------------------------------------------------- */

#define LISTED_OWNER 77u

struct listing {
    int n;
    struct rlock_lock_info info[8];
    char resource[8][64], token[8][128];
    struct rlock_client *c;  /* when set, each visit pings (visit may call the library) */
    enum rlock_err ping_rc;
    int stop_after;          /* return 1 after this many visits (0: never) */
};

static int list_visit(const struct rlock_lock_info *info, void *arg)
{
    struct listing *s = arg;
    if (s->n < 8) {
        s->info[s->n] = *info;
        snprintf(s->resource[s->n], sizeof s->resource[0], "%s", info->resource);
        snprintf(s->token[s->n], sizeof s->token[0], "%s", info->token);
        s->info[s->n].resource = s->resource[s->n];
        s->info[s->n].token = s->token[s->n];
    }
    s->n++;
    if (s->c != NULL && s->ping_rc == RLOCK_OK)
        s->ping_rc = rlock_ping(s->c, CALL_TIMEOUT_MS, NULL);
    return s->stop_after > 0 && s->n >= s->stop_after;
}

/* The listed entry for resource, or NULL. */
static const struct rlock_lock_info *listed(const struct listing *s, const char *resource)
{
    for (int i = 0; i < s->n && i < 8; i++)
        if (strcmp(s->info[i].resource, resource) == 0)
            return &s->info[i];
    return NULL;
}

/* Assert that s lists l's lock as held, with hold count holds. */
static void assert_listed(const struct listing *s, struct rlock_lock *l, uint32_t holds)
{
    const char *res = rlock_lock_resource(l);
    const struct rlock_lock_info *in = listed(s, res);
    ck_assert_msg(in != NULL, "%s not listed", res);
    ck_assert_str_eq(in->token, rlock_lock_token(l));
    ck_assert_uint_eq(in->fence, rlock_lock_fence(l));
    ck_assert_uint_eq(in->owner, rlock_lock_owner(l));
    ck_assert_uint_eq(in->hold_count, holds);
    ck_assert_uint_eq(in->ttl_ms, LOSE_TTL_MS);
    ck_assert_int_eq(in->watchdog, 1);
    ck_assert_int_eq(in->state, RLOCK_HELD);
    ck_assert_msg(in->valid_until > h_now_ms() - 1000, "%s valid until %lld, now %lld", res,
                  (long long)in->valid_until, (long long)h_now_ms());
}

static int lost_once(void *arg)
{
    return atomic_load(&((struct h_lost *)arg)->count) >= 1;
}

START_TEST(test_callbacks_lost_fd_and_foreach)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    int lfd = rlock_lost_fd(f.c);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(rlock_lost_fd(f.c), lfd);
    ck_assert_msg(!fd_readable(lfd, 0), "the lost fd is readable before anything was lost");

    struct rlock_acquire_opts o = {.ttl_ms = LOSE_TTL_MS};
    struct rlock_lock *a = h_acquire_ok(f.c, "cb/list-a", &o);
    struct rlock_lock *b = h_acquire_ok(f.c, "cb/list-b", &o);
    struct rlock_lock *b2 = h_acquire_ok(f.c, "cb/list-b", &o); /* re-entered: hold count 2 */
    struct rlock_acquire_opts oo = {.ttl_ms = LOSE_TTL_MS, .owner = LISTED_OWNER};
    struct rlock_lock *d = h_acquire_ok(f.c, "cb/list-d", &oo);

    struct listing s = {0};
    ck_assert_uint_eq(rlock_foreach_lock(f.c, list_visit, &s), 3);
    ck_assert_int_eq(s.n, 3);
    assert_listed(&s, a, 1);
    assert_listed(&s, b, 2);
    assert_listed(&s, d, 1);
    ck_assert_uint_eq(listed(&s, "cb/list-d")->owner, LISTED_OWNER);
    ck_assert_uint_eq(listed(&s, "cb/list-a")->owner, rlock_thread_owner());

    delete_key(&f, "cb/list-a");
    int64_t t_del = h_now_ms();
    ck_assert_msg(fd_readable(lfd, LOST_WITHIN_MS), "the lost fd not readable %d ms after the "
                  "key was deleted", LOST_WITHIN_MS);
    printf("callbacks: the lost fd became readable %lld ms after the DEL\n",
           (long long)(h_now_ms() - t_del));
    uint64_t v = 0;
    ck_assert_int_eq(read(lfd, &v, sizeof v), (ssize_t)sizeof v);
    ck_assert_uint_ge(v, 1);
    ck_assert_msg(!fd_readable(lfd, 0), "the lost fd still readable after reading it");
    ck_assert_int_eq(rlock_lock_state(a), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(a), RLOCK_LOST_MISSING);
    /* The fd is written as the loss is recorded; the callback follows on its own thread. */
    ck_assert_msg(h_wait_for(lost_once, &f.lost, LOST_WITHIN_MS), "on_lost not called within "
                  "%d ms of the lost fd", LOST_WITHIN_MS);

    /* Exactly the locks still held; the visits may call the library. */
    s = (struct listing){.c = f.c};
    ck_assert_uint_eq(rlock_foreach_lock(f.c, list_visit, &s), 2);
    ck_assert_int_eq(s.n, 2);
    ck_assert_msg(s.ping_rc == RLOCK_OK, "ping from a visit: %s", rlock_strerror(s.ping_rc));
    ck_assert_ptr_null(listed(&s, "cb/list-a"));
    assert_listed(&s, b, 2);
    assert_listed(&s, d, 1);
    /* A non-zero return stops the walk. */
    s = (struct listing){.stop_after = 1};
    ck_assert_uint_eq(rlock_foreach_lock(f.c, list_visit, &s), 1);
    ck_assert_int_eq(s.n, 1);

    /* Releases are not losses: the fd stays quiet, the list empties. */
    h_assert_ok(f.c, rlock_release(b2, CALL_TIMEOUT_MS));
    s = (struct listing){0};
    rlock_foreach_lock(f.c, list_visit, &s);
    assert_listed(&s, b, 1);
    h_release_gone(&f, f.c, b);
    h_release_gone(&f, f.c, d);
    s = (struct listing){0};
    ck_assert_uint_eq(rlock_foreach_lock(f.c, list_visit, &s), 0);
    ck_assert_msg(!fd_readable(lfd, 0), "the lost fd became readable on releases");
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);

    /* The session's end wakes it, with no lock held: an operator ends the session. */
    struct rlock_client *op = h_client_or_fail(&f.e, NULL);
    h_assert_ok(op, rlock_kill_session(op, rlock_session_id(f.c), CALL_TIMEOUT_MS, NULL));
    ck_assert_msg(fd_readable(lfd, LOST_WITHIN_MS),
                  "the lost fd not readable %d ms after the session was ended", LOST_WITHIN_MS);
    ck_assert_int_eq(read(lfd, &v, sizeof v), (ssize_t)sizeof v);
    ck_assert_int_eq(rlock_client_alive(f.c), 0);
    rlock_close(op);

    rlock_lock_free(a);
    rlock_lock_free(b);
    rlock_lock_free(b2);
    rlock_lock_free(d);
    h_fixture_stop(&f);
}
END_TEST

/* --- RLOCK_UNCERTAIN --------------------------------------------------------------------- */

#define UNC_TTL_MS 1500u
#define UNC_SESSION_MS 10000u
/* Stop rlockd only when its lease outlives what the client knows by this much: it must
 * still hold the lock when it runs again, just after the client went UNCERTAIN. */
#define UNC_MIN_SLACK_MS 250
#define UNC_ATTEMPTS 20
/*
 * After SIGCONT rlockd has what is left of its lease (a few hundred ms) to get
 * a renew through; on a busy machine it once did not, and declared the lease
 * run out (EXPIRED): the right call when it cannot renew in time. Such an
 * attempt is taken again with a new lock, this many times at most; a daemon
 * that never renews after a stop loses every attempt and fails the test.
 */
#define UNC_LATE_RETRIES 4

static int uncertain_visit(const struct rlock_lock_info *info, void *arg)
{
    *(enum rlock_lock_state *)arg = info->state;
    return 1;
}

/* Wait (at most 3 s) for a renewal by rlockd: the key's PTTL jumps up. 0, or -1. */
static int wait_renewal(redisContext *r, const char *key)
{
    int64_t deadline = h_now_ms() + 3000;
    long long prev = h_pttl(r, key);
    while (h_now_ms() < deadline) {
        long long p = h_pttl(r, key);
        if (p < 0)
            return -1;
        if (p > prev + 100)
            return 0;
        prev = p;
        h_sleep_ms(1);
    }
    return -1;
}

/* Wait (at most 3 s) until l is HELD again with a valid-until beyond after. */
static int wait_held_beyond(struct rlock_lock *l, int64_t after)
{
    int64_t deadline = h_now_ms() + 3000;
    while (h_now_ms() < deadline) {
        if (rlock_lock_state(l) == RLOCK_HELD && rlock_lock_valid_until(l) > after)
            return 0;
        h_sleep_ms(5);
    }
    return -1;
}

START_TEST(test_callbacks_uncertain)
{
    static const char res[] = "cb/uncertain";
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_options opts = {.session_timeout_ms = UNC_SESSION_MS, .on_lost = h_lost_cb,
                                 .on_lost_arg = &f.lost};
    f.c = h_client_or_fail(&f.e, &opts);
    ck_assert_uint_eq(rlock_session_timeout_ms(f.c), UNC_SESSION_MS);
    struct rlock_acquire_opts o = {.ttl_ms = UNC_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(f.c, res, &o);
    char key[512];
    h_lock_key(&f.e, res, key, sizeof key);

    int64_t now = h_now_ms();
    int64_t vu = rlock_lock_valid_until(l);
    printf("callbacks: valid until now + %lld ms (ttl %u ms)\n", (long long)(vu - now), UNC_TTL_MS);
    ck_assert_msg(vu > now && vu <= now + UNC_TTL_MS, "valid until %lld, now %lld",
                  (long long)vu, (long long)now);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);

    int done = 0, late = 0;
    for (int attempt = 1; attempt <= UNC_ATTEMPTS && !done; attempt++) {
        /* Stop rlockd right after it renewed the key: its lease then runs ~ttl/3 longer
         * than the client learnt from its latest keepalive answer. */
        ck_assert_msg(wait_renewal(f.r, key) == 0, "rlockd did not renew %s within 3 s", key);
        h_rlockd_sigstop(&f.e);
        int64_t t_stop = h_now_ms();
        int64_t v = rlock_lock_valid_until(l);
        long long pttl = h_pttl(f.r, key);
        int64_t key_until = h_now_ms() + pttl;
        int64_t slack = key_until - v;
        if (pttl < 0 || slack < UNC_MIN_SLACK_MS) {
            h_rlockd_sigcont(&f.e);
            printf("callbacks: attempt %d: the key outlives the client's valid-until by %lld ms "
                   "only; again\n", attempt, (long long)slack);
            ck_assert_msg(wait_held_beyond(l, v) == 0, "the lock not HELD again after SIGCONT");
            continue;
        }
        /* No news from here on: UNCERTAIN once valid-until has passed. */
        enum rlock_lock_state st;
        while ((st = rlock_lock_state(l)) == RLOCK_HELD && h_now_ms() < key_until - 150)
            h_sleep_ms(1);
        int64_t t_unc = h_now_ms();
        enum rlock_lock_state listed_state = RLOCK_LOST;
        rlock_foreach_lock(f.c, uncertain_visit, &listed_state);
        int alive = rlock_client_alive(f.c);
        int64_t v_stopped = rlock_lock_valid_until(l); /* before any answer can move it */
        h_rlockd_sigcont(&f.e);
        printf("callbacks: attempt %d: rlockd stopped; the lock %s %lld ms later (valid until "
               "stop + %lld ms, key until stop + %lld ms; session timeout %u ms)\n",
               attempt, st == RLOCK_UNCERTAIN ? "UNCERTAIN" : "still not UNCERTAIN",
               (long long)(t_unc - t_stop), (long long)(v - t_stop),
               (long long)(key_until - t_stop), UNC_SESSION_MS);
        ck_assert_msg(st == RLOCK_UNCERTAIN, "state %d %lld ms after rlockd stopped, valid "
                      "until stop + %lld ms", (int)st, (long long)(t_unc - t_stop),
                      (long long)(v - t_stop));
        ck_assert_msg(t_unc >= v, "UNCERTAIN at %lld, before valid-until %lld", (long long)t_unc,
                      (long long)v);
        ck_assert_msg(t_unc - t_stop < 2000, "UNCERTAIN only %lld ms after the stop",
                      (long long)(t_unc - t_stop));
        ck_assert_int_eq(listed_state, RLOCK_UNCERTAIN);
        ck_assert_int_eq(alive, 1); /* long before the session timeout */
        /* Within a millisecond: the two clocks are read apart when converting. */
        ck_assert_msg(v_stopped >= v - 1 && v_stopped <= v + 1,
                      "valid-until moved while rlockd was stopped: %lld, was %lld",
                      (long long)v_stopped, (long long)v);

        int64_t t_cont = h_now_ms();
        if (wait_held_beyond(l, v) != 0 && rlock_lock_state(l) == RLOCK_LOST &&
            rlock_lock_lost_reason(l) == RLOCK_LOST_EXPIRED && late < UNC_LATE_RETRIES &&
            h_log_count(&f.e, "the lease ran out before a renew succeeded") == late + 1) {
            late++;
            printf("callbacks: attempt %d: rlockd, continued with %lld ms of its lease left, did "
                   "not renew in time (EXPIRED, late %d); again with a new lock\n", attempt,
                   (long long)(key_until - t_cont), late);
            rlock_lock_free(l);
            /* Its key may stay until the daemon's cleanup or its expiry: wait for it. */
            struct rlock_acquire_opts again = o;
            again.wait_ms = 10000;
            l = h_acquire_ok(f.c, res, &again);
            continue;
        }
        ck_assert_msg(wait_held_beyond(l, v) == 0,
                      "the lock is in state %d 3 s after SIGCONT, valid until %lld (was %lld)",
                      (int)rlock_lock_state(l), (long long)rlock_lock_valid_until(l),
                      (long long)v);
        int64_t v2 = rlock_lock_valid_until(l);
        printf("callbacks: HELD again %lld ms after SIGCONT, valid until now + %lld ms\n",
               (long long)(h_now_ms() - t_cont), (long long)(v2 - h_now_ms()));
        done = 1;
    }
    ck_assert_msg(done, "no attempt out of %d stopped rlockd with enough of its lease left",
                  UNC_ATTEMPTS);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    h_assert_ok(f.c, rlock_ping(f.c, CALL_TIMEOUT_MS, NULL));
    ck_assert_int_eq(atomic_load(&f.lost.count), late);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/* --- per-thread errors ------------------------------------------------------------------- */

#define ERR_ROUNDS 200

struct err_thread {
    struct rlock_client *c;
    pthread_barrier_t *go;
    int kind;                /* 0: UNAVAILABLE from rlockd, 1: INVALID from rlockd, 2: ARG */
    int mismatches;
    char first[320];
};

static void *err_thread_main(void *arg)
{
    static const enum rlock_err want[3] = {RLOCK_ERR_UNAVAILABLE, RLOCK_ERR_INVALID,
                                           RLOCK_ERR_ARG};
    static const char *const text[3] = {"redis", "ttl_ms", "resource"};
    struct err_thread *t = arg;
    for (int i = 0; i < ERR_ROUNDS; i++) {
        pthread_barrier_wait(t->go);
        struct rlock_lock *l = NULL;
        struct rlock_acquire_opts o = {.ttl_ms = t->kind == 1 ? 1 : 10000};
        enum rlock_err rc = rlock_acquire(t->c, t->kind == 2 ? "" : "cb/errors", &o,
                                          CALL_TIMEOUT_MS, &l);
        rlock_lock_free(l);
        pthread_barrier_wait(t->go); /* every thread has failed before any looks */
        const struct rlock_error *e = rlock_last_error();
        int ok = rc == want[t->kind] && e->code == want[t->kind] &&
                 strstr(e->message, text[t->kind]) != NULL &&
                 (t->kind == 0 ? e->retry_after_ms > 0 : e->retry_after_ms == 0);
        if (!ok && t->mismatches++ == 0)
            snprintf(t->first, sizeof t->first,
                     "round %d: returned %s; rlock_last_error(): %s, retry %u ms, \"%s\"", i,
                     rlock_strerror(rc), rlock_strerror(e->code), e->retry_after_ms, e->message);
    }
    return NULL;
}

static int redis_down(void *arg)
{
    struct rlock_stats st;
    return rlock_stats(arg, CALL_TIMEOUT_MS, &st) == RLOCK_OK && !st.redis_up;
}

/* Every connection of rlockd's pool ready: a resource's route may be any of them. */
static int redis_all_up(void *arg)
{
    struct rlock_stats st;
    return rlock_stats(arg, CALL_TIMEOUT_MS, &st) == RLOCK_OK && st.redis_connections > 0 &&
           st.redis_connections_ready == st.redis_connections;
}

START_TEST(test_callbacks_per_thread_errors)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    ck_assert_int_eq(rlock_last_error()->code, RLOCK_OK);
    ck_assert_int_eq(h_redis_kill(&f.e), 0);
    ck_assert_msg(h_wait_for(redis_down, f.c, 5000), "rlockd still reports Redis up 5 s after "
                  "redis-server was killed");

    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(f.c, "cb/errors", NULL, CALL_TIMEOUT_MS, &l);
    const struct rlock_error *e = rlock_last_error();
    printf("callbacks: acquire with Redis down: %s, retry after %u ms, \"%s\"\n",
           rlock_strerror(rc), e->retry_after_ms, e->message);
    ck_assert_msg(rc == RLOCK_ERR_UNAVAILABLE, "acquire with Redis down: %s",
                  rlock_strerror(rc));
    ck_assert_ptr_null(l);
    ck_assert_int_eq(e->code, RLOCK_ERR_UNAVAILABLE);
    ck_assert_uint_gt(e->retry_after_ms, 0);
    ck_assert_msg(e->message[0] != '\0', "no message with UNAVAILABLE");
    char msg[256];
    rlock_errmsg(f.c, msg, sizeof msg);
    ck_assert_str_eq(msg, e->message);
    struct rlock_error mine = *e;

    /* Three threads fail at the same moments, each its own way. */
    pthread_barrier_t go;
    ck_assert_int_eq(pthread_barrier_init(&go, NULL, 3), 0);
    struct err_thread t[3];
    struct h_thread th[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (struct err_thread){.c = f.c, .go = &go, .kind = i};
        h_thread_start(&th[i], err_thread_main, &t[i]);
    }
    for (int i = 0; i < 3; i++)
        h_thread_join(&th[i], h_now_ms() + 60000, "an error thread still runs after 60 s");
    pthread_barrier_destroy(&go);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(t[i].mismatches == 0, "thread %d saw another error %d time(s) of %d; "
                      "first: %s", i, t[i].mismatches, ERR_ROUNDS, t[i].first);
    /* Nor did they touch this thread's. */
    ck_assert_int_eq(rlock_last_error()->code, mine.code);
    ck_assert_str_eq(rlock_last_error()->message, mine.message);

    /* Redis back: rlockd reconnects and serves again. */
    ck_assert_int_eq(h_redis_start(&f.e), 0);
    redisFree(f.r); /* its connection died with the old redis-server */
    f.r = h_redis(&f.e);
    ck_assert_ptr_nonnull(f.r);
    ck_assert_msg(h_wait_for(redis_all_up, f.c, 10000),
                  "rlockd's pool not all ready again 10 s after Redis restarted");
    struct rlock_acquire_opts o = {.ttl_ms = 10000};
    l = h_acquire_ok(f.c, "cb/errors", &o);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_callbacks_blocking_call_refused,
                            test_callbacks_close_waits_for_callback,
                            test_callbacks_close_drops_queued_callback,
                            test_callbacks_fork_child_after_session_timeout,
                            test_callbacks_fork_child_closes,
                            test_callbacks_fork_child_exits,
                            test_callbacks_lost_fd_and_foreach,
                            test_callbacks_uncertain,
                            test_callbacks_per_thread_errors};
    return h_run_tests("callbacks", 120, tests, H_LEN(tests));
}
