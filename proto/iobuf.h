/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iobuf.h — a growable byte buffer for a connection's input or output, the
 * daemon's sessions and librlock's engine alike:
 * bytes are appended at the end and consumed from the front, and the front
 * is compacted only when room is needed, so a steady stream of small frames
 * costs no allocation.
 */
#ifndef RLOCK_IOBUF_H
#define RLOCK_IOBUF_H

#include <stddef.h>
#include <stdint.h>

struct iobuf {
    uint8_t *data;
    size_t off; /* consumed bytes at the front */
    size_t len; /* valid bytes from off */
    size_t cap;
};

/* The valid bytes. */
static inline uint8_t *iobuf_head(const struct iobuf *b)
{
    return b->data + b->off;
}
/* Room for at least need more bytes after the valid ones. 0, or -1 when out of memory. */
int iobuf_reserve(struct iobuf *b, size_t need) __attribute__((warn_unused_result));
/* Where the next bytes go (after iobuf_reserve), and how many fit. */
static inline uint8_t *iobuf_tail(const struct iobuf *b)
{
    return b->data + b->off + b->len;
}
static inline size_t iobuf_room(const struct iobuf *b)
{
    return b->cap - b->off - b->len;
}
/* n bytes were written at the tail / used from the head. */
void iobuf_added(struct iobuf *b, size_t n);
void iobuf_consume(struct iobuf *b, size_t n);
/* Give back the memory of an empty buffer that grew beyond keep bytes. */
void iobuf_shrink(struct iobuf *b, size_t keep);
void iobuf_free(struct iobuf *b);

#endif
