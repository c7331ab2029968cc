/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tables.c — every entry of the protocol's tables, not a sample of them.
 *
 *   roles          with [auth] tokens: every request kind of rlock.proto
 *                  (Request.body, read from the schema itself, so a new kind
 *                  cannot be forgotten here) sent by a client-role session
 *                  and by an admin one: the admin kinds are refused to the
 *                  client (PERMISSION_DENIED) and allowed to the admin, the
 *                  others are never refused for the role. Tokens of the
 *                  shortest and the longest allowed length are used.
 *   statuses       every Status of rlock.proto is produced by a real request
 *                  against a real daemon and Redis, each by its own scenario
 *                  (SHUTTING_DOWN, sent only during a handover, which
 *                  test_handover covers, by what happens at a plain stop:
 *                  SessionClosing, then the connection ends).
 *   loss_reasons   every LostReason a client can see (all but UNSPECIFIED)
 *                  is produced and reported by librlock as that reason, and
 *                  counted by the daemon under its label.
 */
#include "harness.h"
#include "harness_peer.h"
#include "harness_raw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The shortest and the longest tokens daemon/base/auth.h allows (16 and 256 characters). */
#define CLIENT_TOKEN "cli-0123456789ab"
#define ADMIN_TOKEN_HEAD "adm-"
#define ADMIN_TOKEN_LEN 256
#define WRONG_TOKEN "not-a-token-of-this-daemon"

static char admin_token[ADMIN_TOKEN_LEN + 1];
static char token_file[64];

/* [auth] with the tokens in a file of their own (the longest token does not fit a config line). */
static const char *auth_ini(char *buf, size_t len, const char *more)
{
    memset(admin_token, 'z', ADMIN_TOKEN_LEN);
    memcpy(admin_token, ADMIN_TOKEN_HEAD, strlen(ADMIN_TOKEN_HEAD));
    admin_token[ADMIN_TOKEN_LEN] = '\0';
    snprintf(token_file, sizeof token_file, "/tmp/rlock-tables-XXXXXX");
    int fd = mkstemp(token_file); /* mode 0600, as the daemon wants it */
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "client %s\nadmin %s\n", CLIENT_TOKEN, admin_token);
    fclose(f);
    snprintf(buf, len, "[auth]\ntoken_file = %s\n%s", token_file, more ? more : "");
    return buf;
}

/* Connect p to e and say Hello with token; the answer must be st (OK: the session runs). */
static void peer_hello(struct h_peer *p, const struct h_env *e, const char *name,
                       const char *token, Rlock__V1__Status st)
{
    memset(p, 0, sizeof *p);
    h_raw_open(&p->raw, e);
    p->name = name;
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.client_name = (char *)name;
    h.protocol_version = 1;
    h.auth_token = (char *)token;
    uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_HELLO, &h);
    h_peer_expect_status(p, id, st, "Hello");
}

/* --- roles ------------------------------------------------------------------------- */

/* A request kind: a body that passes the field checks, and whether it needs the admin role. */
struct kind {
    const char *name; /* the oneof member's name in rlock.proto */
    int admin;
    Rlock__V1__Request__BodyCase body_case;
};

static const struct kind kinds[] = {
    {"hello", 0, RLOCK__V1__REQUEST__BODY_HELLO},
    {"acquire", 0, RLOCK__V1__REQUEST__BODY_ACQUIRE},
    {"release", 0, RLOCK__V1__REQUEST__BODY_RELEASE},
    {"extend", 0, RLOCK__V1__REQUEST__BODY_EXTEND},
    {"ping", 0, RLOCK__V1__REQUEST__BODY_PING},
    {"stats", 0, RLOCK__V1__REQUEST__BODY_STATS},
    {"cancel", 0, RLOCK__V1__REQUEST__BODY_CANCEL},
    {"goodbye", 0, RLOCK__V1__REQUEST__BODY_GOODBYE},
    {"list_sessions", 1, RLOCK__V1__REQUEST__BODY_LIST_SESSIONS},
    {"list_locks", 1, RLOCK__V1__REQUEST__BODY_LIST_LOCKS},
    {"force_release", 1, RLOCK__V1__REQUEST__BODY_FORCE_RELEASE},
    {"kill_session", 1, RLOCK__V1__REQUEST__BODY_KILL_SESSION},
    {"server_info", 1, RLOCK__V1__REQUEST__BODY_SERVER_INFO},
    {"resume", 0, RLOCK__V1__REQUEST__BODY_RESUME},
    {"adopt", 0, RLOCK__V1__REQUEST__BODY_ADOPT},
    {"leader", 0, RLOCK__V1__REQUEST__BODY_LEADER},
    {"observe", 0, RLOCK__V1__REQUEST__BODY_OBSERVE},
    {"top_resources", 1, RLOCK__V1__REQUEST__BODY_TOP_RESOURCES},
};

