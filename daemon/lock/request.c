/* SPDX-License-Identifier: BSD-3-Clause */
/* request.c — see request.h. */
#include "request.h"

#include <stdlib.h>

#include <event2/event.h>

#include "counters.h"
#include "server.h"

struct request *request_new(struct server *srv, struct session *s, uint64_t id, int op)
{
    struct request *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->srv = srv;
    r->sess = s;
    r->id = id;
    r->op = op;
    r->state = REQUEST_NEW;
    if (op == RLOCK__V1__REQUEST__BODY_ACQUIRE)
        srv->nacquires++;
    /* Charged to its token until freed, orphaned or not: a try in Redis may still take a key. */
    if (s != NULL && s->quota != NULL &&
        (op == RLOCK__V1__REQUEST__BODY_ACQUIRE || op == RLOCK__V1__REQUEST__BODY_ADOPT)) {
        r->quota = quota_ref(s->quota);
        r->quota->locks++;
    }
    if (s != NULL) {
        r->arrival_ms = s->last_frame_ms; /* timed from then to its end (request_free) */
        r->arrival_us = s->last_frame_us;
        TAILQ_INSERT_TAIL(&s->requests, r, sess_link);
        s->nrequests++;
    } else {
        srv->background++;
    }
    return r;
}

void request_orphan(struct request *r)
{
    TAILQ_REMOVE(&r->sess->requests, r, sess_link);
    r->sess->nrequests--;
    r->sess = NULL;
    r->srv->background++;
    if (r->deadline_ev != NULL)
        evtimer_del(r->deadline_ev);
}

void request_free(struct request *r)
{
    if (r == NULL)
        return;
    struct server *srv = r->srv;
    int background = r->sess == NULL;
    if (r->op == RLOCK__V1__REQUEST__BODY_ACQUIRE)
        srv->nacquires--;
    if (!background && r->id != 0)
        counters_observe(srv, r->op, util_now_us() - r->arrival_us);
    if (r->sess != NULL) {
        TAILQ_REMOVE(&r->sess->requests, r, sess_link);
        r->sess->nrequests--;
    }
    if (r->deadline_ev != NULL)
        event_free(r->deadline_ev);
    free(r->value);
    free(r->trace);
    if (r->quota != NULL) {
        r->quota->locks--;
        quota_put(&srv->quotas, r->quota);
    }
    free(r);
    if (background)
        server_background_done(srv);
}

void request_set_state(struct request *r, enum request_state st)
{
    r->state = st;
}
