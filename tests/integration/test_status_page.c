/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_status_page.c — the status page on the metrics endpoint (/status,
 * /status.json; docs/operations.md "The status page"), in a real headless
 * Chromium (harness_browser.h) against a live rlockd with known locks and
 * waiters:
 *
 *  - page: with [auth] tokens the page asks for a token, refuses a client
 *    token, then with an admin token shows the sessions, locks and waiters
 *    the daemon counts, the resource waited for with its holder's client
 *    name, session and queue, and Redis healthy; names made of markup show
 *    as text (no element made of them, the title untouched); the figures
 *    follow a release without the page being reloaded; Redis killed shows
 *    "down" and back "healthy"; rlockd stopped (SIGSTOP) shows that it does
 *    not answer, and the page recovers on SIGCONT. A screenshot is kept in
 *    the env's dir (and copied to $RLOCK_STATUS_SCREENSHOT when set: that is
 *    how docs/status-page.png is made);
 *  - gate: /status.json answers 401 (with WWW-Authenticate) without a token,
 *    with an unknown one or another scheme, 403 to a client token, 400 to two
 *    Authorization headers, 200 to an admin token; each refusal counted under
 *    rlockd_http_requests_refused_total{reason="unauthorized"}; the page's
 *    files are served to anyone with a policy allowing no inline script;
 *  - open: without tokens the document needs none.
 */
#include "harness.h"
#include "harness_browser.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ADMIN_TOKEN "status-admin-token-0001"
#define CLIENT_TOKEN "status-client-token-0001"
#define AUTH_INI "[auth]\ntokens = admin " ADMIN_TOKEN ", client " CLIENT_TOKEN "\n"
/* A name of markup, as a resource and as a client name: it must show as text. */
#define MARKUP "<img src=x onerror=\"document.title='owned'\">\"\\"

static struct rlock_client *client(struct h_env *e, const char *name, const char *token)
{
    struct rlock_options o = {.client_name = name, .auth_token = token};
    return h_client_or_fail(e, &o);
}

/* An acquire waiting (up to a minute) on its own thread and session; released at once. */
struct waiter {
    struct h_env *e;
    const char *resource;
    enum rlock_err rc;
    pthread_t t;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    struct rlock_options opt = {.client_name = "queued-worker", .auth_token = CLIENT_TOKEN};
    struct rlock_client *c = h_client(w->e, &opt);
    if (c == NULL) {
        w->rc = RLOCK_ERR_CONNECT;
        return NULL;
    }
    struct rlock_acquire_opts o = {.ttl_ms = 30000, .wait_ms = 60000};
    struct rlock_lock *l = NULL;
    w->rc = rlock_acquire(c, w->resource, &o, 0, &l);
    if (w->rc == RLOCK_OK) {
        w->rc = rlock_release(l, 5000);
        rlock_lock_free(l);
    }
    rlock_close(c);
    return NULL;
}

