/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_move.c — librlock sessions that outlive their daemon (docs/client.md,
 * "When the daemon goes away"): clients given two daemons that share a resume
 * key move to the other one when theirs is killed, and carry every lock on
 * with its fence; a daemon restarted in place takes its clients back; a
 * client that cannot resume in time reports its locks lost; an asynchronous
 * client moves on its own loop. Real redis-server and rlockd processes, real
 * signals.
 */
#include "harness.h"
#include "harness_move.h"
#include "harness_proxy.h"

#include <event2/event.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlock_event.h"

#define LOCK_TTL_MS 5000u
/* Generous: a move on a busy machine still takes well under this. */
#define MOVE_DEADLINE_MS 20000

/* Two daemons on one Redis sharing a resume key; B started first, then stopped. */
struct pair {
    struct h_keydir k;
    struct h_env a, b;
    char list[700]; /* "A,B" */
};

static void pair_start(struct pair *p, const char *extra)
{
    h_keydir_make(&p->k, extra);
    h_env_start_or_fail(&p->a, p->k.ini);
    ck_assert_msg(h_env_start_peer(&p->b, &p->a, p->k.ini) == 0, "could not start daemon B");
    snprintf(p->list, sizeof p->list, "%s,%s", p->a.rlockd_addr, p->b.rlockd_addr);
}

