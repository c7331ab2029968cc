/* SPDX-License-Identifier: BSD-3-Clause */
/* election.c — see election.h. */
#include "election.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "config.h"
#include "lock.h"
#include "log.h"
#include "pool.h"
#include "pubsub.h"
#include "reply.h"
#include "request.h"
#include "resource.h"
#include "server.h"
#include "session.h"
#include "util.h"

/* Reads of an observed election with no leader, when notices are off: the only news. */
#define ELECTION_POLL_MS 1000
/* The same with notices on: grants and releases are announced, this is a safety net. */
#define ELECTION_IDLE_MS 10000
/* After a leader's lease would run out without renewal (its daemon died). */
#define ELECTION_EXPIRY_SLACK_MS 50
/* After a read that failed. */
#define ELECTION_RETRY_MS 1000

/* One session observing one election. */
struct observer {
    struct session *sess;
    struct resource *res;
    uint64_t term;    /* the latest term it was shown (0: none yet) */
    uint8_t elected;  /* it was last shown a leader */
    uint8_t answered; /* an Observe of it was answered: changes are pushed from then on */
    uint32_t pending; /* its Observe reads in Redis */
    LIST_ENTRY(observer) res_link;
    LIST_ENTRY(observer) sess_link;
};

/* An election sessions of this daemon observe; holds a reference on its resource. */
struct election {
    LIST_HEAD(, observer) observers;
    uint32_t n;
    struct event *timer;
    uint8_t reading; /* a read is in Redis (one at a time per election) */
    uint8_t again;   /* news came during it: read once more */
    uint8_t read_ok; /* a read of it was answered; then what it found: */
    uint8_t last_elected;
    uint64_t last_term;
};

static void election_read(struct resource *res);

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    election_read(arg);
}

/* The election record of res, made on first use (with the resource's reference). */
static struct election *election_get(struct resource *res)
{
    if (res->el != NULL)
        return res->el;
    struct election *el = calloc(1, sizeof *el);
    if (el == NULL)
        return NULL;
    el->timer = evtimer_new(res->srv->base, timer_cb, res);
    if (el->timer == NULL) {
        free(el);
        return NULL;
    }
    LIST_INIT(&el->observers);
    res->el = el;
    res->srv->nobserved++;
    resource_ref(res);
    pubsub_observe(res->srv, res, 1);
    return el;
}

/* Free res's election once nobody observes it and no read is in Redis. */
static void election_put(struct resource *res)
{
    struct election *el = res->el;
    if (el == NULL || el->n > 0 || el->reading)
        return;
    event_free(el->timer);
    free(el);
    res->el = NULL;
    res->srv->nobserved--;
    pubsub_observe(res->srv, res, 0);
    resource_unref(res);
}

/* Send leader.lua for res: the lock key and its leader record. */
static void leader_send(struct resource *res, rpool_cb *cb, void *arg)
{
    char leader_key[res->key_len + RESOURCE_SUBKEY_MAX + 1];
    const char *args[2] = {res->key, leader_key};
    size_t lens[2] = {res->key_len,
                      resource_subkey(res, RESOURCE_LEADER_SUFFIX, leader_key, sizeof leader_key)};
    rpool_eval(res->srv->pool, res->route, SCRIPT_LEADER, 2, 2, args, lens, cb, arg);
}

/* What a read found, as the protocol says it. */
static void leader_fill(Rlock__V1__LeaderReply *r, int found, const struct reply_leader *ld,
                        char *value)
{
    r->elected = found == 1;
    r->term = found == 1 ? ld->term : 0;
    r->value = value;
    r->ttl_ms = found == 1 && ld->pttl > 0 ? (uint32_t)(ld->pttl > UINT32_MAX ? UINT32_MAX
                                                                            : ld->pttl)
                                           : 0;
}

/* The value of a read as a C string (Redis's bytes may hold anything but a NUL: checked
 * at the campaign). NULL when out of memory. */
