/* SPDX-License-Identifier: BSD-3-Clause */
/* util.c — see util.h. */
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uuid/uuid.h>
#include <time.h>

int64_t util_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t util_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t util_wall_of_ms(int64_t when_ms)
{
    int64_t ago = util_now_ms() - when_ms;
    uint64_t wall = util_wall_ms();
    return ago > 0 && (uint64_t)ago < wall ? wall - (uint64_t)ago : wall;
}

void util_rng_init(struct util_rng *r)
{
    r->pos = UTIL_RNG_BYTES;
}

/* Fill buf with n bytes from the kernel; aborts if it cannot (tokens must be unguessable). */
static void kernel_random(uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(buf + got, n - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            fprintf(stderr, "rlockd: getrandom: %s\n", strerror(errno));
            abort();
        }
        got += (size_t)k;
    }
}

void util_random(struct util_rng *r, void *out, size_t n)
{
    uint8_t *o = out;
    while (n > 0) {
        if (r->pos == UTIL_RNG_BYTES) {
            kernel_random(r->buf, UTIL_RNG_BYTES);
            r->pos = 0;
        }
        size_t k = UTIL_RNG_BYTES - r->pos < n ? UTIL_RNG_BYTES - r->pos : n;
        memcpy(o, r->buf + r->pos, k);
        /* Bytes handed out are not kept around in memory longer than needed. */
        memset(r->buf + r->pos, 0, k);
        r->pos += k;
        o += k;
        n -= k;
    }
}

void util_uuid(struct util_rng *r, char *buf)
{
    uint8_t u[16];
    util_random(r, u, sizeof u);
    util_uuid_mark(u);
    util_uuid_text(u, buf);
}

void util_uuid_mark(uint8_t u[16])
{
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x80); /* version 8: acquire.lua looks for it */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

void util_uuid_text(const uint8_t u[16], char *buf)
{
    uuid_unparse_lower(u, buf);
}

void util_session_id(char *buf)
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, buf);
}

int util_uuid_parse(const char *text, char *canon)
{
    uuid_t u;
    if (strnlen(text, UTIL_UUID_LEN + 1) != UTIL_UUID_LEN || uuid_parse(text, u) != 0)
        return -1;
    uuid_unparse_lower(u, canon);
    return 0;
}

/* --- SipHash-1-3 --------------------------------------------------------------- */

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

struct sip_state {
    uint64_t v0, v1, v2, v3;
};

static void sip_round(struct sip_state *s)
{
    s->v0 += s->v1;
    s->v1 = ROTL64(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = ROTL64(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = ROTL64(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = ROTL64(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = ROTL64(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = ROTL64(s->v2, 32);
}

/* Key setup and compression of every block, the last one with the length. wide: the
 * 128-bit variant, which starts from another v1. */
static struct sip_state sip_absorb(int crounds, const uint8_t key[UTIL_HASH_KEY_BYTES],
                                   const uint8_t *in, size_t len, int wide)
{
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    struct sip_state s = {
        .v0 = k0 ^ UINT64_C(0x736f6d6570736575),
        .v1 = k1 ^ UINT64_C(0x646f72616e646f6d),
        .v2 = k0 ^ UINT64_C(0x6c7967656e657261),
        .v3 = k1 ^ UINT64_C(0x7465646279746573),
    };
    if (wide)
        s.v1 ^= 0xee;
    size_t full = len - len % 8;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t m = load_le64(in + i);
        s.v3 ^= m;
        for (int r = 0; r < crounds; r++)
            sip_round(&s);
        s.v0 ^= m;
    }
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < len % 8; i++)
        last |= (uint64_t)in[full + i] << (8 * i);
    s.v3 ^= last;
    for (int r = 0; r < crounds; r++)
        sip_round(&s);
    s.v0 ^= last;
    return s;
}

uint64_t util_siphash(int crounds, int drounds, const uint8_t key[UTIL_HASH_KEY_BYTES],
                      const void *data, size_t len)
{
    struct sip_state s = sip_absorb(crounds, key, data, len, 0);
    s.v2 ^= 0xff;
    for (int r = 0; r < drounds; r++)
        sip_round(&s);
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

static void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void util_siphash128(const uint8_t key[UTIL_HASH_KEY_BYTES], const void *data, size_t len,
                     uint8_t out[16])
{
    struct sip_state s = sip_absorb(2, key, data, len, 1);
    s.v2 ^= 0xee;
    for (int r = 0; r < 4; r++)
        sip_round(&s);
    store_le64(out, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
    s.v1 ^= 0xdd;
    for (int r = 0; r < 4; r++)
        sip_round(&s);
    store_le64(out + 8, s.v0 ^ s.v1 ^ s.v2 ^ s.v3);
}

uint64_t util_hash(const uint8_t key[UTIL_HASH_KEY_BYTES], const void *data, size_t len)
{
    return util_siphash(1, 3, key, data, len);
}

/* The length of the UTF-8 sequence starting with byte b (0: not a valid first byte). */
static size_t utf8_len(unsigned char b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xc2 && b <= 0xdf)
        return 2;
    if (b >= 0xe0 && b <= 0xef)
        return 3;
    if (b >= 0xf0 && b <= 0xf4)
        return 4;
    return 0; /* continuation byte, overlong lead (c0, c1) or beyond U+10FFFF (f5..ff) */
}

const char *util_text_check(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_len(p[i]);
        if (n == 0 || i + n > len)
            return "not valid UTF-8";
        uint32_t cp = n == 1 ? p[i] : p[i] & (0x7f >> n);
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return "not valid UTF-8";
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        /* Overlong 3- and 4-byte forms, surrogates, and beyond U+10FFFF. */
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return "not valid UTF-8";
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
            return "contains control characters";
        i += n;
    }
    return NULL;
}

struct timeval util_tv_ms(int64_t ms)
{
    struct timeval tv = {0, 0};
    if (ms > 0) {
        tv.tv_sec = (time_t)(ms / 1000);
        tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    }
    return tv;
}

uint32_t util_rand(uint32_t n)
{
    return (uint32_t)(random() % n);
}
