/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c — framing, bounded unpack allocator and name tables for rlock.v1.
 * See wire.h for the contracts.
 */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

uint32_t wire_get_len(const uint8_t *hdr)
{
    return ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) |
           ((uint32_t)hdr[2] << 8) | (uint32_t)hdr[3];
}

void wire_put_len(uint8_t *hdr, uint32_t len)
{
    hdr[0] = (uint8_t)(len >> 24);
    hdr[1] = (uint8_t)(len >> 16);
    hdr[2] = (uint8_t)(len >> 8);
    hdr[3] = (uint8_t)len;
}

enum wire_frame_state wire_frame_next(const uint8_t *hdr, size_t avail, uint32_t max,
                                      uint32_t *len)
{
    if (avail < WIRE_HEADER_BYTES)
        return WIRE_FRAME_PARTIAL;
    *len = wire_get_len(hdr);
    if (*len > max)
        return WIRE_FRAME_TOO_LARGE;
    return avail - WIRE_HEADER_BYTES < *len ? WIRE_FRAME_PARTIAL : WIRE_FRAME_READY;
}

/* Each allocation carries its size in front so free can return it to the budget. */
union budget_hdr {
    size_t size;
    max_align_t align;
};

static void *budget_alloc(void *data, size_t size)
{
    struct wire_budget *b = data;
    size_t total = size + sizeof(union budget_hdr);
    if (total < size || b->used + total > b->limit || b->used + total < b->used) {
        b->exhausted = 1;
        return NULL;
    }
    union budget_hdr *h = malloc(total);
    if (h == NULL) {
        b->exhausted = 1;
        return NULL;
    }
    h->size = total;
    b->used += total;
    return h + 1;
}

static void budget_free(void *data, void *ptr)
{
    struct wire_budget *b = data;
    if (ptr == NULL)
        return;
    union budget_hdr *h = (union budget_hdr *)ptr - 1;
    b->used -= h->size;
    free(h);
}

void wire_budget_init(struct wire_budget *b, size_t limit)
{
    b->alloc.alloc = budget_alloc;
    b->alloc.free = budget_free;
    b->alloc.allocator_data = b;
    b->limit = limit;
    b->used = 0;
    b->exhausted = 0;
}

size_t wire_budget_for(size_t frame_len)
{
    return frame_len * WIRE_BUDGET_FACTOR + WIRE_BUDGET_FLOOR;
}

/* Pack any message behind a 4-byte prefix; pack_fn/size_fn are the generated pair. */
static uint8_t *pack_framed(const ProtobufCMessage *m, size_t *out_len)
{
    size_t body = protobuf_c_message_get_packed_size(m);
    if (body > UINT32_MAX)
        return NULL;
    uint8_t *buf = malloc(WIRE_HEADER_BYTES + body);
    if (buf == NULL)
        return NULL;
    wire_put_len(buf, (uint32_t)body);
    protobuf_c_message_pack(m, buf + WIRE_HEADER_BYTES);
    *out_len = WIRE_HEADER_BYTES + body;
    return buf;
}

uint8_t *wire_pack_server_message(const Rlock__V1__ServerMessage *m, size_t *out_len)
{
    return pack_framed(&m->base, out_len);
}

uint8_t *wire_pack_request(const Rlock__V1__Request *m, size_t *out_len)
{
    return pack_framed(&m->base, out_len);
}

/* The name of value v of enum d without its prefix ("STATUS_OK" -> "OK"), from the schema. */
static const char *enum_name(const ProtobufCEnumDescriptor *d, int v, size_t prefix)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    if (ev == NULL || strlen(ev->name) <= prefix)
        return "UNKNOWN";
    return ev->name + prefix;
}

const char *wire_status_name(int status)
{
    return enum_name(&rlock__v1__status__descriptor, status, strlen("STATUS_"));
}

const char *wire_lost_reason_name(int reason)
{
    return enum_name(&rlock__v1__lost_reason__descriptor, reason, strlen("LOST_"));
}

const char *wire_op_name(int op)
{
    if (op <= 1) /* 1 is Request.id */
        return NULL;
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&rlock__v1__request__descriptor, (unsigned)op);
    return f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->name : NULL;
}

const char *wire_check_trace_id(const char *id)
{
    size_t n = strlen(id);
    if (n > WIRE_TRACE_MAX)
        return "trace_id too long (at most 128 bytes)";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\')
            return "trace_id: printable ASCII only, without space, quote or backslash";
    }
    return NULL;
}