static void waiter_start(struct waiter *w, struct h_env *e, const char *resource)
{
    *w = (struct waiter){.e = e, .resource = resource};
    ck_assert_int_eq(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

static void waiter_join(struct waiter *w)
{
    ck_assert_int_eq(pthread_join(w->t, NULL), 0);
    ck_assert_msg(w->rc == RLOCK_OK, "a queued acquire of %s ended with %s", w->resource,
                  rlock_strerror(w->rc));
}

/* Wait until the page's element id shows text (the page redraws every second). */
static void page_shows(struct h_browser *b, const char *id, const char *text)
{
    if (h_browser_try(b, "until 20000 document.getElementById('%s').textContent === '%s'", id,
                      text) != 0) {
        char why[sizeof b->buf];
        memcpy(why, b->buf, sizeof why);
        ck_abort_msg("the page's #%s shows '%s', not '%s' (%s)", id,
                     h_browser(b, "js document.getElementById('%s').textContent", id), text, why);
    }
}

/* The text of the cell cls of the row of resource in table id ("" without one). */
static const char *row_cell(struct h_browser *b, const char *table, const char *resource,
                            const char *cls)
{
    return h_browser(b,
                     "js (function () { for (const r of document.querySelectorAll('#%s tbody tr'))"
                     " if (r.dataset.resource === %s) return r.querySelector('.%s').textContent;"
                     " return ''; })()",
                     table, resource, cls);
}

static void keep_screenshot(struct h_browser *b, struct h_env *e)
{
    char path[400];
    h_env_path(e, "status-page.png", path, sizeof path);
    h_browser(b, "shot %s", path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_msg(st.st_size > 10000, "the screenshot has %lld bytes", (long long)st.st_size);
    char *png = h_read_file(path);
    ck_assert_ptr_nonnull(png);
    ck_assert_msg(memcmp(png, "\x89PNG", 4) == 0, "the screenshot is not a PNG");
    free(png);
    const char *keep = getenv("RLOCK_STATUS_SCREENSHOT");
    if (keep != NULL && keep[0] != '\0') {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, keep);
        ck_assert_int_eq(system(cmd), 0);
    }
}

START_TEST(test_page)
{
    int port = h_free_port();
    char ini[512];
    snprintf(ini, sizeof ini, AUTH_INI "[metrics]\nlisten = 127.0.0.1:%d\n", port);
    struct h_env e;
    ck_assert_int_eq(h_env_start(&e, ini), 0);
    struct rlock_client *admin = client(&e, "status-test", ADMIN_TOKEN);
    struct rlock_client *bot = client(&e, "deploy-bot", CLIENT_TOKEN);
    struct rlock_client *odd = client(&e, MARKUP, CLIENT_TOKEN);
    struct rlock_acquire_opts ho = {.ttl_ms = 30000};
    struct rlock_lock *held = h_acquire_ok(bot, "orders/eu-west", &ho);
    struct rlock_lock *odd_held = h_acquire_ok(odd, MARKUP, &ho);
    struct waiter w[3];
    waiter_start(&w[0], &e, "orders/eu-west");
    waiter_start(&w[1], &e, "orders/eu-west");
    ck_assert_int_ge(h_wait_stats_of(admin, 2, 2, 10000, NULL), 0);
    waiter_start(&w[2], &e, MARKUP);
    struct rlock_stats st;
    ck_assert_int_ge(h_wait_stats_of(admin, 2, 3, 10000, &st), 0);
    ck_assert_uint_eq(st.sessions, 6); /* admin, bot, odd, three waiters */

    struct h_browser b;
    h_browser_start(&b, &e);
    /* No token: the page asks for one and shows nothing else. */
    h_browser(&b, "open http://127.0.0.1:%d/status", port);
    h_browser(&b, "until 20000 !document.getElementById('login').hidden");
    ck_assert_str_eq(h_browser(&b, "js String(document.getElementById('main').hidden)"), "true");
    /* A client token is not enough. */
    h_browser(&b, "type #token " CLIENT_TOKEN);
    h_browser(&b, "click #login button");
    h_browser(&b, "until 20000 document.getElementById('login-why').textContent"
                  ".includes('not an admin token')");
    h_browser(&b, "type #token " ADMIN_TOKEN);
    h_browser(&b, "click #login button");
    h_browser(&b, "until 20000 Number(document.body.dataset.updates) >= 1");
    ck_assert_str_eq(h_browser(&b, "js String(document.getElementById('login').hidden)"), "true");

    /* The numbers the daemon counts. */
    page_shows(&b, "sessions", "6");
    page_shows(&b, "locks", "2");
    page_shows(&b, "waiters", "3");
    page_shows(&b, "lost", "0");
    page_shows(&b, "redis-health", "healthy");
    char ready[64];
    snprintf(ready, sizeof ready, "%u of %u", st.redis_connections, st.redis_connections);
    page_shows(&b, "redis-ready", ready);
    /* Waiting now: the resource with two queued first, its holder named. */
    h_browser(&b, "until 20000 [...document.querySelectorAll('#waiting tbody tr')]"
                  ".map(r => r.dataset.resource)[0] === 'orders/eu-west'");
    ck_assert_str_eq(row_cell(&b, "waiting", "'orders/eu-west'", "waiters"), "2");
    char who[128];
    snprintf(who, sizeof who, "deploy-bot · session %.8s · owner", rlock_session_id(bot));
    const char *holder = row_cell(&b, "waiting", "'orders/eu-west'", "holder");
    ck_assert_msg(strncmp(holder, who, strlen(who)) == 0, "holder cell: '%s', not '%s...'",
                  holder, who);
    /* Markup in names is text: the cells show it, no element came of it. */
    const char *markup = "'<img src=x onerror=\"document.title=\\'owned\\'\">\"\\\\'";
    ck_assert_str_eq(row_cell(&b, "waiting", markup, "resource"), MARKUP);
    holder = row_cell(&b, "waiting", markup, "holder");
    ck_assert_msg(strncmp(holder, MARKUP " · session", strlen(MARKUP " · session")) == 0,
                  "holder cell of the markup: '%s'", holder);
    ck_assert_str_eq(h_browser(&b, "js document.title"), "rlockd status");
    ck_assert_str_eq(h_browser(&b, "js String(document.images.length)"), "0");
    keep_screenshot(&b, &e);

    /* The page follows a release by itself (the same document: the marker stays). */
    h_browser(&b, "js (window.sameDocument = 'yes')");
    ck_assert_int_eq(rlock_release(held, 5000), RLOCK_OK);
    rlock_lock_free(held);
    waiter_join(&w[0]);
    waiter_join(&w[1]);
    page_shows(&b, "locks", "1");
    page_shows(&b, "waiters", "1");
    h_browser(&b, "until 20000 ![...document.querySelectorAll('#waiting tbody tr')]"
                  ".some(r => r.dataset.resource === 'orders/eu-west')");
    h_browser(&b, "until 20000 [...document.querySelectorAll('#top tbody tr')]"
                  ".some(r => r.dataset.resource === 'orders/eu-west' &&"
                  " r.querySelector('.contended').textContent === '2')");
    ck_assert_str_eq(h_browser(&b, "js window.sameDocument"), "yes");

    /* rlockd stopped: the page says it does not answer, and recovers. */
    h_rlockd_sigstop(&e);
    h_browser(&b, "until 30000 !document.getElementById('error').hidden");
    ck_assert_ptr_nonnull(strstr(h_browser(&b, "js document.getElementById('error').textContent"),
                                 "does not answer"));
    h_rlockd_sigcont(&e);
    h_browser(&b, "until 30000 document.getElementById('error').hidden");

    /* Redis gone: down; back: healthy. */
    ck_assert_int_eq(h_redis_kill(&e), 0);
    page_shows(&b, "redis-health", "down");
    ck_assert_int_eq(h_redis_start(&e), 0);
    page_shows(&b, "redis-health", "healthy");

    h_browser_stop(&b);
    ck_assert_int_eq(rlock_release(odd_held, 5000) == RLOCK_OK ||
                         rlock_lock_state(odd_held) == RLOCK_LOST, 1);
    rlock_lock_free(odd_held);
    waiter_join(&w[2]);
    rlock_close(odd);
    rlock_close(bot);
    rlock_close(admin);
    h_env_stop(&e);
}
END_TEST

/* A request of path with the extra header lines (each ending "\r\n") on e's endpoint. */
static void get(const struct h_env *e, const char *path, const char *headers,
                struct h_http_reply *r)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, headers);
    ck_assert_int_eq(h_http_request(e->metrics_sock, req, (size_t)n, 10000, r), 0);
}

