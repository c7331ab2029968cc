/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_admin.c — the operators' views and actions, through rlockctl run as a
 * real process and through librlock, against a real rlockd and redis-server.
 *
 *  views          5 sessions with known names holding 12 locks: `sessions`
 *                 and `locks`, as tables and as JSON, list exactly them with
 *                 the right counts, fences and holders; the filters; paging
 *                 through librlock with one entry per page
 *  many_locks     20,000 held locks: `locks --json` pages through all of them
 *                 (each once) while a raw pinger measures the daemon's Ping
 *                 latency; pages are bounded in entries, a filter that
 *                 matches nothing still ends each request after a bounded
 *                 scan; one-lock pages through a prefix's 1111 locks, ending
 *                 inside buckets, list each exactly once
 *  force_release  the holder gets LockLost(FORCED), the key goes at once, the
 *                 head waiter gets the lock; a key held elsewhere is left
 *  kill_session   the session is told (SessionClosing) and ends, its locks
 *                 are freed at once; an unknown id is NOT_FOUND (exit 66)
 *  protocol       what librlock hides: cursors the daemon did not issue,
 *                 the byte bound of a page, the default limit, a session
 *                 that ends itself, ForceRelease with a token
 */
#include "admin_ctl.h"
#include "harness.h"
#include "harness_raw.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSIONS 5
#define LOCKS 12
#define MANY 20000
#define MANY_PAGE "100"
#define PING_EVERY_MS 2
#define PING_MAX_MS 50

/* --- views ------------------------------------------------------------------------- */

/* Locks per session in the views test: 4 + 3 + 2 + 2 + 1 = 12. */
static const int locks_of[SESSIONS] = {4, 3, 2, 2, 1};

struct views {
    struct rlock_client *c[SESSIONS];
    struct rlock_lock *l[LOCKS];
    int owner_of[LOCKS]; /* which client holds l[i] */
    char name[SESSIONS][32];
};

static void views_start(struct views *v, struct h_env *e)
{
    int k = 0;
    for (int i = 0; i < SESSIONS; i++) {
        snprintf(v->name[i], sizeof v->name[i], "view-client-%d", i);
        struct rlock_options o = {.client_name = v->name[i]};
        v->c[i] = h_client_or_fail(e, &o);
        for (int j = 0; j < locks_of[i]; j++, k++) {
            char res[64];
            snprintf(res, sizeof res, "views/%d/%d", i, j);
            v->l[k] = h_acquire_ok(v->c[i], res, NULL);
            v->owner_of[k] = i;
        }
    }
    ck_assert_int_eq(k, LOCKS);
}

static void views_stop(struct views *v)
{
    for (int k = 0; k < LOCKS; k++)
        rlock_lock_free(v->l[k]);
    for (int i = 0; i < SESSIONS; i++)
        rlock_close(v->c[i]);
}

/* The index of the client whose session id is id, or -1. */
static int client_of(const struct views *v, const char *id)
{
    for (int i = 0; i < SESSIONS; i++)
        if (strcmp(rlock_session_id(v->c[i]), id) == 0)
            return i;
    return -1;
}

/* The index of the lock on resource, or -1. */
static int lock_of(const struct views *v, const char *resource)
{
    for (int k = 0; k < LOCKS; k++)
        if (strcmp(rlock_lock_resource(v->l[k]), resource) == 0)
            return k;
    return -1;
}

/* `sessions --json`: the five sessions with their names and lock counts, plus rlockctl's own. */
static void check_sessions_json(struct views *v, const char *json)
{
    int seen[SESSIONS] = {0};
    size_t n = 0;
    for (const char *p = actl_first(json); p != NULL; p = actl_next(p), n++) {
        char id[64], name[64], state[16];
        uint64_t held = 0, waiting = 0;
        ck_assert(actl_str(p, "id", id, sizeof id) && actl_str(p, "client_name", name, sizeof name));
        ck_assert(actl_u64(p, "locks_held", &held) && actl_u64(p, "waiting", &waiting));
        ck_assert(actl_str(p, "state", state, sizeof state));
        ck_assert_str_eq(state, "active");
        int i = client_of(v, id);
        if (i < 0) {
            ck_assert_msg(strcmp(name, "rlockctl sessions") == 0, "unknown session %s (%s)", id,
                          name);
            ck_assert_uint_eq(held, 0);
            continue;
        }
        seen[i]++;
        ck_assert_str_eq(name, v->name[i]);
        ck_assert_uint_eq(held, (uint64_t)locks_of[i]);
        ck_assert_uint_eq(waiting, 0);
    }
    ck_assert_uint_eq(n, SESSIONS + 1);
    for (int i = 0; i < SESSIONS; i++)
        ck_assert_msg(seen[i] == 1, "session %d listed %d times", i, seen[i]);
    ck_assert_ptr_nonnull(strstr(json, "\"count\": 6\n"));
}

