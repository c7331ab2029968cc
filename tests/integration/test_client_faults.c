/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client_faults.c — librlock's error paths against the real rlockd and
 * redis-server of the harness, with the faults made by real signals to the
 * real rlockd process:
 *  - rlockd stopped (SIGSTOP) with its unix listen backlog full: connect
 *    keeps trying until its deadline instead of failing at once with EAGAIN,
 *    and succeeds once rlockd runs again (SIGCONT) and drains the backlog;
 *  - rlockd stopped while a client says Hello, resumed only after the
 *    session timeout the client asked for: connect fails (RLOCK_ERR_CONNECT,
 *    naming the session timeout) instead of returning a dead client;
 *  - SIGTERM: rlockd sends SessionClosing; the session ends there (locks
 *    LOST with reason SESSION, on_lost once per lock), and rlockd exits 0;
 *  - rlockd stopped, so it reads nothing: a request that cannot be written
 *    in time fails with RLOCK_ERR_DEADLINE and the session is closed, and so
 *    does a call queued behind another thread's unwritten request (the held
 *    lock is then LOST, and the daemon frees it once it runs again);
 *  - the one meaning of DEADLINE, with locks held: a request written and not
 *    answered, and one that could not be written, each leave the client
 *    ended, every handle LOST (SESSION), on_lost called once per lock, and
 *    the keys released by rlockd once it runs again;
 *  - rlock_close() from inside on_lost (the lock's key deleted in Redis, so
 *    the watchdog reports it lost): returns, the client is freed by its own
 *    thread and the daemon sees the session end (meant to be run under a
 *    sanitizer too);
 * and addresses whose port is not 1..65535 (no server needed): RLOCK_ERR_ARG,
 * rlockctl exit 64.
 */
#include "harness.h"

#include <pthread.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* More than rlockd's listen backlog (128), whatever somaxconn allows. */
#define MAX_FILLERS 8192
/* A request this big cannot sit in a socket buffer (the daemon would refuse it, too, but a
 * stopped daemon reads nothing). */
#define BIG_RESOURCE_BYTES (8u * 1024u * 1024u)

/* --- helpers ------------------------------------------------------------ */

/* rlockd answers a fresh client's ping (within 5 s). */
static void assert_rlockd_serves(struct h_env *e)
{
    h_assert_env_alive(e);
    struct rlock_options o = {.connect_timeout_ms = 5000};
    struct rlock_client *c = h_client_or_fail(e, &o);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    rlock_close(c);
}

/* --- connecting from a thread -------------------------------------------- */

struct connector {
    const char *addr;
    uint32_t session_timeout_ms;
    enum rlock_err rc;
    struct rlock_client *c;
    char err[512];
    int64_t start_ms, end_ms;
};

static void *connect_main(void *arg)
{
    struct connector *k = arg;
    struct rlock_options o = {.connect_timeout_ms = 5000,
                              .session_timeout_ms = k->session_timeout_ms};
    k->start_ms = h_now_ms();
    k->rc = rlock_connect(k->addr, &o, &k->c, k->err, sizeof k->err);
    k->end_ms = h_now_ms();
    return NULL;
}

/* --- the listen backlog is full ------------------------------------------ */

