/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin_list.c — ListSessions and ListLocks: one bounded page per request.
 *
 * Sessions are listed in connection order. The cursor "s<N>" is the serial
 * of the last session returned; the next page starts at the first live
 * session with a higher serial (sessidx.h), so sessions that end meanwhile
 * shift nothing, and each session that lives through the listing is
 * returned exactly once.
 *
 * Locks are listed by scanning the resource table a bucket at a time
 * (restable_scan_*): the cursor "b<C>" names the next bucket to visit. A
 * page takes whole buckets, so that nothing in a bucket is split between
 * pages; only when one bucket alone holds more matches than fit in a page
 * are its matches sorted by hash and the page ends inside it, with the
 * cursor "b<C>.<H>.<B>.<S>": resume at bucket C after hash H and, within it,
 * after the holder of session serial S (a resource held shared is listed once
 * per holding session, in serial order), if the table still has B buckets
 * (if it grew, the bucket is read again whole, which may repeat a lock but
 * never skips one). A request visits at most
 * ADMIN_SCAN_BUCKETS buckets, however little its filters match: a page may
 * then be empty with a cursor to go on from.
 */
#include "admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "config.h"
#include "lease.h"
#include "resource.h"
#include "sessidx.h"
#include "request.h"
#include "session.h"

#define CURSOR_TEXT 64
/* A repeated field's tag and length in front of each entry, at most. */
#define ENTRY_OVERHEAD 6

/* Parse "<tag><hex>[.<hex>.<hex>[.<hex>]]" into up to four numbers; how many, or -1. */
static int cursor_parse(const char *text, char tag, uint64_t out[4])
{
    if (text[0] != tag || text[1] == '\0')
        return -1;
    const char *p = text + 1;
    int n = 0;
    for (;;) {
        uint64_t v = 0;
        int digits = 0;
        for (; *p != '\0' && *p != '.'; p++, digits++) {
            int d = *p >= '0' && *p <= '9'   ? *p - '0'
                    : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                             : -1;
            if (d < 0 || digits == 16)
                return -1;
            v = v << 4 | (uint64_t)d;
        }
        if (digits == 0 || n == 4)
            return -1;
        out[n++] = v;
        if (*p == '\0')
            return n;
        p++;
    }
}

/* --- sessions --------------------------------------------------------------------- */

_Static_assert((int)AUTH_ROLE_OPEN == (int)RLOCK__V1__ROLE__ROLE_OPEN &&
                   (int)AUTH_ROLE_CLIENT == (int)RLOCK__V1__ROLE__ROLE_CLIENT &&
                   (int)AUTH_ROLE_ADMIN == (int)RLOCK__V1__ROLE__ROLE_ADMIN &&
                   (int)AUTH_ROLE_NONE == (int)RLOCK__V1__ROLE__ROLE_NONE,
               "enum auth_role is the protocol's Role");

/* The session's Acquires queued for a lock; *work counts the requests looked at. */
static uint32_t session_waiting(const struct session *t, uint64_t *work)
{
    uint32_t n = 0;
    const struct request *r;
    TAILQ_FOREACH(r, &t->requests, sess_link) {
        n += r->in_queue != 0;
        (*work)++;
    }
    return n;
}

static void session_info(const struct session *t, Rlock__V1__SessionInfo *info, int64_t now,
                         uint64_t *work)
{
    rlock__v1__session_info__init(info);
    info->session_id = (char *)t->id;
    info->client_name = (char *)t->name;
    info->peer = (char *)t->peer;
    info->state = t->state == SESSION_ACTIVE ? RLOCK__V1__SESSION_STATE__SESSION_STATE_ACTIVE
                                             : RLOCK__V1__SESSION_STATE__SESSION_STATE_ACCEPTED;
    info->role = (Rlock__V1__Role)t->role; /* enum auth_role has the protocol's values */
    info->connected_at_ms = util_wall_of_ms(t->opened_ms);
    info->idle_ms = (uint64_t)(now > t->last_frame_ms ? now - t->last_frame_ms : 0);
    info->locks_held = t->nleases;
    info->waiting = session_waiting(t, work);
    info->in_flight = t->nrequests;
    info->requested_timeout_ms = t->requested_timeout_ms;
    info->timeout_ms = t->state == SESSION_ACTIVE ? t->timeout_ms : 0;
    info->resumed = t->resumed;
}