static char *value_dup(int found, const struct reply_leader *ld)
{
    size_t n = found == 1 ? ld->value_len : 0;
    char *v = malloc(n + 1);
    if (v != NULL) {
        memcpy(v, n > 0 ? ld->value : "", n);
        v[n] = '\0';
    }
    return v;
}

static void push_change(struct observer *o, const char *value)
{
    Rlock__V1__LeaderChanged ch = RLOCK__V1__LEADER_CHANGED__INIT;
    ch.resource = o->res->name;
    ch.elected = o->elected;
    ch.term = o->term;
    ch.value = (char *)value;
    Rlock__V1__Event ev = RLOCK__V1__EVENT__INIT;
    ev.body_case = RLOCK__V1__EVENT__BODY_LEADER_CHANGED;
    ev.leader_changed = &ch;
    session_push_event(o->sess, &ev);
}

/*
 * Whether a read that found found (and ld) is news to o: a higher term, its leader
 * gone, or the term it was last shown leading again (a read that missed the record,
 * protocol.md §6.11). If so, o's view becomes it and 1 is returned. Never a lower term.
 */
static int observer_takes(struct observer *o, int found, const struct reply_leader *ld)
{
    if (found == 1 && (ld->term > o->term || (ld->term == o->term && !o->elected))) {
        o->term = ld->term;
        o->elected = 1;
        return 1;
    }
    if (found == 0 && o->elected) {
        o->elected = 0; /* the term stays the last one seen */
        return 1;
    }
    return 0;
}

/* Show o what a read found, if it is news to o. */
static void observer_update(struct observer *o, int found, const struct reply_leader *ld,
                            const char *value)
{
    if (observer_takes(o, found, ld))
        push_change(o, o->elected ? value : "");
}

/* Remember what a read of el found; 1 when it differs from the read before. */
static int election_saw(struct election *el, int found, const struct reply_leader *ld)
{
    uint64_t term = found == 1 ? ld->term : 0;
    int changed = !el->read_ok || el->last_elected != (found == 1) || el->last_term != term;
    el->read_ok = 1;
    el->last_elected = found == 1;
    el->last_term = term;
    return changed;
}

static void election_arm(struct election *el, uint32_t ms)
{
    struct timeval tv = util_tv_ms(ms);
    evtimer_add(el->timer, &tv);
}

/* When to read res's leader again after a read found it (found 1) or nobody (0). */
static uint32_t election_next_ms(const struct resource *res, int found,
                                 const struct reply_leader *ld)
{
    uint32_t next = res->srv->pubsub != NULL ? ELECTION_IDLE_MS : ELECTION_POLL_MS;
    if (found == 1 && ld->pttl >= 0 && (uint64_t)ld->pttl + ELECTION_EXPIRY_SLACK_MS < next)
        next = (uint32_t)ld->pttl + ELECTION_EXPIRY_SLACK_MS;
    return next;
}

static void read_cb(const redisReply *reply, const char *err, void *arg)
{
    (void)err;
    struct resource *res = arg;
    struct election *el = res->el;
    struct reply_leader ld = {0};
    int found = reply_leader(reply, &ld);
    char *value = found >= 0 ? value_dup(found, &ld) : NULL;
    el->reading = 0;
    if (value == NULL) {
        /* Debug only: while Redis is out, this comes every second per observed election. */
        log_debug("election %s: the leader could not be read (%s); again in %d ms", res->name,
                 reply == NULL ? err : found < 0 ? "unexpected reply" : "out of memory",
                 ELECTION_RETRY_MS);
        election_arm(el, ELECTION_RETRY_MS);
    } else {
        struct observer *o;
        election_saw(el, found, &ld);
        LIST_FOREACH(o, &el->observers, res_link)
            if (o->answered)
                observer_update(o, found, &ld, value);
        election_arm(el, election_next_ms(res, found, &ld));
        free(value);
    }
    if (el->again && el->n > 0) {
        el->again = 0;
        election_read(res);
    }
    election_put(res);
    resource_unref(res); /* the read's */
}