/* `locks --json`: exactly the given locks, each with its holder and fence. */
static void check_locks_json(struct views *v, const char *json, const int *want, int nwant)
{
    int seen[LOCKS] = {0};
    size_t n = 0;
    for (const char *p = actl_first(json); p != NULL; p = actl_next(p), n++) {
        char res[64], sid[64], name[64], token[64];
        uint64_t fence = 0, holds = 0;
        ck_assert(actl_str(p, "resource", res, sizeof res));
        ck_assert(actl_str(p, "session_id", sid, sizeof sid));
        ck_assert(actl_str(p, "client_name", name, sizeof name));
        ck_assert(actl_str(p, "token", token, sizeof token));
        ck_assert(actl_u64(p, "fence", &fence) && actl_u64(p, "hold_count", &holds));
        int k = lock_of(v, res);
        ck_assert_msg(k >= 0, "unknown lock %s", res);
        seen[k]++;
        ck_assert_uint_eq(fence, rlock_lock_fence(v->l[k]));
        ck_assert_str_eq(token, rlock_lock_token(v->l[k]));
        ck_assert_str_eq(sid, rlock_session_id(v->c[v->owner_of[k]]));
        ck_assert_str_eq(name, v->name[v->owner_of[k]]);
        ck_assert_uint_eq(holds, 1);
    }
    ck_assert_uint_eq(n, (size_t)nwant);
    for (int i = 0; i < nwant; i++)
        ck_assert_msg(seen[want[i]] == 1, "lock %s listed %d times",
                      rlock_lock_resource(v->l[want[i]]), seen[want[i]]);
}

/* The column where header's word col starts (the table is aligned on it). */
static size_t column(const char *header, const char *col)
{
    const char *p = strstr(header, col);
    ck_assert_ptr_nonnull(p);
    return (size_t)(p - header);
}

/* The tables: a header, a row per entry, every row aligned with the header. */
static void check_tables(struct views *v, const char *sessions, const char *locks)
{
    /* sessions: rows start with the id; STATE is a left-aligned column. */
    size_t state_at = column(sessions, "STATE"), rows = 0;
    for (const char *line = strchr(sessions, '\n') + 1; *line != '\0';
         line = strchr(line, '\n') + 1, rows++) {
        ck_assert_msg(strncmp(line + state_at, "active ", 7) == 0, "misaligned row: %.*s",
                      (int)(strchr(line, '\n') - line), line);
        char id[40];
        memcpy(id, line, 36);
        id[36] = '\0';
        int i = client_of(v, id);
        if (i >= 0)
            ck_assert_ptr_nonnull(strstr(line, v->name[i]));
    }
    ck_assert_uint_eq(rows, SESSIONS + 1);

    /* locks: FENCE is right-aligned, so each fence ends where the header's word ends. */
    size_t fence_end = column(locks, "FENCE") + strlen("FENCE");
    rows = 0;
    for (const char *line = strchr(locks, '\n') + 1; *line != '\0';
         line = strchr(line, '\n') + 1, rows++) {
        char row[512];
        snprintf(row, sizeof row, "%.*s", (int)(strchr(line, '\n') - line), line);
        int k = lock_of(v, strrchr(row, ' ') + 1);
        ck_assert_msg(k >= 0, "row without a known resource: %s", row);
        char fence[32];
        int len = snprintf(fence, sizeof fence, "%" PRIu64, rlock_lock_fence(v->l[k]));
        ck_assert_msg(strncmp(row + fence_end - (size_t)len, fence, (size_t)len) == 0,
                      "fence %s not at its column in: %s", fence, row);
        ck_assert_int_eq(row[fence_end], ' ');
    }
    ck_assert_uint_eq(rows, LOCKS);
}