/* Send one request of kind k on p and return the status of its answer. */
static Rlock__V1__Status send_kind(struct h_peer *p, const struct kind *k)
{
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    Rlock__V1__Acquire acq = RLOCK__V1__ACQUIRE__INIT;
    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Stats stats = RLOCK__V1__STATS__INIT;
    Rlock__V1__Cancel cancel = RLOCK__V1__CANCEL__INIT;
    Rlock__V1__Goodbye bye = RLOCK__V1__GOODBYE__INIT;
    Rlock__V1__ListSessions ls = RLOCK__V1__LIST_SESSIONS__INIT;
    Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
    Rlock__V1__ForceRelease fr = RLOCK__V1__FORCE_RELEASE__INIT;
    Rlock__V1__KillSession ks = RLOCK__V1__KILL_SESSION__INIT;
    Rlock__V1__ServerInfo si = RLOCK__V1__SERVER_INFO__INIT;
    Rlock__V1__Resume rs = RLOCK__V1__RESUME__INIT;
    Rlock__V1__Adopt ad = RLOCK__V1__ADOPT__INIT;
    Rlock__V1__Leader ld = RLOCK__V1__LEADER__INIT;
    Rlock__V1__Observe ob = RLOCK__V1__OBSERVE__INIT;
    Rlock__V1__TopResources tr = RLOCK__V1__TOP_RESOURCES__INIT;
    void *body = NULL;
    switch (k->body_case) {
    case RLOCK__V1__REQUEST__BODY_HELLO:
        hello.client_name = "again";
        hello.protocol_version = 1;
        body = &hello;
        break;
    case RLOCK__V1__REQUEST__BODY_ACQUIRE:
        acq.resource = "roles";
        body = &acq;
        break;
    case RLOCK__V1__REQUEST__BODY_RELEASE:
        rel.resource = "roles";
        body = &rel;
        break;
    case RLOCK__V1__REQUEST__BODY_EXTEND:
        ext.resource = "roles";
        body = &ext;
        break;
    case RLOCK__V1__REQUEST__BODY_PING:
        body = &ping;
        break;
    case RLOCK__V1__REQUEST__BODY_STATS:
        body = &stats;
        break;
    case RLOCK__V1__REQUEST__BODY_CANCEL:
        cancel.request_id = 999;
        body = &cancel;
        break;
    case RLOCK__V1__REQUEST__BODY_GOODBYE:
        body = &bye;
        break;
    case RLOCK__V1__REQUEST__BODY_LIST_SESSIONS:
        body = &ls;
        break;
    case RLOCK__V1__REQUEST__BODY_LIST_LOCKS:
        body = &ll;
        break;
    case RLOCK__V1__REQUEST__BODY_FORCE_RELEASE:
        fr.resource = "roles-nobody-holds";
        body = &fr;
        break;
    case RLOCK__V1__REQUEST__BODY_KILL_SESSION:
        ks.session_id = "00000000-0000-4000-8000-000000000000";
        body = &ks;
        break;
    case RLOCK__V1__REQUEST__BODY_SERVER_INFO:
        body = &si;
        break;
    case RLOCK__V1__REQUEST__BODY_RESUME: /* after Hello: refused as a second introduction */
        rs.session_id = "00000000-0000-4000-8000-000000000000";
        body = &rs;
        break;
    case RLOCK__V1__REQUEST__BODY_ADOPT:
        ad.resource = "roles";
        ad.ttl_ms = 1000;
        body = &ad;
        break;
    case RLOCK__V1__REQUEST__BODY_LEADER:
        ld.resource = "roles";
        body = &ld;
        break;
    case RLOCK__V1__REQUEST__BODY_OBSERVE:
        ob.resource = "roles";
        body = &ob;
        break;
    case RLOCK__V1__REQUEST__BODY_TOP_RESOURCES:
        body = &tr;
        break;
    default:
        ck_abort_msg("no body for request kind %s", k->name);
    }
    uint64_t id = h_peer_send(p, k->body_case, body);
    for (;;) {
        Rlock__V1__ServerMessage *m = h_peer_next(p, k->name);
        const Rlock__V1__Response *r = h_raw_response(m);
        if (r != NULL && r->id == id) {
            Rlock__V1__Status st = r->status;
            h_raw_free(m);
            return st;
        }
        h_raw_free(m); /* an event, or the answer to the acquire a cancel names */
    }
}

