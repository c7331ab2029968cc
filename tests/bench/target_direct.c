/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * target_direct.c — the baseline: an application that talks to Redis
 * itself, the way the classic scripts do. One synchronous hiredis connection per
 * worker; `SET key token NX PX ttl` to take a lock, EVALSHA of the classic
 * compare-and-delete to release it (loaded once per connection, EVAL when
 * Redis answers NOSCRIPT). Keys have rlockd's layout, PREFIX{resource}, and
 * tokens are random UUID strings like rlockd's, so both targets move the same
 * bytes.
 */
#include "target.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "pair.h"
#include "redis_conn.h"

/* The classic release script, byte for byte. */
static const char SEED_RELEASE[] =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) "
    "else return 0 end";

struct direct {
    const struct bench_opts *o;
    redisContext *rc;
    uint64_t rng;
    char sha[41];
    char key[640];
    char token[37];
    char ttl[16];
    char msg[160]; /* what the latest failure said */
};

static int load_script(redisContext *rc, char *sha, char *err, size_t errlen)
{
    redisReply *r = redisCommand(rc, "SCRIPT LOAD %s", SEED_RELEASE);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(sha, r->str, 41);
    else
        snprintf(err, errlen, "SCRIPT LOAD: %s",
                 r == NULL ? rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "odd reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int target_direct_load_script(const char *address, char *sha, char *err, size_t errlen)
{
    redisContext *rc = bench_redis_connect(address, err, errlen);
    if (rc == NULL)
        return -1;
    int rv = load_script(rc, sha, err, errlen);
    redisFree(rc);
    return rv;
}

static void *direct_open(const struct bench_opts *o, void *run, char *err, size_t errlen)
{
    (void)run;
    struct direct *d = calloc(1, sizeof *d);
    if (d == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->o = o;
    d->rng = pair_seed((unsigned)(uintptr_t)d);
    snprintf(d->ttl, sizeof d->ttl, "%u", o->ttl_ms);
    d->rc = bench_redis_connect(o->server, err, errlen);
    if (d->rc == NULL || load_script(d->rc, d->sha, err, errlen) != 0) {
        redisFree(d->rc);
        free(d);
        return NULL;
    }
    return d;
}

static void direct_close(void *w)
{
    struct direct *d = w;
    if (d == NULL)
        return;
    redisFree(d->rc);
    free(d);
}

/* A version-4 UUID string from the worker's generator, like the classic scripts' uuidv4(). */
static void make_token(struct direct *d)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t bits[2] = {pair_random(&d->rng), pair_random(&d->rng)};
    unsigned k = 0;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            d->token[i] = '-';
            continue;
        }
        unsigned nib = (unsigned)(bits[k / 16] >> (4 * (k % 16))) & 0xF;
        k++;
        if (i == 14)
            nib = 4; /* version 4 */
        else if (i == 19)
            nib = 8 | (nib & 3); /* variant 10xx */
        d->token[i] = hex[nib];
    }
    d->token[36] = '\0';
}

/* The class of a reply that is not the expected one, its text kept in d->msg. */
static int failure(struct direct *d, const redisReply *r, int e)
{
    snprintf(d->msg, sizeof d->msg, "%s",
             r == NULL                        ? d->rc->errstr
             : r->type == REDIS_REPLY_ERROR   ? r->str
             : e == BERR_LOST                 ? "the key no longer held this token"
                                              : "unexpected reply type");
    return e;
}

static int direct_acquire(void *w, const char *resource)
{
    struct direct *d = w;
    snprintf(d->key, sizeof d->key, "%s{%s}", d->o->key_prefix, resource);
    make_token(d);
    const char *argv[] = {"SET", d->key, d->token, "NX", "PX", d->ttl};
    redisReply *r = redisCommandArgv(d->rc, 6, argv, NULL);
    int rv = r != NULL && r->type == REDIS_REPLY_STATUS ? TARGET_GRANTED
             : r != NULL && r->type == REDIS_REPLY_NIL  ? TARGET_BUSY
                                                        : failure(d, r, BERR_REDIS);
    freeReplyObject(r);
    return rv;
}

static int direct_release(void *w)
{
    struct direct *d = w;
    const char *argv[] = {"EVALSHA", d->sha, "1", d->key, d->token};
    redisReply *r = redisCommandArgv(d->rc, 5, argv, NULL);
    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        /* Redis lost its script cache (restart, SCRIPT FLUSH): EVAL caches it again. */
        freeReplyObject(r);
        argv[0] = "EVAL";
        argv[1] = SEED_RELEASE;
        r = redisCommandArgv(d->rc, 5, argv, NULL);
    }
    int rv = r == NULL || r->type != REDIS_REPLY_INTEGER ? failure(d, r, BERR_REDIS)
             : r->integer == 1                         ? 0
                                                       : failure(d, r, BERR_LOST);
    freeReplyObject(r);
    return rv;
}

static int direct_usable(void *w)
{
    return ((struct direct *)w)->rc->err == 0;
}

static int no_run(const struct bench_opts *o, void **run, char *err, size_t errlen)
{
    (void)o, (void)err, (void)errlen;
    *run = NULL;
    return 0;
}

static void no_close_run(void *run)
{
    (void)run;
}

static const char *direct_last_error(void *w)
{
    return ((struct direct *)w)->msg;
}

const struct target_ops target_direct_ops = {
    .open_run = no_run,
    .close_run = no_close_run,
    .open_worker = direct_open,
    .close_worker = direct_close,
    .acquire = direct_acquire,
    .release = direct_release,
    .usable = direct_usable,
    .last_error = direct_last_error,
};