static void election_read(struct resource *res)
{
    struct election *el = res->el;
    if (el == NULL)
        return;
    if (el->reading) {
        el->again = 1;
        return;
    }
    el->reading = 1;
    evtimer_del(el->timer);
    resource_ref(res);
    leader_send(res, read_cb, res);
}

void election_notice(struct resource *res)
{
    if (res->el != NULL && res->el->n > 0)
        election_read(res);
}

/* --- requests ------------------------------------------------------------- */

/* s's observer of res, or NULL. Walks what s observes (at most [session] max_locks). */
static struct observer *observer_find(struct session *s, const struct resource *res)
{
    struct observer *o;
    LIST_FOREACH(o, &s->observing, sess_link)
        if (o->res == res)
            return o;
    return NULL;
}

static void observer_free(struct observer *o)
{
    struct resource *res = o->res;
    LIST_REMOVE(o, res_link);
    LIST_REMOVE(o, sess_link);
    res->el->n--;
    o->sess->nobserving--;
    free(o);
    election_put(res);
}

void election_session_end(struct session *s)
{
    struct observer *o;
    while ((o = LIST_FIRST(&s->observing)) != NULL)
        observer_free(o);
}

/*
 * An Observe's read came back for o (found < 0: it failed). Its answer is o's view
 * from now on (a view o had is moved on only by news, as by any read). A first Observe
 * whose read failed was answered with an error: o goes, unless another Observe of it is
 * still in Redis. A read that found something the election's own reads had not seen
 * (observers of it joined at other times) reads it again for everyone.
 */
static void observe_answered(struct observer *o, int found, const struct reply_leader *ld)
{
    struct resource *res = o->res;
    struct election *el = res->el;
    o->pending--;
    if (found < 0) {
        if (!o->answered && o->pending == 0)
            observer_free(o);
        return;
    }
    if (!o->answered) {
        o->answered = 1;
        o->elected = found == 1;
        o->term = found == 1 ? ld->term : 0;
    } else {
        (void)observer_takes(o, found, ld); /* the answer itself tells the client */
    }
    int differs = el->read_ok && (el->last_elected != (found == 1) ||
                                  el->last_term != (found == 1 ? ld->term : 0));
    if (differs)
        election_read(res);
    else if (!el->reading && !evtimer_pending(el->timer, NULL))
        election_arm(el, election_next_ms(res, found, ld));
}

/* A Leader or Observe read came back: answer it (and, for an Observe, its observer). */
static void request_read_cb(const redisReply *reply, const char *err, void *arg)
{
    struct request *req = arg;
    struct session *s = req->sess;
    struct reply_leader ld = {0};
    int found = reply_leader(reply, &ld);
    char *value = found >= 0 && s != NULL ? value_dup(found, &ld) : NULL;
    if (s != NULL && req->op == RLOCK__V1__REQUEST__BODY_OBSERVE) {
        struct observer *o = observer_find(s, req->res);
        if (o != NULL)
            observe_answered(o, value != NULL ? found : -1, &ld);
    }
    if (s != NULL && found < 0) {
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_UNAVAILABLE,
                              reply == NULL ? err : "unexpected reply from Redis");
    } else if (s != NULL && value == NULL) {
        session_respond_error(s, req->id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
    } else if (s != NULL) {
        Rlock__V1__LeaderReply r = RLOCK__V1__LEADER_REPLY__INIT;
        leader_fill(&r, found, &ld, value);
        session_respond(s, req->id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                        RLOCK__V1__RESPONSE__BODY_LEADER, &r);
    }
    free(value);
    lock_request_done(req);
}

/*
 * The checks of a read for request id: the name, the session's bound on what it has
 * in Redis ([session] max_locks: these reads count with its acquires), the route.
 * The resource (a new reference) in *out and 0, or -1 when answered.
 */
