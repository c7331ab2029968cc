/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_move.c — the kill -9 check of session resume (harness_move.h).
 */
#include "harness_move.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVE_TTL_MS 10000u
/* Generous: a move on a busy machine takes well under this. */
#define MOVE_WITHIN_MS 20000

long long h_keys_count_exists(void *ctx, const char *const *keys, int n)
{
    redisContext *r = ctx;
    const char **argv = malloc(sizeof *argv * (size_t)(n + 1));
    ck_assert_ptr_nonnull(argv);
    argv[0] = "EXISTS";
    memcpy(argv + 1, keys, sizeof *argv * (size_t)n);
    redisReply *rep = redisCommandArgv(r, n + 1, argv, NULL);
    free(argv);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

void h_env_share_prefix(struct h_env *b, const struct h_env *a)
{
    ck_assert_int_eq(h_rlockd_signal(b, SIGTERM), 0);
    char *conf = h_read_file(b->conf);
    ck_assert_ptr_nonnull(conf);
    char from[96];
    snprintf(from, sizeof from, "key_prefix = %s\n", b->prefix);
    char *at = strstr(conf, from);
    ck_assert_ptr_nonnull(at);
    FILE *f = fopen(b->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*skey_prefix = %s\n%s", (int)(at - conf), conf, a->prefix, at + strlen(from));
    ck_assert_int_eq(fclose(f), 0);
    free(conf);
    snprintf(b->prefix, sizeof b->prefix, "%s", a->prefix);
    ck_assert_int_eq(h_rlockd_start(b), 0);
}

/* --- a watcher: every key must exist at every poll (every 10 ms) ------------------------ */

struct watcher {
    const char *const *keys;
    int n;
    h_keys_count_fn count;
    void *ctx;
    atomic_int stop;
    long polls;
    long missing; /* polls that found fewer keys than n */
    long long fewest;
    struct h_thread t;
};

static void *watch_main(void *arg)
{
    struct watcher *w = arg;
    w->fewest = w->n;
    while (!atomic_load(&w->stop)) {
        long long have = w->count(w->ctx, w->keys, w->n);
        if (have < w->n) {
            w->missing++;
            if (have < w->fewest)
                w->fewest = have;
        }
        w->polls++;
        h_sleep_ms(10);
    }
    return NULL;
}

/* --- the check -------------------------------------------------------------------------- */

struct held {
    struct rlock_lock *l;
    uint64_t fence;
    char token[128];
    char key[256];
};

static struct rlock_client *connect_list(const char *list, struct h_lost *lost)
{
    struct rlock_options o = {.client_name = "mover", .on_lost = h_lost_cb, .on_lost_arg = lost};
    struct rlock_client *c = NULL;
    char err[512];
    ck_assert_msg(rlock_connect(list, &o, &c, err, sizeof err) == RLOCK_OK, "connect %s: %s",
                  list, err);
    return c;
}

static void wait_resumed(struct rlock_client **clients, int n)
{
    int64_t t0 = h_now_ms();
    for (int i = 0; i < n; i++) {
        while (rlock_session_resumes(clients[i]) == 0 && h_now_ms() - t0 < MOVE_WITHIN_MS)
            h_sleep_ms(5);
        if (rlock_session_resumes(clients[i]) != 1) {
            /* A call on an ended session says why it ended. */
            enum rlock_err e = rlock_ping(clients[i], 1000, NULL);
            ck_abort_msg("client %d did not resume within %d ms (alive %d; ping: %s: %s)", i,
                         MOVE_WITHIN_MS, rlock_client_alive(clients[i]), rlock_strerror(e),
                         e == RLOCK_OK ? "" : rlock_last_error()->message);
        }
    }
}

void h_move_check(struct h_env *a, struct h_env *b, int sig, int nclients, int nlocks,
                  h_keys_count_fn count, void *ctx)
{
    char list[700];
    snprintf(list, sizeof list, "%s,%s", a->rlockd_addr, b->rlockd_addr);
    /* B down while the clients connect, so that every one of them starts on A. */
    ck_assert_int_eq(h_rlockd_signal(b, SIGKILL), 0);
    int status;
    ck_assert_int_eq(h_wait_exit(b->rlockd_pid, 10000, &status), 0);
    b->rlockd_pid = 0;

    int nkeys = nclients * nlocks;
    struct rlock_client **clients = calloc((size_t)nclients, sizeof *clients);
    struct held *held = calloc((size_t)nkeys, sizeof *held);
    const char **keys = calloc((size_t)nkeys, sizeof *keys);
    ck_assert(clients != NULL && held != NULL && keys != NULL);
    struct h_lost lost = {0};
    for (int i = 0; i < nclients; i++) {
        clients[i] = connect_list(list, &lost);
        for (int j = 0; j < nlocks; j++) {
            char res[64];
            snprintf(res, sizeof res, "move/%d/%d", i, j);
            struct held *h = &held[i * nlocks + j];
            h->l = h_acquire_ok(clients[i], res, &(struct rlock_acquire_opts){.ttl_ms = MOVE_TTL_MS});
            h->fence = rlock_lock_fence(h->l);
            snprintf(h->token, sizeof h->token, "%s", rlock_lock_token(h->l));
            h_lock_key(a, res, h->key, sizeof h->key);
            keys[i * nlocks + j] = h->key;
        }
    }
    ck_assert_int_eq(count(ctx, keys, nkeys), nkeys);
    ck_assert_int_eq(h_rlockd_start(b), 0);
    struct watcher w = {.keys = keys, .n = nkeys, .count = count, .ctx = ctx};
    h_thread_start(&w.t, watch_main, &w);

    int64_t t0 = h_now_ms();
    ck_assert_int_eq(h_rlockd_signal(a, sig), 0);
    /* Handing over, A exits once its clients have left: they leave as they resume on B. */
    ck_assert_msg(h_wait_exit(a->rlockd_pid, 15000, &status) == 0, "A did not exit after %s",
                  strsignal(sig));
    a->rlockd_pid = 0;
    wait_resumed(clients, nclients);
    printf("move: %d sessions with %d locks resumed on B %lld ms after %s\n", nclients, nkeys,
           (long long)(h_now_ms() - t0), strsignal(sig));
    for (int k = 0; k < nkeys; k++) {
        struct held *h = &held[k];
        ck_assert_msg(rlock_lock_state(h->l) == RLOCK_HELD, "lock %d: state %d", k,
                      rlock_lock_state(h->l));
        ck_assert_uint_eq(rlock_lock_fence(h->l), h->fence);
        ck_assert_str_eq(rlock_lock_token(h->l), h->token);
    }
    /* Renewed by B: still there well past the ttl. */
    h_sleep_ms((int)MOVE_TTL_MS + 500);
    atomic_store(&w.stop, 1);
    h_thread_join(&w.t, h_now_ms() + 10000, "the key watcher did not stop");
    printf("move: %ld polls of %d keys, %ld found some missing\n", w.polls, w.n, w.missing);
    ck_assert_int_gt(w.polls, 10);
    if (w.missing != 0)
        h_env_dump_logs(b);
    ck_assert_msg(w.missing == 0, "%ld polls found keys missing (fewest %lld of %d)", w.missing,
                  w.fewest, w.n);
    if (atomic_load(&lost.count) != 0)
        h_env_dump_logs(b);
    ck_assert_msg(atomic_load(&lost.count) == 0, "%d locks lost after the move (the last: %s)",
                  atomic_load(&lost.count),
                  rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&lost.reason)));
    for (int k = 0; k < nkeys; k++) {
        ck_assert_int_eq(rlock_lock_state(held[k].l), RLOCK_HELD);
        h_assert_ok(clients[k / nlocks], rlock_release(held[k].l, 0));
        rlock_lock_free(held[k].l);
    }
    for (int i = 0; i < nclients; i++)
        rlock_close(clients[i]);
    ck_assert_msg(count(ctx, keys, nkeys) == 0, "keys left after the releases");
    free(keys);
    free(held);
    free(clients);
}
