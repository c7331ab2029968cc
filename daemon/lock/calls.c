/* SPDX-License-Identifier: BSD-3-Clause */
/* calls.c — see calls.h. */
#include "calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "pubsub.h"
#include "resource.h"
#include "server.h"
#include "util.h"
#include "watchdog.h"

/* The holders and permits keys of res into at (room for both); advances nothing. */
static size_t group_subkeys(const struct resource *res, char *at, const char **keys,
                            size_t *lens)
{
    size_t cap = res->key_len + RESOURCE_SUBKEY_MAX + 1;
    lens[0] = resource_subkey(res, RESOURCE_HOLDERS_SUFFIX, at, cap);
    keys[0] = at;
    lens[1] = resource_subkey(res, RESOURCE_PERMITS_SUFFIX, at + cap, cap);
    keys[1] = at + cap;
    return 2 * cap;
}

void calls_renew(struct server *srv, struct lease *const *leases, const uint32_t *ttls,
                 uint32_t n, rpool_cb *cb, void *arg)
{
    /* renew.lua: KEYS one per lease, ARGV (token, ttl) pairs. group_renew.lua: KEYS in
     * threes (marker, holders, permits), ARGV in threes (token, ttl, marker). */
    const int shared = leases[0]->shared;
    const uint32_t per = shared ? 3 : 1, nargv = shared ? 3 : 2;
    const char *args[WATCHDOG_BATCH_MAX * 6];
    size_t lens[WATCHDOG_BATCH_MAX * 6];
    char ttl_text[WATCHDOG_BATCH_MAX][16];
    char markers[WATCHDOG_BATCH_MAX][LEASE_MARKER_MAX];
    size_t room = 0;
    for (uint32_t i = 0; shared && i < n; i++)
        room += 2 * (leases[i]->res->key_len + RESOURCE_SUBKEY_MAX + 1);
    char *subkeys = room > 0 ? malloc(room) : NULL, *at = subkeys;
    if (room > 0 && subkeys == NULL) {
        cb(NULL, "out of memory", arg);
        return;
    }
    const uint32_t nkeys = n * per;
    for (uint32_t i = 0; i < n; i++) {
        const struct lease *l = leases[i];
        args[per * i] = l->res->key;
        lens[per * i] = l->res->key_len;
        if (shared)
            at += group_subkeys(l->res, at, &args[per * i + 1], &lens[per * i + 1]);
        const uint32_t a = nkeys + nargv * i;
        args[a] = l->token;
        lens[a] = UTIL_UUID_LEN;
        /* 'L': a leader's record expires with its lock (renew.lua). */
        lens[a + 1] = (size_t)snprintf(ttl_text[i], sizeof ttl_text[i], "%s%u",
                                       l->leader ? "L" : "", ttls[i]);
        args[a + 1] = ttl_text[i];
        if (shared) {
            lens[a + 2] = lease_marker(l->limit, markers[i]);
            args[a + 2] = markers[i];
        }
    }
    rpool_eval(srv->pool, leases[0]->res->route, shared ? SCRIPT_GROUP_RENEW : SCRIPT_RENEW,
               (int)nkeys, (int)(nkeys + nargv * n), args, lens, cb, arg);
    free(subkeys);
}

static void group_release(struct server *srv, struct resource *res, const char *token,
                          uint32_t delay_ms, rpool_cb *cb, void *arg)
{
    /* group_release.lua for one place: marker, holders, permits; token, delay, suffix. */
    char sub[2 * (res->key_len + RESOURCE_SUBKEY_MAX + 1)], delay[16];
    const char *suffix = pubsub_suffix(srv);
    const char *args[6] = {res->key, NULL, NULL, token, delay, suffix};
    size_t lens[6] = {res->key_len, 0, 0, strlen(token), 0, strlen(suffix)};
    lens[4] = (size_t)snprintf(delay, sizeof delay, "%u", delay_ms);
    group_subkeys(res, sub, &args[1], &lens[1]);
    rpool_eval(srv->pool, res->route, SCRIPT_GROUP_RELEASE, 3, 6, args, lens, cb, arg);
}

void calls_release_later(struct server *srv, struct resource *res, const char *token,
                         uint32_t delay_ms, rpool_cb *cb, void *arg)
{
    group_release(srv, res, token, delay_ms, cb, arg);
}

void calls_release(struct server *srv, struct resource *res, const char *token, int shared,
                   rpool_cb *cb, void *arg)
{
    char channel[res->key_len + sizeof PUBSUB_CHANNEL_SUFFIX];
    size_t clen = pubsub_channel(srv, res, channel, sizeof channel);
    if (!shared) {
        const char *args[3] = {res->key, token, channel};
        size_t lens[3] = {res->key_len, strlen(token), clen};
        rpool_eval(srv->pool, res->route, SCRIPT_RELEASE, 1, 3, args, lens, cb, arg);
        return;
    }
    group_release(srv, res, token, 0, cb, arg);
}
