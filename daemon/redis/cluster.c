/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c — see cluster.h. */
#include "cluster.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

uint16_t cluster_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint16_t cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close != NULL && close > open + 1)
            key = open + 1, len = (size_t)(close - open - 1);
    }
    return cluster_crc16(key, len) & (CLUSTER_SLOTS - 1);
}

/* host (len bytes, numeric IPv4 or IPv6, or empty for fallback) and port into *out. */
static int set_addr(const char *host, size_t hlen, long long port, const char *fallback,
                    struct config_address *out)
{
    char buf[sizeof out->host];
    if (hlen == 0 && fallback != NULL) {
        host = fallback;
        hlen = strlen(fallback);
    }
    if (hlen == 0 || hlen >= sizeof buf || port < 1 || port > 65535)
        return -1;
    memcpy(buf, host, hlen);
    buf[hlen] = '\0';
    unsigned char bin[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, buf, bin) != 1 && inet_pton(AF_INET6, buf, bin) != 1)
        return -1;
    memset(out, 0, sizeof *out);
    memcpy(out->host, buf, hlen + 1);
    out->port = (uint16_t)port;
    return 0;
}

static int is_int(const redisReply *r, long long lo, long long hi)
{
    return r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= lo && r->integer <= hi;
}

int cluster_parse_slots(const redisReply *r, const char *fallback_host, struct cluster_range *out,
                        size_t max, char *err, size_t errlen)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "CLUSTER SLOTS: not an array");
        return -1;
    }
    if (r->elements > max) {
        snprintf(err, errlen, "CLUSTER SLOTS: %zu ranges, at most %zu", r->elements, max);
        return -1;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            !is_int(e->element[0], 0, CLUSTER_SLOTS - 1) ||
            !is_int(e->element[1], e->element[0]->integer, CLUSTER_SLOTS - 1)) {
            snprintf(err, errlen, "CLUSTER SLOTS: range %zu is malformed", i);
            return -1;
        }
        const redisReply *m = e->element[2];
        if (m == NULL || m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
            m->element[0]->type != REDIS_REPLY_STRING || !is_int(m->element[1], 1, 65535) ||
            set_addr(m->element[0]->str, m->element[0]->len, m->element[1]->integer,
                     fallback_host, &out[i].addr) != 0) {
            snprintf(err, errlen, "CLUSTER SLOTS: range %zu names no usable numeric address", i);
            return -1;
        }
        out[i].start = (uint16_t)e->element[0]->integer;
        out[i].end = (uint16_t)e->element[1]->integer;
    }
    return (int)r->elements;
}

int cluster_parse_redirect(const char *err, size_t len, const char *fallback_host, uint16_t *slot,
                           struct config_address *addr)
{
    int kind;
    size_t at;
    if (len > 6 && memcmp(err, "MOVED ", 6) == 0)
        kind = CLUSTER_MOVED, at = 6;
    else if (len > 4 && memcmp(err, "ASK ", 4) == 0)
        kind = CLUSTER_ASK, at = 4;
    else
        return CLUSTER_NOT_REDIRECT;
    long long s = 0;
    size_t digits = 0;
    while (at < len && err[at] >= '0' && err[at] <= '9' && digits < 6)
        s = s * 10 + (err[at++] - '0'), digits++;
    if (digits == 0 || s >= CLUSTER_SLOTS || at >= len || err[at] != ' ')
        return -1;
    at++;
    /* host:port, the host possibly IPv6 (colons inside): the port follows the last colon. */
    size_t colon = len;
    for (size_t i = at; i < len; i++)
        if (err[i] == ':')
            colon = i;
    if (colon == len || colon + 1 == len || len - colon - 1 > 5)
        return -1;
    long long port = 0;
    for (size_t i = colon + 1; i < len; i++) {
        if (err[i] < '0' || err[i] > '9')
            return -1;
        port = port * 10 + (err[i] - '0');
    }
    if (set_addr(err + at, colon - at, port, fallback_host, addr) != 0)
        return -1;
    *slot = (uint16_t)s;
    return kind;
}

int cluster_addr_equal(const struct config_address *a, const struct config_address *b)
{
    if (a->is_unix != b->is_unix)
        return 0;
    if (a->is_unix)
        return strcmp(a->path, b->path) == 0;
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

int cluster_map_node(struct cluster_map *m, const struct config_address *a)
{
    for (uint32_t i = 0; i < m->nnodes; i++)
        if (cluster_addr_equal(&m->nodes[i], a))
            return (int)i;
    if (m->nnodes == CLUSTER_MAX_NODES)
        return -1;
    m->nodes[m->nnodes] = *a;
    return (int)m->nnodes++;
}

int cluster_map_owner(const struct cluster_map *m, uint16_t slot)
{
    return (int)m->owner[slot & (CLUSTER_SLOTS - 1)] - 1;
}

void cluster_map_set(struct cluster_map *m, uint16_t slot, uint32_t node)
{
    slot &= CLUSTER_SLOTS - 1;
    if (m->owner[slot] != 0)
        m->nslots[m->owner[slot] - 1]--;
    m->owner[slot] = (uint8_t)(node + 1);
    m->nslots[node]++;
}

int cluster_map_apply(struct cluster_map *m, const struct cluster_range *ranges, size_t n)
{
    uint32_t before = m->nnodes;
    int full = 0;
    memset(m->owner, 0, sizeof m->owner);
    memset(m->nslots, 0, sizeof m->nslots);
    for (size_t i = 0; i < n; i++) {
        int node = cluster_map_node(m, &ranges[i].addr);
        if (node < 0) {
            full = 1;
            continue;
        }
        for (uint32_t s = ranges[i].start; s <= ranges[i].end; s++)
            cluster_map_set(m, (uint16_t)s, (uint32_t)node);
    }
    return full ? -1 : (int)(m->nnodes - before);
}
