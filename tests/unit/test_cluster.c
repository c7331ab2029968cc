/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster.c — Redis Cluster's pure parts: CRC16 and the key's slot (the
 * spec's values), CLUSTER SLOTS replies (built by hiredis' own reader from
 * RESP text, so they are what the pool will see) and MOVED / ASK errors.
 */
#include <string.h>

#include <hiredis/hiredis.h>

#include "check_main.h"
#include "resp.h"
#include "cluster.h"

START_TEST(test_crc16)
{
    /* The reference value of CRC16/XMODEM, quoted by the cluster spec. */
    ck_assert_uint_eq(cluster_crc16("123456789", 9), 0x31C3);
    ck_assert_uint_eq(cluster_crc16("", 0), 0);
}
END_TEST

START_TEST(test_key_slot)
{
    /* Values CLUSTER KEYSLOT gives. */
    ck_assert_uint_eq(cluster_key_slot("foo", 3), 12182);
    ck_assert_uint_eq(cluster_key_slot("somekey", 7), 11058);
    ck_assert_uint_eq(cluster_key_slot("123456789", 9), 0x31C3);
    /* The hash tag: the lock key and its fence share a slot. */
    uint16_t s = cluster_key_slot("user1000", 8);
    ck_assert_uint_eq(cluster_key_slot("rlock:{user1000}", 16), s);
    ck_assert_uint_eq(cluster_key_slot("rlock:{user1000}:fence", 22), s);
    /* An empty tag is no tag: the whole key counts. */
    ck_assert_uint_eq(cluster_key_slot("a{}b", 4), cluster_crc16("a{}b", 4) & 16383);
    /* No closing brace: the whole key. */
    ck_assert_uint_eq(cluster_key_slot("a{bc", 4), cluster_crc16("a{bc", 4) & 16383);
    /* The first '{' and the first '}' after it. */
    ck_assert_uint_eq(cluster_key_slot("{a}b}", 5), cluster_key_slot("a", 1));
    ck_assert_uint_eq(cluster_key_slot("x{{y}}", 6), cluster_key_slot("{y", 2));
    ck_assert_uint_eq(cluster_key_slot("}{z}", 4), cluster_key_slot("z", 1));
    /* Length-bounded: bytes after len do not count. */
    ck_assert_uint_eq(cluster_key_slot("{ab}", 3), cluster_key_slot("{ab", 3));
}
END_TEST

