/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_auth.c — daemon/base/auth.c: the token file and inline syntax, the errors
 * (which name lines, never tokens), the file's permissions, and the check of
 * a presented token: the right role for each token, nothing for near misses,
 * and the same time whichever token, or how much of one, was right.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "quota.h"
#include "check_main.h"

#define ADMIN_TOK "adm1n-t0ken-0123456789abcdef"
#define CLIENT_TOK "cl1ent-t0ken-0123456789abcdef"

static struct auth_tokens *parse_ok(const char *text, int commas)
{
    struct auth_tokens *t = NULL;
    char err[256] = "";
    int rc = auth_tokens_parse(&t, text, strlen(text), commas, err, sizeof err);
    ck_assert_msg(rc == 0, "refused: %s", err);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Parse text, expect a refusal whose message is want, and that it repeats no token. */
static void parse_bad(const char *text, int commas, const char *want)
{
    struct auth_tokens *t = NULL;
    char err[256] = "";
    int rc = auth_tokens_parse(&t, text, strlen(text), commas, err, sizeof err);
    ck_assert_msg(rc == -1, "accepted: %s", text);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(err, want);
    ck_assert_msg(strstr(err, "0123456789") == NULL, "the message shows a token: %s", err);
}

START_TEST(test_file_syntax)
{
    struct auth_tokens *t = parse_ok("# rlockd tokens\n"
                                     "\n"
                                     "admin " ADMIN_TOK "\n"
                                     "   # indented comment\n"
                                     "client\t" CLIENT_TOK "\r\n"
                                     "  client   " CLIENT_TOK "-2  \n",
                                     0);
    ck_assert_uint_eq(t->n, 3);
    ck_assert_uint_eq(auth_tokens_count(t, AUTH_ROLE_ADMIN), 1);
    ck_assert_uint_eq(auth_tokens_count(t, AUTH_ROLE_CLIENT), 2);
    ck_assert_int_eq(auth_check(t, ADMIN_TOK, strlen(ADMIN_TOK), NULL), AUTH_ROLE_ADMIN);
    ck_assert_int_eq(auth_check(t, CLIENT_TOK, strlen(CLIENT_TOK), NULL), AUTH_ROLE_CLIENT);
    ck_assert_int_eq(auth_check(t, CLIENT_TOK "-2", strlen(CLIENT_TOK "-2"), NULL), AUTH_ROLE_CLIENT);
    auth_tokens_free(t);
}
END_TEST

START_TEST(test_inline_and_append)
{
    struct auth_tokens *t = parse_ok("admin " ADMIN_TOK ", client " CLIENT_TOK, 1);
    ck_assert_uint_eq(t->n, 2);
    char err[256];
    /* The file's tokens are added to the inline ones. */
    const char *more = "client another-client-token-xyz\n";
    ck_assert_int_eq(auth_tokens_parse(&t, more, strlen(more), 0, err, sizeof err), 0);
    ck_assert_uint_eq(t->n, 3);
    ck_assert_uint_eq(auth_tokens_count(t, AUTH_ROLE_ADMIN), 1);
    /* A refused addition leaves the table as it was. */
    const char *dup = "admin " ADMIN_TOK "\n";
    ck_assert_int_eq(auth_tokens_parse(&t, dup, strlen(dup), 0, err, sizeof err), -1);
    ck_assert_str_eq(err, "line 1: the same token is listed twice");
    ck_assert_uint_eq(t->n, 3);
    ck_assert_int_eq(auth_check(t, "another-client-token-xyz", 24, NULL), AUTH_ROLE_CLIENT);
    auth_tokens_free(t);
}
END_TEST

START_TEST(test_errors_name_lines)
{
    parse_bad("admin " ADMIN_TOK "\nroot " CLIENT_TOK "\n", 0,
              "line 2: unknown role (use admin or client)");
    parse_bad("# c\nadmin\n", 0, "line 2: no token after the role");
    parse_bad("admin short-0123\n", 0, "line 1: token too short (at least 16 characters)");
    parse_bad("client " ADMIN_TOK " trailing-0123456789\n", 0,
              "line 1: expected ROLE TOKEN [max_locks=N] [max_waiters=N] (a token has no "
              "blanks)");
    parse_bad("client " ADMIN_TOK " max_locks=\n", 0,
              "line 1: expected ROLE TOKEN [max_locks=N] [max_waiters=N] (a token has no "
              "blanks)");
    parse_bad("client " ADMIN_TOK " max_locks=12x\n", 0, "line 1: a quota is not a number");
    parse_bad("client " ADMIN_TOK " max_locks=-1\n", 0, "line 1: a quota is not a number");
    parse_bad("client " ADMIN_TOK " max_waiters=1 max_waiters=2\n", 0,
              "line 1: a quota is given twice");
    parse_bad("client " ADMIN_TOK " max_locks=100000001\n", 0,
              "line 1: a quota is too large (at most 100000000)");
    parse_bad("client " ADMIN_TOK " max_locks=99999999999999999999999\n", 0,
              "line 1: a quota is too large (at most 100000000)");
    parse_bad("admin " ADMIN_TOK "\n\nclient " ADMIN_TOK "\n", 0,
              "line 3: the same token is listed twice");
    parse_bad("admin tok\xc3\xa9n-0123456789abcdef\n", 0,
              "line 1: token has a character other than printable ASCII");
    parse_bad("admin " ADMIN_TOK ",, client " CLIENT_TOK, 1, "entry 2: empty entry");
    parse_bad("admin " ADMIN_TOK ",", 1, "entry 2: empty entry");
    parse_bad("Admin " ADMIN_TOK, 1, "entry 1: unknown role (use admin or client)");

    char longer[AUTH_TOKEN_MAX + 16];
    memset(longer, 'x', sizeof longer);
    memcpy(longer, "admin ", 6);
    longer[6 + AUTH_TOKEN_MAX + 1] = '\0';
    parse_bad(longer, 0, "line 1: token too long (at most 256 characters)");
    longer[6 + AUTH_TOKEN_MAX] = '\0'; /* exactly the longest */
    struct auth_tokens *t = parse_ok(longer, 0);
    ck_assert_int_eq(auth_check(t, longer + 6, AUTH_TOKEN_MAX, NULL), AUTH_ROLE_ADMIN);
    auth_tokens_free(t);
}
END_TEST

/* Quotas after the token: either order, either one, 0 allowed; the entry found by auth_check. */
START_TEST(test_quotas)
{
    struct auth_tokens *t = parse_ok("admin " ADMIN_TOK "\n"
                                     "client " CLIENT_TOK " max_waiters=7 max_locks=100000000\n"
                                     "client " CLIENT_TOK "-2\tmax_locks=0\n",
                                     0);
    ck_assert_uint_eq(t->n, 3);
    size_t at = 99;
    ck_assert_int_eq(auth_check(t, CLIENT_TOK, strlen(CLIENT_TOK), &at), AUTH_ROLE_CLIENT);
    ck_assert_uint_eq(at, 1);
    const struct auth_token *k = &t->tok[at];
    ck_assert(k->has_max_locks && k->has_max_waiters);
    ck_assert_uint_eq(k->max_locks, 100000000);
    ck_assert_uint_eq(k->max_waiters, 7);
    ck_assert_int_eq(auth_check(t, CLIENT_TOK "-2", strlen(CLIENT_TOK "-2"), &at),
                     AUTH_ROLE_CLIENT);
    ck_assert_uint_eq(at, 2);
    ck_assert(t->tok[2].has_max_locks && !t->tok[2].has_max_waiters);
    ck_assert_uint_eq(t->tok[2].max_locks, 0);
    ck_assert_int_eq(auth_check(t, ADMIN_TOK, strlen(ADMIN_TOK), &at), AUTH_ROLE_ADMIN);
    ck_assert_uint_eq(at, 0);
    ck_assert(!t->tok[0].has_max_locks && !t->tok[0].has_max_waiters);
    at = 99;
    ck_assert_int_eq(auth_check(t, "not-a-token-0123456789", 22, &at), AUTH_ROLE_NONE);
    ck_assert_uint_eq(at, 99); /* untouched */
    auth_tokens_free(t);
}
END_TEST

/* Accounts: shared by fingerprint, freed with their last reference, checked against 0 = none. */
START_TEST(test_quota_accounts)
{
    struct quota_table *qt = calloc(1, sizeof *qt);
    ck_assert_ptr_nonnull(qt);
    uint8_t fa[16] = {1, 2, 3}, fb[16] = {1, 2, 3, 4}, fc[16] = {0};
    memcpy(fc, fa, 4); /* fc shares fa's chain (the first four bytes pick it); fb is never added */
    fc[15] = 9;
    struct quota *a = quota_get(qt, fa), *a2 = quota_get(qt, fa), *c = quota_get(qt, fc);
    ck_assert_ptr_eq(a, a2);
    ck_assert_ptr_ne(a, c);
    ck_assert_uint_eq(qt->n, 2);
    ck_assert_ptr_null(quota_find(qt, fb));
    ck_assert_ptr_null(quota_check(a, 1)); /* no quota */
    a->max_locks = 2;
    a->max_waiters = 1;
    a->locks = 1;
    ck_assert_ptr_null(quota_check(a, 1));
    a->waiters = 1;
    ck_assert_str_eq(quota_check(a, 1), "max_waiters");
    ck_assert_ptr_null(quota_check(a, 0)); /* a try does not wait */
    a->locks = 2;
    ck_assert_str_eq(quota_check(a, 0), "max_locks");
    ck_assert_ptr_null(quota_check(NULL, 1));
    quota_put(qt, a2);
    ck_assert_ptr_eq(quota_find(qt, fa), a);
    quota_put(qt, a);
    ck_assert_ptr_null(quota_find(qt, fa));
    ck_assert_ptr_eq(quota_find(qt, fc), c);
    ck_assert_uint_eq(qt->n, 1);
    quota_put(qt, quota_ref(c));
    ck_assert_ptr_eq(quota_find(qt, fc), c);
    quota_put(qt, c);
    ck_assert_uint_eq(qt->n, 0);
    quota_put(qt, NULL);
    free(qt);
}
END_TEST

START_TEST(test_too_many)
{
    size_t n = AUTH_TOKENS_MAX + 1;
    char *text = malloc(n * 40);
    ck_assert_ptr_nonnull(text);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(text + at, "client token-number-%08zu\n", i);
    struct auth_tokens *t = NULL;
    char err[256];
    ck_assert_int_eq(auth_tokens_parse(&t, text, at, 0, err, sizeof err), -1);
    ck_assert_str_eq(err, "line 1025: too many tokens (at most 1024)");
    free(text);
}
END_TEST

/* Near misses of a token get nothing. */
START_TEST(test_check_near_misses)
{
    struct auth_tokens *t = parse_ok("admin " ADMIN_TOK ",client " CLIENT_TOK, 1);
    const char *tok = ADMIN_TOK;
    size_t len = strlen(tok);
    ck_assert_int_eq(auth_check(t, tok, len, NULL), AUTH_ROLE_ADMIN);
    ck_assert_int_eq(auth_check(t, tok, len - 1, NULL), AUTH_ROLE_NONE);  /* a prefix */
    ck_assert_int_eq(auth_check(t, "", 0, NULL), AUTH_ROLE_NONE);
    char buf[AUTH_TOKEN_MAX + 2];
    memcpy(buf, tok, len);
    buf[len] = 'x';
    ck_assert_int_eq(auth_check(t, buf, len + 1, NULL), AUTH_ROLE_NONE);  /* one more character */
    buf[len] = '\0';
    ck_assert_int_eq(auth_check(t, buf, len + 1, NULL), AUTH_ROLE_NONE);  /* padded with a zero */
    for (size_t i = 0; i < len; i++) {
        memcpy(buf, tok, len);
        buf[i] ^= 1;
        ck_assert_msg(auth_check(t, buf, len, NULL) == AUTH_ROLE_NONE, "byte %zu changed", i);
    }
    memset(buf, 'a', sizeof buf);
    ck_assert_int_eq(auth_check(t, buf, sizeof buf, NULL), AUTH_ROLE_NONE); /* over-long */
    auth_tokens_free(t);
}
END_TEST

START_TEST(test_equal)
{
    unsigned char a[64], b[64];
    memset(a, 7, sizeof a);
    memcpy(b, a, sizeof b);
    ck_assert_int_eq(auth_equal(a, b, sizeof a), 1);
    ck_assert_int_eq(auth_equal(a, b, 0), 1);
    for (size_t i = 0; i < sizeof a; i++) {
        b[i] = 0x87;
        ck_assert_int_eq(auth_equal(a, b, sizeof a), 0);
        b[i] = 7;
    }
}
END_TEST

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The fastest of many runs of auth_check on token: robust against a busy machine. */
/* One auth_check of token, in ns. */
static int64_t check_ns(const struct auth_tokens *t, const char *token, size_t len)
{
    int64_t t0 = now_ns();
    volatile enum auth_role r = auth_check(t, token, len, NULL);
    (void)r;
    return now_ns() - t0;
}

/*
 * The fastest of many runs of each of n tokens, taken in turns (token 0,
 * 1, ..., n-1, 0, 1, ...): every token meets the same moments of a busy
 * machine, so a burst of other work cannot slow one token's every run.
 */
static void fastest_ns(const struct auth_tokens *t, const char *const *tokens, size_t len,
                       int n, int64_t *best)
{
    for (int k = 0; k < n; k++)
        best[k] = INT64_MAX;
    for (int round = 0; round < 2000; round++) {
        for (int k = 0; k < n; k++) {
            int64_t took = check_ns(t, tokens[k], len);
            best[k] = took < best[k] ? took : best[k];
        }
    }
}

/*
 * With 64 tokens of 200 characters, a check that stopped at the first
 * differing byte, or at the token that matched, would take many times longer
 * for a token right but for its last byte than for one wrong from its first.
 * Here every case reads everything: the fastest runs agree within 1.5x.
 */
START_TEST(test_check_time_does_not_depend_on_the_token)
{
    enum { N = 64, LEN = 200 };
    char *text = malloc(N * (LEN + 8));
    ck_assert_ptr_nonnull(text);
    size_t at = 0;
    char tok[N][LEN + 1];
    for (int i = 0; i < N; i++) {
        memset(tok[i], 'k', LEN);
        snprintf(tok[i] + LEN - 4, 5, "%04d", i);
        at += (size_t)sprintf(text + at, "%s %s\n", i == 0 ? "admin" : "client", tok[i]);
    }
    struct auth_tokens *t = NULL;
    char err[256];
    ck_assert_int_eq(auth_tokens_parse(&t, text, at, 0, err, sizeof err), 0);
    free(text);

    char wrong_first[LEN + 1], wrong_last[LEN + 1];
    memcpy(wrong_first, tok[N - 1], sizeof wrong_first);
    wrong_first[0] = 'Z';
    memcpy(wrong_last, tok[N - 1], sizeof wrong_last);
    wrong_last[LEN - 1] = 'Z';
    const char *cases[4] = {wrong_first, wrong_last, tok[0], tok[N - 1]};
    int64_t times[4];
    fastest_ns(t, cases, LEN, 4, times);
    int64_t lo = times[0], hi = times[0];
    for (int i = 1; i < 4; i++) {
        lo = times[i] < lo ? times[i] : lo;
        hi = times[i] > hi ? times[i] : hi;
    }
    printf("auth_check with %d tokens: fastest runs %lld, %lld, %lld, %lld ns\n", N,
           (long long)times[0], (long long)times[1], (long long)times[2], (long long)times[3]);
    ck_assert_msg(hi * 2 <= lo * 3, "times differ: %lld to %lld ns", (long long)lo,
                  (long long)hi);
    ck_assert_int_eq(auth_check(t, tok[0], LEN, NULL), AUTH_ROLE_ADMIN);
    ck_assert_int_eq(auth_check(t, tok[N - 1], LEN, NULL), AUTH_ROLE_CLIENT);
    auth_tokens_free(t);
}
END_TEST

/* A temp file holding text with mode; its path in path. */
static void write_file(char *path, size_t len, const char *text, mode_t mode)
{
    snprintf(path, len, "/tmp/rlockd-tokens-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    ck_assert_int_eq(fchmod(fd, mode), 0);
    close(fd);
}

START_TEST(test_file_load)
{
    char path[64], err[256];
    struct auth_tokens *t = NULL;
    write_file(path, sizeof path, "admin " ADMIN_TOK "\nclient " CLIENT_TOK "\n", 0640);
    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), 0);
    ck_assert_uint_eq(t->n, 2);
    auth_tokens_free(t);
    t = NULL;

    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), -1);
    ck_assert_str_eq(err, "readable or writable by others (mode 0644); chmod o-rw it");
    ck_assert_int_eq(chmod(path, 0602), 0);
    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), -1);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(chmod(path, 0660), 0);
    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), -1);
    ck_assert_str_eq(err, "writable by its group (mode 0660); chmod g-w it");
    ck_assert_ptr_null(t);

    /* A symbolic link is followed (a Kubernetes Secret is mounted as one): its target's
     * mode and owner are what count. */
    char link[80];
    snprintf(link, sizeof link, "%s.link", path);
    ck_assert_int_eq(symlink(path, link), 0);
    ck_assert_int_eq(auth_tokens_load_file(&t, link, err, sizeof err), -1);
    ck_assert_str_eq(err, "writable by its group (mode 0660); chmod g-w it");
    ck_assert_int_eq(chmod(path, 0440), 0);
    ck_assert_int_eq(auth_tokens_load_file(&t, link, err, sizeof err), 0);
    ck_assert_uint_eq(t->n, 2);
    auth_tokens_free(t);
    t = NULL;
    if (geteuid() == 0) { /* only root can give a file away */
        ck_assert_int_eq(chown(path, 65534, 65534), 0);
        ck_assert_int_eq(auth_tokens_load_file(&t, link, err, sizeof err), -1);
        ck_assert_str_eq(err, "owned by uid 65534, neither root nor the user rlockd runs as "
                              "(uid 0)");
        ck_assert_ptr_null(t);
    }
    unlink(link);
    unlink(path);

    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), -1);
    ck_assert_str_eq(err, "cannot open: No such file or directory");
    ck_assert_int_eq(auth_tokens_load_file(&t, "/tmp", err, sizeof err), -1);
    ck_assert_str_eq(err, "not a regular file");

    write_file(path, sizeof path, "admin " ADMIN_TOK "\nclient x\n", 0600);
    ck_assert_int_eq(auth_tokens_load_file(&t, path, err, sizeof err), -1);
    ck_assert_str_eq(err, "line 2: token too short (at least 16 characters)");
    unlink(path);
}
END_TEST