START_TEST(test_client_faults_backlog_full)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(f.e.rlockd_sock), sizeof a.sun_path);
    memcpy(a.sun_path, f.e.rlockd_sock, strlen(f.e.rlockd_sock) + 1);

    h_rlockd_sigstop(&f.e);
    /* Fill the backlog: connections rlockd cannot accept, until the kernel refuses one. */
    int *fillers = calloc(MAX_FILLERS, sizeof *fillers);
    ck_assert_ptr_nonnull(fillers);
    int nf = 0, full = 0, fill_errno = 0;
    while (nf < MAX_FILLERS && !full) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            fill_errno = errno;
            break;
        }
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            fillers[nf++] = fd;
            continue;
        }
        fill_errno = errno;
        close(fd);
        full = fill_errno == EAGAIN;
        if (!full)
            break;
    }
    printf("client_faults: rlockd stopped; backlog full after %d connections\n", nf);

    struct connector k = {.addr = f.e.rlockd_addr};
    struct h_thread t;
    int started = 0, gave_up_early = 0;
    int64_t t_cont = 0;
    if (full) {
        h_thread_start(&t, connect_main, &k);
        started = 1;
        h_sleep_ms(500);
        gave_up_early = h_thread_done(&t);
    }
    /* Let rlockd drain the backlog: the fillers hang up, so it accepts each and sees EOF. */
    for (int i = 0; i < nf; i++)
        close(fillers[i]);
    free(fillers);
    t_cont = h_now_ms();
    h_rlockd_sigcont(&f.e);
    if (started)
        h_thread_join(&t, h_now_ms() + 8000, "rlock_connect did not return 8 s after SIGCONT");

    ck_assert_msg(full, "the backlog never filled up (%d connections, last: %s)", nf,
                  strerror(fill_errno));
    printf("client_faults: full backlog: connect returned %s after %lld ms (%lld ms after "
           "SIGCONT): %s\n",
           rlock_strerror(k.rc), (long long)(k.end_ms - k.start_ms),
           (long long)(k.end_ms - t_cont), k.err);
    ck_assert_msg(!gave_up_early && k.end_ms >= t_cont,
                  "rlock_connect gave up while the backlog was full: %s: %s",
                  rlock_strerror(k.rc), k.err);
    ck_assert_msg(k.rc == RLOCK_OK, "connect after the backlog drained: %s: %s",
                  rlock_strerror(k.rc), k.err);
    ck_assert_int_eq(rlock_client_alive(k.c), 1);
    h_assert_ok(k.c, rlock_ping(k.c, 5000, NULL));
    rlock_close(k.c);
    h_fixture_stop(&f);
}
END_TEST

/* --- the Hello reply comes after the session timeout ----------------------- */

#define LATE_SESSION_MS 1000u /* session.min_timeout's default */
#define LATE_STOP_MS 1500

START_TEST(test_client_faults_hello_too_late)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);

    /* In time: a normal client with that session timeout. */
    struct rlock_options o = {.connect_timeout_ms = 5000, .session_timeout_ms = LATE_SESSION_MS};
    struct rlock_client *c = h_client_or_fail(&f.e, &o);
    ck_assert_int_eq(rlock_client_alive(c), 1);
    ck_assert_uint_eq(rlock_session_timeout_ms(c), LATE_SESSION_MS);
    rlock_close(c);

    /* rlockd stopped while the Hello goes out; it answers 1.5 session timeouts later. */
    h_rlockd_sigstop(&f.e);
    struct connector k = {.addr = f.e.rlockd_addr, .session_timeout_ms = LATE_SESSION_MS};
    struct h_thread t;
    h_thread_start(&t, connect_main, &k);
    h_sleep_ms(LATE_STOP_MS);
    int returned_early = h_thread_done(&t);
    int64_t t_cont = h_now_ms();
    h_rlockd_sigcont(&f.e);
    h_thread_join(&t, h_now_ms() + 8000, "rlock_connect did not return 8 s after SIGCONT");

    printf("client_faults: late Hello: %s after %lld ms (%lld ms after SIGCONT): %s\n",
           rlock_strerror(k.rc), (long long)(k.end_ms - k.start_ms),
           (long long)(k.end_ms - t_cont), k.err);
    if (k.rc == RLOCK_OK)
        rlock_close(k.c);
    ck_assert_msg(!returned_early, "rlock_connect returned while rlockd was stopped: %s: %s",
                  rlock_strerror(k.rc), k.err);
    ck_assert_msg(k.rc == RLOCK_ERR_CONNECT, "connect after a late Hello reply: %s (%s)",
                  rlock_strerror(k.rc), k.err);
    ck_assert_ptr_null(k.c);
    ck_assert_msg(strstr(k.err, "session timeout") != NULL, "message: %s", k.err);

    assert_rlockd_serves(&f.e);
    h_fixture_stop(&f);
}
END_TEST

/* --- SIGTERM: SessionClosing ------------------------------------------------ */

#define CLOSING_LOCKS 2
static const char *const closing_names[CLOSING_LOCKS] = {"cf-closing-a", "cf-closing-b"};

struct lost_by_name {
    atomic_int calls[CLOSING_LOCKS];
    atomic_int other;       /* calls for a resource not in closing_names */
    atomic_int bad_reason;  /* calls with a reason other than SESSION */
};

