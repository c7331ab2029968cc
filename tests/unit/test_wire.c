/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wire.c — proto/wire.c: the length prefix and the framing step, packing a Request and
 * unpacking it through the bounded allocator, refusal (without leaks) when
 * the budget is too small, the status / lost-reason name tables checked
 * against the schema's own enums, and the byte examples of the admin requests
 * in docs/protocol.md §9.8 against the generated code; proto/pbscan.c, the
 * NUL-in-string walk, on strings at each depth and on encodings that are
 * valid proto3 but not canonical.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "pbscan.h"
#include "wire.h"

static const uint32_t lengths[] = {0, 1, 255, 256, 65535, 65536, 0x01020304u, UINT32_MAX};

START_TEST(test_len_round_trip)
{
    uint8_t hdr[WIRE_HEADER_BYTES];
    wire_put_len(hdr, lengths[_i]);
    ck_assert_uint_eq(wire_get_len(hdr), lengths[_i]);
}
END_TEST

START_TEST(test_len_big_endian)
{
    uint8_t hdr[WIRE_HEADER_BYTES];
    wire_put_len(hdr, 0x01020304u);
    const uint8_t want[] = {0x01, 0x02, 0x03, 0x04};
    ck_assert_mem_eq(hdr, want, sizeof want);
    const uint8_t in[] = {0x00, 0x01, 0x00, 0x02};
    ck_assert_uint_eq(wire_get_len(in), 65538);
}
END_TEST

/* The framing step: a header, then the body it announces, never more than max. */
static const struct {
    uint8_t bytes[6];
    size_t avail;
    uint32_t max;
    enum wire_frame_state want;
    uint32_t len; /* when a whole header is there */
} frames[] = {
    {{0}, 0, 256, WIRE_FRAME_PARTIAL, 0},
    {{0, 0, 0}, 3, 256, WIRE_FRAME_PARTIAL, 0},
    {{0, 0, 0, 0}, 4, 256, WIRE_FRAME_READY, 0},
    {{0, 0, 0, 2, 0x32}, 5, 256, WIRE_FRAME_PARTIAL, 2},
    {{0, 0, 0, 2, 0x32, 0x00}, 6, 256, WIRE_FRAME_READY, 2},
    {{0, 0, 1, 0}, 4, 256, WIRE_FRAME_PARTIAL, 256}, /* exactly max: allowed */
    {{0, 0, 1, 1}, 4, 256, WIRE_FRAME_TOO_LARGE, 257},
    {{0xff, 0xff, 0xff, 0xff}, 4, UINT32_MAX - 1, WIRE_FRAME_TOO_LARGE, UINT32_MAX},
};

START_TEST(test_frame_next)
{
    uint32_t len = 12345;
    enum wire_frame_state st =
        wire_frame_next(frames[_i].bytes, frames[_i].avail, frames[_i].max, &len);
    ck_assert_int_eq(st, frames[_i].want);
    ck_assert_uint_eq(len, frames[_i].avail >= WIRE_HEADER_BYTES ? frames[_i].len : 12345);
}
END_TEST