/* Stop (SIGKILL) the rlockd of e and reap it. */
static void kill9(struct h_env *e, const char *what)
{
    ck_assert_int_eq(kill(e->rlockd_pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(e->rlockd_pid, 10000, &status) == 0, "%s did not die", what);
    e->rlockd_pid = 0;
}

static void pair_stop(struct pair *p)
{
    h_env_stop(&p->b);
    h_env_stop(&p->a);
    h_keydir_remove(&p->k);
}

static struct rlock_client *connect_list(const char *list, struct h_lost *lost,
                                         uint32_t session_timeout_ms)
{
    struct rlock_options o = {.client_name = "mover", .on_lost = h_lost_cb, .on_lost_arg = lost,
                              .session_timeout_ms = session_timeout_ms};
    struct rlock_client *c = NULL;
    char err[512];
    ck_assert_msg(rlock_connect(list, &o, &c, err, sizeof err) == RLOCK_OK, "connect %s: %s",
                  list, err);
    return c;
}

/* --- kill -9 of the daemon the clients are on -------------------------------------------- */

START_TEST(test_kill9_moves)
{
    struct pair p;
    pair_start(&p, NULL);
    redisContext *r = h_redis(&p.a);
    h_move_check(&p.a, &p.b, SIGKILL, 20, 50, h_keys_count_exists, r);
    redisFree(r);
    pair_stop(&p);
}
END_TEST

/* --- SIGTERM: the daemon hands its sessions over, and the other one answers at once -------- */

/*
 * The SessionClosing{resume} that starts this move is read in the middle of
 * the frames of the connection left, and B answers the Resume at the first
 * try: what the client read before must not shift what it reads from B.
 */
START_TEST(test_term_moves)
{
    struct pair p;
    pair_start(&p, NULL);
    redisContext *r = h_redis(&p.a);
    h_move_check(&p.a, &p.b, SIGTERM, 20, 50, h_keys_count_exists, r);
    redisFree(r);
    pair_stop(&p);
}
END_TEST

/* --- an application's counter across the kill ------------------------------------------------ */

/* 800 sections: seconds on a fast machine, so the kill lands while they run. */
#define COUNTER_ROUNDS 100
#define COUNTER_KILL_AT 40

/* The counter's value now (0 while a section rewrites it). */
static int counter_now(struct h_env *e)
{
    char path[320];
    h_env_path(e, "counter", path, sizeof path);
    char *text = h_read_file(path);
    int v = text != NULL ? atoi(text) : 0;
    free(text);
    return v;
}

struct counter_job {
    struct h_env *e;
    const char *addrs[1];
};

static void *counter_main(void *arg)
{
    struct counter_job *j = arg;
    h_counter_run(j->e, j->addrs, 1, 8, COUNTER_ROUNDS, 240000);
    return NULL;
}

/*
 * Eight processes increment a counter file under `rlockctl run --wait`, each
 * given both daemons; the daemon half of them are on is killed meanwhile.
 * The count stays exact and the fences the sections saw strictly increase:
 * whatever was holding, waiting, connecting or releasing on A when it died
 * carried on through B.
 */
START_TEST(test_counter_across_kill)
{
    struct pair p;
    pair_start(&p, NULL);
    struct counter_job j = {.e = &p.b, .addrs = {p.list}};
    struct h_thread t;
    h_thread_start(&t, counter_main, &j);
    /* Kill A once the sections are under way (a fixed delay missed them on a fast
     * machine: all done before the kill), and while they still run. */
    int64_t until = h_now_ms() + 60000;
    while (counter_now(&p.b) < COUNTER_KILL_AT && !h_thread_done(&t) && h_now_ms() < until)
        h_sleep_ms(5);
    ck_assert_msg(!h_thread_done(&t), "the counter's workers were done before A was killed");
    ck_assert_msg(counter_now(&p.b) < 8 * COUNTER_ROUNDS, "no section left to run across the kill");
    printf("counter_across_kill: A killed at counter %d of %d\n", counter_now(&p.b),
           8 * COUNTER_ROUNDS);
    kill9(&p.a, "A");
    h_thread_join(&t, h_now_ms() + 160000, "the counter's workers did not finish");
    pair_stop(&p);
}
END_TEST

/* --- a call in flight when the connection goes ----------------------------------------------- */

struct blocked {
    struct rlock_client *c;
    enum rlock_err rc;
    char msg[256];
    int64_t took_ms;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    b->rc = rlock_acquire(b->c, "move/busy",
                          &(struct rlock_acquire_opts){.ttl_ms = LOCK_TTL_MS, .wait_ms = 60000},
                          0, &l);
    b->took_ms = h_now_ms() - t0;
    snprintf(b->msg, sizeof b->msg, "%s", rlock_last_error()->message);
    if (l != NULL)
        rlock_lock_free(l);
    return NULL;
}

/*
 * An acquire waiting when the daemon dies is answered UNAVAILABLE at once,
 * whatever its wait; new calls while the session moves are refused the same
 * way; once it has resumed, calls work again and the acquire left nothing.
 */
START_TEST(test_inflight_acquire)
{
    struct pair p;
    pair_start(&p, NULL);
    kill9(&p.b, "B");
    struct h_lost lost = {0};
    struct rlock_client *holder = h_client_or_fail(&p.a, NULL);
    struct rlock_lock *busy = h_acquire_ok(holder, "move/busy",
                                           &(struct rlock_acquire_opts){.ttl_ms = 30000});
    struct rlock_client *c = connect_list(p.list, &lost, 0);
    struct blocked b = {.c = c};
    struct h_thread t;
    h_thread_start(&t, blocked_main, &b);
    h_sleep_ms(300); /* the acquire is queued behind the holder */
    ck_assert_int_eq(h_thread_done(&t), 0);
    ck_assert_int_eq(h_rlockd_start(&p.b), 0);
    kill9(&p.a, "A");
    h_thread_join(&t, h_now_ms() + 10000, "the waiting acquire was not answered");
    ck_assert_msg(b.rc == RLOCK_ERR_UNAVAILABLE, "acquire: %s: %s", rlock_strerror(b.rc), b.msg);
    ck_assert_msg(b.took_ms < 30000, "answered after %lld ms", (long long)b.took_ms);
    int64_t t0 = h_now_ms();
    while (rlock_session_resumes(c) == 0 && h_now_ms() - t0 < MOVE_DEADLINE_MS)
        h_sleep_ms(5);
    ck_assert_int_eq(rlock_session_resumes(c), 1);
    /* The resource is the holder's still (its daemon died too: its key lives on). */
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(c, "move/free", &(struct rlock_acquire_opts){.ttl_ms = 3000},
                                      0, &l);
    ck_assert_msg(rc == RLOCK_OK, "acquire after the resume: %s", rlock_last_error()->message);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    rlock_lock_free(busy);
    rlock_close(holder);
    rlock_close(c);
    pair_stop(&p);
}
END_TEST

/* --- rlock_acquire_all across a move --------------------------------------------------------------- */

struct all_call {
    struct rlock_client *c;
    enum rlock_err rc;
    char msg[256];
};

static void *all_main(void *arg)
{
    struct all_call *a = arg;
    const char *names[] = { "mall/A", "mall/B" };
    struct rlock_lock *out[2];
    a->rc = rlock_acquire_all(a->c, names, 2, &(struct rlock_acquire_opts){.wait_ms = 30000},
                              0, out);
    snprintf(a->msg, sizeof a->msg, "%s", rlock_last_error()->message);
    return NULL;
}

/*
 * rlock_acquire_all holds mall/A and waits for mall/B when its daemon dies: the wait is
 * answered UNAVAILABLE, and the release of mall/A is refused while the session moves. The
 * call gives mall/A back once the session has resumed on B, before it returns: B holds
 * nothing for the client, and mall/A's key is gone (not adopted and renewed for ever).
 */
START_TEST(test_acquire_all_rollback)
{
    struct pair p;
    pair_start(&p, NULL);
    kill9(&p.b, "B");
    struct h_lost lost = {0};
    struct rlock_client *holder = h_client_or_fail(&p.a, NULL);
    struct rlock_lock *busy = h_acquire_ok(holder, "mall/B",
                                           &(struct rlock_acquire_opts){.ttl_ms = 30000});
    struct rlock_client *c = connect_list(p.list, &lost, 0);
    struct all_call a = {.c = c};
    struct h_thread t;
    h_thread_start(&t, all_main, &a);
    ck_assert_msg(h_wait_stats(&p.a, 2, 1, 10000, NULL) == 0, "mall/A not held, mall/B not awaited");
    ck_assert_int_eq(h_rlockd_start(&p.b), 0);
    kill9(&p.a, "A");
    h_thread_join(&t, h_now_ms() + 30000, "rlock_acquire_all did not return");
    ck_assert_msg(a.rc == RLOCK_ERR_UNAVAILABLE, "rlock_acquire_all: %s: %s",
                  rlock_strerror(a.rc), a.msg);
    ck_assert_int_eq(rlock_session_resumes(c), 1);
    struct rlock_stats st;
    h_stats_or_fail(&p.b, &st);
    ck_assert_msg(st.held_locks == 0, "B holds %llu locks for the client after the call failed",
                  (unsigned long long)st.held_locks);
    redisContext *r = h_redis(&p.b);
    char key[200];
    h_lock_key(&p.b, "mall/A", key, sizeof key);
    ck_assert_int_eq(h_redis_int(r, "EXISTS %s", key), 0);
    redisFree(r);
    rlock_lock_free(busy);
    rlock_close(holder);
    rlock_close(c);
    pair_stop(&p);
}
END_TEST

/* --- a grant whose answer never came -------------------------------------------------------------- */

struct granted_call {
    struct rlock_client *c;
    enum rlock_err rc;
};

static void *grant_main(void *arg)
{
    struct granted_call *g = arg;
    struct rlock_lock *l = NULL;
    g->rc = rlock_acquire(g->c, "move/unanswered",
                          &(struct rlock_acquire_opts){.ttl_ms = 30000}, 0, &l);
    if (l != NULL)
        rlock_lock_free(l);
    return NULL;
}

/*
 * A's grant is in Redis but its answer is held on the way (a proxy between
 * the client and A); then A is stopped and the connection dropped, so A
 * neither answers nor releases anything. The acquire returns UNAVAILABLE,
 * the session moves to B, and the resume releases what that acquire took, by
 * its request id: the key is gone though A still believes in the grant (its
 * ttl is 30 s).
 */
START_TEST(test_unanswered_grant)
{
    struct pair p;
    pair_start(&p, NULL);
    kill9(&p.b, "B");
    char psock[320], list[800];
    h_env_path(&p.a, "client-proxy.sock", psock, sizeof psock);
    struct h_proxy *px = h_proxy_start(psock, p.a.rlockd_sock);
    ck_assert_ptr_nonnull(px);
    snprintf(list, sizeof list, "unix:%s,%s", psock, p.b.rlockd_addr);
    struct h_lost lost = {0};
    struct rlock_client *c = connect_list(list, &lost, 0);
    ck_assert_int_eq(h_rlockd_start(&p.b), 0);
    char key[256];
    h_lock_key(&p.a, "move/unanswered", key, sizeof key);
    redisContext *r = h_redis(&p.a);

    h_proxy_hold(px, H_PROXY_ALL, H_PROXY_DOWN);
    struct granted_call g = {.c = c};
    struct h_thread t;
    h_thread_start(&t, grant_main, &g);
    for (int64_t t0 = h_now_ms(); h_key_exists(r, key) != 1; h_sleep_ms(5))
        ck_assert_msg(h_now_ms() - t0 < 10000, "A never granted the acquire");
    /* A stopped: it neither answers nor sees the connection end (it would release). */
    h_sigstop(p.a.rlockd_pid, "daemon A");
    h_proxy_drop(px, H_PROXY_ALL);
    h_thread_join(&t, h_now_ms() + 10000, "the acquire was not answered");
    ck_assert_msg(g.rc == RLOCK_ERR_UNAVAILABLE, "acquire: %s", rlock_strerror(g.rc));
    int64_t t0 = h_now_ms();
    while (rlock_session_resumes(c) == 0 && h_now_ms() - t0 < MOVE_DEADLINE_MS)
        h_sleep_ms(5);
    ck_assert_int_eq(rlock_session_resumes(c), 1);
    int64_t gone = h_wait_key_gone(r, key, 5000, &p.b);
    ck_assert_msg(gone >= 0, "the unanswered grant's key is still there after the resume");
    h_sigcont(p.a.rlockd_pid, "daemon A");
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    redisFree(r);
    rlock_close(c);
    h_proxy_free(px);
    pair_stop(&p);
}
END_TEST

/* --- restart in place ------------------------------------------------------------------------- */

/*
 * One daemon, SIGTERM (handover, the default with a resume key), restarted on
 * the same address: `rlockctl run` keeps its job running, never signalled,
 * and exits 0; a waiter on another daemon is not granted the resource before
 * the job has ended.
 */
START_TEST(test_restart_in_place)
{
    struct pair p;
    pair_start(&p, NULL);
    char bin[512], marks[320], job[900];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&p.a, "marks", marks, sizeof marks);
    /* The job notes a signal, and the time it ends. */
    snprintf(job, sizeof job,
             "trap 'echo signalled >> %s; exit 3' TERM INT HUP; sleep 6; "
             "echo \"end $(date +%%s%%3N)\" >> %s",
             marks, marks);
    char *argv[] = {bin, "run", "--server", p.a.rlockd_addr, "--ttl", "10s", "inplace",
                    "--", "/bin/sh", "-c", job, NULL};
    char out[320], errf[320];
    h_env_path(&p.a, "run.out", out, sizeof out);
    h_env_path(&p.a, "run.err", errf, sizeof errf);
    pid_t run = h_spawn_io(argv, out, errf);
    ck_assert_int_gt(run, 0);
    char key[256];
    h_lock_key(&p.a, "inplace", key, sizeof key);
    redisContext *r = h_redis(&p.a);
    for (int64_t t0 = h_now_ms(); h_key_exists(r, key) != 1; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < 10000, "rlockctl run never took the lock");
    /* A waiter on B. */
    struct h_waiter w;
    h_waiter_start(&w, &p.b, "inplace", 3000, 60000);
    h_sleep_ms(300);

    pid_t old = p.a.rlockd_pid;
    ck_assert_int_eq(kill(old, SIGTERM), 0);
    int status;
    ck_assert_msg(h_wait_exit(old, 10000, &status) == 0, "A did not exit once its client left");
    p.a.rlockd_pid = 0;
    ck_assert_msg(h_key_exists(r, key) == 1, "the key went with the daemon");
    /* Down for a while (the client keeps trying, its lock uncertain but valid). */
    h_sleep_ms(1500);
    ck_assert_int_eq(h_rlockd_start(&p.a), 0);

    ck_assert_msg(h_wait_exit(run, 30000, &status) == 0, "rlockctl run did not end");
    char *text = h_read_file(marks);
    ck_assert_ptr_nonnull(text);
    h_print_tail(errf, 20);
    ck_assert_msg(strstr(text, "signalled") == NULL, "the job was signalled: %s", text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl run: %s",
                  h_status_str(status, (char[64]){0}, 64));
    long long end_ms = 0;
    ck_assert_msg(sscanf(strstr(text, "end ") ? strstr(text, "end ") : "", "end %lld", &end_ms) == 1,
                  "the job never ended: %s", text);
    free(text);
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    ck_assert_msg(w.granted_wall_ms >= end_ms, "the waiter on B got it %lld ms before the job ended",
                  end_ms - (long long)w.granted_wall_ms);
    h_waiter_close(&w);
    redisFree(r);
    pair_stop(&p);
}
END_TEST