static const struct {
    const char *resp;
    int n; /* ranges, or -1 */
} slots_cases[] = {
    /* Two masters, the second with a replica and Redis 7's extra fields. */
    {"*2\r\n"
     "*3\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
     "*4\r\n:8192\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:7002\r\n$2\r\nid\r\n*0\r\n"
     "*2\r\n$9\r\n127.0.0.1\r\n:7003\r\n",
     2},
    {"*0\r\n", 0},                                                    /* no slots assigned */
    {"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n", 1},     /* empty host */
    {"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$3\r\n::1\r\n:7001\r\n", 1},  /* IPv6 */
    {"$2\r\nno\r\n", -1},                                             /* not an array */
    {"-ERR This instance has cluster support disabled\r\n", -1},
    {"*1\r\n*2\r\n:0\r\n:16383\r\n", -1},                             /* no master */
    {"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n", -1}, /* end < start */
    {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n", -1}, /* past the last */
    {"*1\r\n*3\r\n:-1\r\n:5\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n", -1},
    {"*1\r\n*3\r\n$1\r\n0\r\n:5\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n", -1}, /* string slot */
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$9\r\nlocalhost\r\n:7001\r\n", -1},  /* a name */
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n", -1},     /* port 0 */
    {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$9\r\n127.0.0.1\r\n:70000\r\n", -1}, /* port too big */
    {"*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$9\r\n127.0.0.1\r\n", -1},           /* no port */
    {"*1\r\n*3\r\n:0\r\n:5\r\n:1\r\n", -1},                              /* node not an array */
    {"*1\r\n:7\r\n", -1},                                                /* entry not an array */
};

START_TEST(test_parse_slots)
{
    struct cluster_range out[4];
    char err[128] = "";
    redisReply *r = unit_resp(slots_cases[_i].resp);
    int n = cluster_parse_slots(r, "10.0.0.9", out, 4, err, sizeof err);
    ck_assert_msg(n == slots_cases[_i].n, "case %d: %d ranges (%s)", _i, n, err);
    if (n < 0)
        ck_assert_msg(err[0] != '\0', "case %d: no reason", _i);
    if (_i == 0) {
        ck_assert_uint_eq(out[0].start, 0);
        ck_assert_uint_eq(out[0].end, 8191);
        ck_assert_str_eq(out[0].addr.host, "127.0.0.1");
        ck_assert_uint_eq(out[0].addr.port, 7001);
        ck_assert_uint_eq(out[1].start, 8192);
        ck_assert_uint_eq(out[1].end, 16383);
        ck_assert_uint_eq(out[1].addr.port, 7002); /* the master, not the replica */
    }
    if (_i == 2)
        ck_assert_str_eq(out[0].addr.host, "10.0.0.9");
    if (_i == 3)
        ck_assert_str_eq(out[0].addr.host, "::1");
    freeReplyObject(r);
}
END_TEST

START_TEST(test_parse_slots_bound)
{
    struct cluster_range out[1];
    char err[128] = "";
    redisReply *r = unit_resp(slots_cases[0].resp); /* two ranges, room for one */
    ck_assert_int_eq(cluster_parse_slots(r, NULL, out, 1, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "at most"));
    freeReplyObject(r);
}
END_TEST

static const struct {
    const char *err;
    int kind;
    unsigned slot;
    const char *host;
    unsigned port;
} redirect_cases[] = {
    {"MOVED 3999 127.0.0.1:6381", CLUSTER_MOVED, 3999, "127.0.0.1", 6381},
    {"ASK 3999 127.0.0.1:6381", CLUSTER_ASK, 3999, "127.0.0.1", 6381},
    {"MOVED 0 ::1:7000", CLUSTER_MOVED, 0, "::1", 7000},
    {"MOVED 16383 :7000", CLUSTER_MOVED, 16383, "10.0.0.9", 7000}, /* empty host */
    {"NOSCRIPT No matching script", CLUSTER_NOT_REDIRECT, 0, NULL, 0},
    {"ERR MOVED 1 1.2.3.4:5", CLUSTER_NOT_REDIRECT, 0, NULL, 0},
    {"MOVED", CLUSTER_NOT_REDIRECT, 0, NULL, 0},
    {"MOVED 16384 127.0.0.1:7000", -1, 0, NULL, 0},
    {"MOVED 1234567 127.0.0.1:7000", -1, 0, NULL, 0},
    {"MOVED x 127.0.0.1:7000", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1:", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1:0", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1:65536", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1:123456", -1, 0, NULL, 0},
    {"MOVED 5 127.0.0.1:7x", -1, 0, NULL, 0},
    {"MOVED 5 redis.example:7000", -1, 0, NULL, 0},
    {"MOVED 5  127.0.0.1:7000", -1, 0, NULL, 0},
    {"ASK 5 999.0.0.1:7000", -1, 0, NULL, 0},
};

START_TEST(test_parse_redirect)
{
    uint16_t slot = 0;
    struct config_address a;
    memset(&a, 0, sizeof a);
    const char *e = redirect_cases[_i].err;
    int kind = cluster_parse_redirect(e, strlen(e), "10.0.0.9", &slot, &a);
    ck_assert_msg(kind == redirect_cases[_i].kind, "case %d (%s): %d", _i, e, kind);
    if (kind > 0) {
        ck_assert_uint_eq(slot, redirect_cases[_i].slot);
        ck_assert_str_eq(a.host, redirect_cases[_i].host);
        ck_assert_uint_eq(a.port, redirect_cases[_i].port);
    }
}
END_TEST

START_TEST(test_redirect_no_fallback)
{
    uint16_t slot;
    struct config_address a;
    ck_assert_int_eq(cluster_parse_redirect("MOVED 1 :7000", 13, NULL, &slot, &a), -1);
}
END_TEST

START_TEST(test_map)
{
    static struct cluster_map m;
    struct cluster_range r[3];
    memset(&m, 0, sizeof m);
    memset(r, 0, sizeof r);
    strcpy(r[0].addr.host, "127.0.0.1"), r[0].addr.port = 7001, r[0].start = 0, r[0].end = 99;
    strcpy(r[1].addr.host, "127.0.0.1"), r[1].addr.port = 7002, r[1].start = 100, r[1].end = 16383;
    r[2] = r[0], r[2].start = r[2].end = 5000; /* a single slot back on the first node */
    ck_assert_int_eq(cluster_map_node(&m, &r[1].addr), 0); /* a seed, known first */
    ck_assert_int_eq(cluster_map_apply(&m, r, 3), 1);      /* one node added */
    ck_assert_uint_eq(m.nnodes, 2);
    ck_assert_int_eq(cluster_map_owner(&m, 0), 1);
    ck_assert_int_eq(cluster_map_owner(&m, 99), 1);
    ck_assert_int_eq(cluster_map_owner(&m, 100), 0);
    ck_assert_int_eq(cluster_map_owner(&m, 5000), 1);
    ck_assert_int_eq(cluster_map_owner(&m, 16383), 0);
    ck_assert_uint_eq(m.nslots[0], 16283);
    ck_assert_uint_eq(m.nslots[1], 101);
    cluster_map_set(&m, 0, 0); /* MOVED */
    ck_assert_int_eq(cluster_map_owner(&m, 0), 0);
    ck_assert_uint_eq(m.nslots[0], 16284);
    ck_assert_uint_eq(m.nslots[1], 100);
    /* A later map without slot 0..99: no owner; node indexes stay. */
    ck_assert_int_eq(cluster_map_apply(&m, &r[1], 1), 0);
    ck_assert_int_eq(cluster_map_owner(&m, 0), -1);
    ck_assert_int_eq(cluster_map_owner(&m, 200), 0);
    ck_assert_uint_eq(m.nnodes, 2);
    /* A full map refuses new nodes; their slots stay without owner. */
    for (int i = 0; m.nnodes < CLUSTER_MAX_NODES; i++) {
        struct config_address a = r[0].addr;
        a.port = (uint16_t)(8000 + i);
        ck_assert_int_ge(cluster_map_node(&m, &a), 0);
    }
    struct cluster_range extra = r[0];
    extra.addr.port = 9999;
    ck_assert_int_eq(cluster_map_node(&m, &extra.addr), -1);
    ck_assert_int_eq(cluster_map_apply(&m, &extra, 1), -1);
    ck_assert_int_eq(cluster_map_owner(&m, 0), -1);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"crc16", test_crc16, 0},
        {"slot", test_key_slot, 0},
        {"slots", test_parse_slots, UNIT_COUNT(slots_cases)},
        {"slots", test_parse_slots_bound, 0},
        {"redirect", test_parse_redirect, UNIT_COUNT(redirect_cases)},
        {"redirect", test_redirect_no_fallback, 0},
        {"map", test_map, 0},
    };
    return unit_run("cluster", tests, sizeof tests / sizeof tests[0]);
}
