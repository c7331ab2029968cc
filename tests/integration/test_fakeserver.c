/*
 * test_fakeserver.c — librlock against a scripted stand-in for rlockd, for
 * what a real daemon does not do on demand:
 *  - a unix socket whose listen backlog is full: connect keeps trying until
 *    its deadline instead of failing at once with EAGAIN;
 *  - a Hello answered only after the session timeout it grants: connect
 *    fails (RLOCK_ERR_CONNECT) instead of returning a dead client;
 *  - SessionClosing with the connection left open: the session ends there
 *    (locks LOST, reason SESSION, on_lost once);
 *  - a peer that stops reading: a request that cannot be written in time
 *    fails with RLOCK_ERR_DEADLINE, not RLOCK_ERR_CLOSED;
 *  - rlock_close() from inside on_lost: returns, and the client is freed by
 *    its own thread (meant to be run under a sanitizer too);
 * and addresses whose port is not 1..65535 (no server needed): RLOCK_ERR_ARG,
 * rlockctl exit 64.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire.h"

#define BIG_RESOURCE_BYTES (8u * 1024u * 1024u)

/* A listening unix socket in a private temp dir. */
struct fake {
    char dir[256];
    char path[320];
    char addr[340];
    int lfd;
};

static void fake_listen(struct fake *f, int backlog)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/rlock-fake-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/fake.sock", f->dir);
    snprintf(f->addr, sizeof f->addr, "unix:%s", f->path);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(f->path), sizeof a.sun_path);
    memcpy(a.sun_path, f->path, strlen(f->path) + 1);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(f->lfd, 0);
    ck_assert_msg(bind(f->lfd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s",
                  strerror(errno));
    ck_assert_int_eq(listen(f->lfd, backlog), 0);
}

static void fake_stop(struct fake *f)
{
    close(f->lfd);
    unlink(f->path);
    rmdir(f->dir);
}

/* 1 once fd is readable (or at EOF) within timeout_ms, else 0. */
static int wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    return n > 0;
}

/* Read exactly n bytes before deadline (h_now_ms): 0, or -1 on EOF, error or timeout. */
static int read_full(int fd, void *buf, size_t n, int64_t deadline)
{
    uint8_t *p = buf;
    while (n > 0) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0 || !wait_readable(fd, (int)left))
            return -1;
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* The next request on fd (NULL on EOF or timeout); free with free_request. */
static Rlock__V1__Request *read_request(int fd, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    uint8_t hdr[WIRE_HEADER_BYTES];
    if (read_full(fd, hdr, sizeof hdr, deadline) < 0)
        return NULL;
    uint32_t len = wire_get_len(hdr);
    if (len > 1024u * 1024u)
        return NULL;
    uint8_t *body = malloc(len ? len : 1);
    Rlock__V1__Request *r = NULL;
    if (body != NULL && read_full(fd, body, len, deadline) == 0)
        r = rlock__v1__request__unpack(NULL, len, body);
    free(body);
    return r;
}

static void free_request(Rlock__V1__Request *r)
{
    if (r != NULL)
        rlock__v1__request__free_unpacked(r, NULL);
}

static int send_message(int fd, const Rlock__V1__ServerMessage *m)
{
    size_t len = 0, off = 0;
    uint8_t *buf = wire_pack_server_message(m, &len);
    if (buf == NULL)
        return -1;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    free(buf);
    return off == len ? 0 : -1;
}

static int send_response(int fd, Rlock__V1__Response *resp)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_RESPONSE;
    m.response = resp;
    return send_message(fd, &m);
}

static int send_event(int fd, Rlock__V1__Event *ev)
{
    Rlock__V1__ServerMessage m = RLOCK__V1__SERVER_MESSAGE__INIT;
    m.body_case = RLOCK__V1__SERVER_MESSAGE__BODY_EVENT;
    m.event = ev;
    return send_message(fd, &m);
}

/* What the stand-in does after the Hello. */
enum script {
    SCRIPT_HELLO,    /* nothing more */
    SCRIPT_NO_READ,  /* stop reading until the test sets stop */
    SCRIPT_CLOSING,  /* grant one Acquire, then SessionClosing (connection kept open) */
    SCRIPT_LOST,     /* grant one Acquire, then LockLost for it */
};

