/* SPDX-License-Identifier: BSD-3-Clause */
/* explicit.c — see explicit.h. */
#include "explicit.h"

#include <string.h>

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (out != NULL)
            out[n] = (uint8_t)(b | (v ? 0x80 : 0));
        n++;
    } while (v != 0);
    return n;
}

static size_t put_tag(uint8_t *out, unsigned id, unsigned wire_type)
{
    return put_varint(out, ((uint64_t)id << 3) | wire_type);
}

/* A length-delimited field: tag, length, then len bytes from data (or a sub-message). */
static size_t put_bytes(uint8_t *out, unsigned id, const void *data, size_t len)
{
    size_t n = put_tag(out, id, 2);
    n += put_varint(out ? out + n : NULL, len);
    if (out != NULL && len > 0)
        memcpy(out + n, data, len);
    return n + len;
}

size_t pb_encode_explicit(const ProtobufCMessage *m, uint8_t *out)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    size_t n = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *at = (const char *)m + f->offset;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* Only the member the oneof holds: that is what every encoder writes. */
            uint32_t which = *(const uint32_t *)((const char *)m + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            return SIZE_MAX; /* no request has one so far */
        uint8_t *o = out ? out + n : NULL;
        switch (f->type) {
        case PROTOBUF_C_TYPE_BOOL:
            n += put_tag(o, f->id, 0);
            n += put_varint(out ? out + n : NULL, *(const protobuf_c_boolean *)at ? 1 : 0);
            break;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_ENUM:
            n += put_tag(o, f->id, 0);
            n += put_varint(out ? out + n : NULL, *(const uint32_t *)at);
            break;
        case PROTOBUF_C_TYPE_UINT64:
            n += put_tag(o, f->id, 0);
            n += put_varint(out ? out + n : NULL, *(const uint64_t *)at);
            break;
        case PROTOBUF_C_TYPE_STRING: {
            const char *s = *(char *const *)at;
            n += put_bytes(o, f->id, s, s != NULL ? strlen(s) : 0);
            break;
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
            const ProtobufCMessage *sub = *(ProtobufCMessage *const *)at;
            if (sub == NULL)
                break; /* an absent message is absent in proto3, explicit or not */
            size_t len = pb_encode_explicit(sub, NULL);
            if (len == SIZE_MAX)
                return SIZE_MAX;
            n += put_tag(o, f->id, 2);
            n += put_varint(out ? out + n : NULL, len);
            if (out != NULL)
                (void)pb_encode_explicit(sub, out + n);
            n += len;
            break;
        }
        default:
            return SIZE_MAX; /* a type the schema did not use so far */
        }
    }
    return n;
}

