/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.h — small pure helpers used across the daemon: clocks, hashing,
 * random tokens, libevent timer arithmetic.
 */
#ifndef RLOCKD_UTIL_H
#define RLOCKD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#define UTIL_UUID_LEN 36 /* characters, without the NUL */
#define UTIL_HASH_KEY_BYTES 16
#define UTIL_RNG_BYTES 4096

/*
 * Milliseconds on CLOCK_BOOTTIME: every validity and deadline uses this
 * clock. Unlike CLOCK_MONOTONIC it keeps counting while the machine is
 * suspended, as Redis's clock (and every other host's) does, so a lease is
 * never believed valid after a suspend that outlasted it.
 */
int64_t util_now_ms(void);
/* The same clock in microseconds (request latencies: most are well under 1 ms). */
int64_t util_now_us(void);
/* Milliseconds since the epoch (wall clock), for display only. */
uint64_t util_wall_ms(void);
/* The wall clock (ms since the epoch) of when_ms, a time on util_now_ms()'s clock. */
uint64_t util_wall_of_ms(int64_t when_ms);

/*
 * Random bytes from the kernel, fetched UTIL_RNG_BYTES at a time: one
 * getrandom() call serves 256 tokens. Owned by the server (no global state).
 */
struct util_rng {
    uint8_t buf[UTIL_RNG_BYTES];
    size_t pos; /* bytes of buf used; UTIL_RNG_BYTES = empty */
};
void util_rng_init(struct util_rng *r);
void util_random(struct util_rng *r, void *out, size_t n);
/*
 * A fresh random UUID in lower-case text form, into buf (UTIL_UUID_LEN + 1 bytes). It is
 * a version 8 UUID (RFC 9562: "custom"), 122 random bits, so that acquire.lua can tell a
 * key rlockd set (whose release is published) from one set by the copied SET NX scripts
 * (uuid v4 or anything else, whose release may not be): see util_uuid_mark.
 */
void util_uuid(struct util_rng *r, char *buf);
/*
 * A session id: a random (version 4) UUID from libuuid, lower-case text into buf
 * (UTIL_UUID_LEN + 1 bytes). libuuid asks the kernel for each one (getrandom: about
 * 8 us here, half of what a whole request costs the daemon): right for a session's
 * id, once per connection; a token, one per acquire, comes from util_uuid's buffer.
 */
void util_session_id(char *buf);
/* Stamp 16 bytes with the version 8 and RFC 4122 variant bits of every rlockd token. */
void util_uuid_mark(uint8_t u[16]);
/* Write 16 bytes as a lower-case UUID text (UTIL_UUID_LEN + 1 bytes). */
void util_uuid_text(const uint8_t u[16], char *buf);
/*
 * An id a peer sent, read as a UUID (libuuid's uuid_parse: 36 characters, hex digits of
 * either case, dashes in their places) and written back in the lower-case form the
 * daemon itself uses into canon (UTIL_UUID_LEN + 1 bytes). 0, or -1 when it is not one.
 */
int util_uuid_parse(const char *text, char *canon);

/*
 * SipHash-1-3 of len bytes under a secret key: resource names are chosen by
 * clients, and an unkeyed hash would let them pile names into one bucket of
 * the resource table or onto one Redis connection.
 */
uint64_t util_hash(const uint8_t key[UTIL_HASH_KEY_BYTES], const void *data, size_t len);
/* SipHash with crounds compression and drounds finalisation rounds (util_hash is 1, 3). */
uint64_t util_siphash(int crounds, int drounds, const uint8_t key[UTIL_HASH_KEY_BYTES],
                      const void *data, size_t len);

/*
 * SipHash-2-4 with its 128-bit output (bytes as the reference implementation
 * writes them): a keyed MAC for short messages (seal.h).
 */
void util_siphash128(const uint8_t key[UTIL_HASH_KEY_BYTES], const void *data, size_t len,
                     uint8_t out[16]);

/*
 * NULL when the len bytes at s are valid UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF) without control characters (U+0000 to
 * U+001F, U+007F to U+009F); else why not. Names pass through the protocol
 * to clients in every language, and into logs.
 */
const char *util_text_check(const char *s, size_t len);

/* A timeval of ms milliseconds (negative counts as 0). */
struct timeval util_tv_ms(int64_t ms);
/* Random integer in [0, n) (n > 0), for jitter; not for secrets. */
uint32_t util_rand(uint32_t n);

#endif
