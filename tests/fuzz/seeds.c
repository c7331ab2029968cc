/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seeds.c — writes the generated part of the seed corpora:
 *
 *   fuzz_seeds tests/fuzz/corpus
 *
 * fuzz_request/        request frames packed by the generated protobuf code
 * fuzz_client_frames/  server frames answering the calls fuzz_client_frames.c
 *                      has in flight (ids 1 to 9), and events
 * fuzz_reply/          RESP replies as redis-server 7.0 sends them to the
 *                      scripts (captured from it), and a few shapes it never
 *                      sends
 *
 * The config corpus is plain files, written by hand. Files already there
 * are overwritten; other files (regression inputs) are left alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "explicit.h"
#include "wire.h"

#define TOKEN "0b5c9a0e-8f7a-4d0c-9d35-2f8a4c1e7b21"

/* Where seeds go, and how many could not be written. */
struct corpus {
    const char *dir;
    int failures;
};

static void put(struct corpus *c, const char *target, const char *name, const void *data,
                size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        c->failures++;
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s", c->dir, target, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        c->failures++;
    }
}

/* A stream of frames under construction. */
struct stream {
    uint8_t buf[4096];
    size_t len;
};

static void append(struct stream *st, const uint8_t *frame, size_t len)
{
    if (frame == NULL || st->len + len > sizeof st->buf) {
        fprintf(stderr, "seeds: frame does not fit\n");
        exit(EXIT_FAILURE);
    }
    memcpy(st->buf + st->len, frame, len);
    st->len += len;
    free((void *)frame);
}

static void add_request(struct stream *st, const Rlock__V1__Request *req)
{
    size_t len;
    const uint8_t *frame = wire_pack_request(req, &len);
    append(st, frame, len);
}

static void add_server(struct stream *st, const Rlock__V1__ServerMessage *m)
{
    size_t len;
    const uint8_t *frame = wire_pack_server_message(m, &len);
    append(st, frame, len);
}

/* --- requests ------------------------------------------------------------------- */

/* req alone as the seed name, and appended to session (when not NULL). */
/* req as encoders that write every default encode it (protobufjs): one frame into st. */
static void add_request_explicit(struct stream *st, const Rlock__V1__Request *req)
{
    size_t len = pb_encode_explicit(&req->base, NULL);
    uint8_t *frame = len != SIZE_MAX ? malloc(WIRE_HEADER_BYTES + len) : NULL;
    if (frame == NULL) {
        fprintf(stderr, "seeds: cannot encode %s with explicit defaults\n",
                req->base.descriptor->name);
        exit(EXIT_FAILURE);
    }
    wire_put_len(frame, (uint32_t)len);
    (void)pb_encode_explicit(&req->base, frame + WIRE_HEADER_BYTES);
    append(st, frame, WIRE_HEADER_BYTES + len); /* frees frame */
}

/* req alone as the seed name, as NAME-explicit with every default written, and appended
 * to session (when not NULL). */
static void request_seed(struct corpus *c, const char *name, const Rlock__V1__Request *req,
                         struct stream *session)
{
    struct stream st = {.len = 0};
    add_request(&st, req);
    put(c, "fuzz_request", name, st.buf, st.len);
    st.len = 0;
    add_request_explicit(&st, req);
    char explicit_name[96];
    snprintf(explicit_name, sizeof explicit_name, "%s-explicit", name);
    put(c, "fuzz_request", explicit_name, st.buf, st.len);
    if (session != NULL)
        add_request(session, req);
}

