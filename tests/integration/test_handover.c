/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_handover.c — sessions that outlive their daemon, seen from the wire
 * (raw protocol, real rlockd and redis-server processes, real signals):
 *  - Hello gives a secret and grants a seal only with a resume key;
 *  - after kill -9 of daemon A the session resumes on B (same Redis, same
 *    key file) and adopts its lock: same fence, a new token in Redis, kept
 *    alive by B past its ttl;
 *  - a zombie A (SIGSTOP while the client moved, then SIGCONT, its session
 *    timeout, its renewals and a SIGTERM) changes nothing on the adopted key,
 *    and a third daemon's waiter is not granted while B's holder holds;
 *  - a resume too late: a key gone is LockLost MISSING, a key another client
 *    took is LockLost STOLEN and stays theirs;
 *  - forged or wrong resumes and adopts are refused, the real session
 *    untouched (until a reload removes its token: then it is ended, and a
 *    resume with that token refused); an adopt whose answer never came (a proxy in front of B)
 *    leaves no token of B's in Redis, and one answered after its session
 *    ended (uncleanly) leaves a tombstone for the lock's lock_delay;
 *  - SIGTERM with shutdown = handover: SessionClosing{resume}, the daemon
 *    exits once its client left, the key stays, and the session resumes on
 *    the daemon restarted in place; with shutdown = release the lock is
 *    released, as before.
 */
#include "harness.h"
#include "harness_peer.h"
#include "harness_proxy.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TTL_MS 3000
/* Generous: a daemon under load still answers well within this. */
#define PROMPT_MS 5000

/* What a session needs to resume: its id and secret. */
struct sess {
    char id[64];
    char secret[64];
};

/* Hello on a fresh connection of p to e; the reply's id and secret into *s. */
static void open_session(struct h_peer *p, const struct h_env *e, const char *name,
                         uint32_t timeout_ms, struct sess *s)
{
    p->name = name;
    p->last_id = 1;
    h_raw_open(&p->raw, e);
    h_raw_send_hello(&p->raw, 1, name, timeout_ms);
    Rlock__V1__ServerMessage *m = h_peer_response(p, 1, "Hello");
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_HELLO,
                  "%s: Hello: %s", name, h_msg_describe(m));
    snprintf(s->id, sizeof s->id, "%s", r->hello->session_id);
    snprintf(s->secret, sizeof s->secret, "%s", r->hello->session_secret);
    ck_assert_int_eq(r->hello->resumed, 0);
    h_raw_free(m);
}

/* Send Resume as the first request of a fresh connection of p to e (id 1). */
static void send_resume_timeout(struct h_peer *p, const struct h_env *e, const char *name,
                                const char *id, const char *secret, const char *auth_token,
                                uint32_t timeout_ms)
{
    p->name = name;
    p->last_id = 1;
    h_raw_open(&p->raw, e);
    Rlock__V1__Resume rs = RLOCK__V1__RESUME__INIT;
    rs.session_id = (char *)id;
    rs.session_secret = (char *)secret;
    rs.client_name = (char *)name;
    rs.auth_token = (char *)(auth_token != NULL ? auth_token : "");
    rs.session_timeout_ms = timeout_ms;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_RESUME;
    req.resume = &rs;
    ck_assert_int_eq(h_raw_send(&p->raw, &req), 0);
}

static void send_resume(struct h_peer *p, const struct h_env *e, const char *name,
                        const char *id, const char *secret, const char *auth_token)
{
    send_resume_timeout(p, e, name, id, secret, auth_token, 0);
}

/* Resume s on e (asking for timeout_ms, 0 = default) and expect the HelloReply (resumed,
 * same id and secret). */
static void resume_ok_timeout(struct h_peer *p, const struct h_env *e, const char *name,
                              const struct sess *s, uint32_t timeout_ms)
{
    send_resume_timeout(p, e, name, s->id, s->secret, NULL, timeout_ms);
    Rlock__V1__ServerMessage *m = h_peer_response(p, 1, "Resume");
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_HELLO,
                  "%s: Resume: %s", name, h_msg_describe(m));
    ck_assert_str_eq(r->hello->session_id, s->id);
    ck_assert_str_eq(r->hello->session_secret, s->secret);
    ck_assert_int_eq(r->hello->resumed, 1);
    h_raw_free(m);
}

static void resume_ok(struct h_peer *p, const struct h_env *e, const char *name,
                      const struct sess *s)
{
    resume_ok_timeout(p, e, name, s, 0);
}

/* Send Adopt for resource with the terms of grant g (as granted: the caller may alter them). */
static uint64_t send_adopt(struct h_peer *p, const char *resource, const struct h_grant *g)
{
    Rlock__V1__Adopt a = RLOCK__V1__ADOPT__INIT;
    a.resource = (char *)resource;
    a.token = (char *)g->token;
    a.fence = g->fence;
    a.ttl_ms = g->ttl_ms;
    a.watchdog_off = !g->watchdog;
    a.hold_count = g->hold_count;
    a.max_hold_until_ms = g->max_hold_until_ms;
    a.lock_delay_ms = g->lock_delay_ms;
    a.seal = (char *)g->seal;
    return h_peer_send(p, RLOCK__V1__REQUEST__BODY_ADOPT, &a);
}

/* Adopt and expect an OK AdoptReply; g takes the new token and seal. */
static void adopt_ok(struct h_peer *p, const char *resource, struct h_grant *g)
{
    uint64_t id = send_adopt(p, resource, g);
    Rlock__V1__ServerMessage *m = h_peer_response(p, id, "Adopt");
    const Rlock__V1__Response *r = m->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_ADOPT,
                  "%s: Adopt %s: %s", p->name, resource, h_msg_describe(m));
    ck_assert_str_ne(r->adopt->token, g->token);
    ck_assert_uint_eq(strlen(r->adopt->seal), 32);
    ck_assert_uint_eq(r->adopt->ttl_ms, g->ttl_ms);
    ck_assert_msg(r->adopt->valid_ms > 0 && r->adopt->valid_ms <= g->ttl_ms,
                  "valid_ms %u for a ttl of %u", r->adopt->valid_ms, g->ttl_ms);
    snprintf(g->token, sizeof g->token, "%s", r->adopt->token);
    snprintf(g->seal, sizeof g->seal, "%s", r->adopt->seal);
    h_raw_free(m);
}

