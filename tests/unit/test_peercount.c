/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_peercount.c — daemon/session/peercount.c: counts per address through
 * adds and removes, many addresses (the buckets grow), an entry freed at zero
 * and counted again from nothing, removes of addresses never added.
 */
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include "peercount.h"

#define MANY 5000

static void ip_of(uint32_t i, uint8_t ip[16])
{
    memset(ip, 0, 16);
    ip[10] = ip[11] = 0xff;
    ip[12] = (uint8_t)(i >> 24);
    ip[13] = (uint8_t)(i >> 16);
    ip[14] = (uint8_t)(i >> 8);
    ip[15] = (uint8_t)i;
}

static const uint8_t key[UTIL_HASH_KEY_BYTES] = {1, 2, 3};

START_TEST(test_counts)
{
    struct peercount *t = peercount_new(key);
    ck_assert_ptr_nonnull(t);
    uint8_t a[16], b[16];
    ip_of(1, a);
    ip_of(2, b);
    ck_assert_uint_eq(peercount_get(t, a), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(peercount_add(t, a), 0);
    ck_assert_int_eq(peercount_add(t, b), 0);
    ck_assert_uint_eq(peercount_get(t, a), 3);
    ck_assert_uint_eq(peercount_get(t, b), 1);
    peercount_remove(t, b);
    ck_assert_uint_eq(peercount_get(t, b), 0);
    peercount_remove(t, b); /* never below zero, nothing else touched */
    ck_assert_uint_eq(peercount_get(t, a), 3);
    ck_assert_int_eq(peercount_add(t, b), 0);
    ck_assert_uint_eq(peercount_get(t, b), 1);
    peercount_free(t);
}
END_TEST

START_TEST(test_many)
{
    struct peercount *t = peercount_new(key);
    ck_assert_ptr_nonnull(t);
    uint8_t ip[16];
    for (uint32_t i = 0; i < MANY; i++) {
        ip_of(i, ip);
        for (uint32_t k = 0; k <= i % 3; k++)
            ck_assert_int_eq(peercount_add(t, ip), 0);
    }
    for (uint32_t i = 0; i < MANY; i++) {
        ip_of(i, ip);
        ck_assert_uint_eq(peercount_get(t, ip), i % 3 + 1);
        peercount_remove(t, ip);
        ck_assert_uint_eq(peercount_get(t, ip), i % 3);
    }
    ip_of(MANY + 1, ip);
    ck_assert_uint_eq(peercount_get(t, ip), 0);
    peercount_free(t);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"peercount", test_counts, 0},
        {"peercount", test_many, 0},
    };
    return unit_run("peercount", tests, sizeof tests / sizeof tests[0]);
}
