/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h — pure helpers shared by both ends of the rlock.v1 protocol.
 *
 * Framing is a 4-byte unsigned big-endian length followed by that many bytes
 * of one protobuf message. Nothing here touches a socket: the daemon and the
 * client library feed bytes in and get lengths, messages and errors out, so
 * the whole codec is unit-testable and fuzzable.
 *
 * protobuf-c 1.4 unpack has no allocation limit, so every unpack goes through
 * a wire_budget: a ProtobufCAllocator that refuses to hand out more than a
 * fixed number of bytes in total.
 */
#ifndef RLOCK_WIRE_H
#define RLOCK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "rlock.pb-c.h"

#define WIRE_HEADER_BYTES 4u
#define WIRE_PROTOCOL_VERSION 1u
/* Allocation allowed per unpack, as a multiple of the frame size (plus a floor). */
#define WIRE_BUDGET_FACTOR 16u
#define WIRE_BUDGET_FLOOR 4096u

/* Decode the length prefix at hdr[0..3]. */
uint32_t wire_get_len(const uint8_t *hdr);
/* Encode len as the 4-byte prefix at hdr[0..3]. */
void wire_put_len(uint8_t *hdr, uint32_t len);

/* What the front of an input stream holds. */
enum wire_frame_state {
    WIRE_FRAME_PARTIAL,   /* less than a header, or than the frame it announces: read more */
    WIRE_FRAME_TOO_LARGE, /* a header announcing more than the limit: the stream is unusable */
    WIRE_FRAME_READY,     /* a whole frame: a header and *len bytes of body */
};

/*
 * Look at the avail bytes buffered at the front of a stream; hdr holds the
 * first min(avail, WIRE_HEADER_BYTES) of them. *len is set to the announced
 * body length unless the header is incomplete. Checking the length before
 * waiting for the body is what keeps an oversized frame from ever being
 * buffered.
 */
enum wire_frame_state wire_frame_next(const uint8_t *hdr, size_t avail, uint32_t max,
                                      uint32_t *len);

/* A ProtobufCAllocator with a hard byte budget. */
struct wire_budget {
    ProtobufCAllocator alloc; /* pass &budget.alloc to *_unpack() */
    size_t limit;             /* bytes that may be live at once */
    size_t used;              /* bytes live now */
    int exhausted;            /* set once an allocation was refused */
};

/* Prepare b to allow allocations of at most limit bytes. */
void wire_budget_init(struct wire_budget *b, size_t limit);
/* Budget for unpacking a frame of frame_len bytes. */
size_t wire_budget_for(size_t frame_len);

/*
 * Serialise a ServerMessage / Request with its length prefix into a freshly
 * malloc'd buffer. On success returns the buffer and stores the total length
 * (header included) in *out_len; returns NULL when out of memory.
 * The caller frees the buffer.
 */
uint8_t *wire_pack_server_message(const Rlock__V1__ServerMessage *m, size_t *out_len);
uint8_t *wire_pack_request(const Rlock__V1__Request *m, size_t *out_len);

/* Name of a status value ("OK", "NOT_ACQUIRED", ...); "UNKNOWN" for others. */
const char *wire_status_name(int status);
/* Name of a lost reason ("EXPIRED", ...). */
const char *wire_lost_reason_name(int reason);
/* Name of a request kind, by Request's oneof case ("acquire", "list_locks", ...), from the
 * schema; NULL for a case the schema does not have. */
const char *wire_op_name(int op);

/* The longest trace id (Acquire.trace_id; docs/protocol.md §6.12). */
#define WIRE_TRACE_MAX 128
/*
 * NULL when id (not NULL; "" = none) is a trace id a daemon may log as it is: at most
 * WIRE_TRACE_MAX bytes of printable ASCII without space, quote or backslash (so that no
 * id can forge a log line or a field of one); else why not. The daemon and librlock
 * both check with it.
 */
const char *wire_check_trace_id(const char *id);

#endif
