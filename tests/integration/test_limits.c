/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_limits.c — every limit at its edge: the last value accepted and the
 * first refused, with the status and message the daemon gives.
 *
 *   frame           max_frame_bytes 1024: a 1024-byte frame is read (a Ping
 *                   padded with an unknown field), a 1025-byte one is refused
 *                   (INVALID, id 0) and closes the connection
 *   session_locks   [session] max_locks 3: three locks, the fourth refused
 *                   (LIMIT_EXCEEDED); re-entries do not count, requests in
 *                   flight do
 *   daemon_locks    [limits] max_locks 4 over all sessions, waiters counted;
 *                   also for a burst of tries in one write
 *   waiters         [limits] max_waiters 2: a third waiter refused, a try not
 *   ttl             min_ttl 1 s / max_ttl 10 s, for Acquire and Extend
 *   resource_bytes  max_resource_bytes 64: empty refused, 64 bytes (ASCII or
 *                   two-byte characters) accepted, 65/66 refused
 *   extend_in_flight  a second Extend of a lock while one is in Redis:
 *                   LIMIT_EXCEEDED, in one write and across a Redis stall; the
 *                   lock takes Extends again once the first is answered
 *   hello_timeout   Hello's session_timeout_ms clamped to [session]
 *                   min_timeout / max_timeout (and 0 = [session] timeout), in
 *                   the HelloReply and in what the daemon enforces
 */
#include "harness.h"
#include "harness_peer.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define TTL_MS 5000u
#define LONG_WAIT_MS 20000u

/* --- frames ------------------------------------------------------------------------- */

#define FRAME_MAX 1024u

/*
 * Request{id, ping{}, field 99: n bytes} of exactly len bytes: 08 id, 32 00,
 * 9a 06 <2-byte varint n> <n bytes>. Field 99 is unknown to the schema (a
 * field the schema has, such as 15, Resume, would be decoded as that
 * message); an unknown field survives decoding and re-encoding, so the frame
 * is canonical and answered like any Ping.
 */
static size_t padded_ping(uint8_t *buf, uint64_t id, size_t len)
{
    size_t n = len - 8;
    ck_assert(id < 128 && n >= 128 && n < 16384);
    uint8_t head[8] = {0x08, (uint8_t)id, 0x32, 0x00, 0x9a, 0x06, (uint8_t)(0x80 | (n & 0x7f)),
                       (uint8_t)(n >> 7)};
    memcpy(buf, head, sizeof head);
    memset(buf + sizeof head, 'p', n);
    return len;
}

START_TEST(test_limits_frame)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[server]\nmax_frame_bytes = 1024\n");
    struct h_peer p;
    h_peer_open(&p, &f.e, "framer");
    uint8_t body[FRAME_MAX + 1];

    ck_assert_int_eq(h_raw_send_body(&p.raw, body, padded_ping(body, 10, FRAME_MAX)), 0);
    Rlock__V1__ServerMessage *m = h_peer_response(&p, 10, "a frame of max_frame_bytes");
    ck_assert_msg(m->response->status == H_ST(OK) &&
                      m->response->body_case == RLOCK__V1__RESPONSE__BODY_PING,
                  "a frame of exactly max_frame_bytes: %s", h_msg_describe(m));
    printf("limits: FIGURE a %u-byte frame: %s\n", FRAME_MAX, h_msg_describe(m));
    h_raw_free(m);
    p.last_id = 10;
    h_peer_ping(&p, "after a frame of max_frame_bytes");

    ck_assert_int_eq(h_raw_send_body(&p.raw, body, padded_ping(body, 20, FRAME_MAX + 1)), 0);
    m = h_peer_response(&p, 0, "a frame one byte over max_frame_bytes");
    printf("limits: FIGURE a %u-byte frame: %s\n", FRAME_MAX + 1, h_msg_describe(m));
    ck_assert_msg(m->response->status == H_ST(INVALID) &&
                      strstr(m->response->message, "exceeds max_frame_bytes") != NULL,
                  "a frame one byte over max_frame_bytes: %s", h_msg_describe(m));
    h_raw_free(m);
    h_peer_expect_eof(&p, "after a frame one byte over max_frame_bytes");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- locks -------------------------------------------------------------------------- */

