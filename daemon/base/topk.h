/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topk.h — the heaviest names of an unbounded stream, in memory fixed by K:
 * weighted Space-Saving (Metwally, Agrawal and El Abbadi, "Efficient
 * computation of frequent and top-k elements in data streams", 2005; the
 * weighted form adds w where the paper adds 1).
 *
 * K counters, each a name with a count and an error. Weight w added to a
 * counted name adds w to its count. A name not counted takes over the counter
 * with the least count m once all K are in use: its count becomes m + w and
 * its error m, and what was counted of the name it replaced is forgotten.
 * With W the total weight added so far:
 *
 *   - a counted name's true weight lies in [count - error, count], and
 *     error <= m <= W / K (m: the least count now);
 *   - every name whose true weight exceeds W / K is counted, so the names
 *     heavier than that are all among the K, in the right order up to their
 *     errors.
 *
 * Each counter carries a payload of the caller's, zeroed when a name takes
 * the counter over: whatever it counts is exact since that moment.
 *
 * Memory: K counters with their payloads, a table of at least 2K slots and
 * the names (each a copy of at most the caller's longest name): fixed by K,
 * however many distinct names go by. Names are hashed with a secret key:
 * they come from clients, who could otherwise pile them into one run.
 */
#ifndef RLOCKD_TOPK_H
#define RLOCKD_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct topk_entry {
    uint64_t count; /* weight counted: the true weight is at most this ... */
    uint64_t error; /* ... and at least count - error */
    uint64_t hash;
    char *name; /* owned, NUL-terminated */
    uint32_t name_len;
    uint32_t heap_pos;
    _Alignas(16) unsigned char payload[]; /* the caller's, zeroed at takeover */
};

struct topk;

/*
 * An empty summary of k counters (k >= 1) with payload_size bytes each, names
 * hashed under key. NULL when out of memory. Every counter is allocated here:
 * adding a name later allocates only its copy.
 */
struct topk *topk_new(uint32_t k, size_t payload_size, const uint8_t key[UTIL_HASH_KEY_BYTES]);
/* Free it and every name. Accepts NULL. */
void topk_free(struct topk *t);

/* The counter of name, or NULL when it is not counted. */
struct topk_entry *topk_find(const struct topk *t, const char *name, size_t len);
/*
 * Add weight to name (taking a counter over when it has none). Its counter,
 * or NULL when weight is 0 and name is not counted (nothing changes), or when
 * out of memory for the name's copy (nothing changes).
 */
struct topk_entry *topk_add(struct topk *t, const char *name, size_t len, uint64_t weight);

/* Counters in use (at most K), and the counter at index i < that, in no order. */
uint32_t topk_size(const struct topk *t);
uint32_t topk_capacity(const struct topk *t);
struct topk_entry *topk_at(const struct topk *t, uint32_t i);
/* W: every weight added so far; and the least count (0 while counters are free). */
uint64_t topk_total(const struct topk *t);
uint64_t topk_min(const struct topk *t);
/* Bytes allocated for it now: counters, table, heap and names. */
size_t topk_bytes(const struct topk *t);

#endif
