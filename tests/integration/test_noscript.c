/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_noscript.c — SCRIPT FLUSH under load is invisible to clients.
 *
 * Four threads, each with its own session, take and give back locks on their
 * own resources as fast as they can while the main thread empties Redis'
 * script cache ten times. The daemon must answer NOSCRIPT by re-sending the
 * script (EVAL) so that not a single call fails, and must count the reloads.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define WORKERS 4
#define RUN_MS 4000
#define FLUSHES 10
#define CALL_TIMEOUT_MS 5000u

struct worker {
    struct rlock_client *c;
    int id;
    atomic_int *stop;
    long pairs;             /* acquire + release pairs that both succeeded */
    long failures;          /* calls that returned anything but RLOCK_OK */
    char first_error[300];
    struct h_thread thread;
};

static void note_failure(struct worker *w, const char *what, const char *res, enum rlock_err rc)
{
    if (w->failures++ == 0) {
        char msg[160];
        rlock_errmsg(w->c, msg, sizeof msg);
        snprintf(w->first_error, sizeof w->first_error, "%s %s: %s (%s)", what, res,
                 rlock_strerror(rc), msg);
    }
}

/* Alternate try-acquires and short waits over a few resources of this worker's own. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (long n = 0; !atomic_load(w->stop); n++) {
        char res[64];
        snprintf(res, sizeof res, "noscript/%d/%ld", w->id, n % 8);
        struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = (n & 1) ? 200 : 0};
        struct rlock_lock *l = NULL;
        enum rlock_err rc = rlock_acquire(w->c, res, &o, CALL_TIMEOUT_MS, &l);
        if (rc != RLOCK_OK) {
            note_failure(w, "acquire", res, rc);
            continue;
        }
        rc = rlock_release(l, CALL_TIMEOUT_MS);
        rlock_lock_free(l);
        if (rc != RLOCK_OK)
            note_failure(w, "release", res, rc);
        else
            w->pairs++;
    }
    return NULL;
}

/* SCRIPT FLUSH, checked. */
static void script_flush(redisContext *r)
{
    redisReply *rep = redisCommand(r, "SCRIPT FLUSH");
    ck_assert_msg(rep != NULL, "SCRIPT FLUSH: %s", r->errstr);
    ck_assert_msg(rep->type == REDIS_REPLY_STATUS, "SCRIPT FLUSH: reply type %d %s", rep->type,
                  rep->str ? rep->str : "");
    freeReplyObject(rep);
}

START_TEST(test_noscript)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);

    static struct worker w[WORKERS];
    atomic_int stop;
    atomic_init(&stop, 0);
    for (int i = 0; i < WORKERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].c = h_client_or_fail(&f.e, NULL);
        w[i].id = i;
        w[i].stop = &stop;
    }
    int64_t t0 = h_now_ms();
    for (int i = 0; i < WORKERS; i++)
        h_thread_start(&w[i].thread, worker_main, &w[i]);

    /* Spread the flushes over the run so that each lands among live traffic. */
    for (int i = 1; i <= FLUSHES; i++) {
        int64_t at = t0 + (int64_t)RUN_MS * i / (FLUSHES + 1);
        int64_t now = h_now_ms();
        if (at > now)
            h_sleep_ms((int)(at - now));
        script_flush(f.r);
    }
    int64_t left = t0 + RUN_MS - h_now_ms();
    if (left > 0)
        h_sleep_ms((int)left);
    atomic_store(&stop, 1);
    int64_t stop_deadline = h_now_ms() + 15000;
    for (int i = 0; i < WORKERS; i++)
        h_thread_join(&w[i].thread, stop_deadline, "workers still blocked 15 s after stop");

    long pairs = 0, failures = 0;
    for (int i = 0; i < WORKERS; i++) {
        printf("noscript: worker %d: %ld acquire/release pairs, %ld failed calls%s%s\n", i,
               w[i].pairs, w[i].failures, w[i].failures ? "; first: " : "", w[i].first_error);
        pairs += w[i].pairs;
        failures += w[i].failures;
    }

    struct rlock_stats st;
    ck_assert_int_eq(rlock_stats(w[0].c, CALL_TIMEOUT_MS, &st), RLOCK_OK);
    printf("noscript: %ld pairs in %d ms with %d SCRIPT FLUSH; %ld failed calls; "
           "script_reloads %llu\n",
           pairs, RUN_MS, FLUSHES, failures, (unsigned long long)st.script_reloads);
    fflush(stdout);
    ck_assert_int_eq(failures, 0);
    for (int i = 0; i < WORKERS; i++)
        ck_assert_msg(w[i].pairs > 0, "worker %d completed no pair", i);
    ck_assert_uint_gt(st.script_reloads, 0);

    for (int i = 0; i < WORKERS; i++)
        rlock_close(w[i].c);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_noscript };
    return h_run_tests("integration_noscript", 60, tests, H_LEN(tests));
}