static const char *res_name(char *buf, size_t len, const char *base, int i)
{
    snprintf(buf, len, "%s-%d", base, i);
    return buf;
}

START_TEST(test_limits_session_locks)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[session]\nmax_locks = 3\n");
    struct h_peer p;
    h_peer_open(&p, &f.e, "session");
    char name[4][32];
    struct h_grant g[4], re;
    for (int i = 0; i < 3; i++) {
        struct h_acq a = {.resource = res_name(name[i], sizeof name[i], "sl", i), .ttl_ms = TTL_MS};
        h_peer_acquire_ok(&p, &a, &g[i], "one of three locks");
    }
    struct h_acq fourth = {.resource = res_name(name[3], sizeof name[3], "sl", 3),
                           .ttl_ms = TTL_MS};
    h_peer_expect_error(&p, h_peer_acquire(&p, &fourth), H_ST(LIMIT_EXCEEDED),
                        "too many locks held or awaited by this session", "a fourth lock");
    struct h_acq again = {.resource = name[0], .ttl_ms = TTL_MS};
    h_peer_acquire_ok(&p, &again, &re, "a re-entry at the limit");
    ck_assert_uint_eq(re.hold_count, 2);
    h_peer_release_ok(&p, name[0], "", 1, "the re-entry's release");
    h_peer_release_ok(&p, name[0], "", 0, "a release");

    /* Two held, two more in one write: the first is in flight when the second is read. */
    struct h_raw_batch b = {.len = 0};
    Rlock__V1__Acquire m0 = h_acquire_msg(&(struct h_acq){.resource = name[0], .ttl_ms = TTL_MS});
    Rlock__V1__Acquire m3 = h_acquire_msg(&fourth);
    uint64_t id0 = h_peer_next_id(&p), id3 = h_peer_next_id(&p);
    h_raw_batch_add_body(&b, id0, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m0);
    h_raw_batch_add_body(&b, id3, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m3);
    h_peer_send_batch(&p, &b);
    h_peer_expect_error(&p, id3, H_ST(LIMIT_EXCEEDED), "by this session",
                        "a fourth lock while the third is in flight");
    h_peer_expect_grant(&p, id0, &g[0], "the third lock, in flight");
    h_peer_expect_stats(&p, 0, 3, "at the limit");
    printf("limits: FIGURE [session] max_locks 3: 3 held, the 4th refused (also with the 3rd in "
           "flight), a re-entry accepted\n");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

#define DAEMON_MAX 4