static void lost_by_name_cb(struct rlock_client *c, const char *resource, const char *token,
                            uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)token, (void)fence;
    struct lost_by_name *r = arg;
    int found = 0;
    for (int i = 0; i < CLOSING_LOCKS; i++) {
        if (strcmp(resource, closing_names[i]) == 0) {
            atomic_fetch_add(&r->calls[i], 1);
            found = 1;
        }
    }
    if (!found)
        atomic_fetch_add(&r->other, 1);
    if (reason != RLOCK_LOST_SESSION)
        atomic_fetch_add(&r->bad_reason, 1);
    fprintf(stderr, "lost: %s (%s)\n", resource, rlock_lost_reason_str(reason));
}

static int all_lost_once(void *arg)
{
    struct lost_by_name *r = arg;
    for (int i = 0; i < CLOSING_LOCKS; i++) {
        if (atomic_load(&r->calls[i]) == 0)
            return 0;
    }
    return 1;
}

START_TEST(test_client_faults_session_closing)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct lost_by_name lost = {0};
    struct rlock_options o = {.on_lost = lost_by_name_cb, .on_lost_arg = &lost};
    struct rlock_client *c = h_client_or_fail(&f.e, &o);
    struct rlock_lock *locks[CLOSING_LOCKS];
    for (int i = 0; i < CLOSING_LOCKS; i++)
        locks[i] = h_acquire_ok(c, closing_names[i], NULL);

    int status = 0;
    int64_t t_term = h_now_ms();
    int in_time = h_stop_pid(f.e.rlockd_pid, SIGTERM, 10000, "rlockd", &status) == 0;
    int64_t t_exit = h_now_ms();
    f.e.rlockd_pid = 0; /* gone: the teardown must not signal it again */
    char st[32];
    printf("client_faults: rlockd ended (%s) %lld ms after SIGTERM\n",
           h_status_str(status, st, sizeof st), (long long)(t_exit - t_term));
    ck_assert_msg(in_time, "rlockd needed a SIGKILL after SIGTERM");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "rlockd ended with %s on SIGTERM, want exit 0", st);

    ck_assert_msg(h_wait_for(all_lost_once, &lost, 5000),
                  "on_lost not called for every lock within 5 s of rlockd's exit (%d, %d)",
                  atomic_load(&lost.calls[0]), atomic_load(&lost.calls[1]));
    printf("client_faults: every lock reported lost %lld ms after SIGTERM\n",
           (long long)(h_now_ms() - t_term));
    for (int i = 0; i < CLOSING_LOCKS; i++) {
        ck_assert_msg(rlock_lock_state(locks[i]) == RLOCK_LOST, "%s is in state %d",
                      closing_names[i], (int)rlock_lock_state(locks[i]));
        ck_assert_int_eq(rlock_lock_lost_reason(locks[i]), RLOCK_LOST_SESSION);
    }
    ck_assert_int_eq(rlock_client_alive(c), 0);
    h_sleep_ms(300); /* a second callback for the same lock would come by now */
    for (int i = 0; i < CLOSING_LOCKS; i++)
        ck_assert_msg(atomic_load(&lost.calls[i]) == 1, "on_lost called %d times for %s",
                      atomic_load(&lost.calls[i]), closing_names[i]);
    ck_assert_int_eq(atomic_load(&lost.other), 0);
    ck_assert_msg(atomic_load(&lost.bad_reason) == 0, "on_lost with a reason other than session");

    /* The session ended on SessionClosing, not on the EOF that followed it. */
    char msg[256];
    ck_assert_int_eq(rlock_ping(c, 1000, NULL), RLOCK_ERR_CLOSED);
    rlock_errmsg(c, msg, sizeof msg);
    printf("client_faults: after SIGTERM: %s\n", msg);
    ck_assert_msg(strstr(msg, "closing") != NULL, "errmsg: %s", msg);
    for (int i = 0; i < CLOSING_LOCKS; i++) {
        char key[256];
        h_lock_key(&f.e, closing_names[i], key, sizeof key);
        ck_assert_msg(h_key_exists(f.r, key) == 0, "%s survived the shutdown", key);
        rlock_lock_free(locks[i]);
    }
    rlock_close(c);
    redisFree(f.r);
    h_env_stop(&f.e);
}
END_TEST

/* --- a request that cannot be written in time -------------------------------- */

#define UNWRITTEN_TIMEOUT_MS 300