static void expect_status(const struct h_env *e, const char *headers, int code)
{
    struct h_http_reply r;
    get(e, "/status.json", headers, &r);
    ck_assert_msg(r.status == code, "/status.json with '%s': %d, not %d (%s)", headers, r.status,
                  code, r.body);
    if (code == 401)
        ck_assert_ptr_nonnull(strstr(r.head, "\r\nWWW-Authenticate: Bearer realm=\"rlockd\""));
    if (code != 200)
        ck_assert_ptr_null(strstr(r.body, "\"sessions\""));
    h_http_free(&r);
}

START_TEST(test_gate)
{
    struct h_fixture f;
    h_fixture_start_env(&f, AUTH_INI);
    f.c = client(&f.e, "gate", CLIENT_TOKEN);
    expect_status(&f.e, "", 401);
    expect_status(&f.e, "Authorization: Bearer " CLIENT_TOKEN "\r\n", 403);
    expect_status(&f.e, "Authorization: Bearer status-wrong-token-0001\r\n", 401);
    expect_status(&f.e, "Authorization: Basic " ADMIN_TOKEN "\r\n", 401);
    expect_status(&f.e, "Authorization: Bearer " ADMIN_TOKEN "\r\n"
                        "Authorization: Bearer " ADMIN_TOKEN "\r\n", 400);
    ck_assert_int_eq((int)h_metric(&f.e, "rlockd_http_requests_refused_total"
                                         "{reason=\"unauthorized\"}"), 4);
    struct h_http_reply r;
    get(&f.e, "/status.json", "Authorization:   Bearer " ADMIN_TOKEN "  \r\n", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.head, "\r\nContent-Type: application/json"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"sessions\":1,"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"auth\":true"));
    h_http_free(&r);
    /* The page's files: to anyone, under a policy that allows no inline script. */
    static const char *const files[] = {"/", "/status", "/status.js", "/status.css"};
    for (size_t i = 0; i < H_LEN(files); i++) {
        get(&f.e, files[i], "", &r);
        ck_assert_msg(r.status == 200, "%s: %d", files[i], r.status);
        ck_assert_ptr_nonnull(strstr(r.head, "\r\nContent-Security-Policy: default-src 'none'; "
                                             "script-src 'self';"));
        ck_assert_ptr_nonnull(strstr(r.head, "\r\nX-Content-Type-Options: nosniff"));
        if (i < 2) { /* the page: one script, from a file */
            ck_assert_ptr_nonnull(strstr(r.body, "<script src=\"status.js\""));
            ck_assert_ptr_null(strstr(strstr(r.body, "<script") + 1, "<script"));
        }
        h_http_free(&r);
    }
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_open)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_http_reply r;
    get(&f.e, "/status.json", "", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"auth\":false"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"redis\":{\"topology\":\"single\""));
    h_http_free(&r);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_page, test_gate, test_open};
    return h_run_tests("status_page", 300, tests, H_LEN(tests));
}
