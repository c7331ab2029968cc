/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_pubsub.c — which resource a release notice's channel names
 * (PREFIX{resource}:free), as the pub/sub connection reads it.
 */
#include <string.h>

#include "check_main.h"
#include "pubsub.h"

static const struct {
    const char *prefix;
    const char *chan;
    const char *name; /* NULL: not a resource's channel */
} cases[] = {
    {"rlock:", "rlock:{orders/42}:free", "orders/42"},
    {"rlock:", "rlock:{}:free", ""},
    {"rlock:", "rlock:{a}b}:free", "a}b"},       /* braces in a name stay in it */
    {"rlock:", "rlock:{{x}}:free", "{x}"},
    {"", "{job}:free", "job"},                   /* no prefix */
    {"rlock:", "rlock:daemons", NULL},           /* the daemons' channel */
    {"rlock:", "rlock:{job}:fence", NULL},
    {"rlock:", "rlock:{job}", NULL},
    {"rlock:", "other:{job}:free", NULL},        /* another prefix */
    {"rlock:", "rlock:job}:free", NULL},
    {"rlock:", "rlock:{job:free", NULL},
    {"rlock:", "rlock:{:free", NULL},            /* too short to hold both braces */
    {"rlock:", "", NULL},
    {"a-long-prefix:", "a-long:{x}:free", NULL}, /* shorter than the prefix */
};

START_TEST(test_channel_resource)
{
    const char *name = NULL;
    size_t len = 0;
    const char *chan = cases[_i].chan;
    int rc = pubsub_channel_resource(cases[_i].prefix, chan, strlen(chan), &name, &len);
    if (cases[_i].name == NULL) {
        ck_assert_msg(rc != 0, "case %d: %s taken for a resource's channel", _i, chan);
        return;
    }
    ck_assert_msg(rc == 0, "case %d: %s not taken for a resource's channel", _i, chan);
    ck_assert_uint_eq(len, strlen(cases[_i].name));
    ck_assert_msg(memcmp(name, cases[_i].name, len) == 0, "case %d: name %.*s", _i, (int)len,
                  name);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"channel_resource", test_channel_resource, UNIT_COUNT(cases)},
    };
    return unit_run("pubsub", tests, sizeof tests / sizeof tests[0]);
}