/* The key of resource must hold token. */
static void expect_key(struct h_env *e, const char *resource, const char *token, const char *what)
{
    char key[256], got[128];
    redisContext *r = h_redis(e);
    h_lock_key(e, resource, key, sizeof key);
    int n = h_get(r, key, got, sizeof got);
    ck_assert_msg(n > 0 && strcmp(got, token) == 0, "%s: key %s holds \"%s\", want \"%s\"",
                  what, key, n > 0 ? got : "(none)", token);
    redisFree(r);
}

/* Watch the key of resource for ms: it must hold token all along (polled every 10 ms). */
static void key_kept(struct h_env *e, const char *resource, const char *token, int ms,
                     const char *what)
{
    char key[256], got[128];
    redisContext *r = h_redis(e);
    h_lock_key(e, resource, key, sizeof key);
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end; h_sleep_ms(10)) {
        int n = h_get(r, key, got, sizeof got);
        if (n <= 0 || strcmp(got, token) != 0)
            h_env_dump_logs(e);
        ck_assert_msg(n > 0 && strcmp(got, token) == 0, "%s: key %s holds \"%s\", want \"%s\"",
                      what, key, n > 0 ? got : "(none)", token);
    }
    redisFree(r);
}

static void start_pair(struct h_env *a, struct h_env *b, const struct h_keydir *k)
{
    h_env_start_or_fail(a, k->ini);
    ck_assert_msg(h_env_start_peer(b, a, k->ini) == 0, "could not start daemon B");
}

/* Without a resume key there is no secret and no seal, and Resume is refused. */
START_TEST(test_no_key)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    struct h_peer p;
    struct sess s;
    open_session(&p, &e, "nokey", 0, &s);
    ck_assert_str_eq(s.secret, "");
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "nokey/r", .ttl_ms = TTL_MS}, &g, "grant");
    ck_assert_str_eq(g.seal, "");
    struct h_peer q;
    send_resume(&q, &e, "nokey2", s.id, "00000000000000000000000000000000", NULL);
    h_peer_expect_error(&q, 1, H_ST(INVALID), "no resume key", "Resume without a key");
    h_peer_expect_eof(&q, "Resume without a key");
    h_raw_close(&q.raw);
    h_raw_close(&p.raw);
    h_env_stop(&e);
}
END_TEST

/* kill -9 of A: the session resumes on B and adopts its locks, fences unchanged. */
START_TEST(test_kill9_resume)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct stat st;
    char keyfile[256];
    snprintf(keyfile, sizeof keyfile, "%s/resume.key", k.dir);
    ck_assert_int_eq(stat(keyfile, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);

    struct h_peer p;
    struct sess s;
    open_session(&p, &a, "mover", 0, &s);
    ck_assert_uint_eq(strlen(s.secret), 32);
    struct h_grant g1, g2;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "k9/a", .ttl_ms = TTL_MS}, &g1, "a");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "k9/b", .ttl_ms = TTL_MS, .owner = 7},
                      &g2, "b");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "k9/b", .ttl_ms = TTL_MS, .owner = 7},
                      &g2, "b again (re-entry)");
    ck_assert_uint_eq(g2.hold_count, 2);
    ck_assert_uint_eq(strlen(g1.seal), 32);
    uint64_t fence1 = g1.fence, fence2 = g2.fence;
    char old1[64];
    snprintf(old1, sizeof old1, "%s", g1.token);

    h_rlockd_signal(&a, SIGKILL);
    h_raw_close(&p.raw);
    struct h_peer q;
    resume_ok(&q, &b, "mover", &s);
    adopt_ok(&q, "k9/a", &g1);
    adopt_ok(&q, "k9/b", &g2);
    ck_assert_str_ne(g1.token, old1);
    expect_key(&a, "k9/a", g1.token, "after the adopt");
    /* B renews them: they outlive their ttl, with their new tokens. */
    key_kept(&a, "k9/a", g1.token, TTL_MS + 1000, "B renews k9/a");
    expect_key(&a, "k9/b", g2.token, "B renews k9/b");
    /* Fences carried over; the locks are B's session's now, with their hold counts. */
    ck_assert_uint_eq(g1.fence, fence1);
    ck_assert_uint_eq(g2.fence, fence2);
    h_peer_release_ok(&q, "k9/b", g2.token, 1, "release one hold of two");
    h_peer_release_ok(&q, "k9/b", "", 0, "release the last hold");
    h_peer_release_ok(&q, "k9/a", "", 0, "release a");
    redisContext *r = h_redis(&a);
    char key[256];
    ck_assert_int_eq(h_key_exists(r, h_lock_key(&a, "k9/a", key, sizeof key)), 0);
    redisFree(r);
    h_raw_close(&q.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * A paused while its client moved to B, then continued: its session timeout,
 * renewals and SIGTERM change nothing on the key B adopted, and a waiter on a
 * third daemon is not granted while B's holder holds it.
 */
START_TEST(test_zombie)
{
    struct h_keydir k;
    h_keydir_make(&k, "timeout = 1s\n[server]\nshutdown = release\n");
    struct h_env a, b, c;
    start_pair(&a, &b, &k);
    ck_assert_msg(h_env_start_peer(&c, &a, k.ini) == 0, "could not start daemon C");
    struct h_peer p, q, w;
    struct sess s;
    open_session(&p, &a, "zombie-client", 1000, &s);
    struct h_grant g;
    /* A ttl long enough for B to renew it on a busy machine, short enough that A's
     * renewal is due when it wakes. */
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "zombie/r", .ttl_ms = 3000}, &g, "grant");

    h_sigstop(a.rlockd_pid, "daemon A");
    /* On B it asks for a longer timeout: this test does not ping while it waits. */
    resume_ok_timeout(&q, &b, "zombie-client", &s, 60000);
    adopt_ok(&q, "zombie/r", &g);
    /* A waiter on C, spinning on the resource. */
    open_session(&w, &c, "waiter", 60000, &(struct sess){{0}, {0}});
    uint64_t wid = h_peer_acquire(&w, &(struct h_acq){.resource = "zombie/r", .ttl_ms = 1000,
                                                      .wait_ms = 60000});
    /* Keep the connection to A open: A sees no end, only its own timeout once it runs. */
    h_sleep_ms(1500); /* past A's session timeout and a third of the ttl (its renew) */
    h_sigcont(a.rlockd_pid, "daemon A");
    /* A now times the session out (release by its old token), renews (stolen) ... */
    ck_assert_msg(h_log_wait(&a, "closed: session timed out", PROMPT_MS, NULL) == 0,
                  "A never ended the session");
    key_kept(&a, "zombie/r", g.token, 1500, "after A woke");
    /* ... and shuts down, releasing what it believes it holds. */
    h_rlockd_signal(&a, SIGTERM);
    key_kept(&a, "zombie/r", g.token, 1500, "after A's SIGTERM");
    h_peer_expect_quiet(&w, 100, "C's waiter while B's holder holds");
    /* B's holder releases: now C's waiter gets it. */
    h_peer_release_ok(&q, "zombie/r", g.token, 0, "release on B");
    struct h_grant gw;
    h_peer_expect_grant(&w, wid, &gw, "C's waiter after the release");
    ck_assert_uint_gt(gw.fence, g.fence);
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_raw_close(&w.raw);
    h_env_stop(&c);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* A resume too late: a key gone is MISSING, a key someone else took is STOLEN (and stays). */
