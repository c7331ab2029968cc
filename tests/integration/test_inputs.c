/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_inputs.c — names the daemon must refuse, and Redis keys of a type it
 * does not expect.
 *
 *   resource_names  invalid UTF-8 (overlong, truncated, lone continuation
 *                   byte, surrogate, beyond U+10FFFF) and control characters
 *                   (U+0000–U+001F, U+007F, C1 U+0080–U+009F) in an Acquire's
 *                   resource: INVALID with the reason, nothing reaches Redis,
 *                   and the session goes on. Valid names next to those limits
 *                   (U+00A0, U+D7FF, U+E000, U+10FFFF, ...) are granted.
 *   client_names    the same bytes in Hello's client_name: INVALID, and the
 *                   connection is closed (a bad Hello ends it)
 *   wrongtype_*     a list at a lock key (NOT_ACQUIRED: the key is taken),
 *                   a hash at a fence key (the acquire fails with INTERNAL and
 *                   its message, and leaves no lock key), a list put where a
 *                   held lock's key was (that lock is lost as STOLEN, the lock
 *                   renewed in the same call is not): in every case the foreign
 *                   key is left alone and the daemon and other locks go on.
 *   python_encoder  the same kinds as Python's protobuf runtime encodes them
 *                   (encode_python.py): each answered as it should be
 *   explicit_defaults every request kind written with its default fields
 *                   (0, "", false) as protobufjs writes them: answered as its
 *                   canonical encoding is (Hello opens, Acquire grants,
 *                   Release frees).
 */
#include "harness.h"
#include "harness_peer.h"
#include "harness_raw.h"
#include "wire.h"

#include <stdlib.h>
#include <sys/wait.h>

#if !defined(ENCODE_PYTHON) || !defined(PROTO_DIR)
#error "ENCODE_PYTHON must name tests/integration/encode_python.py, PROTO_DIR proto/"
#endif
#define PYTHON "/usr/bin/python3" /* Debian's, where python3-protobuf is */

#include <stdio.h>
#include <string.h>

#define TTL_MS 30000u

struct name_case {
    const char *bytes;
    const char *what;
};

static const struct name_case bad_utf8[] = {
    {"\xc0\xaf", "overlong 2-byte '/'"},
    {"\xc1\xbf", "overlong 2-byte U+007F"},
    {"\xe0\x80\xaf", "overlong 3-byte '/'"},
    {"\xe0\x9f\xbf", "overlong 3-byte U+07FF"},
    {"\xf0\x80\x80\xaf", "overlong 4-byte '/'"},
    {"\xf0\x8f\xbf\xbf", "overlong 4-byte U+FFFF"},
    {"ab\xe2\x82", "truncated 3-byte sequence at the end"},
    {"\xe2\x82z", "truncated 3-byte sequence before an ASCII byte"},
    {"x\xf0\x9f\x94", "truncated 4-byte sequence"},
    {"\x80", "lone continuation byte"},
    {"a\xbf" "b", "continuation byte between ASCII"},
    {"\xed\xa0\x80", "surrogate U+D800"},
    {"\xed\xbf\xbf", "surrogate U+DFFF"},
    {"\xf4\x90\x80\x80", "U+110000"},
    {"\xf5\x80\x80\x80", "lead byte F5"},
    {"\xfe", "byte FE"},
    {"\xff", "byte FF"},
};

static const struct name_case control[] = {
    {"\x01", "U+0001"},
    {"a\tb", "U+0009 (tab)"},
    {"a\nb", "U+000A (newline)"},
    {"a\x1f", "U+001F"},
    {"\x7f", "U+007F (DEL)"},
    {"x\xc2\x80", "U+0080 (C1)"},
    {"\xc2\x85", "U+0085 (C1 NEL)"},
    {"\xc2\x9f" "x", "U+009F (C1)"},
};

static const struct name_case good[] = {
    {" ~", "U+0020 and U+007E"},
    {"caf\xc3\xa9", "U+00E9"},
    {"\xc2\xa0", "U+00A0, right after C1"},
    {"\xdf\xbf", "U+07FF"},
    {"\xe0\xa0\x80", "U+0800"},
    {"\xed\x9f\xbf", "U+D7FF, right before the surrogates"},
    {"\xee\x80\x80", "U+E000, right after the surrogates"},
    {"\xef\xbf\xbd", "U+FFFD"},
    {"\xf0\x90\x80\x80", "U+10000"},
    {"\xf4\x8f\xbf\xbf", "U+10FFFF"},
    {"\xf0\x9f\x94\x92", "U+1F512"},
};