static int count_entry(const struct rlock_lock_entry *e, void *arg)
{
    (void)e;
    (*(int *)arg)++;
    return 0;
}

/* The many/N locks a listing gave, each once (seen_entry). */
struct seen_locks {
    unsigned char *seen; /* MANY flags */
    int n, twice;
    char first_twice[64];
};

static int seen_entry(const struct rlock_lock_entry *e, void *arg)
{
    struct seen_locks *sl = arg;
    int i = atoi(e->resource + strlen("many/"));
    ck_assert_msg(strncmp(e->resource, "many/", 5) == 0 && i >= 0 && i < MANY, "stray lock %s",
                  e->resource);
    if (sl->seen[i]++ != 0 && sl->twice++ == 0)
        snprintf(sl->first_twice, sizeof sl->first_twice, "%s", e->resource);
    sl->n++;
    return 0;
}

/* How a listing through librlock went. */
struct page_count {
    int entries, pages, max_page;
};

/* Page through the locks matching filter, limit per request (at most max_pages requests). */
static struct page_count list_all_locks(struct rlock_client *admin,
                                        const struct rlock_lock_filter *filter, uint32_t limit,
                                        int max_pages)
{
    char cursor[RLOCK_CURSOR_BYTES] = "", next[RLOCK_CURSOR_BYTES];
    struct page_count pc = {0, 0, 0};
    do {
        int before = pc.entries;
        h_assert_ok(admin, rlock_list_locks(admin, filter, cursor, limit, count_entry,
                                            &pc.entries, next, sizeof next, 0));
        int got = pc.entries - before;
        pc.max_page = got > pc.max_page ? got : pc.max_page;
        pc.pages++;
        memcpy(cursor, next, sizeof cursor);
    } while (cursor[0] != '\0' && pc.pages < max_pages);
    return pc;
}

START_TEST(test_admin_views)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct views v;
    views_start(&v, &f.e);

    char *out = NULL;
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "sessions", "--json", NULL), 0);
    check_sessions_json(&v, out);
    free(out);
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "sessions", "--json", "--page-size", "1",
                              NULL),
                     0);
    check_sessions_json(&v, out);
    free(out);

    int all[LOCKS];
    for (int k = 0; k < LOCKS; k++)
        all[k] = k;
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "locks", "--json", NULL), 0);
    check_locks_json(&v, out, all, LOCKS);
    free(out);
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "locks", "--json", "--page-size", "1",
                              NULL),
                     0);
    check_locks_json(&v, out, all, LOCKS);
    free(out);

    /* Filters: client 1's locks by prefix, then by session. */
    const int of1[] = {4, 5, 6};
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "locks", "--json", "--prefix", "views/1/",
                              NULL),
                     0);
    check_locks_json(&v, out, of1, 3);
    free(out);
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "locks", "--json", "--session",
                              rlock_session_id(v.c[1]), NULL),
                     0);
    check_locks_json(&v, out, of1, 3);
    free(out);
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "locks", "--json", "--prefix", "nothing/",
                              NULL),
                     0);
    ck_assert_uint_eq(actl_count(out), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"count\": 0\n"));
    free(out);

    /* The tables for people. */
    char *sessions = NULL, *locks = NULL;
    ck_assert_int_eq(actl_run(&f.e, NULL, &sessions, NULL, "sessions", NULL), 0);
    ck_assert_int_eq(actl_run(&f.e, NULL, &locks, NULL, "locks", NULL), 0);
    printf("admin: rlockctl sessions:\n%srlockctl locks:\n%s", sessions, locks);
    check_tables(&v, sessions, locks);
    free(sessions);
    free(locks);

    /* The library pages one lock at a time through the same 12. */
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    struct page_count pc = list_all_locks(admin, NULL, 1, 100);
    printf("admin: librlock listed %d locks in %d pages of at most 1\n", pc.entries, pc.pages);
    ck_assert_int_eq(pc.entries, LOCKS);
    ck_assert_int_eq(pc.max_page, 1);
    rlock_close(admin);

    views_stop(&v);
    h_fixture_stop(&f);
}
END_TEST

/* --- many locks ---------------------------------------------------------------------- */