START_TEST(test_too_late)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q, o;
    struct sess s;
    open_session(&p, &a, "late", 0, &s);
    struct h_grant gone, taken;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "late/gone", .ttl_ms = 1000}, &gone, "g");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "late/taken", .ttl_ms = 1000}, &taken,
                      "t");
    h_rlockd_signal(&a, SIGKILL);
    h_raw_close(&p.raw);
    /* Another client takes late/taken on B once the key has expired. */
    open_session(&o, &b, "other", 0, &(struct sess){{0}, {0}});
    struct h_grant og;
    h_peer_acquire_ok(&o, &(struct h_acq){.resource = "late/taken", .ttl_ms = 30000,
                                          .wait_ms = 10000},
                      &og, "other's grant");
    h_sleep_ms(200); /* late/gone has expired too by now (same ttl, granted before) */
    resume_ok(&q, &b, "late", &s);
    uint64_t id = send_adopt(&q, "late/gone", &gone);
    h_peer_expect_lost(&q, "late/gone", RLOCK__V1__LOST_REASON__LOST_MISSING, "adopt of gone");
    h_peer_expect_error(&q, id, H_ST(NOT_HELD), "gone", "adopt of gone");
    id = send_adopt(&q, "late/taken", &taken);
    h_peer_expect_lost(&q, "late/taken", RLOCK__V1__LOST_REASON__LOST_STOLEN, "adopt of taken");
    h_peer_expect_error(&q, id, H_ST(NOT_HELD), "another token", "adopt of taken");
    expect_key(&a, "late/taken", og.token, "the other client's lock");
    h_raw_close(&q.raw);
    h_raw_close(&o.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* The value of an unlabelled sample of e's /metrics (fails the test when absent). */
static long long metric(const struct h_env *e, const char *name)
{
    double v = h_metric(e, name);
    ck_assert_msg(v >= 0, "no sample %s in /metrics", name);
    return (long long)v;
}

/* Forged or wrong resumes and adopts are refused; the real session is untouched. */
START_TEST(test_forged)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    char tokens[256], ini[1024];
    snprintf(tokens, sizeof tokens, "%s/tokens", k.dir);
    FILE *f = fopen(tokens, "w");
    ck_assert_ptr_nonnull(f);
    fputs("client tok-one-0123456789abcdef\nclient tok-two-0123456789abcdef\n", f);
    fclose(f);
    chmod(tokens, 0600);
    snprintf(ini, sizeof ini, "%s[auth]\ntoken_file = %s\n", k.ini, tokens);
    struct h_env a;
    h_env_start_or_fail(&a, ini);
    struct h_peer p, x, q;
    struct sess s, sx;
    p.name = "real";
    p.last_id = 1;
    h_raw_open(&p.raw, &a);
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.client_name = "real";
    h.auth_token = "tok-one-0123456789abcdef";
    h_peer_send(&p, RLOCK__V1__REQUEST__BODY_HELLO, &h);
    (void)s;
    Rlock__V1__ServerMessage *m = h_peer_next(&p, "Hello");
    ck_assert_int_eq(m->response->status, H_ST(OK));
    snprintf(s.id, sizeof s.id, "%s", m->response->hello->session_id);
    snprintf(s.secret, sizeof s.secret, "%s", m->response->hello->session_secret);
    h_raw_free(m);
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "forged/r", .ttl_ms = TTL_MS,
                                          .max_hold_ms = 60000},
                      &g, "grant");
    ck_assert_uint_gt(g.max_hold_until_ms, 0);
    /* Another session of its own, for its secret and seal. */
    x.name = "other";
    x.last_id = 1;
    h_raw_open(&x.raw, &a);
    h.client_name = "other";
    h.auth_token = "tok-two-0123456789abcdef";
    h_peer_send(&x, RLOCK__V1__REQUEST__BODY_HELLO, &h);
    m = h_peer_next(&x, "Hello");
    snprintf(sx.id, sizeof sx.id, "%s", m->response->hello->session_id);
    snprintf(sx.secret, sizeof sx.secret, "%s", m->response->hello->session_secret);
    h_raw_free(m);

    /* Wrong secret; another session's secret for this id. */
    char bad[64];
    snprintf(bad, sizeof bad, "%s", s.secret);
    bad[0] = bad[0] == '0' ? '1' : '0';
    send_resume(&q, &a, "forger", s.id, bad, "tok-one-0123456789abcdef");
    h_peer_expect_error(&q, 1, H_ST(UNAUTHENTICATED), "secret", "a wrong secret");
    h_peer_expect_eof(&q, "a wrong secret");
    h_raw_close(&q.raw);
    send_resume(&q, &a, "forger", s.id, sx.secret, "tok-one-0123456789abcdef");
    h_peer_expect_error(&q, 1, H_ST(UNAUTHENTICATED), "secret", "another session's secret");
    h_raw_close(&q.raw);
    /* The right secret without the auth token. */
    send_resume(&q, &a, "forger", s.id, s.secret, "");
    h_peer_expect_error(&q, 1, H_ST(UNAUTHENTICATED), "auth token", "no auth token");
    h_raw_close(&q.raw);

    /* Session x (resumed by its own right) claims p's lock with p's seal: refused. */
    h_raw_close(&x.raw);
    send_resume(&q, &a, "other", sx.id, sx.secret, "tok-two-0123456789abcdef");
    m = h_peer_response(&q, 1, "x's resume");
    ck_assert_int_eq(m->response->status, H_ST(OK));
    h_raw_free(m);
    uint64_t id = send_adopt(&q, "forged/r", &g);
    h_peer_expect_error(&q, id, H_ST(PERMISSION_DENIED), "seal", "another session's lock");
    /* Altered terms: a longer max_hold, a longer ttl, another fence, another token. */
    struct h_grant alt = g;
    alt.max_hold_until_ms += 60000;
    id = send_adopt(&q, "forged/r", &alt);
    h_peer_expect_error(&q, id, H_ST(PERMISSION_DENIED), "seal", "a longer max_hold");
    alt = g;
    alt.ttl_ms *= 2;
    id = send_adopt(&q, "forged/r", &alt);
    h_peer_expect_error(&q, id, H_ST(PERMISSION_DENIED), "seal", "a longer ttl");
    alt = g;
    alt.fence++;
    id = send_adopt(&q, "forged/r", &alt);
    h_peer_expect_error(&q, id, H_ST(PERMISSION_DENIED), "seal", "another fence");
    h_raw_close(&q.raw);

    /* The real session goes on holding its lock. */
    expect_key(&a, "forged/r", g.token, "after the forgeries");
    h_peer_ping(&p, "the real session");

    /* A token removed from the auth file since: the resume is refused. */
    f = fopen(tokens, "w");
    fputs("client tok-two-0123456789abcdef\n", f);
    fclose(f);
    ck_assert_int_eq(kill(a.rlockd_pid, SIGHUP), 0);
    ck_assert_int_eq(h_log_wait(&a, "reloaded", PROMPT_MS, NULL), 0);
    /* The real session used that token: the reload ended it, and its lock went with it. */
    h_peer_expect_eof(&p, "the session of a revoked token");
    char key[256];
    redisContext *r = h_redis(&a);
    ck_assert_msg(h_wait_key_gone(r, h_lock_key(&a, "forged/r", key, sizeof key), PROMPT_MS, &a) >=
                      0,
                  "the lock of a revoked token's session stayed");
    redisFree(r);
    send_resume(&q, &a, "real", s.id, s.secret, "tok-one-0123456789abcdef");
    h_peer_expect_error(&q, 1, H_ST(UNAUTHENTICATED), "auth token", "a revoked token");
    h_raw_close(&q.raw);
    /* Four refused (two secrets, a missing and a revoked token); x's own resume was not. */
    ck_assert_int_eq(metric(&a, "rlockd_resumes_refused_total"), 4);
    ck_assert_int_eq(metric(&a, "rlockd_sessions_resumed_total"), 1);
    h_raw_close(&p.raw);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * An Acquire whose answer the client never read (its daemon killed): after the resume,
 * Release.acquire_id has the new daemon delete what it took; one that never ran takes
 * nothing, and another holder's key is untouched.
 */
