/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_util.c — daemon/base/util.c: the SipHash rounds against the reference
 * vector, keyed hashing, UUIDs from the buffered kernel randomness.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "util.h"

/* SipHash-2-4 of bytes 00..0e under key 00..0f: the reference implementation's vector. */
START_TEST(test_siphash_reference)
{
    uint8_t key[16], msg[15];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        msg[i] = (uint8_t)i;
    ck_assert_uint_eq(util_siphash(2, 4, key, msg, sizeof msg), UINT64_C(0xa129ca6149be45e5));
    /* And the empty message: 0x726fdb47dd0e0e31. */
    ck_assert_uint_eq(util_siphash(2, 4, key, msg, 0), UINT64_C(0x726fdb47dd0e0e31));
}
END_TEST

/*
 * SipHash-2-4-128 of bytes 00..len-1 under key 00..0f, for lengths that end
 * in every position of a block: the reference implementation's vectors.
 */
START_TEST(test_siphash128_reference)
{
    static const struct {
        size_t len;
        const char *hex;
    } v[] = {
        {0, "a3817f04ba25a8e66df67214c7550293"},  {1, "da87c1d86b99af44347659119b22fc45"},
        {7, "a1f1ebbed8dbc153c0b84aa61ff08239"},  {8, "3b62a9ba6258f5610f83e264f31497b4"},
        {15, "5493e99933b0a8117e08ec0f97cfc3d9"}, {16, "6ee2a4ca67b054bbfd3315bf85230577"},
        {33, "77c6077146f01c32b6b69d5f4ea9ffcf"}, {63, "5150d1772f50834a503e069a973fbd7c"},
    };
    uint8_t key[16], msg[64], out[16];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        util_siphash128(key, msg, v[i].len, out);
        char hex[33];
        for (int j = 0; j < 16; j++)
            snprintf(hex + 2 * j, 3, "%02x", out[j]);
        ck_assert_msg(strcmp(hex, v[i].hex) == 0, "length %zu: %s, expected %s", v[i].len, hex,
                      v[i].hex);
    }
}
END_TEST

/* The key matters: the same name hashes differently under another key. */
START_TEST(test_hash_keyed)
{
    uint8_t k1[16] = {1}, k2[16] = {2};
    const char *name = "orders/42";
    ck_assert_uint_eq(util_hash(k1, name, strlen(name)), util_hash(k1, name, strlen(name)));
    ck_assert_uint_ne(util_hash(k1, name, strlen(name)), util_hash(k2, name, strlen(name)));
    ck_assert_uint_ne(util_hash(k1, "a", 1), util_hash(k1, "b", 1));
}
END_TEST

/* 600 UUIDs (more than one 4 KiB buffer of randomness): well formed, version 8 (what acquire.lua
 * takes for rlockd's), all distinct. */
START_TEST(test_uuid)
{
    enum { N = 600 };
    static char ids[N][UTIL_UUID_LEN + 1];
    struct util_rng r;
    util_rng_init(&r);
    for (int i = 0; i < N; i++) {
        util_uuid(&r, ids[i]);
        ck_assert_uint_eq(strlen(ids[i]), UTIL_UUID_LEN);
        for (int j = 0; j < UTIL_UUID_LEN; j++) {
            char ch = ids[i][j];
            if (j == 8 || j == 13 || j == 18 || j == 23)
                ck_assert_int_eq(ch, '-');
            else
                ck_assert_msg((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'),
                              "uuid %s: bad character", ids[i]);
        }
        ck_assert_int_eq(ids[i][14], '8');
        ck_assert_msg(strchr("89ab", ids[i][19]) != NULL, "uuid %s: bad variant", ids[i]);
        for (int k = 0; k < i; k++)
            ck_assert_str_ne(ids[i], ids[k]);
    }
}
END_TEST

/* Session ids: version 4, lower case, distinct; ids peers send are read as UUIDs only. */
START_TEST(test_session_id_and_parse)
{
    char a[UTIL_UUID_LEN + 1], b[UTIL_UUID_LEN + 1], canon[UTIL_UUID_LEN + 1];
    util_session_id(a);
    util_session_id(b);
    ck_assert_str_ne(a, b);
    ck_assert_uint_eq(strlen(a), UTIL_UUID_LEN);
    ck_assert_int_eq(a[14], '4');
    ck_assert_int_eq(util_uuid_parse(a, canon), 0);
    ck_assert_str_eq(canon, a);
    /* Upper case is the same id, written back as the daemon writes it. */
    ck_assert_int_eq(util_uuid_parse("6F1D0C2E-3B7A-4E55-A1F0-9C8D7E6B5A43", canon), 0);
    ck_assert_str_eq(canon, "6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5a43");
    static const char *const bad[] = {
        "",
        "6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5a4",   /* short */
        "6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5a43a", /* long */
        "6f1d0c2e3b7a-4e55-a1f0-9c8d7e6b5a43a",  /* a dash missing */
        "6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5g43",  /* not hex */
        "{6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5a43}",
        "s1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(util_uuid_parse(bad[i], canon) == -1, "%s read as a UUID", bad[i]);
}
END_TEST

/* Names: UTF-8 without control characters. */
START_TEST(test_text_check)
{
    static const struct {
        const char *s;
        int ok;
    } cases[] = {
        {"orders/42", 1},
        {"caf\xc3\xa9", 1},                 /* é */
        {"\xe2\x82\xac", 1},               /* € */
        {"\xf0\x9f\x94\x92", 1},           /* U+1F512 */
        {"\xef\xbf\xbf", 1},               /* U+FFFF, a noncharacter but valid */
        {"a\nb", 0},                       /* control */
        {"a\x7f", 0},                      /* DEL */
        {"\xc2\x85", 0},                   /* U+0085, a C1 control */
        {"\xc2\xa0", 1},                   /* U+00A0, the first after C1 */
        {"\xff", 0},                       /* never in UTF-8 */
        {"\xc3", 0},                       /* truncated */
        {"\xc0\xaf", 0},                   /* overlong '/' */
        {"\xe0\x80\xaf", 0},               /* overlong '/' */
        {"\xed\xa0\x80", 0},               /* a surrogate */
        {"\xf4\x90\x80\x80", 0},           /* above U+10FFFF */
        {"\x80", 0},                       /* a lone continuation byte */
        {"ab\xe2\x82", 0},                 /* truncated at the end */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = util_text_check(cases[i].s, strlen(cases[i].s));
        ck_assert_msg((why == NULL) == cases[i].ok, "case %zu: %s", i, why ? why : "accepted");
    }
    /* An embedded NUL is a control character too. */
    ck_assert_ptr_nonnull(util_text_check("a\0b", 3));
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"hash", test_siphash_reference, 0},
        {"hash128", test_siphash128_reference, 0},
        {"hash", test_hash_keyed, 0},
        {"uuid", test_uuid, 0},
        {"uuid", test_session_id_and_parse, 0},
        {"text", test_text_check, 0},
    };
    return unit_run("util", tests, sizeof tests / sizeof tests[0]);
}