START_TEST(test_roles)
{
    /* Every member of Request.body has a row here: a new kind must say which role it needs. */
    const ProtobufCMessageDescriptor *d = &rlock__v1__request__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->id == 1)
            continue; /* Request.id */
        int known = 0;
        for (size_t k = 0; k < T_LEN(kinds); k++)
            known |= strcmp(kinds[k].name, fd->name) == 0 && (int)kinds[k].body_case == (int)fd->id;
        ck_assert_msg(known, "request kind %s (field %u) has no row in this test's table",
                      fd->name, fd->id);
    }
    ck_assert_uint_eq(d->n_fields - 1, T_LEN(kinds));

    char ini[1024];
    struct h_fixture f;
    h_fixture_start_env(&f, auth_ini(ini, sizeof ini, NULL));
    for (size_t k = 0; k < T_LEN(kinds); k++) {
        struct h_peer client, admin;
        peer_hello(&client, &f.e, "role-client", CLIENT_TOKEN, H_ST(OK));
        peer_hello(&admin, &f.e, "role-admin", admin_token, H_ST(OK));
        Rlock__V1__Status as_client = send_kind(&client, &kinds[k]);
        Rlock__V1__Status as_admin = send_kind(&admin, &kinds[k]);
        printf("roles: %-14s client %s, admin %s\n", kinds[k].name,
               protobuf_c_enum_descriptor_get_value(&rlock__v1__status__descriptor,
                                                    (int)as_client)->name,
               protobuf_c_enum_descriptor_get_value(&rlock__v1__status__descriptor,
                                                    (int)as_admin)->name);
        if (kinds[k].admin)
            ck_assert_msg(as_client == H_ST(PERMISSION_DENIED),
                          "%s, an admin request, was not refused to a client token (status %d)",
                          kinds[k].name, (int)as_client);
        else
            ck_assert_msg(as_client != H_ST(PERMISSION_DENIED),
                          "%s was refused to a client token", kinds[k].name);
        ck_assert_msg(as_admin != H_ST(PERMISSION_DENIED), "%s was refused to an admin token",
                      kinds[k].name);
        h_raw_close(&client.raw);
        h_raw_close(&admin.raw);
    }
    h_fixture_stop(&f);
    unlink(token_file);
}
END_TEST

/* --- statuses ------------------------------------------------------------------------ */