START_TEST(test_client_faults_write_deadline)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_options o = {.connect_timeout_ms = 5000};
    struct rlock_client *c = h_client_or_fail(&f.e, &o);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    char *big = malloc(BIG_RESOURCE_BYTES + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'r', BIG_RESOURCE_BYTES);
    big[BIG_RESOURCE_BYTES] = '\0';

    /* rlockd reads nothing while stopped: the socket buffer fills and the write stalls. */
    h_rlockd_sigstop(&f.e);
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_acquire(c, big, NULL, UNWRITTEN_TIMEOUT_MS, &l);
    int64_t took = h_now_ms() - t0;
    char msg[256];
    rlock_errmsg(c, msg, sizeof msg);
    int alive = rlock_client_alive(c);
    h_rlockd_sigcont(&f.e);
    free(big);

    printf("client_faults: unwritable acquire: %s after %lld ms (timeout %d ms): %s\n",
           rlock_strerror(rc), (long long)took, UNWRITTEN_TIMEOUT_MS, msg);
    ck_assert_msg(rc == RLOCK_ERR_DEADLINE, "acquire that could not be written: %s (%s)",
                  rlock_strerror(rc), msg);
    ck_assert_ptr_null(l);
    ck_assert_msg(took >= UNWRITTEN_TIMEOUT_MS - 50 && took < UNWRITTEN_TIMEOUT_MS + 1000,
                  "the acquire returned after %lld ms, timeout %d ms", (long long)took,
                  UNWRITTEN_TIMEOUT_MS);
    /* The write itself ran out of time, not the wait for an answer to a written request. */
    ck_assert_msg(strstr(msg, "not written") != NULL, "errmsg: %s", msg);
    ck_assert_int_eq(alive, 0);
    ck_assert_int_eq(rlock_ping(c, 1000, NULL), RLOCK_ERR_CLOSED);
    rlock_close(c);

    /* rlockd, resumed, finds the torn oversized frame, drops that connection and carries on. */
    assert_rlockd_serves(&f.e);
    h_fixture_stop(&f);
}
END_TEST

/* --- a call queued behind another thread's stalled write ------------------------- */

#define STALLED_WRITER_TIMEOUT_MS 3000

struct big_writer {
    struct rlock_client *c;
    const char *resource;
    enum rlock_err rc;
};

static void *big_writer_main(void *arg)
{
    struct big_writer *w = arg;
    struct rlock_lock *l = NULL;
    w->rc = rlock_acquire(w->c, w->resource, NULL, STALLED_WRITER_TIMEOUT_MS, &l);
    rlock_lock_free(l);
    return NULL;
}

START_TEST(test_client_faults_behind_stalled_write)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    /* A lock held before the stall: DEADLINE must leave it LOST, and the daemon must free it. */
    struct rlock_lock *held = h_acquire_ok(c, "stalled/held", NULL);
    char key[256];
    h_lock_key(&f.e, "stalled/held", key, sizeof key);
    char *big = malloc(BIG_RESOURCE_BYTES + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'r', BIG_RESOURCE_BYTES);
    big[BIG_RESOURCE_BYTES] = '\0';

    h_rlockd_sigstop(&f.e);
    struct big_writer w = {.c = c, .resource = big};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, big_writer_main, &w), 0);
    h_sleep_ms(200); /* the big request now fills the connection */
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_ping(c, UNWRITTEN_TIMEOUT_MS, NULL);
    int64_t took = h_now_ms() - t0;
    char msg[256];
    rlock_errmsg(c, msg, sizeof msg);
    pthread_join(t, NULL);
    int alive = rlock_client_alive(c);
    enum rlock_lock_state st = rlock_lock_state(held);
    enum rlock_lost_reason why = rlock_lock_lost_reason(held);
    h_rlockd_sigcont(&f.e);
    free(big);

    printf("client_faults: ping behind a stalled write: %s after %lld ms (timeout %d ms): %s; "
           "the big acquire: %s\n",
           rlock_strerror(rc), (long long)took, UNWRITTEN_TIMEOUT_MS, msg,
           rlock_strerror(w.rc));
    /* One meaning of DEADLINE: outcome unknown, the session closed. */
    ck_assert_msg(rc == RLOCK_ERR_DEADLINE, "ping behind a stalled write: %s",
                  rlock_strerror(rc));
    ck_assert_msg(took < UNWRITTEN_TIMEOUT_MS + 1000, "the ping waited %lld ms",
                  (long long)took);
    ck_assert_msg(strstr(msg, "session closed") != NULL, "errmsg: %s", msg);
    /* The other call ended with the session (or ran out of time itself first). */
    ck_assert_msg(w.rc == RLOCK_ERR_CLOSED || w.rc == RLOCK_ERR_DEADLINE, "big acquire: %s",
                  rlock_strerror(w.rc));
    ck_assert_int_eq(alive, 0);
    ck_assert_int_eq(st, RLOCK_LOST);
    ck_assert_int_eq(why, RLOCK_LOST_SESSION);
    ck_assert_int_eq(rlock_ping(c, 1000, NULL), RLOCK_ERR_CLOSED);
    /* Resumed, the daemon sees the connection gone and releases what the session held. */
    ck_assert_msg(h_wait_key_gone(f.r, key, 5000, &f.e) >= 0,
                  "the lock of the closed session is still in Redis");
    rlock_lock_free(held);
    rlock_close(c);
    assert_rlockd_serves(&f.e);
    h_fixture_stop(&f);
}
END_TEST