struct server {
    struct fake *f;
    enum script script;
    uint32_t session_ms;   /* granted in the HelloReply */
    int hello_delay_ms;    /* before answering the Hello */
    atomic_int stop;       /* SCRIPT_NO_READ: the test is done writing */
    atomic_int saw_eof;    /* the client closed its end */
    char fail[256];        /* what went wrong in the stand-in; empty if nothing */
};

#define FAKE_TOKEN "fake-token"
#define FAKE_FENCE 42u

static int serve_acquire(struct server *s, int fd)
{
    Rlock__V1__Request *r = read_request(fd, 5000);
    if (r == NULL || r->body_case != RLOCK__V1__REQUEST__BODY_ACQUIRE) {
        snprintf(s->fail, sizeof s->fail, "no Acquire from the client");
        free_request(r);
        return -1;
    }
    Rlock__V1__AcquireReply ar = RLOCK__V1__ACQUIRE_REPLY__INIT;
    ar.token = FAKE_TOKEN;
    ar.fence = FAKE_FENCE;
    ar.ttl_ms = 30000;
    ar.hold_count = 1;
    ar.watchdog = 1;
    Rlock__V1__Response resp = RLOCK__V1__RESPONSE__INIT;
    resp.id = r->id;
    resp.body_case = RLOCK__V1__RESPONSE__BODY_ACQUIRE;
    resp.acquire = &ar;
    int rc = send_response(fd, &resp);
    free_request(r);
    return rc;
}

/* Drain fd until EOF (at most timeout_ms); 1 at EOF. */
static int drain_to_eof(int fd, int timeout_ms)
{
    static uint8_t sink[65536];
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0 || !wait_readable(fd, (int)left))
            return 0;
        ssize_t n = read(fd, sink, sizeof sink);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return 1;
    }
}

/* The stand-in for one connection, on its own thread. */
static void *serve(void *arg)
{
    struct server *s = arg;
    if (!wait_readable(s->f->lfd, 5000)) {
        snprintf(s->fail, sizeof s->fail, "no connection");
        return NULL;
    }
    int fd = accept4(s->f->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        snprintf(s->fail, sizeof s->fail, "accept: %s", strerror(errno));
        return NULL;
    }
    Rlock__V1__Request *r = read_request(fd, 5000);
    if (r == NULL || r->body_case != RLOCK__V1__REQUEST__BODY_HELLO) {
        snprintf(s->fail, sizeof s->fail, "no Hello from the client");
        goto out;
    }
    if (s->hello_delay_ms > 0)
        h_sleep_ms(s->hello_delay_ms);
    Rlock__V1__HelloReply hr = RLOCK__V1__HELLO_REPLY__INIT;
    hr.session_id = "00000000-0000-0000-0000-000000000000";
    hr.protocol_version = 1;
    hr.session_timeout_ms = s->session_ms;
    hr.keepalive_interval_ms = s->session_ms / 3;
    Rlock__V1__Response resp = RLOCK__V1__RESPONSE__INIT;
    resp.id = r->id;
    resp.body_case = RLOCK__V1__RESPONSE__BODY_HELLO;
    resp.hello = &hr;
    if (send_response(fd, &resp) < 0)
        goto out;

    if (s->script == SCRIPT_NO_READ) {
        for (int i = 0; i < 1000 && !atomic_load(&s->stop); i++)
            h_sleep_ms(10);
    } else if (s->script == SCRIPT_CLOSING || s->script == SCRIPT_LOST) {
        if (serve_acquire(s, fd) < 0)
            goto out;
        Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
        Rlock__V1__SessionClosing sc = RLOCK__V1__SESSION_CLOSING__INIT;
        Rlock__V1__LockLost ll = RLOCK__V1__LOCK_LOST__INIT;
        if (s->script == SCRIPT_CLOSING) {
            sc.reason = "server shutting down";
            ev.body_case = RLOCK__V1__EVENT__BODY_SESSION_CLOSING;
            ev.session_closing = &sc;
        } else {
            ll.resource = "fake/res";
            ll.token = FAKE_TOKEN;
            ll.fence = FAKE_FENCE;
            ll.reason = RLOCK__V1__LOST_REASON__LOST_STOLEN;
            ev.body_case = RLOCK__V1__EVENT__BODY_LOCK_LOST;
            ev.lock_lost = &ll;
        }
        send_event(fd, &ev);
    }
    atomic_store(&s->saw_eof, drain_to_eof(fd, 10000));
out:
    free_request(r);
    close(fd);
    return NULL;
}

