/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sentinel.c — what rlockd reads from Redis Sentinel: the text of a
 * +switch-master message and the reply to SENTINEL get-master-addr-by-name
 * (built by hiredis' own reader from RESP text, as the connection sees it).
 */
#include <string.h>

#include <hiredis/hiredis.h>

#include "check_main.h"
#include "resp.h"
#include "sentinel.h"

static const struct {
    const char *text;
    const char *master;
    const char *want; /* the new master, or NULL: refused */
} switch_cases[] = {
    {"rlm 127.0.0.1 6379 127.0.0.1 6380", "rlm", "127.0.0.1:6380"},
    {"rlm 10.0.0.1 6379 10.0.0.2 7000", "rlm", "10.0.0.2:7000"},
    /* The old address is not the new one, whatever their order looks like. */
    {"rlm 10.0.0.2 7000 10.0.0.1 6379", "rlm", "10.0.0.1:6379"},
    {"rlm ::1 6379 fe80::2 6380", "rlm", "[fe80::2]:6380"},
    {"other 127.0.0.1 6379 127.0.0.1 6380", "rlm", NULL},
    {"rl 127.0.0.1 6379 127.0.0.1 6380", "rlm", NULL},
    {"rlm 127.0.0.1 6379 127.0.0.1", "rlm", NULL},
    {"rlm 127.0.0.1 6379 127.0.0.1 6380 extra", "rlm", NULL},
    {"rlm 127.0.0.1 6379 127.0.0.1 0", "rlm", NULL},
    {"rlm 127.0.0.1 6379 127.0.0.1 65536", "rlm", NULL},
    {"", "rlm", NULL},
};

START_TEST(test_parse_switch)
{
    char addr[96] = "";
    int rc = sentinel_parse_switch(switch_cases[_i].text, switch_cases[_i].master, addr,
                                   sizeof addr);
    if (switch_cases[_i].want == NULL) {
        ck_assert_msg(rc == -1, "'%s' accepted as %s", switch_cases[_i].text, addr);
    } else {
        ck_assert_msg(rc == 0, "'%s' refused", switch_cases[_i].text);
        ck_assert_str_eq(addr, switch_cases[_i].want);
    }
}
END_TEST

START_TEST(test_parse_switch_small_buffer)
{
    char addr[8];
    ck_assert_int_eq(sentinel_parse_switch("rlm 1.1.1.1 1 10.0.0.2 7000", "rlm", addr, sizeof addr),
                     -1);
}
END_TEST

static const struct {
    const char *resp;
    enum sentinel_master kind;
    const char *want;
} master_cases[] = {
    {"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n", SENTINEL_MASTER_OK, "127.0.0.1:6380"},
    {"*2\r\n$3\r\n::1\r\n$4\r\n6380\r\n", SENTINEL_MASTER_OK, "[::1]:6380"},
    {"*2\r\n$8\r\n10.1.2.3\r\n$5\r\n65535\r\n", SENTINEL_MASTER_OK, "10.1.2.3:65535"},
    {"*-1\r\n", SENTINEL_MASTER_UNKNOWN, NULL},
    {"$-1\r\n", SENTINEL_MASTER_UNKNOWN, NULL},
    {"-ERR No such master with that name\r\n", SENTINEL_MASTER_BAD, NULL},
    {"-NOAUTH Authentication required.\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*1\r\n$9\r\n127.0.0.1\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*3\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n$1\r\nx\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*2\r\n$9\r\n127.0.0.1\r\n:6380\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*2\r\n$0\r\n\r\n$4\r\n6380\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*2\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*2\r\n$9\r\n127.0.0.1\r\n$6\r\n123456\r\n", SENTINEL_MASTER_BAD, NULL},
    {"*2\r\n$64\r\n1234567890123456789012345678901234567890123456789012345678901234\r\n"
     "$4\r\n6380\r\n",
     SENTINEL_MASTER_BAD, NULL},
    {"+OK\r\n", SENTINEL_MASTER_BAD, NULL},
};

START_TEST(test_parse_master)
{
    redisReply *r = unit_resp(master_cases[_i].resp);
    char addr[80] = "";
    enum sentinel_master kind = sentinel_parse_master(r, addr, sizeof addr);
    ck_assert_msg(kind == master_cases[_i].kind, "case %d: kind %d, want %d", _i, (int)kind,
                  (int)master_cases[_i].kind);
    if (master_cases[_i].want != NULL)
        ck_assert_str_eq(addr, master_cases[_i].want);
    freeReplyObject(r);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"switch", test_parse_switch, UNIT_COUNT(switch_cases)},
        {"switch", test_parse_switch_small_buffer, 0},
        {"master", test_parse_master, UNIT_COUNT(master_cases)},
    };
    return unit_run("sentinel", tests, sizeof tests / sizeof tests[0]);
}