/* The number of keys under e's prefix. */
static long long prefix_keys(redisContext *r, const struct h_env *e)
{
    redisReply *rep = redisCommand(r, "KEYS %s*", e->prefix);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_ARRAY, "KEYS failed");
    long long n = (long long)rep->elements;
    freeReplyObject(rep);
    return n;
}

START_TEST(test_inputs_resource_names)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer p;
    h_peer_open(&p, &f.e, "inputs");
    char what[128];
    int refused = 0;
    for (size_t i = 0; i < H_LEN(bad_utf8); i++) {
        struct h_acq a = {.resource = bad_utf8[i].bytes, .ttl_ms = TTL_MS};
        snprintf(what, sizeof what, "resource with %s", bad_utf8[i].what);
        h_peer_expect_error(&p, h_peer_acquire(&p, &a), H_ST(INVALID), "not valid UTF-8", what);
        h_peer_ping(&p, what);
        refused++;
    }
    for (size_t i = 0; i < H_LEN(control); i++) {
        struct h_acq a = {.resource = control[i].bytes, .ttl_ms = TTL_MS};
        snprintf(what, sizeof what, "resource with %s", control[i].what);
        h_peer_expect_error(&p, h_peer_acquire(&p, &a), H_ST(INVALID), "control characters",
                            what);
        h_peer_ping(&p, what);
        refused++;
    }
    /*
     * U+0000: Request{id 50, acquire{resource "a\0b"}}. The decoder cuts the
     * string at the NUL; the daemon reads the string as sent and refuses it.
     */
    static const uint8_t nul[] = {0x08, 50, 0x1a, 0x05, 0x0a, 0x03, 'a', 0x00, 'b'};
    ck_assert_int_eq(h_raw_send_body(&p.raw, nul, sizeof nul), 0);
    h_peer_expect_error(&p, 50, H_ST(INVALID), "NUL byte", "resource with U+0000");
    h_peer_ping(&p, "after U+0000");
    refused++;
    long long keys = prefix_keys(f.r, &f.e);
    printf("inputs: FIGURE %d names refused; keys in Redis after them: %lld\n", refused, keys);
    ck_assert_msg(keys == 0, "%lld keys in Redis after refused names", keys);

    for (size_t i = 0; i < H_LEN(good); i++) {
        struct h_acq a = {.resource = good[i].bytes, .ttl_ms = TTL_MS};
        struct h_grant g;
        char key[256];
        snprintf(what, sizeof what, "resource with %s", good[i].what);
        h_peer_acquire_ok(&p, &a, &g, what);
        h_assert_key_token(f.r, h_lock_key(&f.e, good[i].bytes, key, sizeof key), g.token);
        h_peer_release_ok(&p, good[i].bytes, g.token, 0, what);
    }
    printf("inputs: FIGURE %zu names next to the limits granted and released\n", H_LEN(good));
    h_peer_expect_stats(&p, 0, 0, "at the end");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/* Hello with client_name name: INVALID naming text, then the connection closes. */
static void bad_hello(const struct h_env *e, const char *name, const char *text, const char *what)
{
    struct h_peer p = {.name = what, .last_id = 1};
    h_raw_open(&p.raw, e);
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    hello.client_name = (char *)name;
    hello.protocol_version = WIRE_PROTOCOL_VERSION;
    struct h_raw_batch b = {.len = 0};
    h_raw_batch_add_body(&b, 1, RLOCK__V1__REQUEST__BODY_HELLO, &hello);
    h_peer_send_batch(&p, &b);
    h_peer_expect_error(&p, 1, H_ST(INVALID), text, what);
    h_peer_expect_eof(&p, what);
    h_raw_close(&p.raw);
}

