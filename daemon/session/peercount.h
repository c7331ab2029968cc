/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peercount.h — connections before their Hello, counted per peer IP address
 * (server.max_pending_per_peer): a keyed hash of addresses to counts, so that
 * each accept costs the same however many connections wait.
 */
#ifndef RLOCKD_PEERCOUNT_H
#define RLOCKD_PEERCOUNT_H

#include <stdint.h>

#include "util.h"

struct peercount;

/* A table keyed with key (per process: a peer cannot aim at one chain). NULL when out of memory. */
struct peercount *peercount_new(const uint8_t key[UTIL_HASH_KEY_BYTES]);
void peercount_free(struct peercount *t);
/* The count of ip (16 bytes: IPv4 mapped into IPv6). */
uint32_t peercount_get(const struct peercount *t, const uint8_t ip[16]);
/* Count one more for ip; 0, or -1 when out of memory (then it is not counted). */
int peercount_add(struct peercount *t, const uint8_t ip[16]);
/* Count one less for ip (an entry reaching 0 is freed). */
void peercount_remove(struct peercount *t, const uint8_t ip[16]);

#endif
