/* SPDX-License-Identifier: BSD-3-Clause */
/* pbscan.c — see pbscan.h. */
#include "pbscan.h"

#include <string.h>

/* A varint at *p (before end) into *v; 0, or -1 when cut short or longer than 10 bytes. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static const char *scan(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                        const uint8_t *end, int depth)
{
    if (depth > PBSCAN_MAX_DEPTH)
        return "malformed";
    while (p < end) {
        uint64_t tag, n;
        if (get_varint(&p, end, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
            return "malformed";
        switch (tag & 7) {
        case 0: /* varint */
            if (get_varint(&p, end, &n) != 0)
                return "malformed";
            continue;
        case 1: /* 64-bit */
            n = 8;
            break;
        case 5: /* 32-bit */
            n = 4;
            break;
        case 2: { /* length-delimited: a string, bytes, a message or a packed array */
            if (get_varint(&p, end, &n) != 0 || n > (uint64_t)(end - p))
                return "malformed";
            const ProtobufCFieldDescriptor *f =
                desc != NULL ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
                             : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)n) != NULL)
                return f->name;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                const char *bad = scan(f->descriptor, p, p + n, depth + 1);
                if (bad != NULL)
                    return bad;
            }
            break;
        }
        default: /* groups: not proto3, and the decoder refuses them */
            return "malformed";
        }
        if (n > (uint64_t)(end - p))
            return "malformed";
        p += n;
    }
    return NULL;
}

const char *pbscan_nul_string(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                              size_t len)
{
    return scan(desc, data, data + len, 0);
}
