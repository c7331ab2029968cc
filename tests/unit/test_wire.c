/*
 * test_wire.c — proto/wire.c: the length prefix and the framing step, packing a Request and
 * unpacking it through the bounded allocator, refusal (without leaks) when
 * the budget is too small, and the status / lost-reason name tables checked
 * against the schema's own enums.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
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
    };
    return unit_run("wire", tests, sizeof tests / sizeof tests[0]);
}