START_TEST(test_limits_daemon_locks)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[limits]\nmax_locks = 4\n");
    struct h_peer s1, s2, s3;
    h_peer_open(&s1, &f.e, "S1");
    h_peer_open(&s2, &f.e, "S2");
    h_peer_open(&s3, &f.e, "S3");
    char name[8][32];
    struct h_grant g[8];
    for (int i = 0; i < 3; i++) {
        struct h_acq a = {.resource = res_name(name[i], sizeof name[i], "dl", i), .ttl_ms = TTL_MS};
        h_peer_acquire_ok(&s1, &a, &g[i], "S1's locks");
    }
    struct h_acq a3 = {.resource = res_name(name[3], sizeof name[3], "dl", 3), .ttl_ms = TTL_MS};
    h_peer_acquire_ok(&s2, &a3, &g[3], "S2's lock, the fourth in the daemon");
    struct h_acq a4 = {.resource = res_name(name[4], sizeof name[4], "dl", 4), .ttl_ms = TTL_MS};
    h_peer_expect_error(&s3, h_peer_acquire(&s3, &a4), H_ST(LIMIT_EXCEEDED), "limits.max_locks",
                        "a fifth lock in the daemon");
    /* A waiter counts: three held and one waiting fill the daemon again. */
    h_peer_release_ok(&s2, name[3], g[3].token, 0, "S2's release");
    struct h_acq w = {.resource = name[0], .ttl_ms = TTL_MS, .wait_ms = LONG_WAIT_MS};
    uint64_t wid = h_peer_acquire(&s2, &w);
    h_peer_ping(&s2, "S2 queued");
    h_peer_expect_stats(&s3, 1, 3, "three held, one waiting");
    h_peer_expect_error(&s3, h_peer_acquire(&s3, &a4), H_ST(LIMIT_EXCEEDED), "limits.max_locks",
                        "a lock while three are held and one awaited");
    h_peer_release_ok(&s1, name[0], g[0].token, 0, "S1's release");
    h_peer_expect_grant(&s2, wid, &g[0], "S2's wait");
    h_peer_release_ok(&s2, name[0], g[0].token, 0, "S2's release");
    h_peer_release_ok(&s1, name[1], g[1].token, 0, "S1's release");
    h_peer_release_ok(&s1, name[2], g[2].token, 0, "S1's release");
    h_peer_expect_stats(&s3, 0, 0, "nothing held");

    /* A burst: six tries in one write, none held yet when they are read. */
    struct h_raw_batch b = {.len = 0};
    uint64_t ids[6];
    Rlock__V1__Acquire msgs[6];
    for (int i = 0; i < 6; i++) {
        msgs[i] = h_acquire_msg(&(struct h_acq){
            .resource = res_name(name[i], sizeof name[i], "burst", i), .ttl_ms = TTL_MS});
        ids[i] = h_peer_next_id(&s3);
        h_raw_batch_add_body(&b, ids[i], RLOCK__V1__REQUEST__BODY_ACQUIRE, &msgs[i]);
    }
    h_peer_send_batch(&s3, &b);
    int granted = 0, refused = 0;
    for (int i = 0; i < 6; i++) {
        Rlock__V1__ServerMessage *m = h_peer_next(&s3, "the burst");
        const Rlock__V1__Response *r = h_raw_response(m);
        ck_assert_msg(r != NULL, "the burst: %s", h_msg_describe(m));
        granted += r->status == H_ST(OK);
        refused += r->status == H_ST(LIMIT_EXCEEDED);
        h_raw_free(m);
    }
    uint64_t waiting, held;
    h_peer_stats(&s3, &waiting, &held, "after the burst");
    printf("limits: FIGURE [limits] max_locks %d: a burst of 6 tries in one write: %d granted, "
           "%d refused; Stats held_locks %llu\n",
           DAEMON_MAX, granted, refused, (unsigned long long)held);
    ck_assert_msg(held <= DAEMON_MAX && granted <= DAEMON_MAX,
                  "[limits] max_locks is %d, but a burst of tries got %d locks held at once "
                  "(Stats: %llu)",
                  DAEMON_MAX, granted, (unsigned long long)held);
    h_raw_close(&s1.raw);
    h_raw_close(&s2.raw);
    h_raw_close(&s3.raw);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_limits_waiters)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[limits]\nmax_waiters = 2\n");
    struct h_peer holder, w1, w2, w3;
    h_peer_open(&holder, &f.e, "holder");
    h_peer_open(&w1, &f.e, "W1");
    h_peer_open(&w2, &f.e, "W2");
    h_peer_open(&w3, &f.e, "W3");
    struct h_acq a = {.resource = "waiters", .ttl_ms = TTL_MS};
    struct h_grant g;
    h_peer_acquire_ok(&holder, &a, &g, "the holder");
    a.wait_ms = LONG_WAIT_MS;
    uint64_t id1 = h_peer_acquire(&w1, &a);
    h_peer_ping(&w1, "W1 queued");
    h_peer_acquire(&w2, &a);
    h_peer_ping(&w2, "W2 queued");
    h_peer_expect_stats(&w3, 2, 1, "two waiters");
    h_peer_expect_error(&w3, h_peer_acquire(&w3, &a), H_ST(LIMIT_EXCEEDED),
                        "too many waiters on this resource", "a third waiter");
    struct h_acq try = {.resource = "waiters", .ttl_ms = TTL_MS};
    h_peer_expect_status(&w3, h_peer_acquire(&w3, &try), H_ST(NOT_ACQUIRED),
                         "a try with two waiters queued");
    /* One leaves the queue (its session ends): a waiter fits again. */
    h_raw_close(&w2.raw);
    int64_t deadline = h_now_ms() + H_PEER_DEADLINE_MS;
    uint64_t waiting = 2, held;
    while (waiting != 1 && h_now_ms() < deadline)
        h_peer_stats(&w3, &waiting, &held, "W2 gone");
    ck_assert_uint_eq(waiting, 1);
    uint64_t id3 = h_peer_acquire(&w3, &a);
    h_peer_expect_stats(&w3, 2, 1, "W3 queued in W2's place");
    h_peer_release_ok(&holder, "waiters", g.token, 0, "the holder's release");
    h_peer_expect_grant(&w1, id1, &g, "W1, first in the queue");
    h_peer_release_ok(&w1, "waiters", g.token, 0, "W1's release");
    h_peer_expect_grant(&w3, id3, &g, "W3");
    printf("limits: FIGURE [limits] max_waiters 2: a third waiter refused, a try not; a waiter "
           "fits again once one left\n");
    h_raw_close(&holder.raw);
    h_raw_close(&w1.raw);
    h_raw_close(&w3.raw);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_limits_ttl)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[limits]\nmin_ttl = 1s\nmax_ttl = 10s\ndefault_ttl = 5s\n");
    struct h_peer p;
    h_peer_open(&p, &f.e, "ttl");
    static const uint32_t refused[] = {999, 10001};
    static const uint32_t accepted[] = {1000, 10000, 0};
    struct h_grant g;
    char what[64];
    for (size_t i = 0; i < H_LEN(refused); i++) {
        struct h_acq a = {.resource = "ttl", .ttl_ms = refused[i]};
        snprintf(what, sizeof what, "Acquire with ttl_ms %u", refused[i]);
        h_peer_expect_error(&p, h_peer_acquire(&p, &a), H_ST(INVALID),
                            "ttl_ms must be between 1000 and 10000", what);
    }
    for (size_t i = 0; i < H_LEN(accepted); i++) {
        struct h_acq a = {.resource = "ttl", .ttl_ms = accepted[i], .watchdog_off = 1};
        snprintf(what, sizeof what, "Acquire with ttl_ms %u", accepted[i]);
        h_peer_acquire_ok(&p, &a, &g, what);
        ck_assert_uint_eq(g.ttl_ms, accepted[i] ? accepted[i] : 5000);
        h_peer_release_ok(&p, "ttl", g.token, 0, what);
    }
    struct h_acq a = {.resource = "ttl", .ttl_ms = 5000, .watchdog_off = 1};
    h_peer_acquire_ok(&p, &a, &g, "acquire for Extends");
    for (size_t i = 0; i < H_LEN(refused); i++) {
        snprintf(what, sizeof what, "Extend with ttl_ms %u", refused[i]);
        h_peer_expect_error(&p, h_peer_extend(&p, "ttl", refused[i], g.token), H_ST(INVALID),
                            "ttl_ms must be between 1000 and 10000", what);
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "Extend with ttl_ms %u", accepted[i]);
        uint64_t id = h_peer_extend(&p, "ttl", accepted[i], g.token);
        Rlock__V1__ServerMessage *m = h_peer_response(&p, id, what);
        ck_assert_msg(m->response->status == H_ST(OK) &&
                          m->response->body_case == RLOCK__V1__RESPONSE__BODY_EXTEND &&
                          m->response->extend->ttl_ms == accepted[i],
                      "%s: %s", what, h_msg_describe(m));
        h_raw_free(m);
    }
    h_peer_release_ok(&p, "ttl", g.token, 0, "release");
    printf("limits: FIGURE ttl 999 and 10001 refused, 1000, 10000 and 0 (5000) accepted, for "
           "Acquire and Extend\n");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_limits_resource_bytes)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[limits]\nmax_resource_bytes = 64\n");
    struct h_peer p;
    h_peer_open(&p, &f.e, "names");
    char ascii[66], twobyte[67];
    memset(ascii, 'r', 65);
    ascii[65] = '\0';
    for (int i = 0; i < 33; i++)
        memcpy(twobyte + 2 * i, "\xc3\xa9", 2);
    twobyte[66] = '\0';

    h_peer_expect_error(&p, h_peer_acquire(&p, &(struct h_acq){.resource = "", .ttl_ms = TTL_MS}),
                        H_ST(INVALID), "resource is empty", "an empty resource");
    h_peer_expect_error(&p, h_peer_acquire(&p, &(struct h_acq){.resource = ascii,
                                                               .ttl_ms = TTL_MS}),
                        H_ST(INVALID), "resource name too long", "a 65-byte resource");
    h_peer_expect_error(&p, h_peer_acquire(&p, &(struct h_acq){.resource = twobyte,
                                                               .ttl_ms = TTL_MS}),
                        H_ST(INVALID), "resource name too long",
                        "a 66-byte resource of 33 two-byte characters");
    ascii[64] = '\0';
    twobyte[64] = '\0';
    const char *ok[2] = {ascii, twobyte};
    for (int i = 0; i < 2; i++) {
        struct h_grant g;
        char key[256];
        h_peer_acquire_ok(&p, &(struct h_acq){.resource = ok[i], .ttl_ms = TTL_MS}, &g,
                          i == 0 ? "a 64-byte resource" : "64 bytes of two-byte characters");
        h_assert_key_token(f.r, h_lock_key(&f.e, ok[i], key, sizeof key), g.token);
        h_peer_release_ok(&p, ok[i], g.token, 0, "release");
    }
    printf("limits: FIGURE max_resource_bytes 64: empty, 65 and 66 bytes refused; 64 bytes "
           "accepted\n");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- Extends ------------------------------------------------------------------------ */

