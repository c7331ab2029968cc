/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auth.c — see auth.h: token tables, their parser, and the constant-time
 * check of a presented token.
 */
#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secretfile.h"

const char *auth_role_name(enum auth_role role)
{
    switch (role) {
    case AUTH_ROLE_OPEN: return "open";
    case AUTH_ROLE_CLIENT: return "client";
    case AUTH_ROLE_ADMIN: return "admin";
    case AUTH_ROLE_NONE: break;
    }
    return "none";
}

int auth_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= x[i] ^ y[i];
    return (int)((((unsigned)d) - 1u) >> 8 & 1u);
}

/* 1 when x == 0, without a branch on x. */
static unsigned is_zero(size_t x)
{
    return (unsigned)(((x | (0 - x)) >> (sizeof x * 8 - 1)) ^ 1u);
}

/* The entry of kind cert (0: tokens, 1: certificate names) equal to the len bytes at given. */
static enum auth_role check_kind(const struct auth_tokens *t, const char *text, size_t len,
                                 unsigned cert, size_t *index)
{
    unsigned char given[AUTH_TOKEN_MAX];
    memset(given, 0, sizeof given);
    if (len <= AUTH_TOKEN_MAX)
        memcpy(given, text, len);
    unsigned matched = 0, role = 0;
    size_t at = 0;
    /* Every entry is compared in full, whichever matched: no early exit. An entry of the
     * other kind never matches: a Hello presenting "cert:NAME" as its token gets nothing. */
    for (size_t i = 0; i < t->n; i++) {
        const struct auth_token *k = &t->tok[i];
        unsigned eq = (unsigned)auth_equal(k->text, given, AUTH_TOKEN_MAX) & is_zero(k->len ^ len) &
                      is_zero((unsigned)k->cert ^ cert);
        matched |= eq;
        role |= (0u - eq) & (unsigned)k->role;
        at |= ((size_t)0 - (size_t)eq) & i;
    }
    memset(given, 0, sizeof given);
    if (len < (cert ? AUTH_CERT_PREFIX_LEN + 1 : AUTH_TOKEN_MIN) || len > AUTH_TOKEN_MAX ||
        !matched)
        return AUTH_ROLE_NONE;
    if (index != NULL)
        *index = at;
    return (enum auth_role)role;
}

enum auth_role auth_check(const struct auth_tokens *t, const char *token, size_t len,
                          size_t *index)
{
    return check_kind(t, token, len, 0, index);
}

enum auth_role auth_check_cert(const struct auth_tokens *t, const char *entry, size_t len,
                               size_t *index)
{
    return check_kind(t, entry, len, 1, index);
}

size_t auth_tokens_count(const struct auth_tokens *t, enum auth_role role)
{
    if (t == NULL)
        return 0;
    return role == AUTH_ROLE_ADMIN ? t->admins : t->n - t->admins;
}

void auth_tokens_free(struct auth_tokens *t)
{
    if (t == NULL)
        return;
    /* Secrets do not linger in freed memory (volatile: the wipe is not optimised away). */
    volatile unsigned char *p = (volatile unsigned char *)t;
    size_t n = sizeof *t + t->n * sizeof t->tok[0];
    for (size_t i = 0; i < n; i++)
        p[i] = 0;
    free(t);
}

/* --- parsing --------------------------------------------------------------- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* The next word of [*p, end): its start and length; *p moves past it. */
static size_t next_word(const char **p, const char *end, const char **word)
{
    while (*p < end && is_blank(**p))
        (*p)++;
    *word = *p;
    while (*p < end && !is_blank(**p))
        (*p)++;
    return (size_t)(*p - *word);
}

/* "NAME=N" in [w, w + len): the number, into *out (*has set). NULL, or why not. */
static const char *parse_quota(const char *w, size_t len, const char *name, uint32_t *out,
                               uint8_t *has)
{
    size_t nlen = strlen(name);
    if (len <= nlen + 1 || memcmp(w, name, nlen) != 0 || w[nlen] != '=')
        return "";
    if (*has)
        return "a quota is given twice";
    uint64_t v = 0;
    for (size_t i = nlen + 1; i < len; i++) {
        if (w[i] < '0' || w[i] > '9')
            return "a quota is not a number";
        v = v * 10 + (uint64_t)(w[i] - '0');
        if (v > AUTH_QUOTA_MAX)
            return "a quota is too large (at most 100000000)";
    }
    *out = (uint32_t)v;
    *has = 1;
    return NULL;
}