static void server_start(struct h_thread *t, struct server *s, struct fake *f, enum script script,
                         uint32_t session_ms)
{
    memset(s, 0, sizeof *s);
    s->f = f;
    s->script = script;
    s->session_ms = session_ms;
    h_thread_start(t, serve, s);
}

static void server_join(struct h_thread *t, struct server *s)
{
    h_thread_join(t, h_now_ms() + 15000, "the stand-in server did not finish");
    ck_assert_msg(s->fail[0] == '\0', "stand-in server: %s", s->fail);
}

static struct rlock_client *connect_ok(const struct fake *f, rlock_lost_fn on_lost, void *arg)
{
    struct rlock_options o = {.connect_timeout_ms = 5000, .on_lost = on_lost, .on_lost_arg = arg};
    struct rlock_client *c = NULL;
    char err[256] = "";
    enum rlock_err rc = rlock_connect(f->addr, &o, &c, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "connect: %s: %s", rlock_strerror(rc), err);
    return c;
}

/* --- the listen backlog is full ------------------------------------------ */

struct connector {
    const char *addr;
    enum rlock_err rc;
    struct rlock_client *c;
    char err[256];
};

static void *connect_main(void *arg)
{
    struct connector *k = arg;
    struct rlock_options o = {.connect_timeout_ms = 5000};
    k->rc = rlock_connect(k->addr, &o, &k->c, k->err, sizeof k->err);
    return NULL;
}

START_TEST(test_fake_backlog_full)
{
    struct fake f;
    fake_listen(&f, 1);
    /* Fill the backlog: unaccepted connections until the kernel refuses one. */
    int fillers[128], nf = 0, full = 0;
    while (nf < (int)H_LEN(fillers) && !full) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(fd, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        memcpy(a.sun_path, f.path, strlen(f.path) + 1);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            fillers[nf++] = fd;
            continue;
        }
        ck_assert_msg(errno == EAGAIN, "filler connect: %s", strerror(errno));
        close(fd);
        full = 1;
    }
    ck_assert_msg(full, "the backlog never filled up");

    struct connector k = {.addr = f.addr};
    struct h_thread t;
    h_thread_start(&t, connect_main, &k);
    h_sleep_ms(300);
    ck_assert_msg(!h_thread_done(&t), "rlock_connect gave up at once on a full backlog: %s: %s",
                  rlock_strerror(k.rc), k.err);

    /* Make room, and answer the Hello on whichever accepted connection carries one. */
    int conns[H_LEN(fillers) + 8], nc = 0, hello_fd = -1;
    int64_t deadline = h_now_ms() + 4000;
    while (hello_fd < 0 && h_now_ms() < deadline) {
        int fd;
        while (nc < (int)H_LEN(conns) && wait_readable(f.lfd, 0) &&
               (fd = accept4(f.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
            conns[nc++] = fd;
        for (int i = 0; i < nc && hello_fd < 0; i++) {
            if (wait_readable(conns[i], 0))
                hello_fd = conns[i];
        }
        h_sleep_ms(5);
    }
    ck_assert_msg(hello_fd >= 0, "no Hello arrived after the backlog drained");
    Rlock__V1__Request *r = read_request(hello_fd, 2000);
    ck_assert_msg(r != NULL && r->body_case == RLOCK__V1__REQUEST__BODY_HELLO, "not a Hello");
    Rlock__V1__HelloReply hr = RLOCK__V1__HELLO_REPLY__INIT;
    hr.session_id = "00000000-0000-0000-0000-000000000001";
    hr.session_timeout_ms = 10000;
    Rlock__V1__Response resp = RLOCK__V1__RESPONSE__INIT;
    resp.id = r->id;
    resp.body_case = RLOCK__V1__RESPONSE__BODY_HELLO;
    resp.hello = &hr;
    ck_assert_int_eq(send_response(hello_fd, &resp), 0);
    free_request(r);

    h_thread_join(&t, h_now_ms() + 6000, "rlock_connect did not return");
    ck_assert_msg(k.rc == RLOCK_OK, "connect: %s: %s", rlock_strerror(k.rc), k.err);
    rlock_close(k.c);
    for (int i = 0; i < nc; i++)
        close(conns[i]);
    for (int i = 0; i < nf; i++)
        close(fillers[i]);
    fake_stop(&f);
}
END_TEST

/* --- the Hello reply comes after the session timeout ----------------------- */

START_TEST(test_fake_hello_too_late)
{
    struct fake f;
    fake_listen(&f, 8);
    struct server s;
    struct h_thread t;

    /* In time: a normal client. */
    server_start(&t, &s, &f, SCRIPT_HELLO, 1000);
    struct rlock_client *c = connect_ok(&f, NULL, NULL);
    ck_assert_int_eq(rlock_client_alive(c), 1);
    rlock_close(c);
    server_join(&t, &s);

    /* 1.5 session timeouts late: the daemon may have ended the session already. */
    memset(&s, 0, sizeof s);
    s.f = &f;
    s.script = SCRIPT_HELLO;
    s.session_ms = 400;
    s.hello_delay_ms = 600;
    h_thread_start(&t, serve, &s);
    struct rlock_options o = {.connect_timeout_ms = 5000};
    char err[512] = "";
    c = NULL;
    enum rlock_err rc = rlock_connect(f.addr, &o, &c, err, sizeof err);
    printf("fakeserver: late Hello: %s: %s\n", rlock_strerror(rc), err);
    if (rc == RLOCK_OK)
        rlock_close(c);
    ck_assert_msg(rc == RLOCK_ERR_CONNECT, "connect after a late Hello reply: %s",
                  rlock_strerror(rc));
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "session timeout") != NULL, "message: %s", err);
    server_join(&t, &s);
    fake_stop(&f);
}
END_TEST

