/* SPDX-License-Identifier: BSD-3-Clause */
/* deadlock.c — see deadlock.h. */
#include "deadlock.h"

#include <stdio.h>
#include <string.h>

#include "lease.h"
#include "request.h"
#include "resource.h"
#include "session.h"

#define ANY_OWNER UINT64_MAX

struct node {
    const struct session *s;
    uint64_t owner; /* ANY_OWNER: every owner of the session */
};

/* One step of the path: node waits (through its request on res) for the next node. */
struct step {
    struct node n;
    const struct resource *res; /* what the previous node waits for, held by n */
};

struct walk {
    struct node target;
    uint32_t steps;
    struct step path[DEADLOCK_MAX_DEPTH];
    uint32_t depth;
};

static int node_is(const struct node *a, const struct session *s, uint64_t owner)
{
    return a->s == s && (a->owner == ANY_OWNER || owner == ANY_OWNER || a->owner == owner);
}

/* The node of lease l. */
static struct node lease_node(const struct lease *l)
{
    struct node n = {l->sess, l->owners_mixed ? ANY_OWNER : l->owner};
    return n;
}

/* 1 when a waiter of this kind (shared, limit) waits for lease l to leave. */
static int excludes(const struct lease *l, int shared, uint32_t limit)
{
    if (limit != 0 || l->limit != 0)
        return 0; /* semaphores: any holder's permits will do, no edge of necessity */
    return !shared || !l->shared;
}

static int visit(struct walk *w, struct node from);

/* Follow the edges from a wait of kind (shared, limit) on res: its excluding holders. */
static int follow(struct walk *w, const struct resource *res, int shared, uint32_t limit)
{
    const struct lease *l = res->holder;
    if (l != NULL && !l->forgotten && excludes(l, shared, limit)) {
        w->path[w->depth].res = res;
        if (visit(w, lease_node(l)))
            return 1;
    }
    LIST_FOREACH(l, &res->shared, res_link) {
        if (l->forgotten || !excludes(l, shared, limit))
            continue;
        w->path[w->depth].res = res;
        if (visit(w, lease_node(l)))
            return 1;
        if (w->steps >= DEADLOCK_MAX_STEPS)
            return 0;
    }
    return 0;
}

/* Is the target reachable from node n (held by the path so far)? */
static int visit(struct walk *w, struct node n)
{
    if (++w->steps > DEADLOCK_MAX_STEPS)
        return 0;
    if (node_is(&w->target, n.s, n.owner)) {
        w->path[w->depth].n = n;
        w->depth++;
        return 1;
    }
    if (w->depth + 1 >= DEADLOCK_MAX_DEPTH)
        return 0;
    for (uint32_t i = 0; i < w->depth; i++)
        if (node_is(&w->path[i].n, n.s, n.owner))
            return 0; /* a cycle that does not pass through the target: not this wait's */
    w->path[w->depth].n = n;
    w->depth++;
    const struct request *r;
    TAILQ_FOREACH(r, &n.s->requests, sess_link) {
        if (w->steps >= DEADLOCK_MAX_STEPS)
            break;
        if (r->op != RLOCK__V1__REQUEST__BODY_ACQUIRE || !r->in_queue || r->res == NULL ||
            (n.owner != ANY_OWNER && r->owner != n.owner))
            continue;
        if (follow(w, r->res, r->shared, r->limit))
            return 1;
    }
    w->depth--;
    return 0;
}

/* "session ID8 (NAME, owner N)" (the id's first 8 characters, as rlockctl shows them: the
 * message must fit a client's 256 bytes for a cycle of three), or "this session (owner N)". */
static void who(const struct node *n, const struct session *self, char *out, size_t len)
{
    char owner[32] = "";
    if (n->owner != ANY_OWNER)
        snprintf(owner, sizeof owner, "owner %llu", (unsigned long long)n->owner);
    else
        snprintf(owner, sizeof owner, "several owners");
    if (n->s == self)
        snprintf(out, len, "this session (%s)", owner);
    else
        snprintf(out, len, "session %.8s (%.48s, %s)", n->s->id,
                 n->s->name[0] ? n->s->name : "-", owner);
}

int deadlock_find(const struct request *req, char *msg, size_t len)
{
    if (req->sess == NULL || req->limit != 0)
        return 0;
    struct walk w = {.target = {req->sess, req->owner}};
    /* The first step: the waiter itself, waiting on req's resource. */
    w.path[0].n = w.target;
    w.depth = 1;
    if (!follow(&w, req->res, req->shared, req->limit))
        return 0;
    /* path[i].res is held by path[i].n and waited for by path[i - 1].n. */
    size_t n = (size_t)snprintf(msg, len, "deadlock:");
    for (uint32_t i = 1; i < w.depth && n < len; i++) {
        char holder[200];
        who(&w.path[i].n, req->sess, holder, sizeof holder);
        n += (size_t)snprintf(msg + n, len - n, " %s held by %s%s", w.path[i].res->name, holder,
                              i + 1 < w.depth ? ", waiting for" : "");
    }
    return 1;
}