static void request_seeds(struct corpus *c)
{
    /* Every operation once, ids 1 to 8, which also make a session's worth in one stream. */
    struct stream session = {.len = 0};
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    hello.client_name = "billing-worker-7";
    hello.protocol_version = 1;
    hello.session_timeout_ms = 15000;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &hello;
    request_seed(c, "hello", &req, &session);
    hello.auth_token = "s3cret";
    hello.client_name = "caf\xc3\xa9 \xe2\x9c\x93";
    request_seed(c, "hello-utf8-auth", &req, NULL);

    Rlock__V1__Acquire acq = RLOCK__V1__ACQUIRE__INIT;
    acq.resource = "orders/42";
    acq.ttl_ms = 30000;
    acq.wait_ms = 5000;
    acq.watchdog_off = 1;
    acq.owner = 0x8000000000001234ull;
    acq.no_reentry = 1;
    acq.max_hold_ms = 600000;
    acq.lock_delay_ms = 2000;
    req.id = 2;
    req.body_case = RLOCK__V1__REQUEST__BODY_ACQUIRE;
    req.acquire = &acq;
    request_seed(c, "acquire-all-fields", &req, &session);
    Rlock__V1__Acquire plain = RLOCK__V1__ACQUIRE__INIT;
    plain.resource = "cron:nightly-report";
    req.acquire = &plain;
    request_seed(c, "acquire-defaults", &req, NULL);

    Rlock__V1__Release rel = RLOCK__V1__RELEASE__INIT;
    rel.resource = "orders/42";
    rel.token = TOKEN;
    req.id = 3;
    req.body_case = RLOCK__V1__REQUEST__BODY_RELEASE;
    req.release = &rel;
    request_seed(c, "release", &req, &session);

    Rlock__V1__Extend ext = RLOCK__V1__EXTEND__INIT;
    ext.resource = "orders/42";
    ext.ttl_ms = 60000;
    ext.token = TOKEN;
    req.id = 4;
    req.body_case = RLOCK__V1__REQUEST__BODY_EXTEND;
    req.extend = &ext;
    request_seed(c, "extend", &req, &session);

    Rlock__V1__Cancel cancel = RLOCK__V1__CANCEL__INIT;
    cancel.request_id = 2;
    req.id = 5;
    req.body_case = RLOCK__V1__REQUEST__BODY_CANCEL;
    req.cancel = &cancel;
    request_seed(c, "cancel", &req, &session);

    Rlock__V1__Ping ping = RLOCK__V1__PING__INIT;
    req.id = 6;
    req.body_case = RLOCK__V1__REQUEST__BODY_PING;
    req.ping = &ping;
    request_seed(c, "ping", &req, &session);

    Rlock__V1__Stats stats = RLOCK__V1__STATS__INIT;
    req.id = 7;
    req.body_case = RLOCK__V1__REQUEST__BODY_STATS;
    req.stats = &stats;
    request_seed(c, "stats", &req, &session);

    Rlock__V1__Goodbye bye = RLOCK__V1__GOODBYE__INIT;
    req.id = 8;
    req.body_case = RLOCK__V1__REQUEST__BODY_GOODBYE;
    req.goodbye = &bye;
    request_seed(c, "goodbye", &req, &session);
    put(c, "fuzz_request", "session-stream", session.buf, session.len);

    static const uint8_t empty[] = {0, 0, 0, 0};
    put(c, "fuzz_request", "empty-frame", empty, sizeof empty);
    static const uint8_t oversize[] = {0x00, 0x01, 0x00, 0x01, 0x08, 0x01};
    put(c, "fuzz_request", "oversize-length", oversize, sizeof oversize);
    static const uint8_t partial[] = {0x00, 0x00, 0x00, 0x10, 0x08, 0x01, 0x1a};
    put(c, "fuzz_request", "partial-frame", partial, sizeof partial);
    /* Acquire{resource "a\0b"}: decodes as "a", refused (a NUL inside a string). */
    static const uint8_t nul[] = {0, 0, 0, 9, 0x08, 0x02, 0x1a, 0x05, 0x0a, 0x03, 'a', 0, 'b'};
    put(c, "fuzz_request", "acquire-nul-in-name", nul, sizeof nul);
    /*
     * Acquire{resource "a", every other field an explicit default}, as protobufjs
     * writes it: ttl_ms 0, wait_ms 0, watchdog_off false, owner 0, no_reentry false,
     * max_hold_ms 0, lock_delay_ms 0. Accepted.
     */
    static const uint8_t defaults[] = {0,    0,    0,    0x15, 0x08, 0x02, 0x1a, 0x11, 0x0a,
                                       0x01, 'a',  0x10, 0x00, 0x18, 0x00, 0x20, 0x00, 0x28,
                                       0x00, 0x30, 0x00, 0x38, 0x00, 0x40, 0x00};
    put(c, "fuzz_request", "acquire-explicit-defaults", defaults, sizeof defaults);
    /* Ping with id 1 as a padded varint (81 00). */
    static const uint8_t padded[] = {0, 0, 0, 5, 0x08, 0x81, 0x00, 0x32, 0x00};
    put(c, "fuzz_request", "ping-padded-varint", padded, sizeof padded);
}