/* The words after the token: max_locks=N, max_waiters=N. NULL, or why not. */
static const char *parse_quotas(const char *s, const char *end, struct auth_token *k)
{
    const char *w;
    size_t len;
    while ((len = next_word(&s, end, &w)) > 0) {
        const char *why = parse_quota(w, len, "max_locks", &k->max_locks, &k->has_max_locks);
        if (why != NULL && why[0] == '\0')
            why = parse_quota(w, len, "max_waiters", &k->max_waiters, &k->has_max_waiters);
        if (why != NULL)
            return why[0] != '\0' ? why
                                  : "expected ROLE TOKEN [max_locks=N] [max_waiters=N] (a token "
                                    "has no blanks)";
    }
    return NULL;
}

/* Check one "ROLE TOKEN [QUOTA...]" entry of [s, end); fill k. NULL, or why not. */
static const char *parse_entry(const char *s, const char *end, struct auth_token *k)
{
    const char *role, *tok;
    size_t rlen = next_word(&s, end, &role);
    size_t tlen = next_word(&s, end, &tok);
    memset(k, 0, sizeof *k);
    const char *bad = parse_quotas(s, end, k);
    if (bad != NULL)
        return bad;
    if (rlen == 5 && memcmp(role, "admin", 5) == 0)
        k->role = AUTH_ROLE_ADMIN;
    else if (rlen == 6 && memcmp(role, "client", 6) == 0)
        k->role = AUTH_ROLE_CLIENT;
    else
        return "unknown role (use admin or client)";
    if (tlen == 0)
        return "no token after the role";
    k->cert = tlen >= AUTH_CERT_PREFIX_LEN && memcmp(tok, AUTH_CERT_PREFIX, AUTH_CERT_PREFIX_LEN) == 0;
    if (k->cert && tlen == AUTH_CERT_PREFIX_LEN)
        return "no certificate name after cert:";
    if (!k->cert && tlen < AUTH_TOKEN_MIN)
        return "token too short (at least 16 characters)";
    if (tlen > AUTH_TOKEN_MAX)
        return "token too long (at most 256 characters)";
    for (size_t i = 0; i < tlen; i++)
        if ((unsigned char)tok[i] < 0x21 || (unsigned char)tok[i] > 0x7e)
            return "token has a character other than printable ASCII";
    memset(k->text, 0, sizeof k->text);
    memcpy(k->text, tok, tlen);
    k->len = tlen;
    return NULL;
}

static int token_known(const struct auth_tokens *t, size_t upto, const struct auth_token *k)
{
    for (size_t i = 0; i < upto; i++)
        if (t->tok[i].len == k->len && memcmp(t->tok[i].text, k->text, k->len) == 0)
            return 1;
    return 0;
}

int auth_tokens_parse(struct auth_tokens **t, const char *text, size_t len, int commas, char *err,
                      size_t errlen)
{
    char sep = commas ? ',' : '\n';
    size_t entries = 1;
    for (size_t i = 0; i < len; i++)
        entries += text[i] == sep;
    size_t had = *t != NULL ? (*t)->n : 0;
    size_t room = had + entries;
    struct auth_tokens *n = calloc(1, sizeof *n + room * sizeof n->tok[0]);
    if (n == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (*t != NULL) {
        memcpy(n->tok, (*t)->tok, had * sizeof n->tok[0]);
        n->n = had;
        n->admins = (*t)->admins;
    }
    const char *p = text, *end = text + len;
    for (size_t number = 1; p <= end; number++) {
        const char *stop = memchr(p, sep, (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        const char *q = p;
        while (q < stop && is_blank(*q))
            q++;
        const char *why = NULL;
        struct auth_token *k = &n->tok[n->n];
        if (q == stop) {
            if (commas)
                why = "empty entry";
        } else if (*q == '#' && !commas) {
            /* a comment line */
        } else if (n->n >= AUTH_TOKENS_MAX) {
            why = "too many tokens (at most 1024)";
        } else if ((why = parse_entry(q, stop, k)) == NULL) {
            if (token_known(n, n->n, k)) {
                why = "the same token is listed twice";
            } else {
                n->admins += k->role == AUTH_ROLE_ADMIN;
                n->n++;
            }
        }
        if (why != NULL) {
            snprintf(err, errlen, "%s %zu: %s", commas ? "entry" : "line", number, why);
            auth_tokens_free(n);
            return -1;
        }
        p = stop + 1;
    }
    auth_tokens_free(*t);
    *t = n;
    return 0;
}

int auth_tokens_load_file(struct auth_tokens **t, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    if (secretfile_read(path, AUTH_FILE_MAX_BYTES, &buf, &len, err, errlen) != 0)
        return -1;
    int rc = auth_tokens_parse(t, buf, len, 0, err, errlen);
    secretfile_free(buf, len);
    return rc;
}
