/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pbscan.h — what the protobuf-c decoder cannot tell: a walk over the wire
 * bytes of a message that has already decoded, looking at each string field
 * as it was sent.
 *
 * protobuf-c hands strings out NUL-terminated and so cuts a string at an
 * embedded NUL byte: "a\0b" would decode as the resource "a". That is the
 * one encoding the daemon must refuse (docs/protocol.md §4.6). Everything
 * else standard proto3 encoders produce — explicit default values, fields
 * out of order or repeated (the last wins), longer varints, unknown fields —
 * decodes to what the sender meant and is accepted.
 */
#ifndef RLOCK_PBSCAN_H
#define RLOCK_PBSCAN_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* How deep messages nest before the walk gives up. The walk follows the schema's
 * message fields only, so the schema bounds the depth (3 today); this is a backstop. */
#define PBSCAN_MAX_DEPTH 16

/*
 * NULL when no string field of desc's message in data[0..len), at any depth
 * (sub-messages, repeated fields), holds a NUL byte; else the name of the
 * first such field. Malformed bytes (which the decoder would have refused)
 * and nesting beyond PBSCAN_MAX_DEPTH answer "malformed".
 */
const char *pbscan_nul_string(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                              size_t len);

#endif