void admin_list_sessions(struct session *s, uint64_t id, const Rlock__V1__ListSessions *q)
{
    struct server *srv = s->srv;
    uint64_t after[4] = {0, 0, 0, 0};
    if (q->cursor[0] != '\0' && cursor_parse(q->cursor, 's', after) != 1) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                      "cursor is not one of ListSessions (pass next_cursor back as it came)");
        return;
    }
    uint32_t limit = admin_limit(q->limit);
    size_t bytes = admin_page_bytes(s);
    Rlock__V1__SessionInfo *infos = calloc(limit, sizeof *infos);
    Rlock__V1__SessionInfo **ptrs = calloc(limit, sizeof *ptrs);
    if (infos == NULL || ptrs == NULL) {
        free(infos);
        free(ptrs);
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
        return;
    }
    int64_t now = util_now_ms();
    size_t pos = sessidx_seek(srv->sessidx, after[0]), used = 0, n = 0;
    uint64_t last = after[0], work = 0;
    struct session *t;
    while (n < limit && work < ADMIN_SCAN_REQUESTS &&
           (t = sessidx_at(srv->sessidx, &pos)) != NULL) {
        session_info(t, &infos[n], now, &work);
        size_t size = rlock__v1__session_info__get_packed_size(&infos[n]) + ENTRY_OVERHEAD;
        if (n > 0 && used + size > bytes)
            break;
        used += size;
        ptrs[n] = &infos[n];
        n++;
        last = t->serial;
    }
    size_t peek = sessidx_seek(srv->sessidx, last);
    char cursor[CURSOR_TEXT] = "";
    if (sessidx_at(srv->sessidx, &peek) != NULL)
        snprintf(cursor, sizeof cursor, "s%" PRIx64, last);

    Rlock__V1__ListSessionsReply r = RLOCK__V1__LIST_SESSIONS_REPLY__INIT;
    r.n_sessions = n;
    r.sessions = ptrs;
    r.next_cursor = cursor;
    r.total = srv->nsessions;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                    RLOCK__V1__RESPONSE__BODY_LIST_SESSIONS, &r);
    free(infos);
    free(ptrs);
}

/* --- locks ------------------------------------------------------------------------ */

struct match {
    const struct resource *res;
    const struct lease *l;
    uint64_t hash;
    uint64_t serial; /* of the holding session: the order among a resource's shared holders */
};

/* What a ListLocks request looks for, and the matches of the bucket at hand. */
struct lock_scan {
    const char *prefix;
    size_t prefix_len;
    const struct session *only; /* NULL: every session */
    struct match *found;
    size_t nfound, cap;
    int nomem;
};

static void scan_add(struct lock_scan *sc, const struct resource *res, const struct lease *l,
                     uint64_t hash)
{
    if (sc->nomem || (sc->only != NULL && l->sess != sc->only))
        return;
    if (sc->nfound == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 16;
        struct match *m = realloc(sc->found, cap * sizeof *m);
        if (m == NULL) {
            sc->nomem = 1;
            return;
        }
        sc->found = m;
        sc->cap = cap;
    }
    sc->found[sc->nfound] = (struct match){res, l, hash, l->sess->serial};
    sc->nfound++;
}

static void scan_visit(struct resource *res, uint64_t hash, void *arg)
{
    struct lock_scan *sc = arg;
    if (!RESOURCE_HELD_HERE(res) || res->name_len < sc->prefix_len ||
        memcmp(res->name, sc->prefix, sc->prefix_len) != 0)
        return;
    if (res->holder != NULL)
        scan_add(sc, res, res->holder, hash);
    const struct lease *l;
    LIST_FOREACH(l, &res->shared, res_link)
        scan_add(sc, res, l, hash);
}

