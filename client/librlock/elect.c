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
 */
#include "rlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    memcpy(o->name, name, len);
    o->term = term;
    o->elected = elected;
    o->next = c->observed;
    c->observed = o;
    return o;
}

void rlk_elect_unobserve(struct rlock_client *c, const char *name)
{
    for (struct rlk_observed **p = &c->observed; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->name, name) == 0) {
            struct rlk_observed *o = *p;
            *p = o->next;
            free(o);
            return;
        }
    }
}

void rlk_elect_free(struct rlock_client *c)
{
    struct rlk_observed *o;
    while ((o = c->observed) != NULL) {
        c->observed = o->next;
        free(o);
    }
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
    struct rlk_observed *o = observed_find(c, call->name);
    if (call->kind == RLK_CALL_OBSERVE) {
        /* The caller learns the leader from this answer: nothing to report. */
        if (o != NULL) {
            (void)observed_advance(o, r->term, r->elected != 0);
        } else if (observed_add(c, call->name, r->term, r->elected != 0) == NULL) {
            rlk_error_set(&call->detail, RLOCK_ERR_NOMEM, 0, "out of memory observing '%.64s'",
                          call->name);
            return RLOCK_ERR_NOMEM;
        }
    } else if (call->kind == RLK_CALL_REOBSERVE && o != NULL &&
               observed_advance(o, r->term, r->elected != 0)) {
        note_leader(c, o->name, o->elected, o->term, value);
    }
    return RLOCK_OK;
}

void rlk_elect_resumed(struct rlock_client *c)
{
    for (const struct rlk_observed *o = c->observed; o != NULL; o = o->next) {
        struct rlk_call *call = calloc(1, sizeof *call);
        if (call == NULL || (call->acq_resource = strdup(o->name)) == NULL) {
            free(call);
            return; /* its changes go unreported until it is observed again */
        }
        call->kind = RLK_CALL_REOBSERVE;
        call->name = call->acq_resource;
        Rlock__V1__Request req;
        Rlock__V1__Leader l;
        Rlock__V1__Observe ob;
        rlk_elect_fill(call, &req, &l, &ob);
        if (rlk_eng_submit_own(c, &req, call) < 0)
            return; /* the session is over, or moving again (which resends them) */
    }
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
    if (kind == RLK_CALL_UNOBSERVE && c != NULL && c->mode == RLK_MODE_BLOCKING) {
        rlk_client_lock(c);
        rlk_elect_unobserve(c, name);
        rlk_client_unlock(c);
    }
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