START_TEST(test_admin_many_locks)
{
    struct h_fixture f;
    h_fixture_start(&f, "[session]\nmax_locks = 30000\n");
    int64_t t0 = h_now_ms();
    struct rlock_lock **l = calloc(MANY, sizeof *l);
    ck_assert_ptr_nonnull(l);
    for (int i = 0; i < MANY; i++) {
        char res[32];
        snprintf(res, sizeof res, "many/%d", i);
        l[i] = h_acquire_ok(f.c, res, NULL);
    }
    printf("admin: %d locks held in %lld ms\n", MANY, (long long)(h_now_ms() - t0));

    struct h_pinger pg;
    h_pinger_start(&pg, &f.e, PING_EVERY_MS);
    h_sleep_ms(50);

    const char *args[] = {"locks", "--json", "--page-size", MANY_PAGE, NULL};
    t0 = h_now_ms();
    pid_t pid = actl_start(&f.e, NULL, args);
    char *out = NULL;
    int rc = actl_finish(&f.e, pid, 120000, &out, NULL);
    int64_t took = h_now_ms() - t0;
    struct h_ping_figures ping = h_pinger_stop(&pg, "admin: Ping while rlockctl listed");
    ck_assert_int_eq(rc, 0);

    /* Every lock exactly once. */
    unsigned char *seen = calloc(MANY, 1);
    ck_assert_ptr_nonnull(seen);
    size_t n = 0;
    for (const char *p = actl_first(out); p != NULL; p = actl_next(p), n++) {
        char res[64];
        ck_assert(actl_str(p, "resource", res, sizeof res));
        int i = atoi(res + strlen("many/"));
        ck_assert_msg(strncmp(res, "many/", 5) == 0 && i >= 0 && i < MANY, "stray lock %s", res);
        ck_assert_msg(seen[i]++ == 0, "lock %s listed twice", res);
    }
    ck_assert_uint_eq(n, MANY);
    free(seen);
    free(out);

    printf("admin: `locks --json --page-size %s` listed %d locks in %lld ms (%d pages)\n",
           MANY_PAGE, MANY, (long long)took, MANY / atoi(MANY_PAGE));
    ck_assert_msg(ping.p99_us <= PING_MAX_MS * 1000, "Ping p99 %lld us during the listing",
                  (long long)ping.p99_us);

    /* Pages are bounded: at most 1000 entries whatever the limit asked. */
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    struct page_count pc = list_all_locks(admin, NULL, 5000, 1000);
    printf("admin: limit 5000 gave %d pages, the largest of %d locks\n", pc.pages, pc.max_page);
    ck_assert_int_eq(pc.entries, MANY);
    ck_assert_int_eq(pc.max_page, 1000);

    /*
     * One lock a page through the 1111 locks named many/19...: pages end inside buckets
     * holding two or more of them (with 1111 of 20000 names, some bucket surely does), and
     * the next page must go on after the last lock listed, never list it again.
     */
    struct rlock_lock_filter p19 = {.prefix = "many/19"};
    struct seen_locks sl = {.seen = calloc(MANY, 1)};
    ck_assert_ptr_nonnull(sl.seen);
    char cursor[RLOCK_CURSOR_BYTES] = "", next[RLOCK_CURSOR_BYTES];
    int pages = 0;
    do {
        h_assert_ok(admin, rlock_list_locks(admin, &p19, cursor, 1, seen_entry, &sl, next,
                                            sizeof next, 0));
        memcpy(cursor, next, sizeof cursor);
    } while (cursor[0] != '\0' && ++pages < 5000 && sl.twice == 0);
    ck_assert_msg(sl.twice == 0, "lock %s listed twice by one-lock pages", sl.first_twice);
    ck_assert_int_eq(sl.n, 1111);
    free(sl.seen);

    /* A filter that matches nothing: every request scans a bounded part and says where to go on. */
    struct rlock_lock_filter none = {.prefix = "nothing/"};
    pc = list_all_locks(admin, &none, 0, 1000);
    printf("admin: a filter matching nothing took %d requests over %d locks\n", pc.pages, MANY);
    ck_assert_int_eq(pc.entries, 0);
    ck_assert_int_gt(pc.pages, 1);
    ck_assert_int_lt(pc.pages, 1000);
    rlock_close(admin);

    for (int i = 0; i < MANY; i++)
        rlock_lock_free(l[i]);
    free(l);
    h_fixture_stop(&f);
}
END_TEST

/* --- force release ------------------------------------------------------------------- */

