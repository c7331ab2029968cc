/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seal.h — the resume key and what it signs: a session's secret and each
 * lock's seal (docs/architecture.md, "Session resume").
 *
 * A client carries what it needs to resume its session on another daemon;
 * the daemons sharing the key can tell a real session and lock from a forged
 * one without asking anyone. A seal binds a lock to its session and to every
 * term the client must not be able to change: its token, fence, ttl, watchdog,
 * max_hold deadline and lock delay.
 *
 * The MAC is SipHash-2-4 with its 128-bit output (util_siphash128) over a
 * domain byte and length-prefixed fields: no two different messages encode
 * alike, and a session's secret can never pass for a lock's seal.
 */
#ifndef RLOCKD_SEAL_H
#define RLOCKD_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SEAL_KEY_BYTES UTIL_HASH_KEY_BYTES
/* Characters of a secret or a seal in text form (lower-case hex), without the NUL. */
#define SEAL_TEXT_LEN 32

struct seal_key {
    uint8_t k[SEAL_KEY_BYTES];
};

/*
 * Read the key from path: SEAL_KEY_BYTES * 2 hex digits, surrounding white
 * space ignored. A file that does not exist is created (mode 0600, a fresh
 * random key, written to a temporary file and renamed in place) when create
 * is set; *created tells. Refused: a file others may read or write, not a
 * regular file, a symbolic link, anything but the hex key. 0, or -1 with
 * the reason in err.
 */
int seal_key_load(const char *path, int create, struct util_rng *rng, struct seal_key *key,
                  int *created, char *err, size_t errlen);
/* Parse the text of a key file (as seal_key_load reads it). 0 or -1 (err). */
int seal_key_parse(const char *text, size_t len, struct seal_key *key, char *err,
                   size_t errlen);

/* The secret of session id: what proves, at a resume, that the client opened it. */
void seal_session_secret(const struct seal_key *key, const char *session_id,
                         char out[SEAL_TEXT_LEN + 1]);

/* The terms of a held lock that its seal binds. */
struct seal_terms {
    const char *session_id;
    const char *resource;
    size_t resource_len;
    const char *token;
    uint64_t fence;
    uint32_t ttl_ms;
    int watchdog;
    uint64_t max_hold_until_ms; /* wall clock, ms since the epoch; 0 = none */
    uint32_t lock_delay_ms;
};
void seal_lock(const struct seal_key *key, const struct seal_terms *t,
               char out[SEAL_TEXT_LEN + 1]);

/*
 * The token of the Acquire with request_id of session id (UTIL_UUID_LEN
 * characters, UUID-shaped): derived, not drawn at random, so that after a
 * resume a daemon can release what an Acquire left unanswered by the lost
 * connection may have taken (Release.acquire_id) without ever having seen it.
 * Unguessable without the key, like a random token.
 */
void seal_acquire_token(const struct seal_key *key, const char *session_id, uint64_t request_id,
                        char out[UTIL_UUID_LEN + 1]);

/*
 * 1 when text is exactly the SEAL_TEXT_LEN characters of expect, compared in
 * a time that does not depend on where they differ; else 0.
 */
int seal_matches(const char *text, const char *expect);

#endif