/* --- DEADLINE: outcome unknown, session closed, locks released ------------------------ */

#define DEADLINE_TIMEOUT_MS 300

/*
 * With locks held (one of them twice), rlockd stops and a call runs out of
 * time: either a ping that was written and never answered, or an acquire too
 * big to be written. Both mean the same: RLOCK_ERR_DEADLINE, the session
 * closed by the library (every handle LOST with reason SESSION, on_lost once
 * per lock, the lost fd readable), and rlockd, resumed, releases the keys.
 */
static void deadline_case(int written)
{
    static const char *const names[2] = {"cf-deadline-a", "cf-deadline-b"};
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    int lfd = rlock_lost_fd(f.c);
    ck_assert_int_ge(lfd, 0);
    struct rlock_lock *h[3];
    h[0] = h_acquire_ok(f.c, names[0], NULL);
    h[1] = h_acquire_ok(f.c, names[0], NULL); /* re-entered: one lock, two handles */
    h[2] = h_acquire_ok(f.c, names[1], NULL);
    ck_assert_uint_eq(rlock_lock_hold_count(h[1]), 2);
    char *big = NULL;
    if (!written) {
        big = malloc(BIG_RESOURCE_BYTES + 1);
        ck_assert_ptr_nonnull(big);
        memset(big, 'r', BIG_RESOURCE_BYTES);
        big[BIG_RESOURCE_BYTES] = '\0';
    }

    h_rlockd_sigstop(&f.e);
    int64_t t0 = h_now_ms();
    enum rlock_err rc;
    struct rlock_lock *l = NULL;
    if (written)
        rc = rlock_ping(f.c, DEADLINE_TIMEOUT_MS, NULL);
    else
        rc = rlock_acquire(f.c, big, NULL, DEADLINE_TIMEOUT_MS, &l);
    int64_t took = h_now_ms() - t0;
    struct rlock_error err = *rlock_last_error();
    /* Everything the client says is read while rlockd is still stopped: no news from it. */
    int alive = rlock_client_alive(f.c);
    enum rlock_lock_state st[3];
    enum rlock_lost_reason why[3];
    for (int i = 0; i < 3; i++) {
        st[i] = rlock_lock_state(h[i]);
        why[i] = rlock_lock_lost_reason(h[i]);
    }
    enum rlock_err after = rlock_ping(f.c, 1000, NULL);
    h_rlockd_sigcont(&f.e);
    free(big);

    printf("client_faults: %s with rlockd stopped: %s after %lld ms (timeout %d ms): %s\n",
           written ? "ping (written, unanswered)" : "acquire (not written)", rlock_strerror(rc),
           (long long)took, DEADLINE_TIMEOUT_MS, err.message);
    ck_assert_msg(rc == RLOCK_ERR_DEADLINE, "%s: %s (%s)", written ? "ping" : "acquire",
                  rlock_strerror(rc), err.message);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(err.code, RLOCK_ERR_DEADLINE);
    ck_assert_msg(strstr(err.message, written ? "request written, no answer" : "not written"),
                  "message: %s", err.message);
    ck_assert_msg(strstr(err.message, "session closed") != NULL, "message: %s", err.message);
    ck_assert_msg(took >= DEADLINE_TIMEOUT_MS - 50 && took < DEADLINE_TIMEOUT_MS + 1000,
                  "the call returned after %lld ms, timeout %d ms", (long long)took,
                  DEADLINE_TIMEOUT_MS);
    ck_assert_int_eq(alive, 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(st[i] == RLOCK_LOST, "handle %d in state %d after DEADLINE", i, (int)st[i]);
        ck_assert_msg(why[i] == RLOCK_LOST_SESSION, "handle %d lost for %s", i,
                      rlock_lost_reason_str(why[i]));
    }
    ck_assert_int_eq(after, RLOCK_ERR_CLOSED);
    /* The library closed the session, the application did not: on_lost once per lock. */
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    ck_assert_msg(poll(&p, 1, 2000) == 1, "the lost fd is not readable after DEADLINE");
    int64_t deadline = h_now_ms() + 2000;
    while (atomic_load(&f.lost.count) < 2 && h_now_ms() < deadline)
        h_sleep_ms(10);
    h_sleep_ms(200); /* a third call would come by now */
    ck_assert_msg(atomic_load(&f.lost.count) == 2, "on_lost called %d times for 2 locks",
                  atomic_load(&f.lost.count));
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_SESSION);

    /* Resumed, rlockd finds the connection shut and releases what the session held. */
    for (int i = 0; i < 2; i++) {
        char key[256];
        h_lock_key(&f.e, names[i], key, sizeof key);
        int64_t gone = h_wait_key_gone(f.r, key, 5000, &f.e);
        ck_assert_msg(gone >= 0, "%s still in Redis 5 s after SIGCONT", key);
        printf("client_faults: %s released %lld ms after SIGCONT\n", names[i], (long long)gone);
    }
    struct rlock_stats stats;
    ck_assert_msg(h_wait_stats(&f.e, 0, 0, 5000, &stats) == 0,
                  "rlockd still counts %" PRIu64 " held locks", stats.held_locks);
    for (int i = 0; i < 3; i++)
        rlock_lock_free(h[i]);
    assert_rlockd_serves(&f.e);
    h_fixture_stop(&f);
}