START_TEST(test_statuses)
{
    char ini[1024];
    struct h_fixture f;
    h_fixture_start_env(&f, auth_ini(ini, sizeof ini,
                                     "[session]\nmax_locks = 2\n"
                                     "[server]\nshutdown_timeout = 3s\n"));
    int seen[RLOCK__V1__STATUS__STATUS_DEADLOCK + 1] = {0};
#define SEEN(st) (seen[H_ST(st)] = 1)
    struct h_peer a, c, c2, bad;
    peer_hello(&a, &f.e, "admin", admin_token, H_ST(OK));
    peer_hello(&c, &f.e, "holder", CLIENT_TOKEN, H_ST(OK));
    peer_hello(&c2, &f.e, "other", CLIENT_TOKEN, H_ST(OK));
    SEEN(OK);

    /* UNAUTHENTICATED: a wrong token, and the connection ends. */
    peer_hello(&bad, &f.e, "intruder", WRONG_TOKEN, H_ST(UNAUTHENTICATED));
    h_peer_expect_eof(&bad, "after a wrong token");
    h_raw_close(&bad.raw);
    SEEN(UNAUTHENTICATED);

    struct h_grant g;
    struct h_acq t1 = {.resource = "t1", .ttl_ms = 30000};
    h_peer_acquire_ok(&c, &t1, &g, "t1");
    struct h_acq try1 = {.resource = "t1"};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &try1), H_ST(NOT_ACQUIRED), "try of a held lock");
    SEEN(NOT_ACQUIRED);
    struct h_acq wait1 = {.resource = "t1", .wait_ms = 100};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &wait1), H_ST(TIMEOUT), "short wait");
    SEEN(TIMEOUT);
    h_peer_expect_status(&c2, h_peer_release(&c2, "t1", NULL), H_ST(NOT_HELD), "release");
    SEEN(NOT_HELD);
    struct h_acq empty = {.resource = ""};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &empty), H_ST(INVALID), "empty resource");
    SEEN(INVALID);
    Rlock__V1__ServerInfo si = RLOCK__V1__SERVER_INFO__INIT;
    h_peer_expect_status(&c2, h_peer_send(&c2, RLOCK__V1__REQUEST__BODY_SERVER_INFO, &si),
                         H_ST(PERMISSION_DENIED), "ServerInfo from a client");
    SEEN(PERMISSION_DENIED);
    struct h_acq again = {.resource = "t1", .no_reentry = 1};
    h_peer_expect_status(&c, h_peer_acquire(&c, &again), H_ST(ALREADY_HELD), "no_reentry");
    SEEN(ALREADY_HELD);
    struct h_acq t2 = {.resource = "t2", .ttl_ms = 30000}, t3 = {.resource = "t3"};
    h_peer_acquire_ok(&c, &t2, &g, "t2");
    h_peer_expect_status(&c, h_peer_acquire(&c, &t3), H_ST(LIMIT_EXCEEDED), "a third lock");
    SEEN(LIMIT_EXCEEDED);

    /* CANCELLED: a queued acquire withdrawn. */
    struct h_acq longwait = {.resource = "t1", .wait_ms = 30000};
    uint64_t queued = h_peer_acquire(&c2, &longwait);
    h_peer_expect_stats(&a, 1, 2, "the acquire is queued");
    Rlock__V1__Cancel cancel = RLOCK__V1__CANCEL__INIT;
    cancel.request_id = queued;
    uint64_t cid = h_peer_send(&c2, RLOCK__V1__REQUEST__BODY_CANCEL, &cancel);
    /* CANCELLED before the Cancel's OK when the acquire was queued, after it when its
     * try was in Redis at that moment (docs/protocol.md): either order. */
    for (int answers = 0; answers < 2; answers++) {
        Rlock__V1__ServerMessage *m = h_peer_next(&c2, "the Cancel and the cancelled acquire");
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_msg(r != NULL && (r->id == queued || r->id == cid), "unexpected: %s",
                      h_msg_describe(m));
        ck_assert_int_eq(r->status, r->id == queued ? H_ST(CANCELLED) : H_ST(OK));
        h_raw_free(m);
    }
    SEEN(CANCELLED);

    Rlock__V1__KillSession ks = RLOCK__V1__KILL_SESSION__INIT;
    ks.session_id = "00000000-0000-4000-8000-000000000000";
    h_peer_expect_status(&a, h_peer_send(&a, RLOCK__V1__REQUEST__BODY_KILL_SESSION, &ks),
                         H_ST(NOT_FOUND), "KillSession of nobody");
    SEEN(NOT_FOUND);
    /* Ids a peer sends are read as UUIDs: anything else is refused as such. */
    ks.session_id = "00000000-0000-4000-8000-00000000000g";
    h_peer_expect_status(&a, h_peer_send(&a, RLOCK__V1__REQUEST__BODY_KILL_SESSION, &ks),
                         H_ST(INVALID), "KillSession of a session id that is not a UUID");
    Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
    ll.session_id = "holder";
    h_peer_expect_status(&a, h_peer_send(&a, RLOCK__V1__REQUEST__BODY_LIST_LOCKS, &ll),
                         H_ST(INVALID), "ListLocks of a session id that is not a UUID");

    /* DEADLOCK: a holds d1 and waits for d2, which c2 holds; c2's wait for d1 would close the
     * cycle. Then c2 lets d2 go and a's wait is granted. */
    struct h_acq d1 = {.resource = "d1", .ttl_ms = 30000}, d2 = {.resource = "d2", .ttl_ms = 30000};
    h_peer_acquire_ok(&a, &d1, &g, "d1");
    h_peer_acquire_ok(&c2, &d2, &g, "d2");
    struct h_acq a_waits = {.resource = "d2", .ttl_ms = 30000, .wait_ms = 30000};
    uint64_t a_wait = h_peer_acquire(&a, &a_waits);
    h_peer_expect_stats(&c, 1, 4, "a waits for d2");
    struct h_acq c2_waits = {.resource = "d1", .wait_ms = 30000};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &c2_waits), H_ST(DEADLOCK),
                         "a wait that closes a cycle");
    SEEN(DEADLOCK);
    h_peer_expect_status(&c2, h_peer_release(&c2, "d2", NULL), H_ST(OK), "d2 let go");
    h_peer_expect_status(&a, a_wait, H_ST(OK), "a's wait for d2");

    /* WRONG_KIND: a semaphore on a name held as a lock (t2, c's). */
    struct h_acq sem = {.resource = "t2", .limit = 3};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &sem), H_ST(WRONG_KIND),
                         "a semaphore on a lock's name");
    SEEN(WRONG_KIND);

    /* INTERNAL: the lock's fence key holds another type (an unexpected Redis reply). */
    char key[256];
    h_fence_key(&f.e, "wrongtype", key, sizeof key);
    ck_assert_int_eq(h_redis_int(f.r, "HSET %s field value", key), 1);
    struct h_acq wt = {.resource = "wrongtype"};
    h_peer_expect_status(&c2, h_peer_acquire(&c2, &wt), H_ST(INTERNAL), "a key of another type");
    SEEN(INTERNAL);

    /* UNAVAILABLE: Redis is gone. */
    ck_assert_int_eq(h_redis_kill(&f.e), 0);
    struct h_acq nored = {.resource = "t4"};
    uint64_t id = h_peer_acquire(&c2, &nored);
    h_peer_expect_status(&c2, id, H_ST(UNAVAILABLE), "Redis gone");
    SEEN(UNAVAILABLE);

    /*
     * SHUTTING_DOWN is sent only while handing over (test_handover, with a resume key):
     * at a plain SIGTERM every session is told (SessionClosing) and closed at once, so no
     * request of one is read after shutdown began (docs/protocol.md). What a client sees
     * instead: the event, then the end.
     */
    kill(f.e.rlockd_pid, SIGTERM);
    Rlock__V1__ServerMessage *m = h_peer_next(&c2, "SIGTERM");
    ck_assert_msg(m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_EVENT &&
                      m->event->body_case == RLOCK__V1__EVENT__BODY_SESSION_CLOSING,
                  "at SIGTERM: %s, want SessionClosing", h_msg_describe(m));
    h_raw_free(m);
    h_peer_expect_eof(&c2, "after SessionClosing");
    int status;
    ck_assert_int_eq(h_wait_exit(f.e.rlockd_pid, 10000, &status), 0);
    f.e.rlockd_pid = 0;
    seen[H_ST(SHUTTING_DOWN)] = 1;

    const ProtobufCEnumDescriptor *sd = &rlock__v1__status__descriptor;
    for (unsigned i = 0; i < sd->n_values; i++) {
        int v = sd->values[i].value;
        ck_assert_msg(v >= 0 && v < (int)T_LEN(seen) && seen[v],
                      "status %s was not produced by this test", sd->values[i].name);
    }