/* A framed Acquire request; the caller frees the buffer. */
static uint8_t *pack_acquire(size_t *len)
{
    Rlock__V1__Acquire acq = RLOCK__V1__ACQUIRE__INIT;
    acq.resource = "orders/17";
    acq.ttl_ms = 30000;
    acq.wait_ms = 500;
    acq.watchdog_off = 1;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 42;
    req.body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    req.acquire = &acq;
    uint8_t *buf = wire_pack_request(&req, len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_gt(*len, WIRE_HEADER_BYTES);
    ck_assert_uint_eq(wire_get_len(buf), *len - WIRE_HEADER_BYTES);
    return buf;
}

START_TEST(test_pack_unpack_request)
{
    size_t len = 0;
    uint8_t *buf = pack_acquire(&len);
    size_t body = len - WIRE_HEADER_BYTES;
    struct wire_budget b;
    wire_budget_init(&b, wire_budget_for(body));
    Rlock__V1__Request *req = rlock__v1__request__unpack(&b.alloc, body, buf + WIRE_HEADER_BYTES);
    ck_assert_ptr_nonnull(req);
    ck_assert_uint_eq(req->id, 42);
    ck_assert_int_eq(req->body_case, RLOCK__V1__REQUEST__BODY_ACQUIRE);
    ck_assert_str_eq(req->acquire->resource, "orders/17");
    ck_assert_uint_eq(req->acquire->ttl_ms, 30000);
    ck_assert_uint_eq(req->acquire->wait_ms, 500);
    ck_assert_int_eq(req->acquire->watchdog_off, 1);
    ck_assert_uint_gt(b.used, 0);
    ck_assert_int_eq(b.exhausted, 0);
    rlock__v1__request__free_unpacked(req, &b.alloc);
    ck_assert_uint_eq(b.used, 0);
    free(buf);
}
END_TEST

/*
 * Every budget below what the message needs must make unpack fail, and the
 * failed unpack must give back everything it took. The first budget that
 * works must be within what wire_budget_for() allows for the frame.
 */
START_TEST(test_budget_too_small)
{
    size_t len = 0;
    uint8_t *buf = pack_acquire(&len);
    size_t body = len - WIRE_HEADER_BYTES;
    size_t limit = 0;
    for (;; limit++) {
        ck_assert_uint_le(limit, wire_budget_for(body));
        struct wire_budget b;
        wire_budget_init(&b, limit);
        Rlock__V1__Request *req =
            rlock__v1__request__unpack(&b.alloc, body, buf + WIRE_HEADER_BYTES);
        if (req != NULL) {
            rlock__v1__request__free_unpacked(req, &b.alloc);
            ck_assert_uint_eq(b.used, 0);
            break;
        }
        ck_assert_int_eq(b.exhausted, 1);
        ck_assert_msg(b.used == 0, "budget %zu: %zu bytes leaked", limit, b.used);
    }
    ck_assert_uint_gt(limit, 0);
    free(buf);
}
END_TEST

START_TEST(test_unpack_garbage)
{
    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    struct wire_budget b;
    wire_budget_init(&b, wire_budget_for(sizeof junk));
    ck_assert_ptr_null(rlock__v1__request__unpack(&b.alloc, sizeof junk, junk));
    ck_assert_uint_eq(b.used, 0);
}
END_TEST

/* Each enum value NAME_X of the schema must be named X by the table. */
static void check_names(const ProtobufCEnumDescriptor *d, const char *prefix,
                        const char *(*name_of)(int))
{
    size_t skip = strlen(prefix);
    for (unsigned i = 0; i < d->n_values; i++) {
        const ProtobufCEnumValue *v = &d->values[i];
        ck_assert_msg(strncmp(v->name, prefix, skip) == 0, "%s lacks %s", v->name, prefix);
        ck_assert_str_eq(name_of(v->value), v->name + skip);
    }
    ck_assert_str_eq(name_of(-1), "UNKNOWN");
    ck_assert_str_eq(name_of((int)d->n_values), "UNKNOWN");
}

START_TEST(test_status_names)
{
    ck_assert_str_eq(wire_status_name(RLOCK__V1__STATUS__STATUS_OK), "OK");
    ck_assert_str_eq(wire_status_name(RLOCK__V1__STATUS__STATUS_INTERNAL), "INTERNAL");
    check_names(&rlock__v1__status__descriptor, "STATUS_", wire_status_name);
}
END_TEST

START_TEST(test_lost_reason_names)
{
    ck_assert_str_eq(wire_lost_reason_name(RLOCK__V1__LOST_REASON__LOST_EXPIRED), "EXPIRED");
    check_names(&rlock__v1__lost_reason__descriptor, "LOST_", wire_lost_reason_name);
}
END_TEST

/* --- the byte examples of docs/protocol.md §9.8 ------------------------------------ */

#define DOC_UUID "5b0e7c1a-3f2d-4e8b-9a61-c4d2f08e7b39"
#define DOC_TOKEN "9f8c2d4e-6a1b-4c3d-8e7f-0a1b2c3d4e5f"
#define DOC_FENCE UINT64_C(1764470000123456)

/* buf (len bytes, freed here) must be the bytes written in hex as in the docs. */
static void assert_bytes(uint8_t *buf, size_t len, const char *hex)
{
    ck_assert_ptr_nonnull(buf);
    char *text = malloc(len * 3 + 1);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < len; i++)
        snprintf(text + 3 * i, 4, "%02x%s", buf[i], i + 1 < len ? " " : "");
    ck_assert_str_eq(text, hex);
    free(text);
    free(buf);
}