/* cert:NAME entries: matched by a verified certificate's name only, never as a token. */
START_TEST(test_cert_entries)
{
    struct auth_tokens *t = parse_ok("admin cert:ops-admin\nclient cert:w\nclient " CLIENT_TOK "\n", 0);
    ck_assert_uint_eq(t->n, 3);
    size_t at = 99;
    ck_assert_int_eq(auth_check_cert(t, "cert:ops-admin", 14, &at), AUTH_ROLE_ADMIN);
    ck_assert_uint_eq(at, 0);
    ck_assert_int_eq(auth_check_cert(t, "cert:w", 6, &at), AUTH_ROLE_CLIENT);
    ck_assert_uint_eq(at, 1);
    /* The entries' text presented as tokens: nothing. */
    ck_assert_int_eq(auth_check(t, "cert:ops-admin", 14, NULL), AUTH_ROLE_NONE);
    ck_assert_int_eq(auth_check(t, "cert:w", 6, NULL), AUTH_ROLE_NONE);
    /* A token is not a certificate name either. */
    ck_assert_int_eq(auth_check_cert(t, CLIENT_TOK, strlen(CLIENT_TOK), NULL), AUTH_ROLE_NONE);
    ck_assert_int_eq(auth_check(t, CLIENT_TOK, strlen(CLIENT_TOK), NULL), AUTH_ROLE_CLIENT);
    ck_assert_int_eq(auth_check_cert(t, "cert:ops-admi", 13, NULL), AUTH_ROLE_NONE);
    auth_tokens_free(t);
    parse_bad("admin cert:\n", 0, "line 1: no certificate name after cert:");
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"parse", test_file_syntax, 0},
        {"parse", test_inline_and_append, 0},
        {"parse", test_errors_name_lines, 0},
        {"parse", test_too_many, 0},
        {"parse", test_quotas, 0},
        {"quota", test_quota_accounts, 0},
        {"check", test_check_near_misses, 0},
        {"check", test_equal, 0},
        {"check", test_cert_entries, 0},
        {"check", test_check_time_does_not_depend_on_the_token, 0},
        {"file", test_file_load, 0},
    };
    return unit_run("auth", tests, sizeof tests / sizeof tests[0]);
}
