/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_duration.c — proto/duration.c: units, bare numbers in either bare
 * unit, fractions, blanks, junk, negatives and overflow.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "duration.h"

#define SENTINEL 0xdeadbeefu

/* ok = 0: parsing must fail and leave the output untouched. */
static const struct {
    const char *text;
    uint32_t bare_unit_ms;
    int ok;
    uint64_t ms;
} cases[] = {
    {"250ms", 1000, 1, 250},
    {"10s", 1000, 1, 10000},
    {"5m", 1000, 1, 300000},
    {"1h", 1000, 1, 3600000},
    {"0", 1000, 1, 0},
    {"0ms", 1000, 1, 0},
    {"10", 1000, 1, 10000},
    {"10", 1, 1, 10},
    {"1.5s", 1000, 1, 1500},
    {".5s", 1000, 1, 500},
    {"0.5", 1000, 1, 500},
    {"1.5m", 1000, 1, 90000},
    {"0.25h", 1000, 1, 900000},
    {"1.4ms", 1000, 1, 1},
    {"  10s  ", 1000, 1, 10000},
    {"10 s", 1000, 1, 10000},
    {"4294967295ms", 1000, 1, 4294967295u},
    {"1193h", 1000, 1, 4294800000u},
    {"", 1000, 0, 0},
    {"   ", 1000, 0, 0},
    {"s", 1000, 0, 0},
    {"ms", 1000, 0, 0},
    {"10x", 1000, 0, 0},
    {"10sec", 1000, 0, 0},
    {"10 ms s", 1000, 0, 0},
    {"1 0s", 1000, 0, 0},
    {"10S", 1000, 0, 0},
    {"ten", 1000, 0, 0},
    {"0x10", 1000, 0, 0},
    {"1e2s", 1000, 0, 0},
    {"1.", 1000, 1, 1000},
    {".", 1000, 0, 0},
    {"+5s", 1000, 0, 0},
    {"-1", 1000, 0, 0},
    {"-5s", 1000, 0, 0},
    {"+5s", 1000, 0, 0},
    {"inf", 1000, 0, 0},
    {"nan", 1000, 0, 0},
    {"4294967296ms", 1000, 0, 0},
    {"4294968s", 1000, 0, 0},
    {"1194h", 1000, 0, 0},
    {"99999999999999999999999999h", 1000, 0, 0},
};

START_TEST(test_parse)
{
    uint64_t out = SENTINEL;
    int rc = duration_parse_ms(cases[_i].text, cases[_i].bare_unit_ms, &out);
    if (cases[_i].ok) {
        ck_assert_msg(rc == 0, "\"%s\" refused", cases[_i].text);
        ck_assert_msg(out == cases[_i].ms, "\"%s\" gave %llu, want %llu", cases[_i].text,
                      (unsigned long long)out, (unsigned long long)cases[_i].ms);
    } else {
        ck_assert_msg(rc == -1, "\"%s\" accepted as %llu", cases[_i].text,
                      (unsigned long long)out);
        ck_assert_msg(out == SENTINEL, "\"%s\" changed the output", cases[_i].text);
    }
}
END_TEST

START_TEST(test_null)
{
    uint64_t out = SENTINEL;
    ck_assert_int_eq(duration_parse_ms(NULL, 1000, &out), -1);
    ck_assert_uint_eq(out, SENTINEL);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"parse", test_parse, UNIT_COUNT(cases)},
        {"parse", test_null, 0},
    };
    return unit_run("duration", tests, sizeof tests / sizeof tests[0]);
}