START_TEST(test_limits_extend_in_flight)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_peer p;
    h_peer_open(&p, &f.e, "extender");
    struct h_acq a = {.resource = "extend-twice", .ttl_ms = TTL_MS, .watchdog_off = 1};
    struct h_grant g;
    h_peer_acquire_ok(&p, &a, &g, "acquire");

    /* Two Extends in one write: the second is read while the first is in Redis. */
    struct h_raw_batch b = {.len = 0};
    Rlock__V1__Extend e1 = RLOCK__V1__EXTEND__INIT, e2 = RLOCK__V1__EXTEND__INIT;
    e1.resource = e2.resource = (char *)a.resource;
    e1.ttl_ms = 8000;
    e2.ttl_ms = 9000;
    uint64_t id1 = h_peer_next_id(&p), id2 = h_peer_next_id(&p);
    h_raw_batch_add_body(&b, id1, RLOCK__V1__REQUEST__BODY_EXTEND, &e1);
    h_raw_batch_add_body(&b, id2, RLOCK__V1__REQUEST__BODY_EXTEND, &e2);
    h_peer_send_batch(&p, &b);
    h_peer_expect_error(&p, id2, H_ST(LIMIT_EXCEEDED), "already in progress",
                        "a second Extend in the same write");
    Rlock__V1__ServerMessage *m = h_peer_response(&p, id1, "the first Extend");
    ck_assert_msg(m->response->status == H_ST(OK) && m->response->extend->ttl_ms == 8000,
                  "the first Extend: %s", h_msg_describe(m));
    h_raw_free(m);

    /* The same across a stall; the lock takes Extends again once the first failed. */
    h_sigstop(f.e.redis_pid, "redis-server");
    id1 = h_peer_extend(&p, a.resource, 8000, g.token);
    h_peer_expect_quiet(&p, 100, "the Extend in a stopped Redis");
    h_peer_expect_error(&p, h_peer_extend(&p, a.resource, 9000, g.token), H_ST(LIMIT_EXCEEDED),
                        "already in progress", "a second Extend while the first is stalled");
    h_peer_expect_status(&p, id1, H_ST(UNAVAILABLE), "the stalled Extend");
    h_sigcont(f.e.redis_pid, "redis-server");
    int64_t deadline = h_now_ms() + H_PEER_DEADLINE_MS;
    Rlock__V1__Status st;
    do {
        uint64_t id = h_peer_extend(&p, a.resource, 7000, g.token);
        m = h_peer_response(&p, id, "an Extend after the failed one");
        st = m->response->status;
        ck_assert_msg(st == H_ST(OK) || st == H_ST(UNAVAILABLE),
                      "an Extend after the failed one: %s", h_msg_describe(m));
        h_raw_free(m);
        if (st != H_ST(OK))
            h_sleep_ms(20);
    } while (st != H_ST(OK) && h_now_ms() < deadline);
    ck_assert_msg(st == H_ST(OK), "no Extend succeeded within 5 s after Redis resumed");
    printf("limits: FIGURE a second Extend in flight: LIMIT_EXCEEDED (one write, and across a "
           "stall); Extends work again after the first is answered\n");
    h_peer_release_ok(&p, a.resource, g.token, 0, "release");
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/* --- Hello's session timeout ------------------------------------------------------------ */

