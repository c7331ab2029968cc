/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reply.h — what Redis said, in the lock logic's terms.
 *
 * The reply callbacks (lock.c, watchdog.c, cleanup.c) ask these functions
 * what a reply to one of the Lua scripts means and then act on the answer;
 * the meaning lives here, apart from the state changes, so that it can be
 * tested and fuzzed on its own.
 *
 * Every function accepts any reply hiredis can hand over — NULL, nil,
 * integer, string, status, error, arrays of any length holding any of these,
 * nested arrays — and reads nothing outside it. Nothing is allocated and no
 * pointer into the reply is kept: a reply is freed once its callback returns.
 */
#ifndef RLOCKD_REPLY_H
#define RLOCKD_REPLY_H

#include <stdint.h>

#include <hiredis/hiredis.h>

/*
 * The answer to acquire.lua or group_acquire.lua: {1, fence}, {0, pttl, held_by}
 * or (group_acquire.lua) {-1, what holds it}.
 */
enum reply_acquire_kind {
    REPLY_ACQUIRE_GRANTED,   /* the key was set: *fence is the new fence */
    REPLY_ACQUIRE_BUSY,      /* held by another token: *pttl is its PTTL (-1: no expiry);
                              * *held_by: REPLY_HELD_BY_* */
    REPLY_ACQUIRE_WRONG_KIND, /* held as another kind (a semaphore): nothing was set */
    REPLY_ACQUIRE_ERROR,     /* Redis answered an error (reply_error_text); the SET may have run */
    REPLY_ACQUIRE_MALFORMED, /* no reply, or one of another shape; the SET may have run */
};

/* Who holds a busy key (acquire.lua's third element). */
enum reply_held_by {
    REPLY_HELD_BY_RLOCKD = 0,  /* a token or tombstone of rlockd's: its release is announced */
    REPLY_HELD_BY_FOREIGN = 1, /* a value rlockd did not make (the copied SET NX scripts) */
    REPLY_HELD_BY_GROUP = 2,   /* shared holders of rlockd's (a waiter's claim needs refreshing) */
};

/*
 * Interpret r. GRANTED and BUSY need an array of two or three integers, the
 * first 1 (granted) or anything else (busy); *fence or *pttl is set from the second and
 * the other is left alone. *held_by is set on BUSY from the third (an unknown
 * value counts as FOREIGN: polled, never slept on; a two-element answer is of
 * a script that does not tell: the holder is taken for rlockd's, whose release
 * is published). WRONG_KIND is {-1, a string}.
 */
enum reply_acquire_kind reply_acquire(const redisReply *r, uint64_t *fence, long long *pttl,
                                      int *held_by);

/* Per key, the answer to renew.lua (and to an Extend, which renews one key). */
enum reply_renew_result {
    REPLY_RENEW_STOLEN = -1, /* the key holds another value */
    REPLY_RENEW_MISSING = 0, /* the key does not exist */
    REPLY_RENEW_OK = 1,      /* the key holds the token and lives at least the new ttl */
    REPLY_RENEW_UNKNOWN = 2, /* no usable answer for this key */
};

/*
 * Interpret r as the answer for a batch of n keys: fills out[0..n-1] with
 * enum reply_renew_result values. Returns 0 when r is an array of exactly n
 * entries (an entry that is not -1, 0 or 1 is UNKNOWN on its own), else -1
 * with every entry UNKNOWN: the whole batch failed.
 */
int reply_renew(const redisReply *r, uint32_t n, int8_t out[]);

/* The answer to a compare-and-delete (release.lua; group_release.lua for one place: an array of
 * one such integer) or to tombstone.lua. */
enum reply_delete_kind {
    REPLY_DELETE_DONE,    /* 1: the key held the token and was deleted (or tombstoned) */
    REPLY_DELETE_ABSENT,  /* another integer (the scripts say 0): the key did not hold it */
    REPLY_DELETE_UNKNOWN, /* no reply, an error, or another type: it may or may not have run */
};

enum reply_delete_kind reply_delete(const redisReply *r);

/*
 * The answer to adopt.lua: {1, pttl} adopted, {1, pttl, 'leader'} adopted an
 * election's leader, {1, pttl, marker, permits}
 * adopted a group place, {0, 0} missing, {-1, 0} taken. Returns the enum
 * reply_renew_result it means (OK, MISSING, STOLEN) and sets *pttl and *place
 * for OK: whether it was a group's place, and for a semaphore ("group:sem:N")
 * its limit and the place's permits (a pttl below 1, an unknown marker or
 * permits above the limit are not answers adopt.lua gives: UNKNOWN); UNKNOWN
 * for anything else: the swap may or may not have run.
 */
struct reply_place {
    int group;
    uint32_t limit, permits;
    int leader; /* an exclusive lock that leads an election ({1, pttl, 'leader'}) */
};
int reply_adopt_place(const redisReply *r, long long *pttl, struct reply_place *place);

/*
 * The answer to leader.lua: {1, term, value, pttl} or {0}. Returns 1 (a
 * leader: *term, *value and *value_len (pointing into r) and *pttl set), 0
 * (none), or -1 for anything else (no reply, an error, a term that is not a
 * positive decimal).
 */
struct reply_leader {
    uint64_t term;
    const char *value;
    size_t value_len;
    long long pttl;
};
int reply_leader(const redisReply *r, struct reply_leader *out);

/* The text of an error reply (NUL-terminated, valid while r is); NULL for anything else. */
const char *reply_error_text(const redisReply *r);

#endif
