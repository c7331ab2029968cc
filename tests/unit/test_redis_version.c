/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_redis_version.c — the Redis version rlockd accepts at connect, read
 * from the text of INFO server.
 */
#include <stdlib.h>

#include "check_main.h"
#include "pool.h"

static const struct {
    const char *info;
    int ok;
} cases[] = {
    {"# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\n", 1},
    {"# Server\r\nredis_version:6.2.0\r\n", 1},
    {"# Server\r\nredis_version:6.2.14\r\n", 1},
    {"# Server\r\nredis_version:6.0.16\r\n", 0},
    {"# Server\r\nredis_version:5.0.0\r\n", 0},
    {"# Server\r\nredis_version:4.0.14\r\n", 0},
    {"# Server\r\nredis_version:3.2.1\r\n", 0},
    {"# Server\r\nredis_mode:standalone\r\n", 0},
    {"redis_version:garbage\r\n", 0},
    {"redis_version:-7.5\r\n", 0},    /* a sign is not a version */
    {"redis_version: 7.0.15\r\n", 0}, /* nor a blank */
    {"redis_version:7\r\n", 0},
    {"redis_version:99999999999999999999.0\r\n", 1},
};

START_TEST(test_version)
{
    char why[128] = "";
    int rc = rpool_version_check(cases[_i].info, why, sizeof why);
    ck_assert_msg((rc == 0) == cases[_i].ok, "case %d: %s", _i, rc == 0 ? "accepted" : why);
    if (rc != 0)
        ck_assert_msg(why[0] != '\0', "case %d: no reason given", _i);
}
END_TEST

static const struct {
    const char *info;
    int master;
} role_cases[] = {
    {"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n", 1},
    {"role:master\r\n", 1},
    {"role:master", 1},
    {"# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\n", 0},
    {"# Replication\r\nrole:slave\r\nmaster_role:master\r\n", 0},
    {"# Replication\r\nrole:masters\r\n", 0},
    {"", 0},
};

START_TEST(test_role)
{
    ck_assert_msg(rpool_info_is_master(role_cases[_i].info) == role_cases[_i].master,
                  "case %d", _i);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"version", test_version, UNIT_COUNT(cases)},
        {"role", test_role, UNIT_COUNT(role_cases)},
    };
    return unit_run("redis_version", tests, sizeof tests / sizeof tests[0]);
}