START_TEST(test_unanswered_acquire)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q, o;
    struct sess s;
    open_session(&p, &a, "unanswered", 0, &s);
    uint64_t id = h_peer_acquire(&p, &(struct h_acq){.resource = "unans/r", .ttl_ms = 30000});
    char key[256];
    redisContext *r = h_redis(&a);
    h_lock_key(&a, "unans/r", key, sizeof key);
    for (int64_t end = h_now_ms() + PROMPT_MS; h_key_exists(r, key) != 1;) {
        ck_assert_msg(h_now_ms() < end, "the acquire never set its key");
        h_sleep_ms(5);
    }
    h_rlockd_signal(&a, SIGKILL); /* its answer is never read */
    h_raw_close(&p.raw);
    /* Another client holds unans/other: a release of an acquire that never ran touches nothing. */
    open_session(&o, &b, "other", 0, &(struct sess){{0}, {0}});
    struct h_grant og;
    h_peer_acquire_ok(&o, &(struct h_acq){.resource = "unans/other", .ttl_ms = 30000}, &og, "o");
    resume_ok(&q, &b, "unanswered", &s);
    q.last_id = id; /* the session's ids go on */
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = "unans/r";
    rel.acquire_id = id;
    uint64_t rid = h_peer_send(&q, RLOCK__V1__REQUEST__BODY_RELEASE, &rel);
    h_peer_expect_status(&q, rid, H_ST(OK), "release of the unanswered acquire");
    ck_assert_msg(h_wait_key_gone(r, key, PROMPT_MS, &b) >= 0,
                  "the unanswered acquire's key was not deleted");
    rel.resource = "unans/other";
    rel.acquire_id = id - 1; /* Hello's id: no acquire */
    rid = h_peer_send(&q, RLOCK__V1__REQUEST__BODY_RELEASE, &rel);
    h_peer_expect_status(&q, rid, H_ST(OK), "release of an acquire that never ran");
    h_peer_ping(&q, "after the releases");
    expect_key(&a, "unans/other", og.token, "another holder's lock");
    redisFree(r);
    h_raw_close(&q.raw);
    h_raw_close(&o.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * A resume on the same daemon while the session's old connection is still open there
 * (its end not noticed): the old connection is closed, the locks are adopted, and nothing
 * is reported lost or deleted on the way.
 */
START_TEST(test_same_daemon)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a;
    h_env_start_or_fail(&a, k.ini);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "twice", 0, &s);
    struct h_grant g1, g2;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "twice/1", .ttl_ms = TTL_MS}, &g1, "1");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "twice/2", .ttl_ms = TTL_MS}, &g2, "2");
    resume_ok(&q, &a, "twice", &s);
    h_peer_expect_eof(&p, "the old connection, once the session resumed elsewhere");
    adopt_ok(&q, "twice/1", &g1);
    adopt_ok(&q, "twice/2", &g2);
    key_kept(&a, "twice/1", g1.token, TTL_MS + 500, "renewed after the resume");
    expect_key(&a, "twice/2", g2.token, "the second lock");
    ck_assert_int_eq(h_log_count(&a, "lost lock"), 0);
    h_peer_release_ok(&q, "twice/1", g1.token, 0, "release 1");
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * The same with more locks than a closing session lets go of in one loop turn (4096): the
 * adopts that come before the old connection's leases are all let go of must not report
 * those leases lost, nor touch their keys.
 */