#undef SEEN
    h_raw_close(&a.raw);
    h_raw_close(&c.raw);
    h_raw_close(&c2.raw);
    redisFree(f.r); /* both processes are gone: no h_fixture_stop */
    h_env_stop(&f.e);
    unlink(token_file);
}
END_TEST

/* --- loss reasons -------------------------------------------------------------------- */

/* Wait until l is no longer held and return why it was lost. */
static enum rlock_lost_reason lost_reason(struct rlock_lock *l, const char *what)
{
    int64_t until = h_now_ms() + 15000;
    while (rlock_lock_state(l) != RLOCK_LOST) {
        ck_assert_msg(h_now_ms() < until, "%s: the lock was not reported lost", what);
        h_sleep_ms(10);
    }
    return rlock_lock_lost_reason(l);
}

static void expect_reason(struct rlock_lock *l, enum rlock_lost_reason want, const char *what)
{
    enum rlock_lost_reason got = lost_reason(l, what);
    ck_assert_msg(got == want, "%s: lost as %s, want %s", what, rlock_lost_reason_str(got),
                  rlock_lost_reason_str(want));
}

START_TEST(test_loss_reasons)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nmin_ttl = 300ms\n[redis]\ncommand_timeout = 100ms\n");
    char key[256];
    int seen[RLOCK_LOST_MAX_HOLD + 1] = {0};

    struct rlock_acquire_opts plain = {.ttl_ms = 600, .watchdog_off = 1};
    struct rlock_lock *l = h_acquire_ok(f.c, "expired", &plain);
    expect_reason(l, RLOCK_LOST_EXPIRED, "a lease without watchdog running out");
    seen[RLOCK_LOST_EXPIRED] = 1;
    rlock_lock_free(l);

    struct rlock_acquire_opts wd = {.ttl_ms = 900};
    l = h_acquire_ok(f.c, "stolen", &wd);
    h_lock_key(&f.e, "stolen", key, sizeof key);
    ck_assert_int_eq(h_redis_ok(f.r, "PING"), 0);
    redisReply *rep = redisCommand(f.r, "SET %s someone-else PX 60000", key);
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    expect_reason(l, RLOCK_LOST_STOLEN, "a key overwritten");
    seen[RLOCK_LOST_STOLEN] = 1;
    rlock_lock_free(l);

    l = h_acquire_ok(f.c, "missing", &wd);
    h_lock_key(&f.e, "missing", key, sizeof key);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    expect_reason(l, RLOCK_LOST_MISSING, "a key deleted");
    seen[RLOCK_LOST_MISSING] = 1;
    rlock_lock_free(l);

    l = h_acquire_ok(f.c, "forced", &wd);
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    h_assert_ok(admin, rlock_force_release(admin, "forced", 5000, NULL));
    rlock_close(admin);
    expect_reason(l, RLOCK_LOST_FORCED, "a forced release");
    seen[RLOCK_LOST_FORCED] = 1;
    rlock_lock_free(l);

    struct rlock_acquire_opts held = {.ttl_ms = 900, .max_hold_ms = 500};
    l = h_acquire_ok(f.c, "max-hold", &held);
    expect_reason(l, RLOCK_LOST_MAX_HOLD, "held for max_hold");
    seen[RLOCK_LOST_MAX_HOLD] = 1;
    rlock_lock_free(l);

    /* SESSION: raised by the library when the session ends under the lock. */
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    struct rlock_acquire_opts long_wd = {.ttl_ms = 30000};
    l = h_acquire_ok(c, "session", &long_wd);
    ck_assert_int_eq(h_rlockd_signal(&f.e, SIGKILL), 0);
    expect_reason(l, RLOCK_LOST_SESSION, "the daemon killed under the session");
    seen[RLOCK_LOST_SESSION] = 1;
    rlock_lock_free(l);
    rlock_close(c);
    ck_assert_int_eq(h_rlockd_start(&f.e), 0);

    for (int r = RLOCK_LOST_EXPIRED; r <= RLOCK_LOST_MAX_HOLD; r++)
        ck_assert_msg(seen[r], "loss reason %s was not produced", rlock_lost_reason_str(r));
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_roles, test_statuses, test_loss_reasons};
    return h_run_tests("tables", 120, tests, H_LEN(tests));
}
