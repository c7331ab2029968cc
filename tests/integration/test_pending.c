/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pending.c — connections before their Hello are anyone's to open, so
 * they cannot lock clients out (docs/configuration.md, server.max_pending):
 *  - 60 silent connections against max_sessions 20 do not fill it: a client
 *    still connects and takes a lock at once; with max_pending 8, the
 *    longest silent are closed to make room;
 *  - with authentication on, the last admin_reserve sessions of
 *    max_sessions are for admin tokens: clients get LIMIT_EXCEEDED there, an
 *    operator still gets in;
 *  - before its Hello a connection may announce a frame of at most 4 KiB:
 *    a larger one is refused at once, before anything is buffered.
 * Real rlockd and redis-server processes.
 */
#include "harness.h"
#include "harness_raw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SILENT 60
#define ADMIN_TOKEN "adm-0011223344556677889900aabbccdd"
#define CLIENT_TOKEN "cli-ffeeddccbbaa99887766554433221100"

/* Open SILENT connections that never say Hello, then a client that takes a lock. */
static void silent_then_client(struct h_fixture *f, struct h_raw *silent)
{
    for (int i = 0; i < SILENT; i++)
        h_raw_open(&silent[i], &f->e);
    /* Each was accepted: a Ping on the fixture's session orders them before what follows. */
    h_assert_ok(f->c, rlock_ping(f->c, 5000, NULL));
    struct rlock_client *c = h_client_or_fail(&f->e, NULL);
    struct rlock_lock *l = h_acquire_ok(c, "pending/r", NULL);
    h_assert_ok(c, rlock_release(l, 5000));
    rlock_lock_free(l);
    rlock_close(c);
}

/* Silent connections are not sessions: 60 of them against max_sessions 20 lock nobody out. */
START_TEST(test_silent_flood)
{
    struct h_fixture f;
    h_fixture_start(&f, "[server]\nmax_sessions = 20\nhello_timeout = 60s\n");
    struct h_raw silent[SILENT];
    silent_then_client(&f, silent);
    for (int i = 0; i < SILENT; i++)
        h_raw_close(&silent[i]);
    h_fixture_stop(&f);
}
END_TEST

/* Beyond max_pending, the connections silent the longest are closed to make room. */
START_TEST(test_silent_evicted)
{
    struct h_fixture f;
    h_fixture_start(&f, "[server]\nmax_pending = 8\nhello_timeout = 60s\n");
    struct h_raw silent[SILENT];
    silent_then_client(&f, silent);
    int closed = 0;
    for (int i = 0; i < SILENT; i++) {
        Rlock__V1__ServerMessage *m = NULL;
        closed += h_raw_read(&silent[i], h_now_ms() + (i < SILENT - 8 ? 5000 : 50), &m) == 0;
        if (m != NULL)
            h_raw_free(m);
        h_raw_close(&silent[i]);
    }
    printf("pending: %d of %d silent connections closed to make room\n", closed, SILENT);
    ck_assert_msg(closed >= SILENT - 8 - 2, "only %d of %d silent connections were closed",
                  closed, SILENT);
    h_fixture_stop(&f);
}
END_TEST

/* A raw Hello with token; the status it was answered with. */
static Rlock__V1__Status hello_status(struct h_env *e, struct h_raw *c, const char *token)
{
    h_raw_open(c, e);
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = "reserve";
    h.auth_token = (char *)token;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    ck_assert_int_eq(h_raw_send(c, &req), 0);
    Rlock__V1__ServerMessage *m = NULL;
    ck_assert_int_eq(h_raw_read(c, h_now_ms() + 5000, &m), 1);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_ptr_nonnull(r);
    Rlock__V1__Status st = r->status;
    h_raw_free(m);
    return st;
}

START_TEST(test_admin_reserve)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start(&e, "[server]\nmax_sessions = 4\nadmin_reserve = 2\n"
                                     "[auth]\ntokens = admin " ADMIN_TOKEN ", client " CLIENT_TOKEN
                                     "\n"),
                     0);
    struct h_raw c[6];
    ck_assert_int_eq(hello_status(&e, &c[0], CLIENT_TOKEN), RLOCK__V1__STATUS__STATUS_OK);
    ck_assert_int_eq(hello_status(&e, &c[1], CLIENT_TOKEN), RLOCK__V1__STATUS__STATUS_OK);
    ck_assert_int_eq(hello_status(&e, &c[2], CLIENT_TOKEN),
                     RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED);
    ck_assert_int_eq(hello_status(&e, &c[3], ADMIN_TOKEN), RLOCK__V1__STATUS__STATUS_OK);
    ck_assert_int_eq(hello_status(&e, &c[4], ADMIN_TOKEN), RLOCK__V1__STATUS__STATUS_OK);
    ck_assert_int_eq(hello_status(&e, &c[5], ADMIN_TOKEN),
                     RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED);
    for (int i = 0; i < 6; i++)
        h_raw_close(&c[i]);
    ck_assert_int_ge(h_log_count(&e, "kept for admin tokens"), 1);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_big_first_frame)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    struct h_raw c;
    h_raw_open(&c, &e);
    /* A length prefix announcing 60 KiB (within max_frame_bytes), then a little of it. */
    uint8_t head[16] = {0};
    wire_put_len(head, 60 * 1024);
    ck_assert_int_eq(write(c.fd, head, sizeof head), (ssize_t)sizeof head);
    Rlock__V1__ServerMessage *m = NULL;
    ck_assert_int_eq(h_raw_read(&c, h_now_ms() + 5000, &m), 1);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_msg(r != NULL && r->status == RLOCK__V1__STATUS__STATUS_INVALID &&
                      strstr(r->message, "the limit before Hello (4096)") != NULL,
                  "a 60 KiB first frame: %s", r != NULL ? r->message : "(an event)");
    h_raw_free(m);
    ck_assert_int_eq(h_raw_read(&c, h_now_ms() + 5000, &m), 0);
    h_raw_close(&c);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_silent_flood, test_silent_evicted, test_admin_reserve,
                            test_big_first_frame};
    return h_run_tests("pending", 120, tests, H_LEN(tests));
}