START_TEST(test_client_faults_deadline_written)
{
    deadline_case(1);
}
END_TEST

START_TEST(test_client_faults_deadline_unwritten)
{
    deadline_case(0);
}
END_TEST

/* --- rlock_close from on_lost -------------------------------------------------- */

#define CLOSER_TTL_MS 1500u /* renewed every ttl/3: the deletion is noticed within ~0.5 s */

struct closer {
    atomic_int calls;
    atomic_int reason;
    atomic_int closed;          /* rlock_close returned inside the callback */
    _Atomic int64_t closed_ms;
};

static void close_in_callback(struct rlock_client *c, const char *resource, const char *token,
                              uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)resource, (void)token, (void)fence;
    struct closer *k = arg;
    atomic_fetch_add(&k->calls, 1);
    atomic_store(&k->reason, (int)reason);
    rlock_close(c);
    atomic_store(&k->closed_ms, h_now_ms());
    atomic_store(&k->closed, 1);
}

static int closer_done(void *arg)
{
    return atomic_load(&((struct closer *)arg)->closed);
}

/* rlockd's count of open sessions (stats of a fresh client, which counts itself), or -1. */
static long long rlockd_sessions(struct h_env *e)
{
    struct rlock_options o = {.connect_timeout_ms = 5000};
    struct rlock_client *c = h_client(e, &o);
    if (c == NULL)
        return -1;
    struct rlock_stats s;
    long long n = rlock_stats(c, 5000, &s) == RLOCK_OK ? (long long)s.sessions : -1;
    rlock_close(c);
    return n;
}

