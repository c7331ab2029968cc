/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_seal.c — daemon/base/seal.c: the resume key file (parsed, created
 * once, refused when others may read it), session secrets and lock seals
 * (every sealed term changes the seal; nothing but the exact text matches).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "seal.h"

/* A fresh private directory for one test (Check forks each test: no clean-up races). */
static void make_dir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/unit_seal.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_key_parse)
{
    struct seal_key k;
    char err[128];
    ck_assert_int_eq(seal_key_parse(" 000102030405060708090a0b0c0d0E0f\n", 35, &k, err, sizeof err), 0);
    for (int i = 0; i < SEAL_KEY_BYTES; i++)
        ck_assert_uint_eq(k.k[i], (unsigned)i);
    const char *bad[] = {"", "0001", "000102030405060708090a0b0c0d0e0f00",
                         "000102030405060708090a0b0c0d0e0g", "00010203 405060708090a0b0c0d0e0f0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(seal_key_parse(bad[i], strlen(bad[i]), &k, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "not a key") != NULL, "case %zu: %s", i, err);
    }
}
END_TEST

/* A missing file is created 0600 with a random key; loading again reads that same key. */
START_TEST(test_key_create_once)
{
    char dir[64], path[128], err[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/resume.key", dir);
    struct util_rng rng;
    util_rng_init(&rng);
    struct seal_key a, b;
    int created = -1;
    ck_assert_int_eq(seal_key_load(path, 0, &rng, &a, &created, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no such file") != NULL, "%s", err);
    ck_assert_int_eq(seal_key_load(path, 1, &rng, &a, &created, err, sizeof err), 0);
    ck_assert_int_eq(created, 1);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_int_eq(seal_key_load(path, 1, &rng, &b, &created, err, sizeof err), 0);
    ck_assert_int_eq(created, 0);
    ck_assert_mem_eq(a.k, b.k, SEAL_KEY_BYTES);
    /* No temporary file is left behind. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | wc -l) -eq 1", dir);
    ck_assert_int_eq(system(cmd), 0);
    remove_dir(dir);
}
END_TEST

/* Whoever reads the key can forge resumes: a file others may read is refused, as is a link. */
START_TEST(test_key_refused)
{
    char dir[64], path[128], link_path[160], err[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/resume.key", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("000102030405060708090a0b0c0d0e0f\n", f);
    fclose(f);
    struct util_rng rng;
    util_rng_init(&rng);
    struct seal_key k;
    int created;
    ck_assert_int_eq(chmod(path, 0640), 0);
    ck_assert_int_eq(seal_key_load(path, 1, &rng, &k, &created, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "chmod 600") != NULL, "%s", err);
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_int_eq(seal_key_load(path, 1, &rng, &k, &created, err, sizeof err), -1);
    ck_assert_int_eq(chmod(path, 0600), 0);
    ck_assert_int_eq(seal_key_load(path, 1, &rng, &k, &created, err, sizeof err), 0);
    ck_assert_uint_eq(k.k[15], 15);
    snprintf(link_path, sizeof link_path, "%s/link.key", dir);
    ck_assert_int_eq(symlink(path, link_path), 0);
    ck_assert_int_eq(seal_key_load(link_path, 1, &rng, &k, &created, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot open") != NULL, "%s", err);
    remove_dir(dir);
}
END_TEST

static const struct seal_key key1 = {{1, 2, 3}}, key2 = {{1, 2, 4}};

START_TEST(test_secret)
{
    char a[SEAL_TEXT_LEN + 1], b[SEAL_TEXT_LEN + 1], c[SEAL_TEXT_LEN + 1];
    const char *sid = "6a1c0f4e-2f0b-4c53-9a43-0f3a8b1c2d3e";
    seal_session_secret(&key1, sid, a);
    seal_session_secret(&key1, sid, b);
    ck_assert_uint_eq(strlen(a), SEAL_TEXT_LEN);
    ck_assert_str_eq(a, b);
    ck_assert_int_eq(seal_matches(b, a), 1);
    seal_session_secret(&key2, sid, c);
    ck_assert_str_ne(a, c);
    seal_session_secret(&key1, "6a1c0f4e-2f0b-4c53-9a43-0f3a8b1c2d3f", c);
    ck_assert_str_ne(a, c);
}
END_TEST

/* Every term the seal binds changes it; so do the key and the session. */
START_TEST(test_lock_terms)
{
    const struct seal_terms base = {
        .session_id = "s1", .resource = "orders/42", .resource_len = 9, .token = "t1",
        .fence = 7, .ttl_ms = 30000, .watchdog = 1, .max_hold_until_ms = 0,
        .lock_delay_ms = 0,
    };
    char ref[SEAL_TEXT_LEN + 1], s[SEAL_TEXT_LEN + 1];
    seal_lock(&key1, &base, ref);
    ck_assert_uint_eq(strlen(ref), SEAL_TEXT_LEN);
    seal_lock(&key1, &base, s);
    ck_assert_str_eq(ref, s);
    struct seal_terms v[10];
    for (int i = 0; i < 10; i++)
        v[i] = base;
    v[0].session_id = "s2";
    v[1].resource = "orders/43";
    v[2].resource_len = 8;
    v[3].token = "t2";
    v[4].fence = 8;
    v[5].ttl_ms = 30001;
    v[6].watchdog = 0;
    v[7].max_hold_until_ms = 1;
    v[8].lock_delay_ms = 1;
    /* Fields are length-prefixed: moving a byte from one to the next is another message. */
    v[9].session_id = "s1o";
    v[9].resource = "rders/42";
    v[9].resource_len = 8;
    for (int i = 0; i < 10; i++) {
        seal_lock(&key1, &v[i], s);
        ck_assert_msg(strcmp(ref, s) != 0, "term %d does not change the seal", i);
    }
    seal_lock(&key2, &base, s);
    ck_assert_str_ne(ref, s);
    /* A session's secret is never a lock's seal (domain byte). */
    seal_session_secret(&key1, "s1", s);
    ck_assert_str_ne(ref, s);
}
END_TEST

START_TEST(test_matches)
{
    char ref[SEAL_TEXT_LEN + 1];
    seal_session_secret(&key1, "s", ref);
    char t[SEAL_TEXT_LEN + 2];
    strcpy(t, ref);
    ck_assert_int_eq(seal_matches(t, ref), 1);
    t[SEAL_TEXT_LEN - 1] ^= 1;
    ck_assert_int_eq(seal_matches(t, ref), 0);
    strcpy(t, ref);
    t[SEAL_TEXT_LEN - 1] = '\0';
    ck_assert_int_eq(seal_matches(t, ref), 0); /* a prefix */
    strcpy(t, ref);
    strcat(t, "0");
    ck_assert_int_eq(seal_matches(t, ref), 0); /* longer */
    ck_assert_int_eq(seal_matches("", ref), 0);
    ck_assert_int_eq(seal_matches("", ""), 0); /* an unsignable message matches nothing */
    for (int i = 0; i < SEAL_TEXT_LEN; i++)
        t[i] = (char)(ref[i] >= 'a' ? ref[i] - 32 : ref[i]); /* upper case */
    t[SEAL_TEXT_LEN] = '\0';
    if (strcmp(t, ref) != 0)
        ck_assert_int_eq(seal_matches(t, ref), 0);
}
END_TEST

/*
 * Acquire tokens: version 8 UUIDs like the random ones (acquire.lua tells rlockd's keys
 * from the copied scripts' by that), fixed by (key, session, request id), different otherwise.
 */
START_TEST(test_acquire_token)
{
    char a[UTIL_UUID_LEN + 1], b[UTIL_UUID_LEN + 1];
    seal_acquire_token(&key1, "s1", 5, a);
    ck_assert_uint_eq(strlen(a), UTIL_UUID_LEN);
    for (int i = 0; i < UTIL_UUID_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            ck_assert_int_eq(a[i], '-');
        else
            ck_assert_msg(strchr("0123456789abcdef", a[i]) != NULL, "%s", a);
    }
    ck_assert_msg(a[14] == '8' && strchr("89ab", a[19]) != NULL, "not a version 8 UUID: %s", a);
    seal_acquire_token(&key1, "s1", 5, b);
    ck_assert_str_eq(a, b);
    seal_acquire_token(&key1, "s1", 6, b);
    ck_assert_str_ne(a, b);
    seal_acquire_token(&key1, "s2", 5, b);
    ck_assert_str_ne(a, b);
    seal_acquire_token(&key2, "s1", 5, b);
    ck_assert_str_ne(a, b);
}
END_TEST

/* A resource too long to sign gets an empty seal, which matches nothing. */
START_TEST(test_unsignable)
{
    static char big[20000];
    memset(big, 'r', sizeof big);
    struct seal_terms t = {.session_id = "s", .resource = big, .resource_len = sizeof big,
                           .token = "t"};
    char s[SEAL_TEXT_LEN + 1];
    seal_lock(&key1, &t, s);
    ck_assert_str_eq(s, "");
    ck_assert_int_eq(seal_matches(s, s), 0);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"key", test_key_parse, 0},
        {"secret", test_secret, 0},
        {"lock", test_lock_terms, 0},
        {"matches", test_matches, 0},
        {"matches", test_unsignable, 0},
        {"token", test_acquire_token, 0},
        {"file", test_key_create_once, 0},
        {"file", test_key_refused, 0},
    };
    return unit_run("seal", tests, sizeof tests / sizeof tests[0]);
}
