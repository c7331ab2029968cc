/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * elect.c — leader elections (rlock.h, "leader elections").
 *
 * A campaign is an acquire (rlock_acquire_opts.campaign_value, sent by
 * blocking.c and async.c like any acquire) and resigning is a release: the
 * leader's lock is an ordinary lock, renewed, fenced (its fence is the term)
 * and lost like any other. What is here: the Leader and Observe requests,
 * and the elections a session observes.
 *
 * For each observed election the client keeps the latest leader it reported
 * (term, elected). A LeaderChanged event is reported only when it is news
 * against that: a higher term, or the leader of the same term gone. The
 * daemon sends them in order already; the check keeps the application's
 * stream in order when answers cross it — the Observe's own answer, or the
 * Observe the engine sends again after the session resumed on another
 * connection (that daemon may not know the session observes anything, and
 * what changed while the session moved is reported from its answer).
 *
 * That Observe may be refused (Redis out of the new daemon's reach, a limit):
 * it is sent again after a pause (100 ms, doubling up to 2 s) until it is
 * answered, the application stops observing, or the session ends or moves
 * (the next resume sends it anyway). LIMIT_EXCEEDED is tried again for 5 s
 * (the limit may be on reads in flight, which a resume sends all at once);
 * past that, and at once for any error that trying again does not cure, the
 * election is no longer observed and on_leader is told: elected 0, term 0 (no
 * leader's term is 0) and the error as the value.
 *
 * A stop (Observe with stop) ends the daemon's subscription whatever the
 * answers of the Observes sent before it say, even one that comes after the
 * stop's own (the daemon reads the leader for an Observe after it subscribed
 * the session; a stop is answered at once): those are marked superseded when
 * the stop is queued (engine.c) and then change nothing here.
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pauses before an Observe refused after a resume is sent again: the first, the longest. */
#define ELECT_RETRY_FIRST_MS 100u
#define ELECT_RETRY_MAX_MS 2000u
/* How long a run of LIMIT_EXCEEDED answers to it is tried again before it is final. */
#define ELECT_LIMIT_GIVE_UP_MS 5000

/* --- the elections observed ------------------------------------------------------------ */

static struct rlk_observed *observed_find(const struct rlock_client *c, const char *name)
{
    for (struct rlk_observed *o = c->observed; o != NULL; o = o->next)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static struct rlk_observed *observed_add(struct rlock_client *c, const char *name, uint64_t term,
                                         int elected)
{
    size_t len = strlen(name) + 1;
    struct rlk_observed *o = malloc(sizeof *o + len);
    if (o == NULL)
        return NULL;
    memset(o, 0, sizeof *o);
    memcpy(o->name, name, len);
    o->term = term;
    o->elected = elected;
    o->next = c->observed;
    c->observed = o;
    return o;
}

/* o is no longer waiting to be observed again. */
static void retry_clear(struct rlock_client *c, struct rlk_observed *o)
{
    if (o->retrying)
        c->observed_retrying--;
    o->retrying = 0;
    o->backoff_ms = 0;
    o->limited_since = 0;
}

/* Send an Observe of o again at at. */
static void retry_at(struct rlock_client *c, struct rlk_observed *o, int64_t at)
{
    if (!o->retrying)
        c->observed_retrying++;
    o->retrying = 1;
    o->retry_at = at;
}

/* Take o off the list and free it. */
static void observed_remove(struct rlock_client *c, struct rlk_observed *o)
{
    for (struct rlk_observed **p = &c->observed; *p != NULL; p = &(*p)->next) {
        if (*p == o) {
            *p = o->next;
            retry_clear(c, o);
            c->observed_gen++;
            free(o);
            return;
        }
    }
}

void rlk_elect_unobserve(struct rlock_client *c, const char *name)
{
    struct rlk_observed *o = observed_find(c, name);
    if (o != NULL)
        observed_remove(c, o);
}

void rlk_elect_free(struct rlock_client *c)
{
    struct rlk_observed *o;
    while ((o = c->observed) != NULL) {
        c->observed = o->next;
        free(o);
    }
    c->observed_retrying = 0;
    c->observed_gen++;
}

/*
 * Whether (term, elected) is news after what o reported, and then record it.
 * A leader that left is reported with the last term (LeaderChanged), or with
 * term 0 (a LeaderReply when none leads): either way "none since o->term".
 */
static int observed_advance(struct rlk_observed *o, uint64_t term, int elected)
{
    if (!elected && term < o->term)
        term = o->term;
    int news = term > o->term || (term == o->term && o->elected && !elected);
    if (news) {
        o->term = term;
        o->elected = elected;
    }
    return news;
}

/* --- reporting ------------------------------------------------------------------------ */

/* Queue the report of a change of election name for the application (on_leader). */
static void note_leader(struct rlock_client *c, const char *name, int elected, uint64_t term,
                        const char *value)
{
    if (c->on_leader == NULL || c->quiet || rlk_inherited(c))
        return;
    struct rlk_note *n = rlk_note_add(c, RLK_NOTE_LEADER, name, value);
    if (n == NULL)
        return; /* the next change, or rlock_leader, tells */
    n->fence = term;
    n->elected = elected;
}

void rlk_note_deliver(struct rlock_client *c, const struct rlk_note *n)
{
    if (n->kind == RLK_NOTE_LEADER) {
        if (c->on_leader != NULL)
            c->on_leader(c, n->resource, n->elected, n->fence, n->token, c->on_leader_arg);
    } else if (c->on_lost != NULL) {
        c->on_lost(c, n->resource, n->token, n->fence, n->reason, c->on_lost_arg);
    }
}

void rlk_elect_changed(struct rlock_client *c, const Rlock__V1__LeaderChanged *ev)
{
    if (ev->resource == NULL)
        return;
    struct rlk_observed *o = observed_find(c, ev->resource);
    if (o == NULL || !observed_advance(o, ev->term, ev->elected != 0))
        return; /* not observed (any more), or old news */
    note_leader(c, o->name, o->elected, o->term, ev->value != NULL ? ev->value : "");
}

/* --- requests and answers ------------------------------------------------------------- */

void rlk_elect_fill(const struct rlk_call *call, Rlock__V1__Request *req, Rlock__V1__Leader *l,
                    Rlock__V1__Observe *o)
{
    rlock__v1__request__init(req);
    if (call->kind == RLK_CALL_LEADER) {
        rlock__v1__leader__init(l);
        l->resource = (char *)call->name;
        req->body_case = RLOCK__V1__REQUEST__BODY_LEADER;
        req->leader = l;
        return;
    }
    rlock__v1__observe__init(o);
    o->resource = (char *)call->name;
    o->stop = call->kind == RLK_CALL_UNOBSERVE;
    req->body_case = RLOCK__V1__REQUEST__BODY_OBSERVE;
    req->observe = o;
}

enum rlock_err rlk_elect_answer(struct rlock_client *c, struct rlk_call *call,
                                const Rlock__V1__LeaderReply *r)
{
    const char *value = r->value != NULL ? r->value : "";
    size_t vlen = strlen(value);
    if (vlen > RLOCK_VALUE_MAX) {
        rlk_error_set(&call->detail, RLOCK_ERR_PROTOCOL, 0,
                      "the daemon sent a leader's value of %zu bytes (at most %u)", vlen,
                      RLOCK_VALUE_MAX);
        return RLOCK_ERR_PROTOCOL;
    }
    if (call->leader != NULL) {
        call->leader->elected = r->elected != 0;
        call->leader->term = r->term;
        call->leader->ttl_ms = r->ttl_ms;
        memcpy(call->leader->value, value, vlen + 1);
    }
    if (call->superseded)
        return RLOCK_OK; /* a stop sent after it ended the subscription this answers for */
    struct rlk_observed *o = observed_find(c, call->name);
    if (call->kind == RLK_CALL_OBSERVE) {
        /* The caller learns the leader from this answer: nothing to report. */
        if (o != NULL) {
            (void)observed_advance(o, r->term, r->elected != 0);
            retry_clear(c, o); /* the daemon observes it now */
        } else if (observed_add(c, call->name, r->term, r->elected != 0) == NULL) {
            rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory observing '%.64s'",
                          call->name);
            return RLOCK_ERR_NOMEM;
        }
    } else if (call->kind == RLK_CALL_REOBSERVE && o != NULL) {
        retry_clear(c, o); /* observed there: a later refusal starts at the first pause */
        if (observed_advance(o, r->term, r->elected != 0))
            note_leader(c, o->name, o->elected, o->term, value);
    }
    return RLOCK_OK;
}

/* The pause before the next try of o: its backoff doubled (the first: 100 ms), at least hint. */
static uint32_t retry_pause(struct rlk_observed *o, uint32_t hint_ms)
{
    uint32_t b = o->backoff_ms ? o->backoff_ms * 2 : ELECT_RETRY_FIRST_MS;
    o->backoff_ms = b < ELECT_RETRY_MAX_MS ? b : ELECT_RETRY_MAX_MS;
    uint32_t hint = hint_ms < ELECT_RETRY_MAX_MS ? hint_ms : ELECT_RETRY_MAX_MS;
    return o->backoff_ms > hint ? o->backoff_ms : hint;
}

/* Errors an Observe sent again may be refused with that another try may cure. */
static int refusal_passes(enum rlock_err e)
{
    return e == RLOCK_ERR_UNAVAILABLE || e == RLOCK_ERR_SHUTTING_DOWN ||
           e == RLOCK_ERR_INTERNAL || e == RLOCK_ERR_TIMEOUT;
}

void rlk_elect_refused(struct rlock_client *c, const struct rlk_call *call)
{
    if (call->superseded)
        return; /* the application stopped observing it */
    struct rlk_observed *o = observed_find(c, call->name);
    if (o == NULL || o->retrying)
        return;
    int64_t now = rlk_alive_ms();
    enum rlock_err e = call->err;
    int again = refusal_passes(e);
    if (e == RLOCK_ERR_LIMIT_EXCEEDED) {
        if (o->limited_since == 0)
            o->limited_since = now;
        again = now - o->limited_since < ELECT_LIMIT_GIVE_UP_MS;
    } else {
        o->limited_since = 0;
    }
    if (again) {
        retry_at(c, o, now + retry_pause(o, call->detail.retry_after_ms));
        return;
    }
    /* Final: no longer observed (rlock_observe observes it afresh), and the application told. */
    char why[sizeof call->detail.message];
    snprintf(why, sizeof why, "%s",
             call->detail.message[0] ? call->detail.message : rlock_strerror(e));
    note_leader(c, o->name, 0, 0, why);
    observed_remove(c, o);
}

/* Send an Observe of o again. 0, 1 when out of memory (try later), -1 when the session is
 * not open any more. */
static int reobserve(struct rlock_client *c, const struct rlk_observed *o)
{
    struct rlk_call *call = calloc(1, sizeof *call);
    if (call == NULL || (call->acq_resource = strdup(o->name)) == NULL) {
        free(call);
        return 1;
    }
    call->kind = RLK_CALL_REOBSERVE;
    call->name = call->acq_resource;
    Rlock__V1__Request req;
    Rlock__V1__Leader l;
    Rlock__V1__Observe ob;
    rlk_elect_fill(call, &req, &l, &ob);
    if (rlk_eng_submit_own(c, &req, call) < 0)
        return c->state == RLK_SESSION_OPEN ? 1 : -1;
    return 0;
}

int64_t rlk_elect_timers(struct rlock_client *c, int64_t now)
{
    int64_t next = INT64_MAX;
    if (c->observed_retrying == 0)
        return next;
    /*
     * Sending may read (a TLS write that waited for a read), and an answer read may
     * take an election off the list: the walk starts again when that happened.
     */
    unsigned gen = c->observed_gen;
    for (struct rlk_observed *o = c->observed; o != NULL;) {
        if (!o->retrying || o->retry_at > now) {
            if (o->retrying && o->retry_at < next)
                next = o->retry_at;
            o = o->next;
            continue;
        }
        if (c->state != RLK_SESSION_OPEN)
            return INT64_MAX; /* moving (its resume sends them all) or over */
        o->retrying = 0;      /* the backoff stays, for the next refusal */
        c->observed_retrying--;
        int rc = reobserve(c, o);
        if (rc < 0)
            return INT64_MAX;
        if (rc > 0) { /* out of memory: nothing was sent, nor read */
            retry_at(c, o, now + retry_pause(o, 0));
            if (o->retry_at < next)
                next = o->retry_at;
        }
        if (c->observed_gen != gen) {
            gen = c->observed_gen;
            next = INT64_MAX;
            o = c->observed;
        } else {
            o = o->next;
        }
    }
    return next;
}

void rlk_elect_resumed(struct rlock_client *c)
{
    /* This daemon may know nothing of them: every one is due now, with a fresh backoff. */
    int64_t now = rlk_alive_ms();
    for (struct rlk_observed *o = c->observed; o != NULL; o = o->next) {
        retry_clear(c, o);
        retry_at(c, o, now);
    }
    (void)rlk_elect_timers(c, now);
}

/* --- the blocking API ------------------------------------------------------------------ */

/* A Leader or Observe request of kind for election name, its answer into out (may be NULL). */
static enum rlock_err elect_call(struct rlock_client *c, const char *name,
                                 enum rlk_call_kind kind, uint32_t timeout_ms,
                                 struct rlock_leader *out)
{
    if (name == NULL || name[0] == '\0')
        return rlk_fail(RLOCK_ERR_ARG, "election name is empty");
    struct rlk_call call = {.kind = kind, .name = name, .leader = out};
    Rlock__V1__Request req;
    Rlock__V1__Leader l;
    Rlock__V1__Observe o;
    rlk_elect_fill(&call, &req, &l, &o);
    /* A stop: the engine forgets the election when it queues it (rlk_eng_submit). */
    return rlk_call_simple(c, &req, &call, timeout_ms);
}

RLOCK_API enum rlock_err rlock_leader(struct rlock_client *c, const char *name,
                                      uint32_t timeout_ms, struct rlock_leader *out)
{
    if (out == NULL)
        return rlk_fail(RLOCK_ERR_ARG, "out must not be NULL");
    return elect_call(c, name, RLK_CALL_LEADER, timeout_ms, out);
}

RLOCK_API enum rlock_err rlock_observe(struct rlock_client *c, const char *name,
                                       uint32_t timeout_ms, struct rlock_leader *now)
{
    return elect_call(c, name, RLK_CALL_OBSERVE, timeout_ms, now);
}

RLOCK_API enum rlock_err rlock_observe_stop(struct rlock_client *c, const char *name,
                                            uint32_t timeout_ms)
{
    return elect_call(c, name, RLK_CALL_UNOBSERVE, timeout_ms, NULL);
}