START_TEST(test_client_faults_close_in_on_lost)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct closer k = {0};
    struct rlock_options o = {.on_lost = close_in_callback, .on_lost_arg = &k};
    struct rlock_client *c = h_client_or_fail(&f.e, &o);
    struct rlock_acquire_opts ao = {.ttl_ms = CLOSER_TTL_MS};
    struct rlock_lock *l = h_acquire_ok(c, "cf-closer", &ao);
    long long before = rlockd_sessions(&f.e); /* c and the counting client, at least */
    ck_assert_msg(before >= 2, "rlockd counts %lld sessions with a client open", before);
    char key[256];
    h_lock_key(&f.e, "cf-closer", key, sizeof key);
    h_assert_key_token(f.r, key, rlock_lock_token(l));
    /* From here on c and l belong to the callback, which closes the client. */
    l = NULL;
    int64_t t_del = h_now_ms();
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);

    ck_assert_msg(h_wait_for(closer_done, &k, 5000),
                  "rlock_close inside on_lost did not return within 5 s of the DEL "
                  "(on_lost calls: %d)", atomic_load(&k.calls));
    printf("client_faults: on_lost (%s) closed the client %lld ms after the DEL\n",
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&k.reason)),
           (long long)(atomic_load(&k.closed_ms) - t_del));
    ck_assert_int_eq(atomic_load(&k.reason), RLOCK_LOST_MISSING);

    /* The daemon sees the session end: one session fewer than while c was open. */
    int64_t deadline = h_now_ms() + 5000;
    long long sessions;
    while ((sessions = rlockd_sessions(&f.e)) != before - 1 && h_now_ms() < deadline)
        h_sleep_ms(20);
    printf("client_faults: rlockd counts %lld session(s) (%lld with the client open) %lld ms "
           "after the close\n",
           sessions, before, (long long)(h_now_ms() - atomic_load(&k.closed_ms)));
    ck_assert_msg(sessions == before - 1, "rlockd counts %lld sessions after rlock_close, "
                  "%lld before", sessions, before);
    h_sleep_ms(200); /* let the client's thread finish freeing, for the sanitizers */
    ck_assert_int_eq(atomic_load(&k.calls), 1);
    h_fixture_stop(&f);
}
END_TEST

/* --- ports ----------------------------------------------------------------------- */

START_TEST(test_client_faults_bad_ports)
{
    static const char *const bad[] = {
        "127.0.0.1:0",   "127.0.0.1:65536", "127.0.0.1:99999999999", "127.0.0.1:http",
        "127.0.0.1:-1",  "127.0.0.1:+80",   "127.0.0.1: 80",         "[::1]:0",
        "localhost:80x", "127.0.0.1:000000080",
    };
    for (size_t i = 0; i < H_LEN(bad); i++) {
        struct rlock_options o = {.connect_timeout_ms = 1000};
        struct rlock_client *c = NULL;
        char err[256] = "";
        enum rlock_err rc = rlock_connect(bad[i], &o, &c, err, sizeof err);
        if (rc == RLOCK_OK)
            rlock_close(c);
        ck_assert_msg(rc == RLOCK_ERR_ARG, "%s: %s (%s), want RLOCK_ERR_ARG", bad[i],
                      rlock_strerror(rc), err);
        ck_assert_ptr_null(c);
    }
    /* The edges of the range are ports, whatever listens there. */
    static const char *const edge[] = {"127.0.0.1:1", "127.0.0.1:65535", "127.0.0.1:00080"};
    for (size_t i = 0; i < H_LEN(edge); i++) {
        struct rlock_options o = {.connect_timeout_ms = 300};
        struct rlock_client *c = NULL;
        char err[256] = "";
        enum rlock_err rc = rlock_connect(edge[i], &o, &c, err, sizeof err);
        if (rc == RLOCK_OK)
            rlock_close(c);
        ck_assert_msg(rc != RLOCK_ERR_ARG, "%s refused as malformed: %s", edge[i], err);
    }

    char bin[512];
    h_bin("rlockctl", bin, sizeof bin);
    char *ping[] = {bin, "--server", "127.0.0.1:0", "ping", NULL};
    char *run[] = {bin, "run", "--server", "127.0.0.1:65536", "res", "--", "true", NULL};
    char *const *cmds[] = {ping, run};
    for (size_t i = 0; i < H_LEN(cmds); i++) {
        pid_t pid = h_spawn(cmds[i], NULL);
        ck_assert_int_gt(pid, 0);
        int status;
        ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
        char st[32];
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 64,
                      "rlockctl with a bad port ended with %s, want exit 64",
                      h_status_str(status, st, sizeof st));
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_client_faults_backlog_full, test_client_faults_hello_too_late,
                            test_client_faults_session_closing,
                            test_client_faults_write_deadline,
                            test_client_faults_behind_stalled_write,
                            test_client_faults_deadline_written,
                            test_client_faults_deadline_unwritten,
                            test_client_faults_close_in_on_lost, test_client_faults_bad_ports};
    return h_run_tests("client_faults", 60, tests, H_LEN(tests));
}
