/*
 * test_util.c — daemon/util.c: the SipHash rounds against the reference
 * vector, keyed hashing, UUIDs from the buffered kernel randomness.
 */
#include <stdint.h>
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

/* 600 UUIDs (more than one 4 KiB buffer of randomness): well formed, version 4, all distinct. */
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
        ck_assert_int_eq(ids[i][14], '4');
        ck_assert_msg(strchr("89ab", ids[i][19]) != NULL, "uuid %s: bad variant", ids[i]);
        for (int k = 0; k < i; k++)
            ck_assert_str_ne(ids[i], ids[k]);
    }
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"hash", test_siphash_reference, 0},
        {"hash", test_hash_keyed, 0},
        {"uuid", test_uuid, 0},
    };
    return unit_run("util", tests, sizeof tests / sizeof tests[0]);
}