/* --- the daemon left behind wakes up ----------------------------------------------------------- */

/* The value of key now (the key must exist). */
static void key_value(redisContext *r, const char *key, char *buf, size_t len)
{
    ck_assert_msg(h_get(r, key, buf, len) > 0, "key %s is gone", key);
}

/* key must hold value for ms (polled every 10 ms). */
static void key_stays(redisContext *r, const char *key, const char *value, int ms, const char *what)
{
    char got[128];
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(10)) {
        int n = h_get(r, key, got, sizeof got);
        ck_assert_msg(n > 0 && strcmp(got, value) == 0, "%s: key %s holds \"%s\", want \"%s\"",
                      what, key, n > 0 ? got : "(none)", value);
    }
}

/*
 * The client's daemon A is stopped: after two thirds of the session timeout
 * without an answer the client moves to B, which adopts the lock. A is then
 * continued and runs its session timeout, its renewals and a SIGTERM:
 * nothing it does touches the key, and a waiter on a third daemon is not
 * granted the resource while the client holds it.
 */
START_TEST(test_zombie)
{
    struct pair p;
    pair_start(&p, NULL);
    struct h_env c3;
    ck_assert_msg(h_env_start_peer(&c3, &p.a, p.k.ini) == 0, "could not start daemon C");
    kill9(&p.b, "B");
    struct h_lost lost = {0};
    struct rlock_client *c = connect_list(p.list, &lost, 3000);
    struct rlock_lock *l = h_acquire_ok(c, "zombie", &(struct rlock_acquire_opts){.ttl_ms = 6000});
    uint64_t fence = rlock_lock_fence(l);
    ck_assert_int_eq(h_rlockd_start(&p.b), 0);
    char key[256], adopted[128];
    h_lock_key(&p.a, "zombie", key, sizeof key);
    redisContext *r = h_redis(&p.b);

    h_sigstop(p.a.rlockd_pid, "daemon A");
    int64_t t0 = h_now_ms();
    while (rlock_session_resumes(c) == 0 && h_now_ms() - t0 < MOVE_DEADLINE_MS)
        h_sleep_ms(5);
    ck_assert_msg(rlock_session_resumes(c) == 1, "the client did not move off the stopped A");
    printf("move: left the stopped daemon after %lld ms\n", (long long)(h_now_ms() - t0));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    key_value(r, key, adopted, sizeof adopted);
    ck_assert_str_ne(adopted, rlock_lock_token(l)); /* B rotated it */
    struct h_waiter w;
    h_waiter_start(&w, &c3, "zombie", 3000, 60000);
    /* Past A's session timeout and a third of the ttl: its timers are all due. */
    h_sleep_ms(3500);
    h_sigcont(p.a.rlockd_pid, "daemon A");
    key_stays(r, key, adopted, 3000, "after A woke");
    ck_assert_int_eq(h_rlockd_signal(&p.a, SIGTERM), 0);
    key_stays(r, key, adopted, 1500, "after A's SIGTERM");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    ck_assert_int_eq(h_thread_done(&w.t), 0);
    /* Released through B: the waiter on C gets it, with a greater fence. */
    h_assert_ok(c, rlock_release(l, 0));
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    ck_assert_uint_gt(rlock_lock_fence(w.l), fence);
    h_waiter_close(&w);
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_env_stop(&c3);
    pair_stop(&p);
}
END_TEST

