/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_badinput.c — hostile bytes on the daemon's socket hurt nobody else.
 *
 * A victim session holds a lock while raw connections send: a frame header
 * announcing 2 GiB, 4 KiB of random bytes, a truncated frame, requests with
 * no operation, and a Ping before Hello. Each connection must get an error
 * and/or be closed (or, for a well-framed bad request, an INVALID answer);
 * afterwards the daemon still runs, the victim still holds its lock (and its
 * key in Redis), and new clients are served.
 */
#include "harness.h"
#include "harness_raw.h"

#include <stdio.h>
#include <string.h>

#define VICTIM_RES "badinput/victim"
#define CALL_TIMEOUT_MS 5000u
#define DEADLINE_MS 5000

/* What one ServerMessage said. */
struct reply {
    int is_response;
    uint64_t id;
    int status;
    char message[200];
};

/* The next message within the deadline, summarised into *out: as h_raw_read. */
static int read_reply(struct h_raw *c, int64_t deadline, struct reply *out)
{
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(c, deadline, &m);
    memset(out, 0, sizeof *out);
    if (got != 1)
        return got;
    const Rlock__V1__Response *r = h_raw_response(m);
    if (r != NULL) {
        out->is_response = 1;
        out->id = r->id;
        out->status = (int)r->status;
        snprintf(out->message, sizeof out->message, "%s", r->message);
    }
    h_raw_free(m);
    return 1;
}

/*
 * The daemon must close the connection within DEADLINE_MS; whatever it says
 * before that must be an error. Closes our end.
 */
static void expect_closed(struct h_raw *c, const char *what)
{
    int64_t t0 = h_now_ms();
    struct reply r;
    int got;
    while ((got = read_reply(c, t0 + DEADLINE_MS, &r)) == 1) {
        printf("badinput: %s: answered %s \"%s\" (id %llu)\n", what, wire_status_name(r.status),
               r.message, (unsigned long long)r.id);
        ck_assert_msg(!r.is_response || r.status != RLOCK__V1__STATUS__STATUS_OK,
                      "%s: the daemon answered OK", what);
    }
    printf("badinput: %s: %s after %lld ms\n", what, got == 0 ? "closed" : "STILL OPEN",
           (long long)(h_now_ms() - t0));
    fflush(stdout);
    ck_assert_msg(got == 0, "%s: connection still open after %d ms", what, DEADLINE_MS);
    h_raw_close(c);
}

static void expect_daemon_alive(const struct h_env *e, const char *after)
{
    printf("badinput: after %s: redis-server and rlockd %s\n", after,
           h_env_alive(e) ? "running" : "NOT running");
    h_assert_env_alive(e);
}

/* (1) A header announcing 2^31 bytes is refused before any body arrives. */
static void attack_huge_header(const struct h_env *e)
{
    struct h_raw c;
    h_raw_open(&c, e);
    uint8_t hdr[WIRE_HEADER_BYTES];
    wire_put_len(hdr, UINT32_C(1) << 31);
    h_raw_send_bytes(&c, hdr, sizeof hdr);
    expect_closed(&c, "2 GiB frame header");
}

/* (2) 4 KiB of random bytes, framed with a consistent length so the body must be decoded. */
static void attack_garbage(const struct h_env *e)
{
    static uint8_t junk[4096];
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < sizeof junk; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        junk[i] = (uint8_t)(x >> 32);
    }
    wire_put_len(junk, (uint32_t)(sizeof junk - WIRE_HEADER_BYTES));
    struct h_raw c;
    h_raw_open(&c, e);
    h_raw_send_bytes(&c, junk, sizeof junk);
    expect_closed(&c, "4 KiB of random bytes");
}

/* (3) A header for 100 bytes, 10 of them, then our end closes. */
static void attack_truncated(const struct h_env *e)
{
    uint8_t frame[WIRE_HEADER_BYTES + 10] = {0};
    wire_put_len(frame, 100);
    memset(frame + WIRE_HEADER_BYTES, 0x08, 10);
    struct h_raw c;
    h_raw_open(&c, e);
    h_raw_send_bytes(&c, frame, sizeof frame);
    h_raw_close(&c);
    h_sleep_ms(200);
}

/*
 * (4) After Hello, a well-framed request naming no operation gets INVALID.
 * raw is a hand-encoded Request body (NULL: a Request with only id set).
 * If the daemon keeps the connection, a Ping on it must still work.
 */
