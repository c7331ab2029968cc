/*
 * util.h — small pure helpers used across the daemon: clocks, hashing,
 * tokens, libevent timer arithmetic.
 */
#ifndef RLOCKD_UTIL_H
#define RLOCKD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#define UTIL_UUID_LEN 36 /* characters, without the NUL */

/* Milliseconds on CLOCK_MONOTONIC: every validity and deadline uses this clock. */
int64_t util_now_ms(void);
/* Milliseconds since the epoch (wall clock), for display only. */
uint64_t util_wall_ms(void);
/* FNV-1a over len bytes. */
uint32_t util_hash(const void *data, size_t len);
/* A fresh random UUID in lower-case text form, into buf (UTIL_UUID_LEN + 1 bytes). */
void util_uuid(char *buf);
/* A timeval of ms milliseconds (negative counts as 0). */
struct timeval util_tv_ms(int64_t ms);
/* Random integer in [0, n) (n > 0), for jitter; not for secrets. */
uint32_t util_rand(uint32_t n);

#endif