START_TEST(test_inputs_client_names)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char what[128];
    for (size_t i = 0; i < H_LEN(bad_utf8); i++) {
        snprintf(what, sizeof what, "client_name with %s", bad_utf8[i].what);
        bad_hello(&f.e, bad_utf8[i].bytes, "client_name not valid UTF-8", what);
    }
    for (size_t i = 0; i < H_LEN(control); i++) {
        snprintf(what, sizeof what, "client_name with %s", control[i].what);
        bad_hello(&f.e, control[i].bytes, "client_name contains control characters", what);
    }
    /* U+0000: Request{id 1, hello{client_name "a\0b"}}: cut short by the decoder, refused. */
    struct h_peer p = {.name = "client_name with U+0000", .last_id = 1};
    h_raw_open(&p.raw, &f.e);
    static const uint8_t nul[] = {0x08, 0x01, 0x12, 0x05, 0x0a, 0x03, 'a', 0x00, 'b'};
    ck_assert_int_eq(h_raw_send_body(&p.raw, nul, sizeof nul), 0);
    h_peer_expect_error(&p, 1, H_ST(INVALID), "NUL byte", p.name);
    h_peer_expect_eof(&p, p.name); /* closed, as every other refused Hello */
    h_raw_close(&p.raw);

    for (size_t i = 0; i < H_LEN(good); i++) {
        struct h_peer ok;
        snprintf(what, sizeof what, "client_name with %s", good[i].what);
        h_raw_open(&ok.raw, &f.e);
        h_raw_hello(&ok.raw, 1, good[i].bytes, 0);
        h_raw_close(&ok.raw);
    }
    printf("inputs: FIGURE %zu bad client names refused, %zu good ones accepted\n",
           H_LEN(bad_utf8) + H_LEN(control) + 1, H_LEN(good));
    h_fixture_stop(&f);
}
END_TEST

/* --- keys of another type ----------------------------------------------------------- */

#define HELD_RES "wrongtype/held"
#define HELD_TTL_MS 1000u
#define WATCH_MS 3000

/* A lock of f's client, renewed every ttl/3, that must come through untouched. */
static struct rlock_lock *hold_bystander(struct h_fixture *f, const char *resource)
{
    struct rlock_acquire_opts o = {.ttl_ms = HELD_TTL_MS};
    return h_acquire_ok(f->c, resource, &o);
}

/* l is held, renewed, its key holds its token; nothing of f's client was lost. */
static void expect_bystander_fine(struct h_fixture *f, struct rlock_lock *l, int lost)
{
    char key[256];
    h_lock_key(&f->e, rlock_lock_resource(l), key, sizeof key);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    ck_assert_int_eq(atomic_load(&f->lost.count), lost);
    h_assert_key_token(f->r, key, rlock_lock_token(l));
    long long pttl = h_pttl(f->r, key);
    ck_assert_msg(pttl > 0 && pttl <= HELD_TTL_MS, "the bystander's PTTL is %lld", pttl);
}

/* After the foreign key: the bystander came through, nothing else is held; close up. */
static void finish(struct h_fixture *f, struct h_peer *p, struct rlock_lock *held,
                   const char *what)
{
    h_sleep_ms(WATCH_MS);
    expect_bystander_fine(f, held, 0);
    h_peer_expect_stats(p, 0, 1, what);
    h_raw_close(&p->raw);
    h_release_gone(f, f->c, held);
    rlock_lock_free(held);
    h_fixture_stop(f);
}

static void expect_type(redisContext *r, const char *key, const char *type)
{
    redisReply *rep = redisCommand(r, "TYPE %s", key);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, type) == 0,
                  "%s is of type %s, not %s", key, rep ? rep->str : "?", type);
    freeReplyObject(rep);
}

START_TEST(test_inputs_wrongtype_lock_key)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *held = hold_bystander(&f, HELD_RES);
    char key[256];
    h_lock_key(&f.e, "wrongtype/list", key, sizeof key);
    ck_assert_int_eq(h_redis_int(f.r, "LPUSH %s x", key), 1);

    struct h_peer p;
    h_peer_open(&p, &f.e, "inputs");
    struct h_acq a = {.resource = "wrongtype/list", .ttl_ms = TTL_MS};
    h_peer_expect_status(&p, h_peer_acquire(&p, &a), H_ST(NOT_ACQUIRED), "a try of a list key");
    a.wait_ms = 1500;
    h_peer_expect_status(&p, h_peer_acquire(&p, &a), H_ST(TIMEOUT), "a wait for a list key");
    expect_type(f.r, key, "list");
    ck_assert_int_eq(h_redis_int(f.r, "LLEN %s", key), 1);
    finish(&f, &p, held, "after the list key");
}
END_TEST

