/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_restable.c — daemon/lock/resource.c's table: every resource is found, and
 * a full scan visits each exactly once, at every size the table passes
 * through, in particular while a growth is still moving its chains (the
 * move is spread over inserts and removals); removals find their resource
 * in whichever table holds it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "config.h"
#include "resource.h"
#include "pool.h"
#include "server.h"

#define N 20000

/* resource.c asks the pool for a route; one connection here. */
uint32_t rpool_route(const struct rpool *p, const char *key, size_t len)
{
    (void)p;
    (void)key;
    (void)len;
    return 0;
}

struct seen {
    unsigned char *count; /* by index, parsed from the name "r/<i>" */
    int bad;
};

static void visit(struct resource *r, uint64_t hash, void *arg)
{
    (void)hash;
    struct seen *s = arg;
    int i = atoi(r->name + 2);
    if (i < 0 || i >= N)
        s->bad++;
    else
        s->count[i]++;
}

/* Scan the whole table; assert that exactly the live resources came, once each. */
static void scan_all(struct server *srv, const unsigned char *live)
{
    struct seen s = {.count = calloc(N, 1)};
    ck_assert_ptr_nonnull(s.count);
    uint64_t cursor = 0;
    do {
        restable_scan_bucket(srv->resources, cursor, visit, &s);
        cursor = restable_scan_next(srv->resources, cursor);
    } while (cursor != 0);
    ck_assert_int_eq(s.bad, 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(s.count[i] == live[i], "r/%d seen %u times, live %u", i, s.count[i],
                      live[i]);
    free(s.count);
}

static void name_of(int i, char *buf, size_t len)
{
    snprintf(buf, len, "r/%d", i);
}

START_TEST(test_grow_find_scan_remove)
{
    struct config cfg = {.key_prefix = "t:"};
    struct server srv = {.cfg = &cfg};
    uint8_t key[UTIL_HASH_KEY_BYTES] = {1, 2, 3};
    srv.resources = restable_new(key);
    ck_assert_ptr_nonnull(srv.resources);
    static struct resource *res[N];
    static unsigned char live[N];
    char name[32];
    for (int i = 0; i < N; i++) {
        name_of(i, name, sizeof name);
        res[i] = resource_get(&srv, name, strlen(name));
        ck_assert_ptr_nonnull(res[i]);
        live[i] = 1;
        /* Every earlier one is still found, mid-move included. */
        if (i % 97 == 0 || (i > 60 && i < 200)) {
            for (int j = 0; j <= i; j += (i > 1000 ? 13 : 1)) {
                name_of(j, name, sizeof name);
                ck_assert_ptr_eq(resource_find(&srv, name, strlen(name)), res[j]);
            }
        }
        if (i % 1013 == 0 || i == 64 || i == 65 || i == 70 || i == 129 || i == 131)
            scan_all(&srv, live);
    }
    ck_assert_uint_eq(restable_count(srv.resources), N);
    /* A second get is a reference, not a new resource. */
    name_of(5, name, sizeof name);
    ck_assert_ptr_eq(resource_get(&srv, name, strlen(name)), res[5]);
    resource_unref(res[5]);
    /* Remove the odd ones, scanning as the table changes. */
    for (int i = 1; i < N; i += 2) {
        resource_unref(res[i]);
        live[i] = 0;
        if (i % 2001 == 1)
            scan_all(&srv, live);
    }
    scan_all(&srv, live);
    for (int i = 0; i < N; i++) {
        name_of(i, name, sizeof name);
        ck_assert_ptr_eq(resource_find(&srv, name, strlen(name)), live[i] ? res[i] : NULL);
    }
    for (int i = 0; i < N; i += 2)
        resource_unref(res[i]);
    ck_assert_uint_eq(restable_count(srv.resources), 0);
    restable_free(srv.resources);
}
END_TEST

int main(void)
{
    const struct unit_test tests[] = {
        {"restable", test_grow_find_scan_remove, 0},
    };
    return unit_run("restable", tests, sizeof tests / sizeof tests[0]);
}