/* --- SessionClosing without EOF --------------------------------------------- */

START_TEST(test_fake_session_closing)
{
    struct fake f;
    fake_listen(&f, 8);
    struct server s;
    struct h_thread t;
    server_start(&t, &s, &f, SCRIPT_CLOSING, 10000);
    struct h_lost lost = {0};
    struct rlock_client *c = connect_ok(&f, h_lost_cb, &lost);
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, "fake/res", NULL, 3000, &l));

    int64_t deadline = h_now_ms() + 3000;
    while (rlock_lock_state(l) == RLOCK_HELD && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_msg(rlock_lock_state(l) == RLOCK_LOST, "lock still %d after SessionClosing",
                  (int)rlock_lock_state(l));
    ck_assert_int_eq(rlock_lock_lost_reason(l), RLOCK_LOST_SESSION);
    ck_assert_int_eq(rlock_client_alive(c), 0);
    deadline = h_now_ms() + 3000;
    while (atomic_load(&lost.count) == 0 && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_int_eq(atomic_load(&lost.count), 1);
    ck_assert_int_eq(atomic_load(&lost.reason), RLOCK_LOST_SESSION);
    /* The client hangs up by itself; the daemon's EOF is not needed. */
    deadline = h_now_ms() + 3000;
    while (!atomic_load(&s.saw_eof) && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_msg(atomic_load(&s.saw_eof), "the client kept the connection open");
    char msg[256];
    ck_assert_int_eq(rlock_ping(c, 1000, NULL), RLOCK_ERR_CLOSED);
    rlock_errmsg(c, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "closing") != NULL, "errmsg: %s", msg);
    rlock_lock_free(l);
    rlock_close(c);
    server_join(&t, &s);
    fake_stop(&f);
}
END_TEST

/* --- a request that cannot be written in time -------------------------------- */

START_TEST(test_fake_write_deadline)
{
    struct fake f;
    fake_listen(&f, 8);
    struct server s;
    struct h_thread t;
    server_start(&t, &s, &f, SCRIPT_NO_READ, 60000);
    struct rlock_client *c = connect_ok(&f, NULL, NULL);

    char *big = malloc(BIG_RESOURCE_BYTES + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'r', BIG_RESOURCE_BYTES);
    big[BIG_RESOURCE_BYTES] = '\0';
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_acquire(c, big, NULL, 300, &l);
    int64_t took = h_now_ms() - t0;
    free(big);
    char msg[256];
    rlock_errmsg(c, msg, sizeof msg);
    printf("fakeserver: unwritable acquire: %s after %lld ms: %s\n", rlock_strerror(rc),
           (long long)took, msg);
    ck_assert_msg(rc == RLOCK_ERR_DEADLINE, "acquire that could not be written: %s (%s)",
                  rlock_strerror(rc), msg);
    ck_assert_ptr_null(l);
    ck_assert_int_lt(took, 3000);
    ck_assert_int_eq(rlock_client_alive(c), 0);
    atomic_store(&s.stop, 1);
    rlock_close(c);
    server_join(&t, &s);
    fake_stop(&f);
}
END_TEST

/* --- rlock_close from on_lost -------------------------------------------------- */

struct closer {
    atomic_int calls;
    atomic_int closed; /* rlock_close returned inside the callback */
};

static void close_in_callback(struct rlock_client *c, const char *resource, const char *token,
                              uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)resource, (void)token, (void)fence, (void)reason;
    struct closer *k = arg;
    atomic_fetch_add(&k->calls, 1);
    rlock_close(c);
    atomic_store(&k->closed, 1);
}