#define HELLO_CONF "[session]\ntimeout = 5s\nmin_timeout = 2s\nmax_timeout = 8s\n"

START_TEST(test_limits_hello_timeout)
{
    struct h_fixture f;
    h_fixture_start_env(&f, HELLO_CONF);
    static const struct {
        uint32_t asked, granted;
    } cases[] = {
        {0, 5000},    {100, 2000},  {1999, 2000}, {2000, 2000},   {3000, 3000},
        {8000, 8000}, {8001, 8000}, {60000, 8000}, {3600000, 8000},
    };
    for (size_t i = 0; i < H_LEN(cases); i++) {
        struct h_peer p;
        uint32_t got = h_peer_open_timeout(&p, &f.e, "hello", cases[i].asked);
        printf("limits: FIGURE Hello session_timeout_ms %u -> %u\n", cases[i].asked, got);
        ck_assert_msg(got == cases[i].granted, "Hello asking %u got %u, want %u", cases[i].asked,
                      got, cases[i].granted);
        h_raw_close(&p.raw);
    }

    /* Enforced as granted: 100 ms asked, 2 s granted: silent for 1.2 s, the session lives. */
    struct h_peer low, high;
    h_peer_open_timeout(&low, &f.e, "low", 100);
    h_peer_open_timeout(&high, &f.e, "high", 3600000);
    int64_t t = h_now_ms();
    h_sleep_ms(1200);
    h_peer_ping(&low, "after 1.2 s of silence with 100 ms asked, 2 s granted");
    /* 1 h asked, 8 s granted: the silent session ends after 8 s, not later. */
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(&high.raw, t + 8000 + 3000, &m);
    int64_t ended = h_now_ms() - t;
    h_raw_free(m);
    printf("limits: FIGURE a silent session that asked for 1 h ended after %lld ms (max_timeout "
           "8 s)\n",
           (long long)ended);
    ck_assert_msg(got == 0, "the silent session asking for 1 h is still open after 11 s");
    ck_assert_msg(ended >= 8000 - 50, "the silent session ended after %lld ms, before 8 s",
                  (long long)ended);
    h_raw_close(&low.raw);
    h_raw_close(&high.raw);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_limits_frame,         test_limits_session_locks,  test_limits_daemon_locks,
        test_limits_waiters,       test_limits_ttl,            test_limits_resource_bytes,
        test_limits_extend_in_flight, test_limits_hello_timeout,
    };
    return h_run_tests("limits", 60, tests, H_LEN(tests));
}