START_TEST(test_inputs_wrongtype_fence_key)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *held = hold_bystander(&f, HELD_RES);
    char key[256], fence[256];
    h_lock_key(&f.e, "wrongtype/fence", key, sizeof key);
    h_fence_key(&f.e, "wrongtype/fence", fence, sizeof fence);
    ck_assert_int_eq(h_redis_int(f.r, "HSET %s f v", fence), 1);

    struct h_peer p;
    h_peer_open(&p, &f.e, "inputs");
    struct h_acq a = {.resource = "wrongtype/fence", .ttl_ms = TTL_MS};
    uint64_t id = h_peer_acquire(&p, &a);
    Rlock__V1__ServerMessage *m = h_peer_response(&p, id, "an acquire with a hash as fence key");
    printf("inputs: FIGURE a hash at the fence key: %s\n", h_msg_describe(m));
    ck_assert_msg(m->response->status == H_ST(INTERNAL) &&
                      strstr(m->response->message, "refused the acquire script") != NULL,
                  "an acquire with a hash as fence key: %s", h_msg_describe(m));
    h_raw_free(m);
    /* acquire.lua set the lock key before INCR failed: the daemon deletes it by token. */
    ck_assert_msg(h_wait_key_gone(f.r, key, 2000, &f.e) >= 0, "the failed acquire left its key");
    expect_type(f.r, fence, "hash");
    h_peer_ping(&p, "the session goes on");
    finish(&f, &p, held, "after the hash fence key");
}
END_TEST

/*
 * Both locks in one renew call (a pool of one connection): the GET of the
 * list fails inside renew.lua, which must cost only that lock.
 */