#define MANY 6000
START_TEST(test_same_daemon_many)
{
    struct h_keydir k;
    h_keydir_make(&k, "max_locks = 10000\n");
    struct h_env a;
    h_env_start_or_fail(&a, k.ini);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "many", 0, &s);
    static struct h_grant g[MANY];
    static char names[MANY][32];
    struct h_raw_batch b = {.len = 0};
    uint64_t first = p.last_id + 1;
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof names[i], "many/%d", i);
        Rlock__V1__Acquire m = h_acquire_msg(&(struct h_acq){.resource = names[i], .ttl_ms = 30000});
        h_raw_batch_add_body(&b, h_peer_next_id(&p), RLOCK__V1__REQUEST__BODY_ACQUIRE, &m);
        if (b.len > H_RAW_BATCH_BYTES - 200 || i == MANY - 1) {
            h_peer_send_batch(&p, &b);
            b.len = 0;
        }
    }
    for (int n = 0; n < MANY; n++) { /* answered in Redis's order, not the requests' */
        Rlock__V1__ServerMessage *m = h_peer_next(&p, "many grants");
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_msg(r != NULL && r->status == H_ST(OK) &&
                          r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE && r->id >= first &&
                          r->id < first + MANY,
                      "grant %d: %s", n, h_msg_describe(m));
        h_grant_copy(r->acquire, &g[r->id - first]);
        h_raw_free(m);
    }
    /* Resume and the adopts in one stream, as a client pipelines them: the first adopts
     * arrive while the old connection's leases are still being let go of. */
    q.name = "many";
    q.last_id = 1;
    h_raw_open(&q.raw, &a);
    Rlock__V1__Resume rs = RLOCK__V1__RESUME__INIT;
    rs.session_id = s.id;
    rs.session_secret = s.secret;
    rs.client_name = "many";
    h_raw_batch_add_body(&b, 1, RLOCK__V1__REQUEST__BODY_RESUME, &rs);
    uint64_t afirst = q.last_id + 1;
    for (int j = 0; j < MANY; j++) {
        int i = MANY - 1 - j; /* the last granted first: the old leases let go of last */
        Rlock__V1__Adopt ad = RLOCK__V1__ADOPT__INIT;
        ad.resource = names[i];
        ad.token = g[i].token;
        ad.fence = g[i].fence;
        ad.ttl_ms = g[i].ttl_ms;
        ad.hold_count = g[i].hold_count;
        ad.seal = g[i].seal;
        h_raw_batch_add_body(&b, h_peer_next_id(&q), RLOCK__V1__REQUEST__BODY_ADOPT, &ad);
        if (b.len > H_RAW_BATCH_BYTES - 300 || j == MANY - 1) {
            h_peer_send_batch(&q, &b);
            b.len = 0;
        }
    }
    Rlock__V1__ServerMessage *hm = h_peer_response(&q, 1, "Resume");
    ck_assert_int_eq(hm->response->status, H_ST(OK));
    h_raw_free(hm);
    int ok = 0;
    for (int i = 0; i < MANY; i++) {
        Rlock__V1__ServerMessage *m = h_peer_next(&q, "adopt answers");
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_msg(r != NULL && r->id >= afirst && r->id < afirst + MANY, "adopt %d: %s", i,
                      h_msg_describe(m));
        ok += r->status == H_ST(OK);
        h_raw_free(m);
    }
    ck_assert_int_eq(ok, MANY);
    ck_assert_int_eq(h_log_count(&a, "lost lock"), 0);
    h_peer_ping(&q, "after the adopts");
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* The next message on p must be SessionClosing with resume as given. */
static void expect_closing(struct h_peer *p, int resume)
{
    Rlock__V1__ServerMessage *m = h_peer_next(p, "SessionClosing");
    ck_assert_msg(m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT &&
                      m->event->body_case == RLOCK__V1__EVENT__BODY_SESSION_CLOSING,
                  "got %s, want SessionClosing", h_msg_describe(m));
    ck_assert_int_eq(m->event->session_closing->resume, resume);
    h_raw_free(m);
}