START_TEST(test_fake_close_in_on_lost)
{
    struct fake f;
    fake_listen(&f, 8);
    struct server s;
    struct h_thread t;
    server_start(&t, &s, &f, SCRIPT_LOST, 10000);
    struct closer k = {0};
    struct rlock_client *c = connect_ok(&f, close_in_callback, &k);
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, "fake/res", NULL, 3000, &l));
    /* From here on c and l belong to the callback, which closes the client. */
    int64_t deadline = h_now_ms() + 3000;
    while (!atomic_load(&k.closed) && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_msg(atomic_load(&k.closed), "rlock_close inside on_lost did not return");
    deadline = h_now_ms() + 3000;
    while (!atomic_load(&s.saw_eof) && h_now_ms() < deadline)
        h_sleep_ms(5);
    ck_assert_msg(atomic_load(&s.saw_eof), "the connection stayed open after rlock_close");
    h_sleep_ms(100); /* let the thread finish freeing, for the sanitizers */
    ck_assert_int_eq(atomic_load(&k.calls), 1);
    server_join(&t, &s);
    fake_stop(&f);
}
END_TEST

/* --- ports ----------------------------------------------------------------------- */

START_TEST(test_fake_bad_ports)
{
    static const char *const bad[] = {
        "127.0.0.1:0",   "127.0.0.1:65536", "127.0.0.1:99999999999", "127.0.0.1:http",
        "127.0.0.1:-1",  "127.0.0.1:+80",   "127.0.0.1: 80",         "[::1]:0",
        "localhost:80x", "127.0.0.1:000000080",
    };
    for (size_t i = 0; i < H_LEN(bad); i++) {
        struct rlock_options o = {.connect_timeout_ms = 1000};
        struct rlock_client *c = NULL;
        char err[256] = "";
        enum rlock_err rc = rlock_connect(bad[i], &o, &c, err, sizeof err);
        if (rc == RLOCK_OK)
            rlock_close(c);
        ck_assert_msg(rc == RLOCK_ERR_ARG, "%s: %s (%s), want RLOCK_ERR_ARG", bad[i],
                      rlock_strerror(rc), err);
        ck_assert_ptr_null(c);
    }
    /* The edges of the range are ports, whatever listens there. */
    static const char *const edge[] = {"127.0.0.1:1", "127.0.0.1:65535", "127.0.0.1:00080"};
    for (size_t i = 0; i < H_LEN(edge); i++) {
        struct rlock_options o = {.connect_timeout_ms = 300};
        struct rlock_client *c = NULL;
        char err[256] = "";
        enum rlock_err rc = rlock_connect(edge[i], &o, &c, err, sizeof err);
        if (rc == RLOCK_OK)
            rlock_close(c);
        ck_assert_msg(rc != RLOCK_ERR_ARG, "%s refused as malformed: %s", edge[i], err);
    }

    char bin[512];
    h_bin("rlockctl", bin, sizeof bin);
    char *ping[] = {bin, "--server", "127.0.0.1:0", "ping", NULL};
    char *run[] = {bin, "run", "--server", "127.0.0.1:65536", "res", "--", "true", NULL};
    char *const *cmds[] = {ping, run};
    for (size_t i = 0; i < H_LEN(cmds); i++) {
        pid_t pid = h_spawn(cmds[i], NULL);
        ck_assert_int_gt(pid, 0);
        int status;
        ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
        char st[32];
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 64,
                      "rlockctl with a bad port ended with %s, want exit 64",
                      h_status_str(status, st, sizeof st));
    }
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_fake_backlog_full,    test_fake_hello_too_late,
                            test_fake_session_closing, test_fake_write_deadline,
                            test_fake_close_in_on_lost, test_fake_bad_ports};
    return h_run_tests("fakeserver", 60, tests, H_LEN(tests));
}