START_TEST(test_inputs_wrongtype_held_key)
{
    struct h_fixture f;
    h_fixture_start(&f, "[redis]\npool_size = 1\n");
    struct rlock_lock *victim = hold_bystander(&f, "wrongtype/victim");
    struct rlock_lock *held = hold_bystander(&f, HELD_RES);
    char key[256];
    h_lock_key(&f.e, "wrongtype/victim", key, sizeof key);
    redisReply *rep = redisCommand(f.r, "EVAL %s 1 %s", "redis.call('DEL', KEYS[1]) "
                                   "return redis.call('RPUSH', KEYS[1], 'x')", key);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_INTEGER, "replacing the key failed");
    freeReplyObject(rep);
    int64_t t = h_now_ms();

    int64_t deadline = t + 2000;
    while (atomic_load(&f.lost.count) == 0 && h_now_ms() < deadline)
        h_sleep_ms(5);
    printf("inputs: FIGURE a list put at a held lock's key: LockLost(%s) after %lld ms\n",
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&f.lost.reason)),
           (long long)(atomic_load(&f.lost.first_ms) - t));
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_STOLEN);
    ck_assert_int_eq(rlock_lock_state(victim), RLOCK_LOST);
    h_sleep_ms(WATCH_MS);
    expect_bystander_fine(&f, held, 1);
    expect_type(f.r, key, "list");

    /* The daemon still grants new locks. */
    struct rlock_lock *fresh = h_acquire_ok(f.c, "wrongtype/fresh", NULL);
    h_release_gone(&f, f.c, fresh);
    rlock_lock_free(fresh);
    h_release_gone(&f, f.c, held);
    rlock_lock_free(held);
    rlock_lock_free(victim);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A client that sends and never reads: once its unread answers pass
 * max_output_bytes (beyond what the kernel's socket buffers hold), the daemon
 * closes that connection instead of buffering for it without bound; another
 * session and its lock are untouched.
 */
START_TEST(test_inputs_slow_reader)
{
    struct h_fixture f;
    h_fixture_start(&f, "[server]\nmax_output_bytes = 65536\n");
    struct rlock_lock *l = h_acquire_ok(f.c, "inputs/bystander", NULL);
    struct h_raw r;
    h_raw_session(&r, &f.e, "slow-reader");
    /* Request{ping{}} (32 00) framed, many to a write: answers ~20 bytes each. */
    uint8_t batch[6 * 1000];
    for (size_t i = 0; i < sizeof batch; i += 6) {
        wire_put_len(batch + i, 2);
        batch[i + 4] = 0x32;
        batch[i + 5] = 0x00;
    }
    int sent = 0, closed = 0;
    int64_t give_up = h_now_ms() + 30000;
    while (!closed && h_now_ms() < give_up && sent < 2000) {
        closed = h_raw_send_bytes(&r, batch, sizeof batch) != 0;
        sent += !closed;
        if (sent % 50 == 0)
            closed = closed || h_log_find(&f.e, "disconnecting slow reader", NULL);
    }
    printf("inputs: FIGURE slow reader: %d pings sent unread before the close\n", sent * 1000);
    ck_assert_msg(h_log_wait(&f.e, "disconnecting slow reader", 10000, NULL) == 0,
                  "a client that never reads was never disconnected (%d pings sent)",
                  sent * 1000);
    h_raw_close(&r);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    h_assert_ok(f.c, rlock_release(l, 5000));
    rlock_lock_free(l);
    h_fixture_stop(&f);
}
END_TEST

/* --- requests as encoders that write every default encode them -------------------------- */

/* Send req (body of kind bc, id from p) written by h_encode_explicit; its answer. */
static Rlock__V1__ServerMessage *send_explicit(struct h_peer *p,
                                               Rlock__V1__Request__BodyCase bc, void *body,
                                               const char *what)
{
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = h_peer_next_id(p);
    req.body_case = bc;
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(&rlock__v1__request__descriptor, (unsigned)bc);
    ck_assert_ptr_nonnull(fd);
    *(void **)((char *)&req + fd->offset) = body;
    /* Longer unless the body has no field at its default (Ping has none at all). */
    size_t canonical = rlock__v1__request__get_packed_size(&req);
    ck_assert_msg(h_encode_explicit(&req.base, NULL) >= canonical,
                  "%s: the explicit encoding is shorter than the canonical one", what);
    ck_assert_int_eq(h_raw_send_explicit(&p->raw, &req), 0);
    return h_peer_response(p, req.id, what);
}

/* body sent canonically, then with every default written: the same answer both times. */
static void same_answer(struct h_peer *p, Rlock__V1__Request__BodyCase bc, void *body,
                        const char *what)
{
    uint64_t id = h_peer_send(p, bc, body);
    Rlock__V1__ServerMessage *c = h_peer_response(p, id, what);
    Rlock__V1__ServerMessage *e = send_explicit(p, bc, body, what);
    ck_assert_msg(c->response->status == e->response->status &&
                      c->response->body_case == e->response->body_case,
                  "%s: canonical: %s; with explicit defaults: %s", what, h_msg_describe(c),
                  h_msg_describe(e));
    printf("inputs: %-13s answered %s both ways\n", what,
           wire_status_name((int)c->response->status));
    h_raw_free(c);
    h_raw_free(e);
}

/*
 * protobufjs (and other encoders) write fields set to 0, "" or false; proto3
 * reads them as the defaults. Every request kind of a session, so written,
 * is answered as its canonical encoding is: Hello opens the session, Acquire
 * grants, Release frees, the rest answer what they answer canonically.
 */
START_TEST(test_inputs_explicit_defaults)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer p = {.name = "explicit", .last_id = 0};
    h_raw_open(&p.raw, &f.e);
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    hello.client_name = "explicit";
    Rlock__V1__ServerMessage *m = send_explicit(&p, RLOCK__V1__REQUEST__BODY_HELLO, &hello, "Hello");
    ck_assert_msg(m->response->status == H_ST(OK), "Hello: %s", h_msg_describe(m));
    h_raw_free(m);

    Rlock__V1__Acquire acq = RLOCK__V1__ACQUIRE__INIT;
    acq.resource = "explicit/r";
    m = send_explicit(&p, RLOCK__V1__REQUEST__BODY_ACQUIRE, &acq, "Acquire");
    ck_assert_msg(m->response->status == H_ST(OK), "Acquire: %s", h_msg_describe(m));
    char key[256];
    h_assert_key_token(f.r, h_lock_key(&f.e, acq.resource, key, sizeof key),
                       m->response->acquire->token);
    h_raw_free(m);

    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    ext.resource = acq.resource;
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Stats stats = RLOCK__V1__STATS__INIT;
    Rlock__V1__Cancel cancel = RLOCK__V1__CANCEL__INIT;
    Rlock__V1__ServerInfo info = RLOCK__V1__SERVER_INFO__INIT;
    Rlock__V1__ListSessions ls = RLOCK__V1__LIST_SESSIONS__INIT;
    Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
    Rlock__V1__ForceRelease fr = RLOCK__V1__FORCE_RELEASE__INIT;
    fr.resource = "explicit/free";
    Rlock__V1__KillSession ks = RLOCK__V1__KILL_SESSION__INIT;
    const struct {
        Rlock__V1__Request__BodyCase bc;
        void *body;
        const char *what;
    } kinds[] = {
        {RLOCK__V1__REQUEST__BODY_EXTEND, &ext, "Extend"},
        {RLOCK__V1__REQUEST__BODY_PING, &ping, "Ping"},
        {RLOCK__V1__REQUEST__BODY_STATS, &stats, "Stats"},
        {RLOCK__V1__REQUEST__BODY_CANCEL, &cancel, "Cancel"},
        {RLOCK__V1__REQUEST__BODY_SERVER_INFO, &info, "ServerInfo"},
        {RLOCK__V1__REQUEST__BODY_LIST_SESSIONS, &ls, "ListSessions"},
        {RLOCK__V1__REQUEST__BODY_LIST_LOCKS, &ll, "ListLocks"},
        {RLOCK__V1__REQUEST__BODY_FORCE_RELEASE, &fr, "ForceRelease"},
        {RLOCK__V1__REQUEST__BODY_KILL_SESSION, &ks, "KillSession"},
    };
    for (size_t i = 0; i < H_LEN(kinds); i++)
        same_answer(&p, kinds[i].bc, kinds[i].body, kinds[i].what);

    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = acq.resource;
    m = send_explicit(&p, RLOCK__V1__REQUEST__BODY_RELEASE, &rel, "Release");
    ck_assert_msg(m->response->status == H_ST(OK) && m->response->release->hold_count == 0,
                  "Release: %s", h_msg_describe(m));
    h_raw_free(m);
    ck_assert_msg(h_wait_key_gone(f.r, key, 5000, &f.e) >= 0, "the released key is still there");
    Rlock__V1__Goodbye bye = RLOCK__V1__GOODBYE__INIT;
    m = send_explicit(&p, RLOCK__V1__REQUEST__BODY_GOODBYE, &bye, "Goodbye");
    ck_assert_msg(m->response->status == H_ST(OK), "Goodbye: %s", h_msg_describe(m));
    h_raw_free(m);
    h_peer_expect_eof(&p, "after Goodbye");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A second, independent encoder: Python's protobuf runtime (python3-protobuf,
 * rlock_pb2 generated by protoc at the test's start) sends every request kind
 * of a session with the fields an application would set (encode_python.py
 * checks each answer).
 */
START_TEST(test_inputs_python_encoder)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char out[320], err[320], status_text[32];
    h_env_path(&f.e, "python.out", out, sizeof out);
    h_env_path(&f.e, "python.err", err, sizeof err);
    char *argv[] = {PYTHON, ENCODE_PYTHON, f.e.rlockd_sock, PROTO_DIR, f.e.dir, NULL};
    pid_t pid = h_spawn_io(argv, out, err);
    ck_assert_msg(pid > 0, "cannot run %s", PYTHON);
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, 30000, &status) == 0, "encode_python.py did not finish");
    h_print_tail(out, 20);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        h_print_tail(err, 20);
        ck_abort_msg("encode_python.py failed (%s)",
                     h_status_str(status, status_text, sizeof status_text));
    }
    char *text = h_read_file(out);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "13 of 13 answered") != NULL, "encode_python.py: %s", text);
    free(text);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_inputs_resource_names, test_inputs_client_names, test_inputs_wrongtype_lock_key,
        test_inputs_wrongtype_fence_key, test_inputs_wrongtype_held_key,
        test_inputs_slow_reader, test_inputs_explicit_defaults, test_inputs_python_encoder,
    };
    return h_run_tests("inputs", 60, tests, H_LEN(tests));
}
