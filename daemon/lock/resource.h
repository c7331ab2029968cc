/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resource.h — the daemon's view of one lock name: its Redis keys, the
 * local holder (if a session of this daemon holds it) and the FIFO of
 * local waiters. Resources are reference counted (holder, each waiter, each
 * Redis call in flight) and leave the table when the count reaches zero.
 */
#ifndef RLOCKD_RESOURCE_H
#define RLOCKD_RESOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "request.h"

struct lease;
struct event;
struct election;

struct resource {
    struct server *srv;
    char *name;  /* in the same allocation as the struct */
    size_t name_len;
    char *key;   /* PREFIX{name}; likewise */
    size_t key_len;
    uint32_t route;             /* Redis connection for both keys */
    struct lease *holder;       /* held exclusive by a session of this daemon, or NULL */
    /* Held shared by sessions of this daemon (one lease per session; lease.h). */
    LIST_HEAD(, lease) shared;
    uint32_t nshared;
    struct request_list waiters; /* FIFO; only the head tries */
    uint32_t nwaiters;
    int head_trying;            /* the head's try is in Redis */
    int wake_pending;           /* a wake-up came while that try was in Redis (lock_wake) */
    /*
     * A holder that lost its lease (its key MISSING at a renewal, or taken back
     * at MAX_HOLD) was promised the lock until promised_until_ms, and the
     * tombstone that keeps the key taken till then is not answered by Redis yet
     * (tombstone.c retries it): the key may be free there, the lock is not.
     * Nobody of this daemon tries meanwhile (lock.c).
     */
    uint32_t tombstones_unsent;
    int64_t promised_until_ms;
    /*
     * Nobody of this daemon is granted the resource before then: a shared or
     * semaphore grant that found a lost holder's promise running stands in as
     * its tombstone, a place kept in Redis until then (lock.c).
     */
    int64_t held_back_until_ms;
    uint32_t permits_here;      /* permits of this daemon's semaphore leases here */
    struct election *el;        /* sessions here observe it as an election (election.c) */
    struct event *wake_ev;      /* retry the head at the holder's remaining lease */
    /* The head waits behind a key held outside rlockd (lock.c: foreign_delay). */
    uint8_t foreign_wait;
    uint16_t recheck_ms;        /* its backoff now */
    /* Release notices (pubsub.c): who here wants them (PUBSUB_WANT_*), and the channel's state. */
    uint8_t ps_want;
    uint8_t ps_state;
    uint8_t ps_queued;          /* queued for the next subscription flush */
    TAILQ_ENTRY(resource) ps_link; /* on the pub/sub connection's list while subscribed */
    uint32_t refs;
    struct resource *next;      /* hash chain */
};

struct restable;

/* An empty table hashing names under key (secret, per process). */
struct restable *restable_new(const uint8_t key[UTIL_HASH_KEY_BYTES]);
/* Free the table; every resource must already be gone. Accepts NULL. */
void restable_free(struct restable *t);
uint64_t restable_count(const struct restable *t);

/*
 * Scanning the table a bucket at a time, for listings that must not stall
 * the loop. The cursor is Redis SCAN's: bucket indexes with their bits
 * reversed, counted up. Start at 0; restable_scan_next returns 0 once every
 * bucket was visited. Between calls the table may change: every resource present
 * from the first call to the last is visited exactly once (the table grows,
 * never shrinks); resources added or removed meanwhile may or may not be.
 */
/* Call fn for every resource of the bucket the cursor names, with its hash. */
void restable_scan_bucket(const struct restable *t, uint64_t cursor,
                          void (*fn)(struct resource *r, uint64_t hash, void *arg), void *arg);
/* The cursor after this one; 0 when the scan is complete. */
uint64_t restable_scan_next(const struct restable *t, uint64_t cursor);
/* Buckets now (a power of two), so that a cursor can tell whether the table grew. */
uint64_t restable_buckets(const struct restable *t);

/* Find or create the resource (one new reference). NULL when out of memory. */
struct resource *resource_get(struct server *srv, const char *name, size_t len);
/* The fence key: the lock key and this suffix (Redis Cluster keeps both in the slot of {name}). */
#define RESOURCE_FENCE_SUFFIX ":fence"
/* Write r's fence key into buf (cap >= r->key_len + sizeof RESOURCE_FENCE_SUFFIX); its length. */
size_t resource_fence_key(const struct resource *r, char *buf, size_t cap);
/*
 * The keys of shared holds (docs/protocol.md §6.8), in the same slot: the
 * holders ZSET, the permits HASH and an exclusive waiter's claim. Each is the
 * lock key and its suffix, at most RESOURCE_SUBKEY_MAX bytes longer.
 */
#define RESOURCE_HOLDERS_SUFFIX ":holders"
#define RESOURCE_PERMITS_SUFFIX ":permits"
#define RESOURCE_CLAIM_SUFFIX ":claim"
#define RESOURCE_LEADER_SUFFIX ":leader"
#define RESOURCE_SUBKEY_MAX 8
/* Write r's key and suffix into buf (cap >= r->key_len + RESOURCE_SUBKEY_MAX + 1); its length. */
size_t resource_subkey(const struct resource *r, const char *suffix, char *buf, size_t cap);
/* 1 when r is held (exclusive or shared) by a session of this daemon. */
#define RESOURCE_HELD_HERE(r) ((r)->holder != NULL || (r)->nshared > 0)
/* Find without creating or referencing. */
struct resource *resource_find(struct server *srv, const char *name, size_t len);
/* Take / drop a reference; the last drop frees it. */
void resource_ref(struct resource *r);
void resource_unref(struct resource *r);

#endif