/* --- server frames ---------------------------------------------------------------- */

static void add_response(struct stream *st, Rlock__V1__Response *r)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = r;
    add_server(st, &m);
}

static void add_event(struct stream *st, Rlock__V1__Event *ev)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = ev;
    add_server(st, &m);
}

static void add_hello_reply(struct stream *st)
{
    Rlock__V1__HelloReply h = RLOCK__V1__HELLO_REPLY__INIT;
    h.session_id = "6f1d0c2e-3b7a-4e55-a1f0-9c8d7e6b5a43";
    h.server_version = "0.1.0";
    h.protocol_version = 1;
    h.session_timeout_ms = 10000;
    h.keepalive_interval_ms = 3333;
    h.default_ttl_ms = 30000;
    h.max_ttl_ms = 3600000;
    h.max_wait_ms = 600000;
    h.min_ttl_ms = 1000;
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = 1;
    r.body_case = RLOCK__V1__RESPONSE__BODY_HELLO;
    r.hello = &h;
    add_response(st, &r);
}

static void add_grant(struct stream *st, uint64_t id, uint32_t holds)
{
    Rlock__V1__AcquireReply a = RLOCK__V1__ACQUIRE_REPLY__INIT;
    a.token = TOKEN;
    a.fence = 1764471019356112ull;
    a.ttl_ms = 30000;
    a.hold_count = holds;
    a.watchdog = 1;
    a.valid_ms = 29000;
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = id;
    r.body_case = RLOCK__V1__RESPONSE__BODY_ACQUIRE;
    r.acquire = &a;
    add_response(st, &r);
}

static void add_status(struct stream *st, uint64_t id, Rlock__V1__Status status, const char *msg)
{
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = id;
    r.status = status;
    r.message = (char *)msg;
    if (status == RLOCK__V1__STATUS__STATUS_UNAVAILABLE)
        r.retry_after_ms = 250;
    add_response(st, &r);
}

/* NOT_ACQUIRED or TIMEOUT with a Holder: here (a session of the daemon) or outside. */
static void add_refused(struct stream *st, uint64_t id, Rlock__V1__Status status, int here)
{
    Rlock__V1__Holder h = RLOCK__V1__HOLDER__INIT;
    h.here = here;
    if (here) {
        h.session_id = "3f2a9c1e-7b4d-4e8f-a1b2-c3d4e5f60718";
        h.client_name = "billing-worker";
        h.owner = 7;
        h.mode = RLOCK__V1__LOCK_MODE__MODE_SHARED;
        h.since_ms = 1764471019356ull;
        h.holders = 3;
        h.ttl_left_ms = 2430;
    } else {
        h.foreign = 1;
        h.ttl_left_ms = 4999;
    }
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = id;
    r.status = status;
    r.message = here ? "held by another owner" : "wait timed out";
    r.holder = &h;
    add_response(st, &r);
}

static void add_lost(struct stream *st, Rlock__V1__LostReason reason)
{
    Rlock__V1__LockLost l = RLOCK__V1__LOCK_LOST__INIT;
    l.resource = "fuzz-a";
    l.token = TOKEN;
    l.fence = 1764471019356112ull;
    l.reason = reason;
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_LOCK_LOST;
    ev.lock_lost = &l;
    add_event(st, &ev);
}

static void add_closing(struct stream *st)
{
    Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
    sc.reason = "the daemon is shutting down";
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
    ev.session_closing = &sc;
    add_event(st, &ev);
}