/* --- too late --------------------------------------------------------------------------------- */

/*
 * The client's only daemon is killed and comes back after the lock's
 * validity: the lock is reported LOST (EXPIRED) when its validity ends, the
 * session resumes with nothing to adopt, and what another client took
 * meanwhile stays theirs.
 */
START_TEST(test_too_late)
{
    struct pair p;
    pair_start(&p, NULL);
    struct h_lost lost = {0};
    struct rlock_client *c = connect_list(p.a.rlockd_addr, &lost, 20000);
    struct rlock_lock *l = h_acquire_ok(c, "late", &(struct rlock_acquire_opts){.ttl_ms = 1000});
    kill9(&p.a, "A");
    /* Moving, not yet lost: uncertain. */
    h_sleep_ms(50);
    ck_assert_int_eq(rlock_client_alive(c), 1);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_UNCERTAIN);
    /* Its validity ends: lost, EXPIRED. */
    for (int64_t t0 = h_now_ms(); atomic_load(&lost.count) == 0; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < 10000, "the lock was never reported lost");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_EXPIRED);
    /* Someone else takes it through B once the key is gone. */
    struct rlock_client *o = h_client_or_fail(&p.b, NULL);
    struct rlock_lock *ol = NULL;
    ck_assert_int_eq(rlock_acquire(o, "late",
                                   &(struct rlock_acquire_opts){.ttl_ms = 30000, .wait_ms = 10000},
                                   0, &ol),
                     RLOCK_OK);
    ck_assert_int_eq(h_rlockd_start(&p.a), 0);
    for (int64_t t0 = h_now_ms(); rlock_session_resumes(c) == 0; h_sleep_ms(10))
        ck_assert_msg(h_now_ms() - t0 < MOVE_DEADLINE_MS, "never resumed on the restarted A");
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_LOST);
    ck_assert_int_eq(atomic_load(&lost.count), 1);
    char key[256];
    h_lock_key(&p.a, "late", key, sizeof key);
    redisContext *r = h_redis(&p.a);
    h_assert_key_token(r, key, rlock_lock_token(ol));
    redisFree(r);
    rlock_lock_free(l);
    rlock_lock_free(ol);
    rlock_close(o);
    rlock_close(c);
    pair_stop(&p);
}
END_TEST

