/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_request.c — bytes from a client, taken apart as rlockd does it.
 *
 * The input is a stream: framing (wire_frame_next, the default
 * max_frame_bytes), then per frame the unpack through the bounded allocator
 * (dispatch_decode), the checks every request passes (dispatch_check: no
 * NUL inside a string as sent, a known operation) and the field checks the handlers
 * make before they touch any state (Hello's fields; resource names and ttl
 * bounds under the default config). Everything reached here is pure, so the
 * whole path runs without a server or a socket.
 *
 * Properties besides "no crash, no leak": the allocator's budget is fully
 * returned by free_unpacked, and a request the daemon accepts re-encodes
 * canonically to bytes that are accepted and decode and encode again to
 * themselves.
 */
#include <string.h>

#include "config.h"
#include "dispatch.h"
#include "hello.h"
#include "fuzz.h"
#include "lock.h"
#include "wire.h"

/* What the handler of req checks before it looks at the session or a resource. */
static void check_fields(const struct config *cfg, const Rlock__V1__Request *req)
{
    char msg[96];
    const char *close_reason = NULL;
    uint32_t ttl;
    switch (req->body_case) {
    case RLOCK__V1__REQUEST__BODY_HELLO:
        if (dispatch_hello_check(req->hello, msg, sizeof msg, &close_reason) != NULL)
            FUZZ_CHECK(close_reason != NULL);
        break;
    case RLOCK__V1__REQUEST__BODY_ACQUIRE:
        if (lock_check_resource(cfg, req->acquire->resource) == NULL)
            FUZZ_CHECK(strlen(req->acquire->resource) <= cfg->max_resource_bytes);
        ttl = req->acquire->ttl_ms;
        if (lock_check_ttl(cfg, &ttl) == 0)
            FUZZ_CHECK(ttl >= cfg->min_ttl_ms && ttl <= cfg->max_ttl_ms);
        break;
    case RLOCK__V1__REQUEST__BODY_EXTEND:
        /* 0 means the lease's own ttl, which only the handler knows. */
        ttl = req->extend->ttl_ms;
        if (ttl != 0)
            (void)lock_check_ttl(cfg, &ttl);
        break;
    case RLOCK__V1__REQUEST__BODY_RESUME:
        if (hello_check(req->resume->protocol_version, req->resume->client_name, msg, sizeof msg,
                        &close_reason) != NULL)
            FUZZ_CHECK(close_reason != NULL);
        break;
    case RLOCK__V1__REQUEST__BODY_ADOPT:
        if (lock_check_resource(cfg, req->adopt->resource) == NULL)
            FUZZ_CHECK(strlen(req->adopt->resource) <= cfg->max_resource_bytes);
        break;
    default:
        break;
    }
}

/*
 * Whatever the daemon accepts (maybe with explicit defaults, fields out of
 * order or repeated, longer varints), it encodes canonically: that encoding
 * is accepted too and decodes and encodes again to the same bytes.
 */
static void check_round_trip(const Rlock__V1__Request *req)
{
    size_t len = rlock__v1__request__get_packed_size(req);
    uint8_t *packed = malloc(len > 0 ? len : 1);
    FUZZ_CHECK(packed != NULL);
    FUZZ_CHECK(rlock__v1__request__pack(req, packed) == len);
    struct wire_budget budget;
    Rlock__V1__Request *again = dispatch_decode(&budget, packed, len);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(dispatch_check(again, packed, len) == NULL);
    FUZZ_CHECK(again->body_case == req->body_case && again->id == req->id);
    uint8_t *repacked = malloc(len > 0 ? len : 1);
    FUZZ_CHECK(repacked != NULL);
    FUZZ_CHECK(rlock__v1__request__pack(again, repacked) == len);
    FUZZ_CHECK(memcmp(packed, repacked, len) == 0);
    rlock__v1__request__free_unpacked(again, &budget.alloc);
    FUZZ_CHECK(budget.used == 0);
    free(repacked);
    free(packed);
}

static void take_frame(const struct config *cfg, const uint8_t *body, size_t len)
{
    struct wire_budget budget;
    Rlock__V1__Request *req = dispatch_decode(&budget, body, len);
    if (req == NULL) {
        FUZZ_CHECK(budget.used == 0); /* a failed unpack gives back what it took */
        return;
    }
    if (dispatch_check(req, body, len) == NULL) {
        check_fields(cfg, req);
        check_round_trip(req);
    }
    rlock__v1__request__free_unpacked(req, &budget.alloc);
    FUZZ_CHECK(budget.used == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config *cfg = config_defaults();
    FUZZ_CHECK(cfg != NULL);
    size_t off = 0;
    for (;;) {
        uint32_t len = 0;
        size_t avail = size - off;
        enum wire_frame_state st = wire_frame_next(data + off, avail, cfg->max_frame_bytes, &len);
        if (st != WIRE_FRAME_READY)
            break; /* PARTIAL waits for bytes that never come; TOO_LARGE closes */
        FUZZ_CHECK((size_t)len <= avail - WIRE_HEADER_BYTES);
        /* session_read hands an empty body over as a non-NULL pointer too. */
        take_frame(cfg, data + off + WIRE_HEADER_BYTES, len);
        off += WIRE_HEADER_BYTES + len;
    }
    config_free(cfg);
    return 0;
}
