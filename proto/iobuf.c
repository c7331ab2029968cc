/* SPDX-License-Identifier: BSD-3-Clause */
/* iobuf.c — see iobuf.h. */
#include "iobuf.h"

#include <stdlib.h>
#include <string.h>

#define IOBUF_MIN 4096

int iobuf_reserve(struct iobuf *b, size_t need)
{
    if (iobuf_room(b) >= need)
        return 0;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len);
        b->off = 0;
        if (iobuf_room(b) >= need)
            return 0;
    }
    size_t cap = b->cap ? b->cap : IOBUF_MIN;
    while (cap - b->len < need)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

void iobuf_added(struct iobuf *b, size_t n)
{
    b->len += n;
}

void iobuf_consume(struct iobuf *b, size_t n)
{
    b->off += n;
    b->len -= n;
    if (b->len == 0)
        b->off = 0;
}

void iobuf_shrink(struct iobuf *b, size_t keep)
{
    if (b->len == 0 && b->cap > keep) {
        free(b->data);
        b->data = NULL;
        b->cap = b->off = 0;
    }
}

void iobuf_free(struct iobuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}