struct waiter {
    struct rlock_client *c;
    const char *resource;
    enum rlock_err rc;
    struct rlock_lock *l;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_acquire_opts o = {.wait_ms = 20000};
    w->rc = rlock_acquire(w->c, w->resource, &o, 0, &w->l);
    return NULL;
}

static int waiter_queued(void *arg)
{
    struct h_env *e = arg;
    struct rlock_stats st;
    h_stats_or_fail(e, &st);
    return st.waiters == 1;
}

START_TEST(test_admin_force_release)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL); /* f.c is the holder; its losses are in f.lost */
    struct rlock_lock *held = h_acquire_ok(f.c, "force/x", NULL);
    char key[256];
    h_lock_key(&f.e, "force/x", key, sizeof key);

    struct waiter w = {.c = h_client_or_fail(&f.e, NULL), .resource = "force/x"};
    struct h_thread wt;
    h_thread_start(&wt, waiter_main, &w);
    ck_assert_msg(h_wait_for(waiter_queued, &f.e, 5000), "the waiter did not queue");

    char *out = NULL, *err = NULL;
    int64_t t0 = h_now_ms();
    int rc = actl_run(&f.e, NULL, &out, &err, "release", "--force", "force/x", NULL);
    ck_assert_msg(rc == 0, "release --force exited %d: %s", rc, err);
    free(err);
    printf("admin: %s", out);
    ck_assert_ptr_nonnull(strstr(out, rlock_session_id(f.c)));
    ck_assert_ptr_nonnull(strstr(out, "1 waiter on this daemon"));
    free(out);

    h_thread_join(&wt, h_now_ms() + 10000, "the waiter was not granted the lock");
    int64_t granted_after = h_now_ms() - t0;
    ck_assert_int_eq(w.rc, RLOCK_OK);
    ck_assert_uint_gt(rlock_lock_fence(w.l), rlock_lock_fence(held));
    h_assert_key_token(f.r, key, rlock_lock_token(w.l));
    for (int i = 0; i < 200 && atomic_load(&f.lost.count) == 0; i++)
        h_sleep_ms(10);
    ck_assert_int_eq(atomic_load(&f.lost.count), 1);
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_FORCED);
    ck_assert_int_eq(rlock_lock_state(held), RLOCK_LOST);
    ck_assert_int_eq(rlock_lock_lost_reason(held), RLOCK_LOST_FORCED);
    printf("admin: the holder was told FORCED, the waiter had the lock %lld ms after the "
           "command started\n",
           (long long)granted_after);

    /* With nobody waiting, the key is gone by the time the command has returned. */
    struct rlock_lock *second = h_acquire_ok(f.c, "force/y", NULL);
    h_lock_key(&f.e, "force/y", key, sizeof key);
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    struct rlock_forced fr;
    h_assert_ok(admin, rlock_force_release(admin, "force/y", 0, &fr));
    ck_assert_str_eq(fr.session_id, rlock_session_id(f.c));
    ck_assert_uint_eq(fr.fence, rlock_lock_fence(second));
    ck_assert_uint_eq(fr.waiters, 0);
    ck_assert_int_ge(h_wait_key_gone(f.r, key, 2000, &f.e), 0);

    /* Not held here: a key another application holds is left alone (exit 66). */
    h_lock_key(&f.e, "force/app", key, sizeof key);
    redisReply *set = redisCommand(f.r, "SET %s app-token PX 30000", key);
    ck_assert_msg(set != NULL && set->type == REDIS_REPLY_STATUS, "SET failed");
    freeReplyObject(set);
    rc = actl_run(&f.e, NULL, &out, &err, "release", "--force", "force/app", NULL);
    ck_assert_int_eq(rc, 66);
    ck_assert_ptr_nonnull(strstr(err, "NOT_HELD"));
    h_assert_key_token(f.r, key, "app-token");
    free(out);
    free(err);
    ck_assert_int_eq(rlock_force_release(admin, "force/app", 0, NULL), RLOCK_ERR_NOT_HELD);

    rlock_close(admin);
    rlock_lock_free(second);
    rlock_lock_free(held);
    rlock_lock_free(w.l);
    rlock_close(w.c);
    h_fixture_stop(&f);
}
END_TEST

/* --- kill session -------------------------------------------------------------------- */

static int client_ended(void *arg)
{
    return !rlock_client_alive(arg);
}