static int match_cmp(const void *a, const void *b)
{
    const struct match *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

static void lock_info(const struct match *m, Rlock__V1__LockInfo *info, int64_t now)
{
    const struct resource *res = m->res;
    const struct lease *l = m->l;
    rlock__v1__lock_info__init(info);
    info->resource = res->name;
    info->session_id = (char *)l->sess->id;
    info->client_name = (char *)l->sess->name;
    info->owner = l->owner;
    info->fence = l->fence;
    info->token = (char *)l->token;
    info->acquired_at_ms = util_wall_of_ms(l->granted_ms);
    info->ttl_ms = l->ttl_ms;
    info->ttl_left_ms = lease_valid_ms(l, now);
    info->watchdog = l->watchdog != 0;
    info->hold_count = l->holds;
    info->waiters = res->nwaiters;
    info->mode = l->shared && l->limit == 0 ? RLOCK__V1__LOCK_MODE__MODE_SHARED
                                            : RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE;
    info->limit = l->limit;
    info->permits = l->permits;
    info->leader = l->leader;
}

/* The page being built. */
struct lock_page {
    Rlock__V1__LockInfo *infos;
    Rlock__V1__LockInfo **ptrs;
    size_t n, limit, used, bytes;
    int64_t now;
};

/* Add m if the page has room (always when it is empty); 1 if added. */
static int page_add(struct lock_page *p, const struct match *m)
{
    if (p->n == p->limit)
        return 0;
    lock_info(m, &p->infos[p->n], p->now);
    size_t size = rlock__v1__lock_info__get_packed_size(&p->infos[p->n]) + ENTRY_OVERHEAD;
    if (p->n > 0 && p->used + size > p->bytes)
        return 0;
    p->used += size;
    p->ptrs[p->n] = &p->infos[p->n];
    p->n++;
    return 1;
}

/* 1 when all of found[0..n) fit in the page (counted, not added). */
static int page_fits(const struct lock_page *p, const struct match *found, size_t n)
{
    if (p->n + n > p->limit)
        return 0;
    size_t used = p->used;
    for (size_t i = 0; i < n; i++) {
        Rlock__V1__LockInfo info;
        lock_info(&found[i], &info, p->now);
        used += rlock__v1__lock_info__get_packed_size(&info) + ENTRY_OVERHEAD;
    }
    return used <= p->bytes;
}

/*
 * Fill the page from the scan, starting at cursor (resuming after hash
 * resume_after within the first bucket when has_resume). Writes the next
 * cursor ("" at the end). 0, or -1 when out of memory.
 */
static int scan_locks(struct server *srv, struct lock_scan *sc, struct lock_page *p,
                      uint64_t cursor, int has_resume, uint64_t resume_after,
                      uint64_t resume_serial, char *next, size_t next_len)
{
    const struct restable *t = srv->resources;
    next[0] = '\0';
    for (uint32_t visited = 0;; visited++) {
        if (visited == ADMIN_SCAN_BUCKETS || p->n == p->limit) {
            snprintf(next, next_len, "b%" PRIx64, cursor);
            return 0;
        }
        sc->nfound = 0;
        restable_scan_bucket(t, cursor, scan_visit, sc);
        if (sc->nomem)
            return -1;
        size_t skip = 0;
        if (has_resume || (p->n == 0 && !page_fits(p, sc->found, sc->nfound))) {
            /* Only a bucket read in part is taken in hash order. */
            qsort(sc->found, sc->nfound, sizeof *sc->found, match_cmp);
            while (has_resume && skip < sc->nfound &&
                   (sc->found[skip].hash < resume_after ||
                    (sc->found[skip].hash == resume_after &&
                     sc->found[skip].serial <= resume_serial)))
                skip++;
            has_resume = 0;
        }
        if (!page_fits(p, sc->found + skip, sc->nfound - skip)) {
            if (p->n > 0) { /* the next page takes this bucket whole */
                snprintf(next, next_len, "b%" PRIx64, cursor);
                return 0;
            }
            size_t i = skip;
            while (i < sc->nfound && page_add(p, &sc->found[i]))
                i++;
            snprintf(next, next_len, "b%" PRIx64 ".%" PRIx64 ".%" PRIx64 ".%" PRIx64, cursor,
                     sc->found[i - 1].hash, restable_buckets(t), sc->found[i - 1].serial);
            return 0;
        }
        for (size_t i = skip; i < sc->nfound; i++)
            page_add(p, &sc->found[i]);
        cursor = restable_scan_next(t, cursor);
        if (cursor == 0)
            return 0;
    }
}

void admin_list_locks(struct session *s, uint64_t id, const Rlock__V1__ListLocks *q)
{
    struct server *srv = s->srv;
    /* Three parts: a cursor of a version that listed one holder per resource. */
    uint64_t cur[4] = {0, 0, 0, UINT64_MAX};
    int parts = q->cursor[0] == '\0' ? 1 : cursor_parse(q->cursor, 'b', cur);
    if (parts != 1 && parts != 3 && parts != 4) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                      "cursor is not one of ListLocks (pass next_cursor back as it came)");
        return;
    }
    struct lock_scan sc = {.prefix = q->prefix, .prefix_len = strlen(q->prefix)};
    char next[CURSOR_TEXT] = "";
    struct lock_page p = {.limit = admin_limit(q->limit), .bytes = admin_page_bytes(s),
                          .now = util_now_ms()};
    int scan = 1;
    if (q->session_id[0] != '\0') {
        char sid[UTIL_UUID_LEN + 1];
        if (util_uuid_parse(q->session_id, sid) != 0) {
            session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                                  "session_id is not a session id (a UUID, as ListSessions gives it)");
            return;
        }
        /* Ids are never reused: a session not here now holds nothing of this listing. */
        sc.only = sessidx_find(srv->sessidx, sid);
        scan = sc.only != NULL && sc.only->nleases > 0;
    }
    p.infos = calloc(p.limit, sizeof *p.infos);
    p.ptrs = calloc(p.limit, sizeof *p.ptrs);
    int rc = -1;
    if (p.infos != NULL && p.ptrs != NULL)
        rc = scan ? scan_locks(srv, &sc, &p, cur[0] & (restable_buckets(srv->resources) - 1),
                               parts >= 3 && cur[2] == restable_buckets(srv->resources), cur[1],
                               cur[3], next, sizeof next)
                  : 0;
    if (rc != 0) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory");
    } else {
        Rlock__V1__ListLocksReply r = RLOCK__V1__LIST_LOCKS_REPLY__INIT;
        r.n_locks = p.n;
        r.locks = p.ptrs;
        r.next_cursor = next;
        session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL,
                        RLOCK__V1__RESPONSE__BODY_LIST_LOCKS, &r);
    }
    free(sc.found);
    free(p.infos);
    free(p.ptrs);
}