/* --- asynchronous ------------------------------------------------------------------------------- */

struct async_run {
    struct rlock_client *c;
    struct rlock_libevent *bridge;
    struct event_base *base;
    struct rlock_lock *l;
    int granted, closed;
    struct h_lost lost;
};

static void async_granted(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct async_run *a = arg;
    ck_assert_msg(r->err == RLOCK_OK, "async acquire: %s", r->error ? r->error->message : "");
    a->l = r->lock;
    a->granted = 1;
}

static void async_closed(struct rlock_client *c, void *arg)
{
    (void)c;
    ((struct async_run *)arg)->closed = 1;
}

/* Run the loop until *flag or ms pass. */
static void loop_until(struct async_run *a, const int *flag, int ms)
{
    for (int64_t end = h_now_ms() + ms; !*flag && h_now_ms() < end;) {
        struct timeval tv = {0, 10000};
        event_base_loopexit(a->base, &tv);
        event_base_dispatch(a->base);
    }
}

/* An asynchronous client on a libevent loop moves to B; nothing is lost. */
START_TEST(test_async_moves)
{
    struct pair p;
    pair_start(&p, NULL);
    kill9(&p.b, "B");
    struct async_run a = {0};
    a.base = event_base_new();
    ck_assert_ptr_nonnull(a.base);
    struct rlock_options o = {.on_lost = h_lost_cb, .on_lost_arg = &a.lost};
    char err[512];
    ck_assert_msg(rlock_async_connect(p.list, &o, NULL, NULL, &a.c, err, sizeof err) == RLOCK_OK,
                  "%s", err);
    a.bridge = rlock_libevent_attach(a.base, a.c, async_closed, &a);
    ck_assert_ptr_nonnull(a.bridge);
    ck_assert_int_eq(rlock_async_acquire(a.c, "async/r",
                                         &(struct rlock_acquire_opts){.ttl_ms = LOCK_TTL_MS},
                                         async_granted, &a, NULL),
                     RLOCK_OK);
    loop_until(&a, &a.granted, 10000);
    ck_assert_int_eq(a.granted, 1);
    uint64_t fence = rlock_lock_fence(a.l);
    ck_assert_int_eq(h_rlockd_start(&p.b), 0);
    kill9(&p.a, "A");
    int resumed = 0;
    for (int64_t t0 = h_now_ms(); !resumed && h_now_ms() - t0 < MOVE_DEADLINE_MS;) {
        loop_until(&a, &a.closed, 20);
        resumed = rlock_session_resumes(a.c) == 1;
    }
    ck_assert_msg(resumed, "the async client did not resume (closed %d)", a.closed);
    ck_assert_int_eq(a.closed, 0);
    ck_assert_int_eq(rlock_lock_state(a.l), RLOCK_HELD);
    ck_assert_uint_eq(rlock_lock_fence(a.l), fence);
    /* Kept alive by its loop on B past the ttl. */
    int never = 0;
    loop_until(&a, &never, (int)LOCK_TTL_MS + 500);
    ck_assert_int_eq(rlock_lock_state(a.l), RLOCK_HELD);
    ck_assert_int_eq(atomic_load(&a.lost.count), 0);
    char key[256];
    h_lock_key(&p.b, "async/r", key, sizeof key);
    redisContext *r = h_redis(&p.b);
    ck_assert_int_eq(h_key_exists(r, key), 1);
    redisFree(r);
    rlock_lock_free(a.l);
    rlock_libevent_detach(a.bridge);
    rlock_close(a.c);
    event_base_free(a.base);
    pair_stop(&p);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_kill9_moves,      test_term_moves,          test_counter_across_kill,
                            test_inflight_acquire, test_acquire_all_rollback,
                            test_unanswered_grant, test_restart_in_place,    test_zombie,
                            test_too_late,         test_async_moves};
    return h_run_tests("move", 120, tests, H_LEN(tests));
}