START_TEST(test_admin_kill_session)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nlock_delay = 30s\n"); /* a kill must not leave tombstones */
    struct rlock_lock *l[3];
    char keys[3][256];
    for (int i = 0; i < 3; i++) {
        char res[32];
        snprintf(res, sizeof res, "kill/%d", i);
        l[i] = h_acquire_ok(f.c, res, NULL);
        h_lock_key(&f.e, res, keys[i], sizeof keys[i]);
    }
    char id[64];
    snprintf(id, sizeof id, "%s", rlock_session_id(f.c));

    char *out = NULL, *err = NULL;
    int rc = actl_run(&f.e, NULL, &out, &err, "kill-session", "--json", id, NULL);
    ck_assert_msg(rc == 0, "kill-session exited %d: %s", rc, err);
    free(err);
    char want[160];
    snprintf(want, sizeof want, "{\"session_id\": \"%s\", \"locks_released\": 3}\n", id);
    ck_assert_str_eq(out, want);
    free(out);

    ck_assert_msg(h_wait_for(client_ended, f.c, 5000), "the killed client's session goes on");
    ck_assert_int_eq(rlock_ping(f.c, 0, NULL), RLOCK_ERR_CLOSED);
    ck_assert_msg(strstr(rlock_last_error()->message, "ended by an operator") != NULL,
                  "the client was not told why: %s", rlock_last_error()->message);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_ge(h_wait_key_gone(f.r, keys[i], 2000, &f.e), 0);
        ck_assert_int_eq(rlock_lock_state(l[i]), RLOCK_LOST);
        rlock_lock_free(l[i]);
    }
    ck_assert_int_eq(h_wait_stats(&f.e, 0, 0, 5000, NULL), 0);

    /* It is gone from the list; a second kill finds nothing (exit 66). */
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, NULL, "sessions", "--json", NULL), 0);
    ck_assert_ptr_null(strstr(out, id));
    free(out);
    rc = actl_run(&f.e, NULL, &out, &err, "kill-session", id, NULL);
    ck_assert_int_eq(rc, 66);
    ck_assert_ptr_nonnull(strstr(err, "NOT_FOUND"));
    free(out);
    free(err);
    h_fixture_stop(&f);
}
END_TEST

/* --- protocol details ---------------------------------------------------------------- */

/* Send req on raw and return its response (the caller frees the message). */
static Rlock__V1__ServerMessage *raw_call(struct h_raw *raw, Rlock__V1__Request *req)
{
    ck_assert_int_eq(h_raw_send(raw, req), 0);
    for (;;) {
        Rlock__V1__ServerMessage *m = NULL;
        ck_assert_int_eq(h_raw_read(raw, h_now_ms() + 5000, &m), 1);
        const Rlock__V1__Response *r = h_raw_response(m);
        if (r != NULL && r->id == req->id)
            return m;
        h_raw_free(m);
    }
}

static int count_session(const struct rlock_session_entry *e, void *arg)
{
    (void)e;
    (*(int *)arg)++;
    return 0;
}

