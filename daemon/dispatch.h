/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dispatch.h — decode one request frame and hand it to its operation.
 *
 * The decoding and the checks that need no session are exported on their
 * own, so that they can be tested and fuzzed without a server.
 */
#ifndef RLOCKD_DISPATCH_H
#define RLOCKD_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "rlock.pb-c.h"
#include "wire.h"

struct session;

/* Handle one frame body of len bytes (already bounded by max_frame_bytes). */
void dispatch_frame(struct session *s, const uint8_t *data, size_t len);

/*
 * Unpack a frame body of len bytes through budget, which this sets up with
 * the allowance for len. NULL when it does not decode (budget->exhausted
 * tells whether the allowance ran out). The caller frees the request with
 * rlock__v1__request__free_unpacked(req, &budget->alloc).
 */
Rlock__V1__Request *dispatch_decode(struct wire_budget *budget, const uint8_t *data, size_t len);

/*
 * The checks every request decoded from data[0..len) passes before its
 * operation runs: no string field holds a NUL byte as sent (the decoder cuts
 * it there: "a\0b" must not alias "a"), and it names an operation the table
 * knows. Any other encoding a proto3 encoder may produce is accepted
 * (docs/protocol.md §4.6). NULL, or the message of the INVALID answer.
 */
const char *dispatch_check(const Rlock__V1__Request *req, const uint8_t *data, size_t len);

/*
 * Hello's own fields: protocol version, client name (length, UTF-8, no
 * control characters). NULL when acceptable; else the message of the INVALID
 * answer (static, or written to buf of len bytes) with *close_reason, the
 * reason logged as the session is closed.
 */
const char *dispatch_hello_check(const Rlock__V1__Hello *h, char *buf, size_t len,
                                 const char **close_reason);

#endif