/*
 * SIGTERM with shutdown = handover (the default with a key): the session is
 * told to move, the daemon exits once it left, the key stays; the daemon
 * restarted on the same address takes the session back.
 */
START_TEST(test_restart_in_place)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a;
    h_env_start_or_fail(&a, k.ini);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "in-place", 0, &s);
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "inplace/r", .ttl_ms = TTL_MS}, &g, "g");
    pid_t pid = a.rlockd_pid;
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    expect_closing(&p, 1);
    uint64_t id = h_peer_acquire(&p, &(struct h_acq){.resource = "inplace/other", .ttl_ms = TTL_MS});
    h_peer_expect_status(&p, id, H_ST(SHUTTING_DOWN), "an acquire while handing over");
    h_raw_close(&p.raw);
    int status;
    ck_assert_msg(h_wait_exit(pid, PROMPT_MS, &status) == 0, "A did not exit once its client left");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "A exited with status %d", status);
    a.rlockd_pid = 0;
    expect_key(&a, "inplace/r", g.token, "after the handover");
    ck_assert_int_eq(h_rlockd_start(&a), 0);
    resume_ok(&q, &a, "in-place", &s);
    adopt_ok(&q, "inplace/r", &g);
    key_kept(&a, "inplace/r", g.token, TTL_MS + 500, "the restarted daemon renews it");
    h_peer_release_ok(&q, "inplace/r", g.token, 0, "release");
    h_raw_close(&q.raw);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * During a handover, a session that says Goodbye instead of moving is ended
 * as usual: its lock is released at once (not left in Redis until its ttl as
 * if it had been handed over), and /readyz answers 503 all along, so that a
 * load balancer sends no new client to a daemon telling its sessions to leave.
 */
START_TEST(test_handover_goodbye)
{
    struct h_keydir k;
    h_keydir_make(&k, "[server]\nhandover_timeout = 20s\n");
    struct h_env a;
    h_env_start_or_fail(&a, k.ini);
    struct h_peer p, stay;
    struct sess s, s2;
    open_session(&p, &a, "leaver", 0, &s);
    open_session(&stay, &a, "stayer", 0, &s2); /* keeps the handover going */
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "bye/r", .ttl_ms = 30000}, &g, "grant");
    struct h_http_reply hr;
    ck_assert_msg(h_http_get(a.metrics_sock, "/readyz", PROMPT_MS, &hr) == 0, "%s", hr.error);
    ck_assert_int_eq(hr.status, 200);
    h_http_free(&hr);
    pid_t pid = a.rlockd_pid;
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    expect_closing(&p, 1);
    expect_closing(&stay, 1);
    ck_assert_msg(h_http_get(a.metrics_sock, "/readyz", PROMPT_MS, &hr) == 0, "%s", hr.error);
    printf("handover: /readyz while handing over: %d %s", hr.status, hr.body);
    int ready_status = hr.status;
    h_http_free(&hr);
    ck_assert_msg(ready_status == 503,
                  "/readyz answered %d while the daemon hands its sessions over", ready_status);

    Rlock__V1__Goodbye bye = RLOCK__V1__GOODBYE__INIT;
    uint64_t id = h_peer_send(&p, RLOCK__V1__REQUEST__BODY_GOODBYE, &bye);
    h_peer_expect_status(&p, id, H_ST(OK), "Goodbye while handing over");
    char key[256];
    h_lock_key(&a, "bye/r", key, sizeof key);
    redisContext *r = h_redis(&a);
    int64_t t0 = h_now_ms();
    while (h_key_exists(r, key) == 1 && h_now_ms() - t0 < PROMPT_MS)
        h_sleep_ms(10);
    ck_assert_msg(h_key_exists(r, key) == 0, "the lock of a session that said Goodbye during a "
                  "handover was left in Redis (handed over to nobody)");
    redisFree(r);
    h_raw_close(&p.raw);
    h_raw_close(&stay.raw);
    int status;
    ck_assert_msg(h_wait_exit(pid, PROMPT_MS, &status) == 0, "A did not exit once its clients left");
    a.rlockd_pid = 0;
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* shutdown = release: the lock is released at SIGTERM, as before. */
START_TEST(test_shutdown_release)
{
    struct h_keydir k;
    h_keydir_make(&k, "[server]\nshutdown = release\n");
    struct h_env a;
    h_env_start_or_fail(&a, k.ini);
    struct h_peer p;
    struct sess s;
    open_session(&p, &a, "release", 0, &s);
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "rel/r", .ttl_ms = 30000}, &g, "grant");
    pid_t pid = a.rlockd_pid;
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    expect_closing(&p, 0);
    int status;
    ck_assert_int_eq(h_wait_exit(pid, PROMPT_MS, &status), 0);
    a.rlockd_pid = 0;
    redisContext *r = h_redis(&a);
    char key[256];
    ck_assert_int_eq(h_key_exists(r, h_lock_key(&a, "rel/r", key, sizeof key)), 0);
    redisFree(r);
    h_raw_close(&p.raw);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * The per-session lock limit holds for adopts: a session at its limit on the
 * new daemon is answered LIMIT_EXCEEDED for one more.
 */
START_TEST(test_adopt_limit)
{
    struct h_keydir k;
    h_keydir_make(&k, "max_locks = 2\n");
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "limited", 0, &s);
    struct h_grant g1, g2, g3;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "lim/1", .ttl_ms = TTL_MS}, &g1, "1");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "lim/2", .ttl_ms = TTL_MS}, &g2, "2");
    resume_ok(&q, &b, "limited", &s);
    /* One new lock on B, then the first adopt fills the session up. */
    h_peer_acquire_ok(&q, &(struct h_acq){.resource = "lim/3", .ttl_ms = TTL_MS}, &g3, "3");
    adopt_ok(&q, "lim/1", &g1);
    uint64_t id = send_adopt(&q, "lim/2", &g2);
    h_peer_expect_status(&q, id, H_ST(LIMIT_EXCEEDED), "an adopt past max_locks");
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/* The key of resource's PTTL now. */
static long long key_pttl(struct h_env *e, const char *resource)
{
    char key[256];
    redisContext *r = h_redis(e);
    long long v = h_pttl(r, h_lock_key(e, resource, key, sizeof key));
    redisFree(r);
    return v;
}