START_TEST(test_admin_protocol)
{
    struct h_fixture f;
    /* The smallest output bound: pages of at most 16 KiB of entries. */
    h_fixture_start(&f, "[server]\nmax_output_bytes = 65536\n[session]\nmax_locks = 2000\n");
    char name[420];
    memset(name, 'n', sizeof name);
    struct rlock_lock *l[300];
    for (int i = 0; i < 300; i++) {
        snprintf(name + 400, 20, "%04d", i);
        l[i] = h_acquire_ok(f.c, name, NULL);
    }
    struct h_raw raw;
    h_raw_session(&raw, &f.e, "admin-raw");

    /* limit 1000, long names: the page stops at the byte bound, not at the limit. */
    Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
    ll.limit = 1000;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 2;
    req.body_case = RLOCK__V1__REQUEST__BODY_LIST_LOCKS;
    req.list_locks = &ll;
    Rlock__V1__ServerMessage *m = raw_call(&raw, &req);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_int_eq(r->status, RLOCK__V1__STATUS__STATUS_OK);
    size_t bytes = rlock__v1__server_message__get_packed_size(m);
    printf("admin: limit 1000 with 400-byte names: %zu locks, %zu bytes in the first page\n",
           r->list_locks->n_locks, bytes);
    ck_assert_uint_gt(r->list_locks->n_locks, 0);
    ck_assert_uint_lt(r->list_locks->n_locks, 300);
    ck_assert_uint_le(bytes, 16384 + 1024);
    ck_assert_str_ne(r->list_locks->next_cursor, "");
    h_raw_free(m);

    /* limit 0: 100. */
    ll.limit = 0;
    ll.prefix = "nnnn";
    req.id = 3;
    m = raw_call(&raw, &req);
    r = h_raw_response(m);
    ck_assert_int_eq(r->status, RLOCK__V1__STATUS__STATUS_OK);
    ck_assert_uint_le(r->list_locks->n_locks, 100);
    h_raw_free(m);

    /* Cursors the daemon did not issue, or of the other listing. */
    const char *bad[] = {"x", "b", "bzz", "b1.2", "b1.2.3.4.5", "s12", "b12345678901234567", ""};
    for (int i = 0; bad[i][0] != '\0'; i++) {
        ll.cursor = (char *)bad[i];
        req.id = 10 + (uint64_t)i;
        m = raw_call(&raw, &req);
        ck_assert_msg(h_raw_response(m)->status == RLOCK__V1__STATUS__STATUS_INVALID,
                      "cursor \"%s\" accepted", bad[i]);
        h_raw_free(m);
    }
    Rlock__V1__ListSessions ls = RLOCK__V1__LIST_SESSIONS__INIT;
    ls.cursor = "b0";
    req.id = 30;
    req.body_case = RLOCK__V1__REQUEST__BODY_LIST_SESSIONS;
    req.list_sessions = &ls;
    m = raw_call(&raw, &req);
    ck_assert_int_eq(h_raw_response(m)->status, RLOCK__V1__STATUS__STATUS_INVALID);
    h_raw_free(m);

    /* Sessions page by page (one each): all three (harness client, raw, this admin client). */
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    char cursor[RLOCK_CURSOR_BYTES] = "", next[RLOCK_CURSOR_BYTES];
    int n = 0;
    do {
        h_assert_ok(admin, rlock_list_sessions(admin, cursor, 1, count_session, &n, next,
                                               sizeof next, 0));
        memcpy(cursor, next, sizeof cursor);
    } while (cursor[0] != '\0');
    ck_assert_int_eq(n, 3);

    /* ForceRelease with a token that is not the holder's changes nothing. */
    Rlock__V1__ForceRelease fr = RLOCK__V1__FORCE_RELEASE__INIT;
    fr.resource = (char *)rlock_lock_resource(l[0]);
    fr.token = "not-the-token";
    req.id = 40;
    req.body_case = RLOCK__V1__REQUEST__BODY_FORCE_RELEASE;
    req.force_release = &fr;
    m = raw_call(&raw, &req);
    ck_assert_int_eq(h_raw_response(m)->status, RLOCK__V1__STATUS__STATUS_NOT_HELD);
    h_raw_free(m);
    ck_assert_int_eq(rlock_lock_state(l[0]), RLOCK_HELD);

    /* A session may end itself: the reply first, then SessionClosing, then EOF. */
    Rlock__V1__KillSession ks = RLOCK__V1__KILL_SESSION__INIT;
    char raw_id[64] = "";
    {
        /* The raw session's id: the one named admin-raw. */
        Rlock__V1__ListSessions all = RLOCK__V1__LIST_SESSIONS__INIT;
        req.id = 50;
        req.body_case = RLOCK__V1__REQUEST__BODY_LIST_SESSIONS;
        req.list_sessions = &all;
        m = raw_call(&raw, &req);
        const Rlock__V1__ListSessionsReply *lr = h_raw_response(m)->list_sessions;
        ck_assert_uint_eq(lr->total, 3);
        for (size_t i = 0; i < lr->n_sessions; i++)
            if (strcmp(lr->sessions[i]->client_name, "admin-raw") == 0)
                snprintf(raw_id, sizeof raw_id, "%s", lr->sessions[i]->session_id);
        h_raw_free(m);
    }
    ck_assert_str_ne(raw_id, "");
    ks.session_id = raw_id;
    req.id = 51;
    req.body_case = RLOCK__V1__REQUEST__BODY_KILL_SESSION;
    req.kill_session = &ks;
    m = raw_call(&raw, &req);
    ck_assert_int_eq(h_raw_response(m)->status, RLOCK__V1__STATUS__STATUS_OK);
    h_raw_free(m);
    ck_assert_int_eq(h_raw_read(&raw, h_now_ms() + 5000, &m), 1);
    ck_assert_int_eq(m->body_case, RLOCK__V1__SERVER_MESSAGE__BODY_EVENT);
    ck_assert_int_eq(m->event->body_case, RLOCK__V1__EVENT__BODY_SESSION_CLOSING);
    ck_assert_str_eq(m->event->session_closing->reason, "ended by an operator");
    h_raw_free(m);
    ck_assert_int_eq(h_raw_read(&raw, h_now_ms() + 5000, &m), 0);
    h_raw_close(&raw);

    rlock_close(admin);
    for (int i = 0; i < 300; i++)
        rlock_lock_free(l[i]);
    h_fixture_stop(&f);
}
END_TEST