START_TEST(test_doc_admin_requests)
{
    size_t len;
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.client_name = "ops";
    h.protocol_version = 1;
    h.auth_token = "3f9c1e0b7d2a45e8";
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    uint8_t *buf = wire_pack_request(&req, &len);
    assert_bytes(buf, len,
                 "00 00 00 1d 08 01 12 19 0a 03 6f 70 73 10 01 22 10 33 66 39 63 31 65 30 62 "
                 "37 64 32 61 34 35 65 38");

    Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
    ll.limit = 2;
    ll.prefix = "orders/";
    req.id = 6;
    req.body_case = RLOCK__V1__REQUEST__BODY_LIST_LOCKS;
    req.list_locks = &ll;
    buf = wire_pack_request(&req, &len);
    assert_bytes(buf, len, "00 00 00 0f 08 06 5a 0b 10 02 1a 07 6f 72 64 65 72 73 2f");

    Rlock__V1__ForceRelease fr = RLOCK__V1__FORCE_RELEASE__INIT;
    fr.resource = "orders/42";
    req.id = 7;
    req.body_case = RLOCK__V1__REQUEST__BODY_FORCE_RELEASE;
    req.force_release = &fr;
    buf = wire_pack_request(&req, &len);
    assert_bytes(buf, len, "00 00 00 0f 08 07 62 0b 0a 09 6f 72 64 65 72 73 2f 34 32");
}
END_TEST

START_TEST(test_doc_admin_replies)
{
    size_t len;
    Rlock__V1__LockInfo li = RLOCK__V1__LOCK_INFO__INIT;
    li.resource = "orders/42";
    li.session_id = DOC_UUID;
    li.client_name = "demo";
    li.fence = DOC_FENCE;
    li.token = DOC_TOKEN;
    li.acquired_at_ms = UINT64_C(1764470000123);
    li.ttl_ms = 30000;
    li.ttl_left_ms = 24648;
    li.watchdog = 1;
    li.hold_count = 1;
    Rlock__V1__LockInfo *locks[1] = {&li};
    Rlock__V1__ListLocksReply lr = RLOCK__V1__LIST_LOCKS_REPLY__INIT;
    lr.n_locks = 1;
    lr.locks = locks;
    lr.next_cursor = "b2c";
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = 6;
    r.body_case = RLOCK__V1__RESPONSE__BODY_LIST_LOCKS;
    r.list_locks = &lr;
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = &r;
    uint8_t *buf = wire_pack_server_message(&m, &len);
    assert_bytes(buf, len,
                 "00 00 00 89 0a 86 01 08 06 92 01 80 01 0a 79 0a 09 6f 72 64 65 72 73 2f 34 "
                 "32 12 24 35 62 30 65 37 63 31 61 2d 33 66 32 64 2d 34 65 38 62 2d 39 61 36 "
                 "31 2d 63 34 64 32 66 30 38 65 37 62 33 39 1a 04 64 65 6d 6f 28 c0 fc cb fc "
                 "ea 98 91 03 32 24 39 66 38 63 32 64 34 65 2d 36 61 31 62 2d 34 63 33 64 2d "
                 "38 65 37 66 2d 30 61 31 62 32 63 33 64 34 65 35 66 38 fb 93 ee 94 ad 33 40 "
                 "b0 ea 01 48 c8 c0 01 50 01 58 01 12 03 62 32 63");

    Rlock__V1__ForceReleaseReply fr = RLOCK__V1__FORCE_RELEASE_REPLY__INIT;
    fr.session_id = DOC_UUID;
    fr.client_name = "demo";
    fr.fence = DOC_FENCE;
    fr.waiters = 1;
    r.id = 7;
    r.body_case = RLOCK__V1__RESPONSE__BODY_FORCE_RELEASE;
    r.force_release = &fr;
    buf = wire_pack_server_message(&m, &len);
    assert_bytes(buf, len,
                 "00 00 00 3e 0a 3c 08 07 9a 01 37 0a 24 35 62 30 65 37 63 31 61 2d 33 66 32 "
                 "64 2d 34 65 38 62 2d 39 61 36 31 2d 63 34 64 32 66 30 38 65 37 62 33 39 12 "
                 "04 64 65 6d 6f 20 c0 fc cb fc ea 98 91 03 28 01");

    Rlock__V1__LockLost lost = RLOCK__V1__LOCK_LOST__INIT;
    lost.resource = "orders/42";
    lost.token = DOC_TOKEN;
    lost.fence = DOC_FENCE;
    lost.reason = RLOCK__V1__LOST_REASON__LOST_FORCED;
    lost.message = "released by an operator";
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_LOCK_LOST;
    ev.lock_lost = &lost;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = &ev;
    buf = wire_pack_server_message(&m, &len);
    assert_bytes(buf, len,
                 "00 00 00 59 12 57 0a 55 0a 09 6f 72 64 65 72 73 2f 34 32 12 24 39 66 38 63 "
                 "32 64 34 65 2d 36 61 31 62 2d 34 63 33 64 2d 38 65 37 66 2d 30 61 31 62 32 "
                 "63 33 64 34 65 35 66 18 c0 fc cb fc ea 98 91 03 20 04 2a 17 72 65 6c 65 61 "
                 "73 65 64 20 62 79 20 61 6e 20 6f 70 65 72 61 74 6f 72");
}
END_TEST

