/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_raw.c — see harness_raw.h.
 *
 * Replies are unpacked with protobuf-c's default allocator: their size is
 * bounded by H_RAW_MAX_FRAME before unpacking, and they come from the daemon
 * under test, not from an attacker, so a budgeted allocator would buy nothing
 * here and would tie every message to the buffer it was read from.
 */
#include "harness_raw.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define H_RAW_HELLO_DEADLINE_MS 5000

void h_raw_open(struct h_raw *c, const struct h_env *e)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(e->rlockd_sock);
    ck_assert_msg(n < sizeof a.sun_path, "socket path too long: %s", e->rlockd_sock);
    memcpy(a.sun_path, e->rlockd_sock, n + 1);
    c->len = 0;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(c->fd >= 0, "socket: %s", strerror(errno));
    ck_assert_msg(connect(c->fd, (struct sockaddr *)&a, sizeof a) == 0, "connect %s: %s",
                  a.sun_path, strerror(errno));
}

void h_raw_close(struct h_raw *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

int h_raw_send_bytes(const struct h_raw *c, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return -1;
        ck_assert_msg(n > 0, "send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int h_raw_send_body(const struct h_raw *c, const uint8_t *body, size_t len)
{
    ck_assert_uint_le(len, H_RAW_BATCH_BYTES - WIRE_HEADER_BYTES);
    uint8_t frame[H_RAW_BATCH_BYTES];
    wire_put_len(frame, (uint32_t)len);
    if (len > 0)
        memcpy(frame + WIRE_HEADER_BYTES, body, len);
    return h_raw_send_bytes(c, frame, WIRE_HEADER_BYTES + len);
}

void h_raw_batch_add(struct h_raw_batch *b, const Rlock__V1__Request *req)
{
    size_t body = rlock__v1__request__get_packed_size(req);
    ck_assert_msg(b->len + WIRE_HEADER_BYTES + body <= sizeof b->buf,
                  "batch full: %zu + %zu bytes", b->len, WIRE_HEADER_BYTES + body);
    wire_put_len(b->buf + b->len, (uint32_t)body);
    rlock__v1__request__pack(req, b->buf + b->len + WIRE_HEADER_BYTES);
    b->len += WIRE_HEADER_BYTES + body;
}

void h_raw_batch_add_body(struct h_raw_batch *b, uint64_t id,
                          Rlock__V1__Request__BodyCase body_case, void *body)
{
    Rlock__V1__Request r = RLOCK__V1__REQUEST__INIT;
    r.id = id;
    r.body_case = body_case;
    /* Any member of the oneof, found in the schema: a new request kind needs no edit here. */
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field(&rlock__v1__request__descriptor, (unsigned)body_case);
    if (fd != NULL && fd->type == PROTOBUF_C_TYPE_MESSAGE && fd->id != 1)
        *(void **)((char *)&r + fd->offset) = body;
    else
        r.body_case = RLOCK__V1__REQUEST__BODY__NOT_SET;
    h_raw_batch_add(b, &r);
}

int h_raw_batch_send(const struct h_raw *c, struct h_raw_batch *b)
{
    int rc = h_raw_send_bytes(c, b->buf, b->len);
    b->len = 0;
    return rc;
}

int h_raw_send(const struct h_raw *c, const Rlock__V1__Request *req)
{
    struct h_raw_batch b = {.len = 0};
    h_raw_batch_add(&b, req);
    return h_raw_batch_send(c, &b);
}

/* Unpack the complete frame of n bytes at the front of c->buf and drop it from the buffer. */
static Rlock__V1__ServerMessage *take_frame(struct h_raw *c, uint32_t n)
{
    Rlock__V1__ServerMessage *m =
        rlock__v1__server_message__unpack(NULL, n, c->buf + WIRE_HEADER_BYTES);
    ck_assert_msg(m != NULL, "the daemon sent an undecodable %u-byte frame", n);
    c->len -= WIRE_HEADER_BYTES + n;
    memmove(c->buf, c->buf + WIRE_HEADER_BYTES + n, c->len);
    return m;
}

int h_raw_read(struct h_raw *c, int64_t deadline, Rlock__V1__ServerMessage **out)
{
    *out = NULL;
    for (;;) {
        if (c->len >= WIRE_HEADER_BYTES) {
            uint32_t n = wire_get_len(c->buf);
            ck_assert_msg(n <= H_RAW_MAX_FRAME, "the daemon announced a %u-byte frame", n);
            if (c->len >= WIRE_HEADER_BYTES + n) {
                *out = take_frame(c, n);
                return 1;
            }
        }
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)left);
        if (ready < 0 && errno == EINTR)
            continue;
        ck_assert_msg(ready >= 0, "poll: %s", strerror(errno));
        if (ready == 0)
            continue;
        ssize_t k = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (k == 0 || (k < 0 && errno == ECONNRESET))
            return 0;
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        ck_assert_msg(k > 0, "recv: %s", strerror(errno));
        c->len += (size_t)k;
    }
}

void h_raw_free(Rlock__V1__ServerMessage *m)
{
    if (m != NULL)
        rlock__v1__server_message__free_unpacked(m, NULL);
}

const Rlock__V1__Response *h_raw_response(const Rlock__V1__ServerMessage *m)
{
    return m->body_case == RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE ? m->response : NULL;
}

void h_raw_send_hello(const struct h_raw *c, uint64_t id, const char *name,
                      uint32_t session_timeout_ms)
{
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    hello.client_name = (char *)name;
    hello.protocol_version = WIRE_PROTOCOL_VERSION;
    hello.session_timeout_ms = session_timeout_ms;
    struct h_raw_batch b = {.len = 0};
    h_raw_batch_add_body(&b, id, RLOCK__V1__REQUEST__BODY_HELLO, &hello);
    ck_assert_int_eq(h_raw_batch_send(c, &b), 0);
}

uint32_t h_raw_hello(struct h_raw *c, uint64_t id, const char *name, uint32_t session_timeout_ms)
{
    h_raw_send_hello(c, id, name, session_timeout_ms);
    Rlock__V1__ServerMessage *m;
    int got = h_raw_read(c, h_now_ms() + H_RAW_HELLO_DEADLINE_MS, &m);
    ck_assert_msg(got == 1, "Hello: %s", got == 0 ? "connection closed" : "no answer in time");
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_msg(r != NULL && r->id == id && r->status == RLOCK__V1__STATUS__STATUS_OK &&
                      r->body_case == RLOCK__V1__RESPONSE__BODY_HELLO,
                  "Hello: id %llu status %s \"%s\"", r ? (unsigned long long)r->id : 0ULL,
                  r ? wire_status_name(r->status) : "(an event)", r ? r->message : "");
    uint32_t timeout = r->hello->session_timeout_ms;
    h_raw_free(m);
    return timeout;
}

void h_raw_session(struct h_raw *c, const struct h_env *e, const char *name)
{
    h_raw_open(c, e);
    h_raw_hello(c, 1, name, 0);
}

/* --- pinger -------------------------------------------------------------------------- */

#define H_PINGER_SAMPLES 1000000
#define H_PINGER_DEADLINE_MS 10000

static void *pinger_main(void *arg)
{
    struct h_pinger *p = arg;
    struct h_raw *raw = malloc(sizeof *raw);
    if (raw == NULL) {
        p->failures++;
        return NULL;
    }
    h_raw_session(raw, p->e, "pinger");
    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    req.id = 1;
    while (!atomic_load(&p->stop) && p->n < p->cap) {
        req.id++;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        Rlock__V1__ServerMessage *m = NULL;
        int got = h_raw_send(raw, &req) == 0
                      ? h_raw_read(raw, h_now_ms() + H_PINGER_DEADLINE_MS, &m)
                      : 0;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const Rlock__V1__Response *r = got == 1 ? h_raw_response(m) : NULL;
        int ok = r != NULL && r->id == req.id && r->status == RLOCK__V1__STATUS__STATUS_OK;
        h_raw_free(m);
        if (!ok) {
            p->failures++;
            break;
        }
        p->us[p->n++] = (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
        h_sleep_ms(p->every_ms);
    }
    h_raw_close(raw);
    free(raw);
    return NULL;
}

void h_pinger_start(struct h_pinger *p, struct h_env *e, int every_ms)
{
    memset(p, 0, sizeof *p);
    p->e = e;
    p->every_ms = every_ms;
    p->cap = H_PINGER_SAMPLES;
    p->us = malloc(p->cap * sizeof *p->us);
    ck_assert_ptr_nonnull(p->us);
    h_thread_start(&p->thread, pinger_main, p);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

struct h_ping_figures h_pinger_stop(struct h_pinger *p, const char *what)
{
    atomic_store(&p->stop, 1);
    h_thread_join(&p->thread, h_now_ms() + 2 * H_PINGER_DEADLINE_MS, "the pinger did not stop");
    ck_assert_int_eq(p->failures, 0);
    ck_assert_uint_gt(p->n, 10);
    qsort(p->us, p->n, sizeof *p->us, cmp_i64);
    struct h_ping_figures f = {p->n, p->us[p->n / 2], p->us[p->n * 99 / 100], p->us[p->n - 1]};
    printf("%s: %zu pings, p50 %lld us, p99 %lld us, max %lld us\n", what, f.n,
           (long long)f.p50_us, (long long)f.p99_us, (long long)f.max_us);
    fflush(stdout);
    free(p->us);
    p->us = NULL;
    return f;
}