/* --- the times a listing gives, and a filter by a session that has ended ------------ */

struct times {
    const char *session_id;
    uint64_t at_ms;
    int n;
};

static int session_time(const struct rlock_session_entry *e, void *arg)
{
    struct times *t = arg;
    if (strcmp(e->id, t->session_id) == 0) {
        t->at_ms = e->connected_at_ms;
        t->n++;
    }
    return 0;
}

static int lock_time(const struct rlock_lock_entry *e, void *arg)
{
    struct times *t = arg;
    t->at_ms = e->acquired_at_ms;
    t->n++;
    return 0;
}

/* at (a daemon's wall-clock stamp) lies between before and now, give or take a second. */
static void assert_between(uint64_t at, int64_t before, const char *what)
{
    int64_t now = h_wall_ms();
    ck_assert_msg((int64_t)at >= before - 1000 && (int64_t)at <= now + 1000,
                  "%s is %lld ms off the time it happened (between %lld and %lld)", what,
                  (long long)((int64_t)at - now), (long long)before, (long long)now);
}

START_TEST(test_admin_times)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *admin = h_client_or_fail(&f.e, NULL);
    struct rlock_server_info info;
    h_assert_ok(admin, rlock_server_info(admin, 0, &info));
    assert_between(info.started_at_ms, h_wall_ms() - 60000, "ServerInfo.started_at");

    h_sleep_ms(1500); /* a stamp of "now" would no longer pass for the connect or the grant */
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    int64_t connected = h_wall_ms();
    struct rlock_lock *l = h_acquire_ok(c, "times/1", NULL);
    char id[64], next[RLOCK_CURSOR_BYTES];
    snprintf(id, sizeof id, "%s", rlock_session_id(c));
    h_sleep_ms(1500);

    struct times t = {.session_id = id};
    h_assert_ok(admin, rlock_list_sessions(admin, NULL, 0, session_time, &t, next, sizeof next, 0));
    ck_assert_int_eq(t.n, 1);
    assert_between(t.at_ms, connected - 1500, "a session's connected_at");
    ck_assert_msg((int64_t)t.at_ms <= connected + 100, "connected_at is after the connect");
    struct rlock_lock_filter only = {.session_id = id};
    t = (struct times){.session_id = id};
    h_assert_ok(admin, rlock_list_locks(admin, &only, NULL, 0, lock_time, &t, next, sizeof next, 0));
    ck_assert_int_eq(t.n, 1);
    assert_between(t.at_ms, connected, "a lock's acquired_at");
    ck_assert_msg(h_wall_ms() - (int64_t)t.at_ms >= 1000, "acquired_at is not when it was granted");

    /* Another session keeps a lock; the filter by the ended one must find nothing. */
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *ol = h_acquire_ok(other, "times/other", NULL);
    h_assert_ok(c, rlock_release(l, 0));
    rlock_lock_free(l);
    rlock_close(c);
    ck_assert_int_eq(h_wait_stats(&f.e, 1, 0, 5000, NULL), 0);
    t = (struct times){.session_id = id};
    h_assert_ok(admin, rlock_list_locks(admin, &only, NULL, 0, lock_time, &t, next, sizeof next, 0));
    ck_assert_msg(t.n == 0, "the locks of a session that has ended: %d listed", t.n);
    rlock_lock_free(ol);
    rlock_close(other);
    rlock_close(admin);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_admin_views,        test_admin_many_locks, test_admin_force_release,
                            test_admin_kill_session, test_admin_protocol,   test_admin_times};
    return h_run_tests("admin", 240, tests, H_LEN(tests));
}
