/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seal.c — the resume key file, session secrets and lock seals (seal.h).
 */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"

/* Longest key file read: the key, a newline and some white space. */
#define SEAL_FILE_MAX_BYTES 256
/* Longest message a seal signs: the longest resource (4096) and the fixed fields fit. */
#define SEAL_MSG_MAX 8192

enum { SEAL_DOMAIN_SECRET = 'S', SEAL_DOMAIN_LOCK = 'L', SEAL_DOMAIN_TOKEN = 'T' };

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int seal_key_parse(const char *text, size_t len, struct seal_key *key, char *err, size_t errlen)
{
    size_t a = 0, b = len;
    while (a < b && strchr(" \t\r\n", text[a]) != NULL)
        a++;
    while (b > a && strchr(" \t\r\n", text[b - 1]) != NULL)
        b--;
    if (b - a != 2 * SEAL_KEY_BYTES) {
        snprintf(err, errlen, "not a key: expected %d hex digits, found %zu characters",
                 2 * SEAL_KEY_BYTES, b - a);
        return -1;
    }
    for (size_t i = 0; i < SEAL_KEY_BYTES; i++) {
        int hi = hex_value((unsigned char)text[a + 2 * i]);
        int lo = hex_value((unsigned char)text[a + 2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(err, errlen, "not a key: a character that is not a hex digit");
            return -1;
        }
        key->k[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Read an existing key file. 0, -1 (err), or -2 when it does not exist. */
static int key_read(const char *path, struct seal_key *key, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return -2;
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    char buf[SEAL_FILE_MAX_BYTES + 1];
    ssize_t n = -1;
    int rc = -1;
    if (fstat(fd, &st) != 0)
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(err, errlen, "not a regular file");
    else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
        /* Whoever reads the key can forge any session's resume. */
        snprintf(err, errlen, "others may read or write it (mode %04o); chmod 600 it",
                 (unsigned)(st.st_mode & 07777));
    else if ((n = read(fd, buf, sizeof buf)) < 0)
        snprintf(err, errlen, "cannot read: %s", strerror(errno));
    else if ((size_t)n > SEAL_FILE_MAX_BYTES)
        snprintf(err, errlen, "larger than %d bytes", SEAL_FILE_MAX_BYTES);
    else
        rc = seal_key_parse(buf, (size_t)n, key, err, errlen);
    volatile char *v = buf;
    for (size_t i = 0; i < sizeof buf; i++)
        v[i] = 0;
    close(fd);
    return rc;
}

/*
 * Create path with a fresh key. Written to a temporary file first and linked
 * in place: a reader never sees half a key, and of two daemons creating it at
 * once one wins and the other reads the winner's (-2: exists now).
 */
static int key_create(const char *path, struct util_rng *rng, char *err, size_t errlen)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "path too long");
        return -1;
    }
    uint8_t k[SEAL_KEY_BYTES];
    char text[2 * SEAL_KEY_BYTES + 2];
    util_random(rng, k, sizeof k);
    for (size_t i = 0; i < SEAL_KEY_BYTES; i++)
        snprintf(text + 2 * i, 3, "%02x", k[i]);
    text[2 * SEAL_KEY_BYTES] = '\n';
    text[2 * SEAL_KEY_BYTES + 1] = '\0';
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = -1;
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len || fsync(fd) != 0)
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    else if (link(tmp, path) != 0)
        rc = errno == EEXIST ? -2 : (snprintf(err, errlen, "cannot create: %s", strerror(errno)), -1);
    else
        rc = 0;
    close(fd);
    unlink(tmp);
    volatile char *v = text;
    for (size_t i = 0; i < sizeof text; i++)
        v[i] = 0;
    return rc;
}

int seal_key_load(const char *path, int create, struct util_rng *rng, struct seal_key *key,
                  int *created, char *err, size_t errlen)
{
    *created = 0;
    int rc = key_read(path, key, err, errlen);
    if (rc != -2)
        return rc;
    if (!create) {
        snprintf(err, errlen, "no such file");
        return -1;
    }
    rc = key_create(path, rng, err, errlen);
    if (rc == -1)
        return -1;
    *created = rc == 0;
    rc = key_read(path, key, err, errlen);
    if (rc == -2)
        snprintf(err, errlen, "removed while it was being created");
    return rc == 0 ? 0 : -1;
}

/* A message under construction: a domain byte, then length-prefixed fields. */
struct seal_msg {
    uint8_t b[SEAL_MSG_MAX];
    size_t n;
    int overflow;
};

static void msg_put(struct seal_msg *m, const void *p, size_t len)
{
    if (m->overflow || len > sizeof m->b - m->n) {
        m->overflow = 1;
        return;
    }
    memcpy(m->b + m->n, p, len);
    m->n += len;
}

static void msg_u64(struct seal_msg *m, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    msg_put(m, b, sizeof b);
}

static void msg_bytes(struct seal_msg *m, const char *s, size_t len)
{
    msg_u64(m, len);
    msg_put(m, s, len);
}

/* The MAC of m in text form; "" (which matches nothing) for a message too long to sign. */
static void msg_mac(const struct seal_key *key, const struct seal_msg *m,
                    char out[SEAL_TEXT_LEN + 1])
{
    if (m->overflow) {
        out[0] = '\0';
        return;
    }
    uint8_t mac[16];
    util_siphash128(key->k, m->b, m->n, mac);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

void seal_session_secret(const struct seal_key *key, const char *session_id,
                         char out[SEAL_TEXT_LEN + 1])
{
    struct seal_msg m = {.n = 0};
    uint8_t d = SEAL_DOMAIN_SECRET;
    msg_put(&m, &d, 1);
    msg_bytes(&m, session_id, strlen(session_id));
    msg_mac(key, &m, out);
}

void seal_lock(const struct seal_key *key, const struct seal_terms *t,
               char out[SEAL_TEXT_LEN + 1])
{
    struct seal_msg m = {.n = 0};
    uint8_t d = SEAL_DOMAIN_LOCK;
    msg_put(&m, &d, 1);
    msg_bytes(&m, t->session_id, strlen(t->session_id));
    msg_bytes(&m, t->resource, t->resource_len);
    msg_bytes(&m, t->token, strlen(t->token));
    msg_u64(&m, t->fence);
    msg_u64(&m, t->ttl_ms);
    msg_u64(&m, t->watchdog ? 1 : 0);
    msg_u64(&m, t->max_hold_until_ms);
    msg_u64(&m, t->lock_delay_ms);
    msg_mac(key, &m, out);
}

void seal_acquire_token(const struct seal_key *key, const char *session_id, uint64_t request_id,
                        char out[UTIL_UUID_LEN + 1])
{
    struct seal_msg m = {.n = 0};
    uint8_t d = SEAL_DOMAIN_TOKEN;
    msg_put(&m, &d, 1);
    msg_bytes(&m, session_id, strlen(session_id));
    msg_u64(&m, request_id);
    uint8_t mac[16];
    util_siphash128(key->k, m.b, m.n, mac);
    util_uuid_mark(mac); /* 122 bits of the MAC left: as unguessable as a random token */
    util_uuid_text(mac, out);
}

int seal_matches(const char *text, const char *expect)
{
    if (strlen(expect) != SEAL_TEXT_LEN || strnlen(text, SEAL_TEXT_LEN + 1) != SEAL_TEXT_LEN)
        return 0;
    return auth_equal(text, expect, SEAL_TEXT_LEN);
}
