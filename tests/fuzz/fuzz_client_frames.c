/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_client_frames.c — bytes as the daemon might send them, taken in by
 * librlock's engine: framing, unpack through the bounded allocator, and what
 * every response and event does to pending calls and lock objects.
 *
 * The engine reads from its descriptor itself, so it gets one end of a
 * socketpair (no listener, no network) and the input is written into the
 * other end. Before the input arrives the client has calls in flight, with
 * the ids an input can answer:
 *
 *   1 Hello   2 Acquire "fuzz-a"   3 Acquire "fuzz-a" (same owner: a re-entry)
 *   4 Acquire "fuzz-b" with a wait   5 Cancel of 4   6 Ping   7 Stats
 *
 * and every grant delivered gets an Extend and then a Release (ids 8, 9 for
 * the first one, and so on), as an application would send them. The input
 * is written one frame at a time, each followed by rlock_async_process, so
 * that the answers to those later calls can come from the same input.
 */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "rlock_internal.h"

#define FUZZ_FOLLOWUPS 8 /* grants that get an Extend and a Release */

struct fuzz_run {
    struct rlock_client *c;
    struct rlock_stats stats;
    int grants;
    int lost;
};

static void done_cb(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct fuzz_run *run = arg;
    if (r->err != RLOCK_OK)
        FUZZ_CHECK(r->error != NULL && r->error->message[0] != '\0');
    struct rlock_holder h; /* a refused acquire's holder, copied whatever its strings */
    if (r->err != RLOCK_OK && rlock_last_holder(&h) == 0)
        FUZZ_CHECK(memchr(h.session_id, 0, sizeof h.session_id) != NULL &&
                   memchr(h.client_name, 0, sizeof h.client_name) != NULL);
    if (r->err != RLOCK_OK || r->lock == NULL)
        return;
    /* The new handle is the application's: look at it, then use it. */
    FUZZ_CHECK(rlock_lock_resource(r->lock) != NULL && rlock_lock_token(r->lock) != NULL);
    (void)rlock_lock_state(r->lock);
    (void)rlock_lock_valid_until(r->lock);
    if (run->grants++ < FUZZ_FOLLOWUPS) {
        (void)rlock_async_extend(r->lock, 0, done_cb, run, NULL);
        (void)rlock_async_release(r->lock, done_cb, run, NULL);
    }
}

static void lost_cb(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c;
    (void)fence;
    (void)reason;
    struct fuzz_run *run = arg;
    FUZZ_CHECK(resource != NULL && token != NULL);
    run->lost++;
}

/* Queue one of the calls the async API has no function for (Hello, Stats). */
static void submit_call(struct fuzz_run *run, Rlock__V1__Request *req, enum rlk_call_kind kind)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    FUZZ_CHECK(call != NULL);
    call->kind = kind;
    call->owned = 1;
    call->done_fn = done_cb;
    call->done_arg = run;
    if (kind == RLK_CALL_STATS)
        call->stats = &run->stats;
    rlk_client_lock(run->c);
    if (rlk_eng_submit(run->c, req, call) != RLOCK_OK)
        free(call);
    rlk_client_unlock(run->c);
}

static void submit_calls(struct fuzz_run *run)
{
    Rlock__V1__Hello hello = RLOCK__V1__HELLO__INIT;
    hello.client_name = "fuzz";
    hello.protocol_version = WIRE_PROTOCOL_VERSION;
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &hello;
    submit_call(run, &req, RLK_CALL_HELLO);

    struct rlock_acquire_opts wait = {.wait_ms = 1000};
    uint64_t waiting = 0;
    (void)rlock_async_acquire(run->c, "fuzz-a", NULL, done_cb, run, NULL);
    (void)rlock_async_acquire(run->c, "fuzz-a", NULL, done_cb, run, NULL);
    (void)rlock_async_acquire(run->c, "fuzz-b", &wait, done_cb, run, &waiting);
    (void)rlock_async_cancel(run->c, waiting);
    (void)rlock_async_ping(run->c, done_cb, run, NULL);

    Rlock__V1__Stats stats = RLOCK__V1__STATS__INIT;
    req.body_case = RLOCK__V1__REQUEST__BODY_STATS;
    req.stats = &stats;
    submit_call(run, &req, RLK_CALL_STATS);
}

static int count_lock(const struct rlock_lock_info *info, void *arg)
{
    FUZZ_CHECK(info->resource != NULL && info->token != NULL);
    ++*(int *)arg;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    struct fuzz_run run = {0};
    struct rlock_options opts = {.on_lost = lost_cb, .on_lost_arg = &run};
    run.c = rlk_client_new(&opts, RLK_MODE_ASYNC);
    FUZZ_CHECK(run.c != NULL);
    rlk_client_lock(run.c);
    FUZZ_CHECK(rlk_eng_init(run.c, sv[0]) == 0); /* the engine owns sv[0] now */
    rlk_client_unlock(run.c);
    submit_calls(&run);

    size_t off = 0;
    while (off < size) {
        size_t take = size - off;
        if (take >= WIRE_HEADER_BYTES) {
            size_t frame = WIRE_HEADER_BYTES + (size_t)wire_get_len(data + off);
            take = frame < take ? frame : take;
        }
        /* The engine shuts its end down when the session ends: no SIGPIPE for that. */
        ssize_t n = send(sv[1], data + off, take, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
        if (rlock_async_process(run.c, POLLIN) != RLOCK_OK)
            break;
    }
    int held = 0;
    (void)rlock_foreach_lock(run.c, count_lock, &held);
    rlock_close(run.c); /* answers what is pending with CLOSED, frees handles and locks */
    close(sv[1]);
    return 0;
}