/*
 * An adopt keeps the key's expiry where it is longer, and promises no more
 * than the key has left: a watchdog-off lock with little life left is valid
 * only that long on the new daemon; a watchdog lock whose key lives longer
 * than its ttl (a late renewal, an Extend) is not cut back to the ttl.
 */
START_TEST(test_adopt_keeps_expiry)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "expiry", 0, &s);
    struct h_grant off, on;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "exp/off", .ttl_ms = 4000, .watchdog_off = 1},
                      &off, "off");
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "exp/on", .ttl_ms = TTL_MS}, &on, "on");
    /* The key of the watchdog lock lives longer than its ttl. */
    char key[256];
    redisContext *r = h_redis(&a);
    ck_assert_int_eq(h_redis_int(r, "PEXPIRE %s 60000", h_lock_key(&a, "exp/on", key, sizeof key)),
                     1);
    redisFree(r);
    h_sleep_ms(2500);
    resume_ok(&q, &b, "expiry", &s);
    long long left = key_pttl(&b, "exp/off");
    ck_assert_int_gt(left, 0);
    uint64_t id = send_adopt(&q, "exp/off", &off);
    Rlock__V1__ServerMessage *m = h_peer_response(&q, id, "Adopt");
    ck_assert_msg(m->response->status == H_ST(OK), "adopt: %s", h_msg_describe(m));
    ck_assert_msg(m->response->adopt->valid_ms <= left,
                  "a watchdog-off lock with %lld ms left is said valid for %u ms", left,
                  m->response->adopt->valid_ms);
    h_raw_free(m);
    id = send_adopt(&q, "exp/on", &on);
    m = h_peer_response(&q, id, "Adopt");
    ck_assert_msg(m->response->status == H_ST(OK), "adopt: %s", h_msg_describe(m));
    h_raw_free(m);
    ck_assert_msg(key_pttl(&b, "exp/on") > 30000, "the adopt cut the key's life back to its ttl");
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * An adopt whose session is gone when Redis answers gives the key back: the
 * token it swapped in is nobody's, so the key is deleted at once rather than
 * left to block the resource for its ttl.
 */