static void client_seeds(struct corpus *c)
{
    struct stream st = {.len = 0};
    add_hello_reply(&st);
    put(c, "fuzz_client_frames", "hello-reply", st.buf, st.len);

    /* Everything answered: grants with their Extend and Release, Ping, Stats, Cancel. */
    add_grant(&st, 2, 1);
    Rlock__V1__ExtendReply e = RLOCK__V1__EXTEND_REPLY__INIT;
    e.ttl_ms = 30000;
    e.valid_ms = 29500;
    Rlock__V1__Response r = RLOCK__V1__RESPONSE__INIT;
    r.id = 8;
    r.body_case = RLOCK__V1__RESPONSE__BODY_EXTEND;
    r.extend = &e;
    add_response(&st, &r);
    add_grant(&st, 3, 2);
    Rlock__V1__ReleaseReply rr = RLOCK__V1__RELEASE_REPLY__INIT;
    rr.hold_count = 1;
    Rlock__V1__Response rel = RLOCK__V1__RESPONSE__INIT;
    rel.id = 9;
    rel.body_case = RLOCK__V1__RESPONSE__BODY_RELEASE;
    rel.release = &rr;
    add_response(&st, &rel);
    add_status(&st, 4, RLOCK__V1__STATUS__STATUS_CANCELLED, "acquire cancelled");
    Rlock__V1__CancelReply cr = RLOCK__V1__CANCEL_REPLY__INIT;
    cr.found = 1;
    Rlock__V1__Response can = RLOCK__V1__RESPONSE__INIT;
    can.id = 5;
    can.body_case = RLOCK__V1__RESPONSE__BODY_CANCEL;
    can.cancel = &cr;
    add_response(&st, &can);
    Rlock__V1__PingReply p = RLOCK__V1__PING_REPLY__INIT;
    p.server_time_ms = 1764471019356ull;
    p.valid_ms = 28000;
    Rlock__V1__Response ping = RLOCK__V1__RESPONSE__INIT;
    ping.id = 6;
    ping.body_case = RLOCK__V1__RESPONSE__BODY_PING;
    ping.ping = &p;
    add_response(&st, &ping);
    Rlock__V1__StatsReply s = RLOCK__V1__STATS_REPLY__INIT;
    s.sessions = 3;
    s.held_locks = 2;
    s.redis_connections = 2;
    s.redis_connections_ready = 2;
    s.redis_up = 1;
    s.acquires = 17;
    s.grants = 12;
    s.uptime_ms = 86400000;
    s.server_version = "0.1.0";
    Rlock__V1__Response stats = RLOCK__V1__RESPONSE__INIT;
    stats.id = 7;
    stats.body_case = RLOCK__V1__RESPONSE__BODY_STATS;
    stats.stats = &s;
    add_response(&st, &stats);
    put(c, "fuzz_client_frames", "all-answered", st.buf, st.len);

    /* Then the lock is lost, and the daemon closes the session. */
    add_lost(&st, RLOCK__V1__LOST_REASON__LOST_STOLEN);
    add_closing(&st);
    put(c, "fuzz_client_frames", "lost-then-closing", st.buf, st.len);

    st.len = 0;
    add_hello_reply(&st);
    add_status(&st, 2, RLOCK__V1__STATUS__STATUS_NOT_ACQUIRED, "held by another owner");
    add_status(&st, 3, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, "redis unavailable");
    add_grant(&st, 4, 1); /* a grant racing its Cancel: given back */
    add_status(&st, 6, (Rlock__V1__Status)99, "a status from the future");
    add_grant(&st, 7, 1); /* the wrong body for a Stats */
    add_status(&st, 0, RLOCK__V1__STATUS__STATUS_INVALID, "malformed frame");
    put(c, "fuzz_client_frames", "refusals", st.buf, st.len);

    /* Refusals that say who holds the lock (Response.holder). */
    st.len = 0;
    add_hello_reply(&st);
    add_refused(&st, 2, RLOCK__V1__STATUS__STATUS_NOT_ACQUIRED, 1);
    add_refused(&st, 3, RLOCK__V1__STATUS__STATUS_TIMEOUT, 0);
    put(c, "fuzz_client_frames", "refusals-held", st.buf, st.len);

    st.len = 0;
    add_hello_reply(&st);
    add_grant(&st, 2, 1);
    add_lost(&st, RLOCK__V1__LOST_REASON__LOST_EXPIRED);
    add_status(&st, 8, RLOCK__V1__STATUS__STATUS_NOT_HELD, "the lock is no longer held");
    put(c, "fuzz_client_frames", "grant-lost-extend", st.buf, st.len);

    static const uint8_t empty[] = {0, 0, 0, 0};
    put(c, "fuzz_client_frames", "empty-frame", empty, sizeof empty);
    static const uint8_t oversize[] = {0x01, 0x00, 0x00, 0x01, 0x0a};
    put(c, "fuzz_client_frames", "oversize-length", oversize, sizeof oversize);
    static const uint8_t garbage[] = {0, 0, 0, 3, 0x0a, 0x05, 0x08};
    put(c, "fuzz_client_frames", "undecodable", garbage, sizeof garbage);
}

