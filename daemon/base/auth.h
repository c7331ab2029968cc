/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auth.h — the tokens clients present in Hello, and the role each one grants.
 *
 * Tokens come from [auth] token_file (preferred: the secret stays out of the
 * main configuration) and from [auth] tokens (inline). Both use one syntax,
 * an entry per line in the file and comma-separated inline:
 *
 *     admin  <token>      may send every request, admin requests included
 *     client <token>      may not send admin requests
 *
 * optionally followed by the token's own quotas (quota.h), overriding its
 * role's defaults (limits.client_max_locks, ...; 0 = no quota):
 *
 *     client <token> max_locks=100 max_waiters=20
 *
 * A TLS client certificate (tls.h) stands for a token when its name (the
 * subject's common name) has an entry written cert:NAME:
 *
 *     admin  cert:ops.example.com
 *
 * Such an entry is never accepted as a token: only a certificate the daemon
 * verified against [tls] ca_file gives its role.
 *
 * '#' starts a comment line; blank lines are ignored. A token is 16 to
 * AUTH_TOKEN_MAX printable ASCII characters without blanks. With no token
 * configured at all, authentication is off and every session may do
 * everything.
 *
 * A presented token is compared with every configured token, each in time
 * that depends only on AUTH_TOKEN_MAX, so the time taken tells nothing about
 * which token, or how much of one, was right. Token text is never logged and
 * never printed by --dump-config; parse errors name the line, not the text.
 *
 * Pure apart from reading the token file: no sockets, no server state.
 */
#ifndef RLOCKD_AUTH_H
#define RLOCKD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_TOKEN_MIN 16
#define AUTH_TOKEN_MAX 256
/* Most tokens in one configuration (file and inline together). */
#define AUTH_TOKENS_MAX 1024
/* Largest token file read. */
#define AUTH_FILE_MAX_BYTES (1024 * 1024)

/* What a session may do. Values are those of the protocol's Role enum. */
enum auth_role {
    AUTH_ROLE_OPEN = 0,   /* authentication is off: everything */
    AUTH_ROLE_CLIENT = 1, /* locks, ping, stats */
    AUTH_ROLE_ADMIN = 2,  /* everything */
    AUTH_ROLE_NONE = 3,   /* no token, or a wrong one: nothing */
};

/* Largest quota a token entry may give. */
#define AUTH_QUOTA_MAX 100000000u

/* Entries naming a client certificate start with this. */
#define AUTH_CERT_PREFIX "cert:"
#define AUTH_CERT_PREFIX_LEN 5

struct auth_token {
    enum auth_role role;
    uint8_t cert; /* a cert:NAME entry: matched by a verified certificate, never by a token */
    uint32_t max_locks, max_waiters; /* the entry's own quotas, where has_* says so */
    uint8_t has_max_locks, has_max_waiters;
    size_t len;
    unsigned char text[AUTH_TOKEN_MAX]; /* zero-padded: every comparison reads all of it */
};

struct auth_tokens {
    size_t n;
    size_t admins;
    struct auth_token tok[]; /* n of them */
};

/*
 * Parse text (entries separated by '\n', or by ',' when commas is set) and
 * append its tokens to *t (which may be NULL: a table is allocated). Returns
 * 0, or -1 with "ENTRY: problem" in err (ENTRY is "line N" or "entry N").
 * On error *t keeps what it had before the call.
 */
int auth_tokens_parse(struct auth_tokens **t, const char *text, size_t len, int commas, char *err,
                      size_t errlen) __attribute__((warn_unused_result));

/*
 * Read the token file at path and append its tokens to *t. The file (or the
 * one a symbolic link at path leads to) must meet secretfile.h's rules, at
 * most AUTH_FILE_MAX_BYTES long: mode 0600, 0640, 0400 or 0440, owned by root
 * or by rlockd's user. Returns 0, or -1 with the problem in err ("line 3:
 * unknown role", "readable or writable by others (mode 0644); ...", ...).
 */
int auth_tokens_load_file(struct auth_tokens **t, const char *path, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Wipe and free a table; accepts NULL. */
void auth_tokens_free(struct auth_tokens *t);

/* Tokens of a table with role (0 for NULL). */
size_t auth_tokens_count(const struct auth_tokens *t, enum auth_role role);

/*
 * The role of the presented token (len bytes): ADMIN, CLIENT, or NONE when
 * it matches no token (an empty or over-long one included). t must hold at
 * least one token. Takes the same time whatever the token presented. When
 * index is not NULL and the token matched, *index is its entry in t.
 */
enum auth_role auth_check(const struct auth_tokens *t, const char *token, size_t len,
                          size_t *index);

/*
 * The role of the entry "cert:NAME" (len bytes, the prefix included) for a
 * client certificate the TLS handshake verified: like auth_check, over the
 * cert:NAME entries only.
 */
enum auth_role auth_check_cert(const struct auth_tokens *t, const char *entry, size_t len,
                               size_t *index);

/* 1 when the n bytes at a and b are equal; the time depends on n only. */
int auth_equal(const void *a, const void *b, size_t n);

/* "open", "client", "admin" or "none". */
const char *auth_role_name(enum auth_role role);

#endif