START_TEST(test_adopt_session_gone)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "gone", 0, &s);
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "gone/r", .ttl_ms = 30000}, &g, "g");
    resume_ok(&q, &b, "gone", &s);
    (void)send_adopt(&q, "gone/r", &g);
    h_raw_close(&q.raw); /* before the answer: the session ends with the adopt in Redis */
    char key[256];
    redisContext *r = h_redis(&b);
    ck_assert_msg(h_wait_key_gone(r, h_lock_key(&b, "gone/r", key, sizeof key), PROMPT_MS, &b) >= 0,
                  "the adopted key outlived the session that adopted it");
    redisFree(r);
    h_raw_close(&p.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * A lock held through A, its session resumed on B behind a proxy (B's Redis
 * answers can be held): the state both tests below start from.
 */
struct proxied_move {
    struct h_keydir k;
    struct h_env a, b;
    struct h_peer p, q; /* the session's connections to A and to B */
    struct sess s;
    struct h_grant g;
    char key[256];
    redisContext *r;
};

static void proxied_move_start(struct proxied_move *m, const char *extra_ini, const char *name,
                               const struct h_acq *acq)
{
    h_keydir_make(&m->k, extra_ini);
    h_env_start_or_fail(&m->a, m->k.ini);
    ck_assert_msg(h_env_start_peer_proxied(&m->b, &m->a, m->k.ini) == 0,
                  "could not start daemon B");
    open_session(&m->p, &m->a, name, 0, &m->s);
    h_peer_acquire_ok(&m->p, acq, &m->g, "grant");
    resume_ok(&m->q, &m->b, name, &m->s);
    m->r = h_redis(&m->a);
    h_lock_key(&m->a, acq->resource, m->key, sizeof m->key);
}

/* Hold B's Redis answers on the connections open now, send the Adopt and wait until it
 * has swapped the key's token in Redis: its answer is on its way, held. Its request id. */
static uint64_t proxied_move_adopt_held(struct proxied_move *m, const char *resource)
{
    /* A reconnect of B's gets a clean line. */
    h_proxy_hold(m->b.proxy, H_PROXY_OPEN_COMMANDS, H_PROXY_DOWN);
    uint64_t id = send_adopt(&m->q, resource, &m->g);
    char got[128];
    for (int64_t end = h_now_ms() + PROMPT_MS;; h_sleep_ms(5)) {
        int n = h_get(m->r, m->key, got, sizeof got);
        if (n > 0 && strcmp(got, m->g.token) != 0)
            return id;
        ck_assert_msg(h_now_ms() < end, "the adopt never swapped the key's token");
    }
}

static void proxied_move_stop(struct proxied_move *m)
{
    redisFree(m->r);
    h_raw_close(&m->p.raw);
    h_raw_close(&m->q.raw);
    h_env_stop(&m->b);
    h_env_stop(&m->a);
    h_keydir_remove(&m->k);
}

/*
 * As adopt_session_gone, with the lock's lock_delay: the session that ended
 * with its adopt in Redis had held the lock (it was moving), and its holder
 * may still act on it until it hears of the end. The key B's adopt took is let go as at any
 * unclean end: a tombstone for the lock's lock_delay, not freed at once.
 * B's answers are held by the proxy until the close has reached B, so the
 * adopt is answered to a session already gone, every run.
 */
#define GONE_DELAY_MS 3000u
START_TEST(test_adopt_session_gone_delay)
{
    struct proxied_move m;
    proxied_move_start(&m, "[limits]\nmax_lock_delay = 5s\n", "gone-delay",
                       &(struct h_acq){.resource = "gone/d", .ttl_ms = 30000,
                                       .lock_delay_ms = GONE_DELAY_MS});
    (void)proxied_move_adopt_held(&m, "gone/d");
    h_raw_close(&m.q.raw); /* no Goodbye: an unclean end, with the adopt's answer held */
    ck_assert_msg(h_log_wait(&m.b, "gone-delay): closed", PROMPT_MS, NULL) == 0,
                  "B never saw the resumed session end");
    int64_t closed = h_now_ms();
    h_proxy_release(m.b.proxy, H_PROXY_ALL, H_PROXY_DOWN);
    /* The adopt's new token becomes a tombstone (never the key gone) within the delay. */
    char got[128];
    for (int64_t end = h_now_ms() + PROMPT_MS;; h_sleep_ms(5)) {
        int n = h_get(m.r, m.key, got, sizeof got);
        ck_assert_msg(n > 0 || h_now_ms() - closed >= (int64_t)GONE_DELAY_MS,
                      "the key of a lock whose session ended uncleanly was freed %lld ms after "
                      "the end, within its lock_delay of %u ms",
                      (long long)(h_now_ms() - closed), GONE_DELAY_MS);
        if (n > 0 && strncmp(got, "tombstone:", 10) == 0)
            break;
        ck_assert_msg(h_now_ms() < end, "the key still holds \"%s\"", n > 0 ? got : "(none)");
    }
    long long pttl = h_pttl(m.r, m.key);
    ck_assert_msg(pttl > 0 && pttl <= (long long)GONE_DELAY_MS, "the tombstone's PTTL is %lld",
                  pttl);
    proxied_move_stop(&m);
}
END_TEST

/*
 * An adopt whose answer never comes (held on its way back from Redis by a
 * proxy in front of B) may have swapped the key to B's new token: B answers
 * UNAVAILABLE and deletes that token, so the key does not block the resource
 * for its ttl, and the client's retry finds it gone (LockLost MISSING), not
 * taken by somebody else (STOLEN).
 */
START_TEST(test_adopt_unanswered)
{
    struct proxied_move m;
    proxied_move_start(&m, "[redis]\ncommand_timeout = 300ms\n", "unanswered-adopt",
                       &(struct h_acq){.resource = "ua/r", .ttl_ms = 30000});
    uint64_t id = proxied_move_adopt_held(&m, "ua/r");
    h_peer_expect_status(&m.q, id, H_ST(UNAVAILABLE), "an adopt whose answer never came");
    h_proxy_release(m.b.proxy, H_PROXY_ALL, H_PROXY_DOWN);
    ck_assert_msg(h_wait_key_gone(m.r, m.key, PROMPT_MS, &m.b) >= 0,
                  "the token of an unanswered adopt was left in Redis: the resource is blocked");
    id = send_adopt(&m.q, "ua/r", &m.g);
    h_peer_expect_lost(&m.q, "ua/r", RLOCK__V1__LOST_REASON__LOST_MISSING, "the retried adopt");
    h_peer_expect_status(&m.q, id, H_ST(NOT_HELD), "the retried adopt");
    proxied_move_stop(&m);
}
END_TEST

/*
 * An adopted lock keeps its max_hold deadline (a wall-clock time): the new
 * daemon ends it there with MAX_HOLD, and the key goes.
 */
START_TEST(test_adopt_max_hold)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct h_env a, b;
    start_pair(&a, &b, &k);
    struct h_peer p, q;
    struct sess s;
    open_session(&p, &a, "maxhold", 0, &s);
    struct h_grant g;
    h_peer_acquire_ok(&p, &(struct h_acq){.resource = "mh/r", .ttl_ms = TTL_MS, .max_hold_ms = 2500},
                      &g, "grant");
    resume_ok(&q, &b, "maxhold", &s);
    adopt_ok(&q, "mh/r", &g);
    h_peer_expect_lost(&q, "mh/r", RLOCK__V1__LOST_REASON__LOST_MAX_HOLD, "max_hold on B");
    ck_assert_int_ge(h_wall_ms() + 50, (int64_t)g.max_hold_until_ms);
    char key[256];
    redisContext *r = h_redis(&b);
    ck_assert_msg(h_wait_key_gone(r, h_lock_key(&b, "mh/r", key, sizeof key), PROMPT_MS, &b) >= 0,
                  "the key outlived its max_hold");
    redisFree(r);
    h_raw_close(&p.raw);
    h_raw_close(&q.raw);
    h_env_stop(&b);
    h_env_stop(&a);
    h_keydir_remove(&k);
}
END_TEST

/*
 * A resume key file the daemon cannot trust (readable by group or others)
 * stops it from starting, rather than running without resume; the same
 * file made private is accepted.
 */
START_TEST(test_bad_key_file)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    char path[300];
    snprintf(path, sizeof path, "%s/resume.key", k.dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("00112233445566778899aabbccddeeff\n", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0644), 0);
    struct h_env e;
    ck_assert_msg(h_env_start(&e, k.ini) != 0, "rlockd started with a resume key others can read");
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_msg(h_env_start(&e, k.ini) == 0, "rlockd refused a private resume key");
    h_env_stop(&e);
    h_keydir_remove(&k);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_no_key, test_kill9_resume, test_zombie,
        test_too_late, test_forged, test_restart_in_place,
        test_handover_goodbye, test_shutdown_release, test_unanswered_acquire,
        test_same_daemon, test_same_daemon_many, test_bad_key_file,
        test_adopt_limit, test_adopt_keeps_expiry, test_adopt_session_gone,
        test_adopt_session_gone_delay, test_adopt_max_hold, test_adopt_unanswered,
    };
    return h_run_tests("handover", 120, tests, H_LEN(tests));
}