/* --- Redis replies ----------------------------------------------------------------- */

static void reply_seeds(struct corpus *c)
{
    static const struct {
        const char *name;
        const char *resp;
    } replies[] = {
        {"acquire-granted", "*2\r\n:1\r\n:1796116645310293\r\n"},
        {"acquire-busy", "*2\r\n:0\r\n:29950\r\n"},
        {"acquire-busy-no-expiry", "*2\r\n:0\r\n:-1\r\n"},
        {"acquire-busy-foreign", "*3\r\n:0\r\n:29950\r\n:1\r\n"},
        {"acquire-busy-ours", "*3\r\n:0\r\n:29950\r\n:0\r\n"},
        {"renew-three", "*3\r\n:1\r\n:0\r\n:-1\r\n"},
        {"renew-one-stolen", "*1\r\n:-1\r\n"},
        {"renew-empty", "*0\r\n"},
        {"delete-done", ":1\r\n"},
        {"delete-absent", ":0\r\n"},
        {"noscript", "-NOSCRIPT No matching script. Please use EVAL.\r\n"},
        {"wrongtype",
         "-WRONGTYPE Operation against a key holding the wrong kind of value script: "
         "852a9ac8aad7e6f07b94730ebfd569fe03374779, on @user_script:10.\r\n"},
        {"not-an-integer",
         "-ERR value is not an integer or out of range script: "
         "27068972a39b54393f6d3e243c2542f003ec3796, on @user_script:20.\r\n"},
        {"busy", "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                 "SHUTDOWN NOSCRIPT.\r\n"},
        {"oom", "-OOM command not allowed when used memory > 'maxmemory'.\r\n"},
        {"nil-bulk", "$-1\r\n"},
        {"nil-array", "*-1\r\n"},
        {"status-ok", "+OK\r\n"},
        {"script-load-sha", "$40\r\n27068972a39b54393f6d3e243c2542f003ec3796\r\n"},
        {"maxmemory-policy", "*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n"},
        {"nested", "*2\r\n*2\r\n:1\r\n:7\r\n*1\r\n$3\r\nabc\r\n"},
        {"acquire-wrong-shape", "*3\r\n:1\r\n:7\r\n:8\r\n"},
        {"acquire-string-fence", "*2\r\n:1\r\n$4\r\n1234\r\n"},
        {"pipelined", "*2\r\n:0\r\n:500\r\n:1\r\n*1\r\n:1\r\n-ERR x\r\n"},
    };
    for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++)
        put(c, "fuzz_reply", replies[i].name, replies[i].resp, strlen(replies[i].resp));

    /* INFO server answers, as bulk strings (the start of redis-server 7.0's, and a 4.0). */
    static const struct {
        const char *name;
        const char *text;
    } infos[] = {
        {"info-server", "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
                        "redis_git_dirty:0\r\nredis_build_id:ae4d7c971a948f0\r\n"
                        "redis_mode:standalone\r\narch_bits:64\r\n"},
        {"info-server-too-old", "# Server\r\nredis_version:4.0.14\r\nredis_mode:standalone\r\n"},
    };
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++) {
        char bulk[512];
        int n = snprintf(bulk, sizeof bulk, "$%zu\r\n%s\r\n", strlen(infos[i].text),
                         infos[i].text);
        put(c, "fuzz_reply", infos[i].name, bulk, (size_t)n);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
        return EXIT_FAILURE;
    }
    struct corpus c = {argv[1], 0};
    request_seeds(&c);
    client_seeds(&c);
    reply_seeds(&c);
    return c.failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
