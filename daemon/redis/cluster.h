/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h — the pure parts of Redis Cluster support: the key to hash slot
 * function (CRC16 with the hash-tag rule), the slot map read from CLUSTER
 * SLOTS, and the MOVED / ASK redirections. No sockets, no allocation: the
 * pool (pool.c, pool_cluster.c) does the talking.
 *
 * Replies are hostile input: every type, count and length is checked, and
 * anything unexpected is refused with a reason rather than half-used.
 */
#ifndef RLOCKD_CLUSTER_H
#define RLOCKD_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "config.h"

#define CLUSTER_SLOTS 16384
/* Masters one slot map may name; more is refused as not a cluster we can serve. */
#define CLUSTER_MAX_NODES 64
/* Ranges one CLUSTER SLOTS reply may hold (a fragmented map has many). */
#define CLUSTER_MAX_RANGES CLUSTER_SLOTS

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as the cluster spec. */
uint16_t cluster_crc16(const char *buf, size_t len);
/* The slot of key: CRC16 of its hash tag (between the first '{' and the next
 * '}', when non-empty) or else of the whole key, modulo 16384. */
uint16_t cluster_key_slot(const char *key, size_t len);

/* One line of a slot map: slots start..end are served by the master at addr. */
struct cluster_range {
    uint16_t start, end;
    struct config_address addr;
};

/*
 * Parse a CLUSTER SLOTS reply into out[0..max-1]: each entry is
 * [start, end, [host, port, ...], replicas...]; only the master (first
 * node) is kept. Hosts must be numeric; an empty host ("the address you
 * reached me on") takes fallback_host. Returns the number of ranges, or -1
 * with a reason in err.
 */
int cluster_parse_slots(const redisReply *r, const char *fallback_host, struct cluster_range *out,
                        size_t max, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Parse the text of an error reply (without its '-'): "MOVED <slot> <host>:<port>"
 * or "ASK <slot> <host>:<port>". Returns 0 when err is neither, 1 for MOVED,
 * 2 for ASK (with *slot and *addr filled), -1 for a redirection we cannot
 * follow (bad slot, non-numeric or empty host, bad port). An empty host
 * takes fallback_host when it is not NULL.
 */
enum { CLUSTER_NOT_REDIRECT = 0, CLUSTER_MOVED = 1, CLUSTER_ASK = 2 };
int cluster_parse_redirect(const char *err, size_t len, const char *fallback_host, uint16_t *slot,
                           struct config_address *addr);

/*
 * The slot map: the masters known so far (an index never changes once
 * given, so connections can hang off it) and each slot's owner among them.
 */
struct cluster_map {
    uint32_t nnodes;
    struct config_address nodes[CLUSTER_MAX_NODES];
    uint8_t owner[CLUSTER_SLOTS]; /* node index + 1; 0: no owner known */
    uint16_t nslots[CLUSTER_MAX_NODES]; /* slots each node owns */
};
/* Index of the node at a, added when new; -1 when the map is full. */
int cluster_map_node(struct cluster_map *m, const struct config_address *a);
/* The owner of slot (a node index), or -1 when none is known. */
int cluster_map_owner(const struct cluster_map *m, uint16_t slot);
/* Give slot to node (an index the map has): what MOVED says. */
void cluster_map_set(struct cluster_map *m, uint16_t slot, uint32_t node);
/*
 * Replace every slot's owner by ranges[0..n-1] (slots they omit have none).
 * Returns the number of nodes added, or -1 when a range's node did not fit
 * (its slots are left without owner; the rest is applied).
 */
int cluster_map_apply(struct cluster_map *m, const struct cluster_range *ranges, size_t n);

/* 1 when a and b name the same TCP endpoint (or the same unix path). */
int cluster_addr_equal(const struct config_address *a, const struct config_address *b);

#endif