static void attack_no_op(const struct h_env *e, uint64_t id, const uint8_t *raw, size_t raw_len)
{
    struct h_raw c;
    h_raw_open(&c, e);
    h_raw_hello(&c, 1, "badinput", 0);
    if (raw == NULL) {
        Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
        req.id = id;
        ck_assert_int_eq(h_raw_send(&c, &req), 0);
    } else {
        ck_assert_int_eq(h_raw_send_body(&c, raw, raw_len), 0);
    }
    struct reply r;
    ck_assert_msg(read_reply(&c, h_now_ms() + DEADLINE_MS, &r) == 1,
                  "no answer to a request without an operation (id %llu)", (unsigned long long)id);
    printf("badinput: request %llu without an operation: %s \"%s\"\n", (unsigned long long)r.id,
           wire_status_name(r.status), r.message);
    ck_assert_msg(r.is_response && r.id == id && r.status == RLOCK__V1__STATUS__STATUS_INVALID,
                  "request %llu without an operation: id %llu status %s",
                  (unsigned long long)id, (unsigned long long)r.id, wire_status_name(r.status));

    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = id + 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    if (h_raw_send(&c, &req) == 0) {
        int got = read_reply(&c, h_now_ms() + DEADLINE_MS, &r);
        ck_assert_msg(got == 0 || (got == 1 && r.id == id + 1 &&
                                   r.status == RLOCK__V1__STATUS__STATUS_OK),
                      "Ping after the INVALID answer: got %d id %llu status %s", got,
                      (unsigned long long)r.id, wire_status_name(r.status));
        printf("badinput: connection after INVALID: %s\n", got == 0 ? "closed" : "Ping OK");
    }
    fflush(stdout);
    h_raw_close(&c);
}

/* (5) Ping before Hello: an error answer and/or the connection closed. */
static void attack_ping_first(const struct h_env *e)
{
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 3;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    struct h_raw c;
    h_raw_open(&c, e);
    h_raw_send(&c, &req);
    struct reply r;
    int got = read_reply(&c, h_now_ms() + DEADLINE_MS, &r);
    ck_assert_msg(got >= 0, "Ping before Hello: neither an answer nor a close in %d ms",
                  DEADLINE_MS);
    printf("badinput: Ping before Hello: %s %s \"%s\"\n", got == 0 ? "closed" : "answered",
           got == 1 ? wire_status_name(r.status) : "", got == 1 ? r.message : "");
    fflush(stdout);
    ck_assert_msg(got == 0 || (r.is_response && r.status != RLOCK__V1__STATUS__STATUS_OK),
                  "Ping before Hello was answered OK");
    h_raw_close(&c);
}

START_TEST(test_badinput)
{
    struct h_fixture f; /* f.c is the victim session */
    h_fixture_start(&f, NULL);
    struct rlock_lock *vl = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = 30000, .wait_ms = 0};
    ck_assert_int_eq(rlock_acquire(f.c, VICTIM_RES, &o, CALL_TIMEOUT_MS, &vl), RLOCK_OK);

    attack_huge_header(&f.e);
    expect_daemon_alive(&f.e, "the 2 GiB header");
    attack_garbage(&f.e);
    expect_daemon_alive(&f.e, "random bytes");
    attack_truncated(&f.e);
    expect_daemon_alive(&f.e, "a truncated frame");
    attack_no_op(&f.e, 7, NULL, 0);
    /* Request{id = 9, field 99 = 1}: an unknown field and no operation. */
    static const uint8_t unknown_field[] = {0x08, 0x09, 0x98, 0x06, 0x01};
    attack_no_op(&f.e, 9, unknown_field, sizeof unknown_field);
    expect_daemon_alive(&f.e, "requests without an operation");
    attack_ping_first(&f.e);
    expect_daemon_alive(&f.e, "a Ping before Hello");

    /* The victim noticed nothing. */
    ck_assert_int_eq(rlock_lock_state(vl), RLOCK_HELD);
    ck_assert_int_eq(rlock_ping(f.c, CALL_TIMEOUT_MS, NULL), RLOCK_OK);
    char key[512];
    h_lock_key(&f.e, VICTIM_RES, key, sizeof key);
    h_assert_key_token(f.r, key, rlock_lock_token(vl));

    /* And newcomers are served. */
    struct rlock_client *fresh = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *fl = NULL;
    ck_assert_int_eq(rlock_acquire(fresh, VICTIM_RES, &o, CALL_TIMEOUT_MS, &fl),
                     RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_int_eq(rlock_acquire(fresh, "badinput/other", &o, CALL_TIMEOUT_MS, &fl), RLOCK_OK);
    ck_assert_int_eq(rlock_release(fl, CALL_TIMEOUT_MS), RLOCK_OK);
    expect_daemon_alive(&f.e, "the whole test");

    rlock_lock_free(fl);
    rlock_lock_free(vl);
    rlock_close(fresh);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_badinput };
    return h_run_tests("integration_badinput", 90, tests, H_LEN(tests));
}
