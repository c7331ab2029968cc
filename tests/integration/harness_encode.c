/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_encode.c — requests sent as encoders that write every default
 * encode them (tests/encode/explicit.c). See harness_raw.h.
 */
#include "harness_raw.h"

#include <stdlib.h>

#include "explicit.h"

size_t h_encode_explicit(const ProtobufCMessage *m, uint8_t *out)
{
    size_t n = pb_encode_explicit(m, out);
    ck_assert_msg(n != SIZE_MAX, "%s: a field the explicit encoder does not write",
                  m->descriptor->name);
    return n;
}

int h_raw_send_explicit(const struct h_raw *c, const Rlock__V1__Request *req)
{
    size_t len = h_encode_explicit(&req->base, NULL);
    uint8_t *body = malloc(len > 0 ? len : 1);
    ck_assert_ptr_nonnull(body);
    ck_assert_uint_eq(h_encode_explicit(&req->base, body), len);
    int rc = h_raw_send_body(c, body, len);
    free(body);
    return rc;
}