/* --- the byte examples of docs/protocol.md §10.5 ----------------------------------- */

#define DOC_SECRET "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
#define DOC_SEAL "8a7b6c5d4e3f20110213243546576879"
#define DOC_TOKEN2 "2c4e6a8b-1d3f-4a5b-9c7d-e0f1a2b3c4d5"
#define DOC_SEAL2 "11223344556677889900aabbccddeeff"

START_TEST(test_doc_resume)
{
    size_t len;
    Rlock__V1__Resume rs = RLOCK__V1__RESUME__INIT;
    rs.session_id = DOC_UUID;
    rs.session_secret = DOC_SECRET;
    rs.client_name = "demo";
    rs.protocol_version = 1;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_RESUME;
    req.resume = &rs;
    uint8_t *buf = wire_pack_request(&req, &len);
    assert_bytes(buf, len,
                 "00 00 00 54 08 01 7a 50 0a 24 35 62 30 65 37 63 31 61 2d 33 66 32 64 2d "
                 "34 65 38 62 2d 39 61 36 31 2d 63 34 64 32 66 30 38 65 37 62 33 39 12 20 "
                 "30 66 31 65 32 64 33 63 34 62 35 61 36 39 37 38 38 37 39 36 61 35 62 34 "
                 "63 33 64 32 65 31 66 30 1a 04 64 65 6d 6f 20 01");

    Rlock__V1__Adopt ad = RLOCK__V1__ADOPT__INIT;
    ad.resource = "orders/42";
    ad.token = DOC_TOKEN;
    ad.fence = DOC_FENCE;
    ad.ttl_ms = 30000;
    ad.hold_count = 1;
    ad.seal = DOC_SEAL;
    req.id = 2;
    req.body_case = RLOCK__V1__REQUEST__BODY_ADOPT;
    req.adopt = &ad;
    buf = wire_pack_request(&req, &len);
    assert_bytes(buf, len,
                 "00 00 00 67 08 02 82 01 62 0a 09 6f 72 64 65 72 73 2f 34 32 12 24 39 66 "
                 "38 63 32 64 34 65 2d 36 61 31 62 2d 34 63 33 64 2d 38 65 37 66 2d 30 61 "
                 "31 62 32 63 33 64 34 65 35 66 18 c0 fc cb fc ea 98 91 03 20 b0 ea 01 38 "
                 "01 52 20 38 61 37 62 36 63 35 64 34 65 33 66 32 30 31 31 30 32 31 33 32 "
                 "34 33 35 34 36 35 37 36 38 37 39");

    Rlock__V1__AdoptReply ar = RLOCK__V1__ADOPT_REPLY__INIT;
    ar.token = DOC_TOKEN2;
    ar.seal = DOC_SEAL2;
    ar.ttl_ms = 30000;
    ar.valid_ms = 29648;
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = 2;
    r.body_case = RLOCK__V1__RESPONSE__BODY_ADOPT;
    r.adopt = &ar;
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = &r;
    buf = wire_pack_server_message(&m, &len);
    assert_bytes(buf, len,
                 "00 00 00 57 0a 55 08 02 b2 01 50 0a 24 32 63 34 65 36 61 38 62 2d 31 64 "
                 "33 66 2d 34 61 35 62 2d 39 63 37 64 2d 65 30 66 31 61 32 62 33 63 34 64 "
                 "35 12 20 31 31 32 32 33 33 34 34 35 35 36 36 37 37 38 38 39 39 30 30 61 "
                 "61 62 62 63 63 64 64 65 65 66 66 18 b0 ea 01 20 d0 e7 01");

    Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
    sc.reason = "server restarting: resume the session elsewhere";
    sc.resume = 1;
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
    ev.session_closing = &sc;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = &ev;
    buf = wire_pack_server_message(&m, &len);
    assert_bytes(buf, len,
                 "00 00 00 37 12 35 12 33 0a 2f 73 65 72 76 65 72 20 72 65 73 74 61 72 74 "
                 "69 6e 67 3a 20 72 65 73 75 6d 65 20 74 68 65 20 73 65 73 73 69 6f 6e 20 "
                 "65 6c 73 65 77 68 65 72 65 10 01");
}
END_TEST