static int read_check(struct session *s, uint64_t id, const char *name, struct resource **out)
{
    struct server *srv = s->srv;
    const char *bad = lock_check_resource(srv->cfg, name);
    if (bad != NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad);
        return -1;
    }
    if (s->nleases + s->nrequests >= srv->cfg->max_locks_per_session) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED,
                              "too many locks held or requests in flight for this session");
        return -1;
    }
    struct resource *res = resource_get(srv, name, strlen(name));
    if (res == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return -1;
    }
    if (!rpool_route_ready(srv->pool, res->route)) {
        resource_unref(res);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_UNAVAILABLE, "redis unavailable");
        return -1;
    }
    *out = res;
    return 0;
}

/*
 * Send the read of request id (op) on res, handing it res's reference. 0, or -1 when
 * answered (out of memory). Once sent, res may be gone: the answer can come at once.
 */
static int read_send(struct session *s, uint64_t id, int op, struct resource *res)
{
    struct request *req = request_new(s->srv, s, id, op);
    if (req == NULL) {
        resource_unref(res);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return -1;
    }
    req->res = res; /* the request's reference */
    request_set_state(req, REQUEST_IN_REDIS);
    leader_send(res, request_read_cb, req);
    return 0;
}

int election_leader(struct session *s, uint64_t id, const Rlock__V1__Leader *l)
{
    struct resource *res;
    if (read_check(s, id, l->resource, &res) != 0)
        return 0;
    return read_send(s, id, RLOCK__V1__REQUEST__BODY_LEADER, res) == 0;
}

/* Observe{stop}: the session's observer of the name goes; answered with an empty reply. */
static int observe_stop(struct session *s, uint64_t id, const char *name)
{
    const char *bad = lock_check_resource(s->srv->cfg, name);
    struct resource *res = bad == NULL ? resource_find(s->srv, name, strlen(name)) : NULL;
    struct observer *o = res != NULL ? observer_find(s, res) : NULL;
    if (o == NULL) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_NOT_HELD,
                              "this session does not observe that election");
        return 0;
    }
    observer_free(o);
    Rlock__V1__LeaderReply r = RLOCK__V1__LEADER_REPLY__INIT;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL, RLOCK__V1__RESPONSE__BODY_LEADER,
                    &r);
    return 0;
}

int election_observe(struct session *s, uint64_t id, const Rlock__V1__Observe *ob)
{
    if (ob->stop)
        return observe_stop(s, id, ob->resource);
    const struct config *cfg = s->srv->cfg;
    struct resource *res;
    if (read_check(s, id, ob->resource, &res) != 0)
        return 0;
    struct observer *o = observer_find(s, res);
    if (o == NULL) {
        const char *full = s->nobserving >= cfg->max_locks_per_session
                               ? "too many elections observed by this session ([session] max_locks)"
                           : res->el == NULL && s->srv->nobserved >= cfg->max_locks
                               ? "too many elections observed in this daemon (limits.max_locks)"
                               : NULL;
        struct election *el = full == NULL ? election_get(res) : NULL;
        o = el != NULL ? calloc(1, sizeof *o) : NULL;
        if (o == NULL) {
            if (el != NULL)
                election_put(res);
            resource_unref(res);
            session_respond_error(s, id,
                                  full != NULL ? RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED
                                               : RLOCK__V1__STATUS__STATUS_INTERNAL,
                                  full != NULL ? full : "out of memory");
            return 0;
        }
        o->sess = s;
        o->res = res;
        LIST_INSERT_HEAD(&el->observers, o, res_link);
        LIST_INSERT_HEAD(&s->observing, o, sess_link);
        el->n++;
        s->nobserving++;
    }
    /* Counted before the send: its answer may come at once (out of memory). */
    o->pending++;
    if (read_send(s, id, RLOCK__V1__REQUEST__BODY_OBSERVE, res) != 0) {
        if (--o->pending == 0 && !o->answered)
            observer_free(o);
        return 0;
    }
    return 1;
}
