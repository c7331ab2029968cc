/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * explicit.h — messages encoded as encoders that write every field do
 * (protobufjs writes fields set to 0, "" or false): each field of m, at any
 * depth, written even when it holds its default, in field order; only the
 * oneof member set; absent sub-messages absent. Driven by protobuf-c's
 * descriptors, so a new field or request kind needs no edit. For the tests
 * and the fuzz seeds.
 */
#ifndef RLOCK_TEST_EXPLICIT_H
#define RLOCK_TEST_EXPLICIT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Encode m into out, or only size it when out is NULL: the number of bytes, or SIZE_MAX
 * for a field kind not written so far (repeated fields, types the schema does not use). */
size_t pb_encode_explicit(const ProtobufCMessage *m, uint8_t *out);

#endif