/* --- pbscan: a NUL inside a string, as sent --------------------------------------------- */

static const struct {
    const char *what;
    uint8_t bytes[32];
    size_t len;
    const char *nul_in; /* the field named, or NULL */
} scans[] = {
    {"Acquire{resource \"a\"}", {0x08, 0x02, 0x1a, 0x03, 0x0a, 0x01, 'a'}, 7, NULL},
    {"Acquire{resource \"a\\0b\"}", {0x08, 0x02, 0x1a, 0x05, 0x0a, 0x03, 'a', 0, 'b'}, 9,
     "resource"},
    {"Hello{client_name \"\\0\"}", {0x12, 0x03, 0x0a, 0x01, 0x00}, 5, "client_name"},
    {"Hello{auth_token \"x\\0\"}", {0x12, 0x04, 0x22, 0x02, 'x', 0x00}, 6, "auth_token"},
    /* Valid proto3, not canonical: accepted. */
    {"Acquire, every default explicit",
     {0x08, 0x00, 0x1a, 0x11, 0x0a, 0x01, 'a', 0x10, 0x00, 0x18, 0x00, 0x20, 0x00, 0x28, 0x00,
      0x30, 0x00, 0x38, 0x00, 0x40, 0x00},
     21, NULL},
    {"Ping, id as a padded varint", {0x08, 0x81, 0x00, 0x32, 0x00}, 5, NULL},
    {"Acquire, fields out of order and repeated",
     {0x1a, 0x07, 0x10, 0x64, 0x0a, 0x01, 'b', 0x0a, 0x00, 0x08, 0x05}, 11, NULL},
    {"an unknown length-delimited field holding a NUL", {0x08, 0x01, 0xfa, 0x01, 0x01, 0x00,
      0x32, 0x00}, 8, NULL},
    {"Ping with a fixed64 and a fixed32 unknown field",
     {0x08, 0x01, 0xf9, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0xfd, 0x01, 1, 2, 3, 4, 0x32, 0x00}, 20,
     NULL},
    /* Malformed (the decoder refuses these first): never "clean". */
    {"a length past the end", {0x1a, 0x09, 0x0a, 0x01, 'a'}, 5, "malformed"},
    {"a varint cut short", {0x08, 0x80}, 2, "malformed"},
    {"a group", {0x0b, 0x0c}, 2, "malformed"},
    {"field number 0", {0x00, 0x01}, 2, "malformed"},
};

START_TEST(test_pbscan)
{
    const char *got = pbscan_nul_string(&rlock__v1__request__descriptor, scans[_i].bytes,
                                        scans[_i].len);
    if (scans[_i].nul_in == NULL)
        ck_assert_msg(got == NULL, "%s: %s", scans[_i].what, got);
    else
        ck_assert_msg(got != NULL && strcmp(got, scans[_i].nul_in) == 0, "%s: %s, want %s",
                      scans[_i].what, got ? got : "(clean)", scans[_i].nul_in);
}
END_TEST


int main(void)
{
    const struct unit_test tests[] = {
        {"frame", test_len_round_trip, UNIT_COUNT(lengths)},
        {"frame", test_len_big_endian, 0},
        {"frame", test_frame_next, UNIT_COUNT(frames)},
        {"unpack", test_pack_unpack_request, 0},
        {"unpack", test_budget_too_small, 0},
        {"unpack", test_unpack_garbage, 0},
        {"names", test_status_names, 0},
        {"names", test_lost_reason_names, 0},
        {"docs", test_doc_admin_requests, 0},
        {"docs", test_doc_admin_replies, 0},
        {"docs", test_doc_resume, 0},
        {"pbscan", test_pbscan, UNIT_COUNT(scans)},
    };
    return unit_run("wire", tests, sizeof tests / sizeof tests[0]);
}
