/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hello.c — Hello and Resume (hello.h).
 */
#include "hello.h"
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "config.h"
#include "log.h"
#include "seal.h"
#include "sessidx.h"
#include "server.h"
#include "session.h"
#include "util.h"
#include "wire.h"

const char *hello_check(uint32_t protocol_version, const char *client_name, char *buf, size_t len,
                        const char **close_reason)
{
    *close_reason = "bad Hello";
    if (protocol_version > WIRE_PROTOCOL_VERSION) {
        *close_reason = "unsupported protocol version";
        return "unsupported protocol_version (this server speaks 1)";
    }
    if (strlen(client_name) > HELLO_NAME_MAX)
        return "client_name too long";
    const char *bad = util_text_check(client_name, strlen(client_name));
    if (bad != NULL) {
        snprintf(buf, len, "client_name %s", bad);
        return buf;
    }
    return NULL;
}

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Refuse the introduction: answer st with msg, close after the answer. */
static void refuse(struct session *s, uint64_t id, Rlock__V1__Status st, const char *msg,
                   const char *close_reason)
{
    session_respond_error(s, id, st, msg);
    session_close(s, close_reason, 1);
}

/*
 * Whether s, authenticated, may become one more session: max_sessions counts the sessions
 * past their Hello; with authentication on, the last admin_reserve of them are for admin
 * tokens. 0, or -1 once refused.
 */
static int room_for(struct session *s, uint64_t id)
{
    const struct config *cfg = s->srv->cfg;
    uint32_t active = s->srv->nsessions - s->srv->npending; /* s is still pending */
    uint32_t reserve = cfg->auth == NULL ? 0
                       : cfg->admin_reserve < cfg->max_sessions ? cfg->admin_reserve
                                                                : cfg->max_sessions - 1;
    const char *why = NULL;
    if (active >= cfg->max_sessions)
        why = "max_sessions reached";
    else if (s->role != AUTH_ROLE_ADMIN && active >= cfg->max_sessions - reserve)
        why = "max_sessions reached (the last server.admin_reserve sessions are kept for "
              "admin tokens)";
    if (why == NULL)
        return 0;
    s->srv->mx.conns_rejected[METRIC_CONN_MAX_SESSIONS]++;
    log_peer_warn("session %s (%s, %s): refused: %s", s->id, s->peer,
                  s->name[0] ? s->name : "-", why);
    refuse(s, id, RLOCK__V1__STATUS__STATUS_LIMIT_EXCEEDED, why, "max_sessions reached");
    return -1;
}

/* Quotas of the token at k: its entry's own, else its role's (limits.*_max_*). */
static void quota_limits(struct quota *q, const struct config *cfg, const struct auth_token *k)
{
    int admin = k->role == AUTH_ROLE_ADMIN;
    q->max_locks = k->has_max_locks ? k->max_locks
                   : admin          ? cfg->admin_max_locks
                                    : cfg->client_max_locks;
    q->max_waiters = k->has_max_waiters ? k->max_waiters
                     : admin            ? cfg->admin_max_waiters
                                        : cfg->client_max_waiters;
}

/*
 * The checks Hello and Resume share: state, fields, auth token (the session's
 * role). 0, or -1 once refused (answered, closing).
 */
static int introduce(struct session *s, uint64_t id, uint32_t protocol_version,
                     const char *client_name, const char *auth_token, const char *what)
{
    if (s->state != SESSION_ACCEPTED) {
        session_respond_error(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
                              "Hello or Resume was already sent");
        return -1;
    }
    char msg[96];
    const char *close_reason;
    const char *bad = hello_check(protocol_version, client_name, msg, sizeof msg, &close_reason);
    if (bad != NULL) {
        char shown[4 * HELLO_NAME_MAX + 8];
        log_escape(client_name, shown, sizeof shown); /* never a forged line */
        log_peer_warn("session %s (%s): refused %s: %s: \"%s\"", s->id, s->peer, what, bad,
                      shown);
        refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID, bad, close_reason);
        return -1;
    }
    snprintf(s->name, sizeof s->name, "%s", client_name);
    if (s->plain_on_tls) {
        log_peer_warn("session %s (%s, %s): refused %s: the plain protocol on a TLS listener",
                      s->id, s->peer, s->name[0] ? s->name : "-", what);
        refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
               "this address is a TLS listener (tls.listen): connect with tls://",
               "plain protocol on a TLS listener");
        return -1;
    }
    const struct auth_tokens *tokens = s->srv->cfg->auth;
    if (tokens == NULL) {
        s->role = AUTH_ROLE_OPEN;
        return room_for(s, id);
    }
    size_t len = strlen(auth_token), at = 0;
    char entry[AUTH_TOKEN_MAX + 1];
    size_t elen = 0;
    if (len == 0 && s->ssl != NULL && (elen = tls_peer_entry(s->ssl, entry, sizeof entry)) > 0) {
        /* No token, a verified client certificate: its cert:NAME entry gives the role, and
         * stands for a token everywhere else (quota, reloads). */
        s->role = auth_check_cert(tokens, entry, elen, &at);
        util_siphash128(s->srv->hash_key, entry, elen, s->token_fp);
    } else {
        s->role = auth_check(tokens, auth_token, len, &at);
        util_siphash128(s->srv->hash_key, auth_token, len, s->token_fp);
    }
    if (s->role != AUTH_ROLE_NONE) {
        /* Out of memory leaves it uncharged: the daemon-wide limits still hold. */
        if ((s->quota = quota_get(&s->srv->quotas, s->token_fp)) != NULL)
            quota_limits(s->quota, s->srv->cfg, &tokens->tok[at]);
        return room_for(s, id);
    }
    s->srv->ctr.auth_failures++;
    log_peer_warn("session %s (%s, %s): authentication failed: %s", s->id, s->peer,
                  s->name[0] ? s->name : "-",
                  elen > 0 ? "its certificate has no cert: entry" : len == 0 ? "no token"
                                                                            : "wrong token");
    refuse(s, id, RLOCK__V1__STATUS__STATUS_UNAUTHENTICATED,
           elen > 0   ? "this client's certificate has no entry in the token file, and no "
                        "auth token was sent"
           : len == 0 ? "this daemon requires an auth token"
                      : "the auth token is not valid",
           "authentication failed");
    return -1;
}

/* Activate s with the timeout it asked for (within bounds) and answer with a HelloReply. */
static void activate(struct session *s, uint64_t id, uint32_t requested, int resumed)
{
    const struct config *cfg = s->srv->cfg;
    s->requested_timeout_ms = requested;
    uint32_t timeout = requested == 0 ? cfg->session_timeout_ms
                                      : clamp_u32(requested, cfg->session_min_timeout_ms,
                                                  cfg->session_max_timeout_ms);
    session_activate(s, timeout);
    char tls[96] = "";
    if (s->ssl != NULL) {
        char d[80];
        snprintf(tls, sizeof tls, ", %s", tls_describe(s->ssl, d, sizeof d));
    }
    log_info("session %s (%s, %s): %s, timeout %ums%s", s->id, s->peer,
             s->name[0] ? s->name : "-", resumed ? "resumed" : "open", timeout, tls);
    Rlock__V1__HelloReply r = RLOCK__V1__HELLO_REPLY__INIT;
    r.session_id = s->id;
    r.server_version = RLOCKD_VERSION;
    r.protocol_version = WIRE_PROTOCOL_VERSION;
    r.session_timeout_ms = timeout;
    r.keepalive_interval_ms = timeout / 3;
    r.default_ttl_ms = cfg->default_ttl_ms;
    r.max_ttl_ms = cfg->max_ttl_ms;
    r.max_wait_ms = cfg->max_wait_ms;
    r.min_ttl_ms = cfg->min_ttl_ms;
    char secret[SEAL_TEXT_LEN + 1] = "";
    if (s->srv->resume)
        seal_session_secret(&s->srv->resume_key, s->id, secret);
    r.session_secret = secret;
    r.resumed = resumed;
    session_respond(s, id, RLOCK__V1__STATUS__STATUS_OK, NULL, RLOCK__V1__RESPONSE__BODY_HELLO,
                    &r);
}

void hello_open(struct session *s, uint64_t id, const Rlock__V1__Hello *h)
{
    if (introduce(s, id, h->protocol_version, h->client_name, h->auth_token, "Hello") == 0)
        activate(s, id, h->session_timeout_ms, 0);
}

void hello_resume(struct session *s, uint64_t id, const Rlock__V1__Resume *r)
{
    struct server *srv = s->srv;
    if (introduce(s, id, r->protocol_version, r->client_name, r->auth_token, "Resume") != 0) {
        if (s->state == SESSION_CLOSING)
            srv->ctr.resumes_refused++;
        return;
    }
    char expect[SEAL_TEXT_LEN + 1];
    if (!srv->resume) {
        srv->ctr.resumes_refused++;
        refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
               "this daemon has no resume key (session.resume_key_file)", "resume refused");
        return;
    }
    char sid[UTIL_UUID_LEN + 1]; /* as the daemon wrote it: lower case */
    if (util_uuid_parse(r->session_id, sid) != 0) {
        srv->ctr.resumes_refused++;
        refuse(s, id, RLOCK__V1__STATUS__STATUS_INVALID,
               "session_id is not a session id (a UUID, as Hello's answer gave it)",
               "resume refused");
        return;
    }
    seal_session_secret(&srv->resume_key, sid, expect);
    if (!seal_matches(r->session_secret, expect)) {
        srv->ctr.resumes_refused++;
        log_peer_warn("session %s (%s, %s): resume of %s refused: wrong session secret", s->id,
                 s->peer, s->name[0] ? s->name : "-", sid);
        refuse(s, id, RLOCK__V1__STATUS__STATUS_UNAUTHENTICATED,
               "the session secret does not match the session", "resume refused");
        return;
    }
    struct session *old = sessidx_find(srv->sessidx, sid);
    if (old != NULL && old != s) {
        /* The session's last connection here is still open (its end not seen yet): it
         * moves to this one. Its locks stay in Redis for the Adopts to come. */
        log_info("session %s (%s): resumed on another connection (%s): closing this one",
                 old->id, old->peer, s->peer);
        old->moved = 1;
        session_close(old, "resumed on another connection", 0);
    }
    if (session_take_id(s, sid) != 0) {
        refuse(s, id, RLOCK__V1__STATUS__STATUS_INTERNAL, "out of memory", "out of memory");
        return;
    }
    srv->ctr.sessions_resumed++;
    s->resumed = 1;
    activate(s, id, r->session_timeout_ms, 1);
}

/* --- auth at reload --------------------------------------------------------------------- */

/* A token of the reloaded table by its fingerprint (sorted: a million sessions each find
 * theirs in log2(tokens) steps, not a walk over every token). */
struct token_fp {
    uint8_t fp[16];
    int role;
    size_t index; /* in the table */
};

static int fp_cmp(const void *a, const void *b)
{
    return memcmp(((const struct token_fp *)a)->fp, ((const struct token_fp *)b)->fp, 16);
}

void hello_auth_reloaded(struct server *srv, const struct auth_tokens *before, int grace_running)
{
    const struct auth_tokens *now = srv->cfg->auth;
    struct token_fp *fps = NULL;
    if (now != NULL && (fps = calloc(now->n, sizeof *fps)) == NULL) {
        log_error("reload: out of memory checking sessions against the tokens; they keep "
                  "their roles");
        return;
    }
    for (size_t i = 0; now != NULL && i < now->n; i++) {
        util_siphash128(srv->hash_key, now->tok[i].text, now->tok[i].len, fps[i].fp);
        fps[i].role = (int)now->tok[i].role;
        fps[i].index = i;
    }
    if (now != NULL)
        qsort(fps, now->n, sizeof *fps, fp_cmp);
    struct session *s, *next;
    for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (s->state != SESSION_ACTIVE)
            continue;
        int role = AUTH_ROLE_OPEN; /* auth off; or on, and s opened without a token: the grace */
        if (now != NULL && s->role != AUTH_ROLE_OPEN) {
            struct token_fp key;
            memcpy(key.fp, s->token_fp, 16);
            const struct token_fp *hit = bsearch(&key, fps, now->n, sizeof *fps, fp_cmp);
            role = hit != NULL ? hit->role : AUTH_ROLE_NONE;
        }
        if (role == AUTH_ROLE_NONE) {
            log_warn("session %s (%s, %s): its token was removed at reload: ending it", s->id,
                     s->peer, s->name[0] ? s->name : "-");
            session_close(s, "token removed at reload", 1);
        } else if (role != s->role) {
            log_warn("session %s (%s, %s): role %s -> %s at reload", s->id, s->peer,
                     s->name[0] ? s->name : "-", auth_role_name(s->role), auth_role_name(role));
            s->role = role;
        }
    }
    /* Every account takes its token's quotas as they are now (none with auth off). */
    for (size_t i = 0; i < QUOTA_SLOTS; i++) {
        for (struct quota *q = srv->quotas.slot[i]; q != NULL; q = q->next) {
            struct token_fp key;
            memcpy(key.fp, q->fp, 16);
            const struct token_fp *hit =
                now != NULL ? bsearch(&key, fps, now->n, sizeof *fps, fp_cmp) : NULL;
            if (hit != NULL)
                quota_limits(q, srv->cfg, &now->tok[hit->index]);
            else
                q->max_locks = q->max_waiters = 0;
        }
    }
    free(fps);
    if (before == NULL && now != NULL && !grace_running)
        hello_auth_grace_end(srv);
}

void hello_auth_grace_end(struct server *srv)
{
    if (srv->cfg->auth == NULL)
        return;
    struct session *s, *next;
    for (s = TAILQ_FIRST(&srv->sessions); s != NULL; s = next) {
        next = TAILQ_NEXT(s, link);
        if (s->state == SESSION_ACTIVE && s->role == AUTH_ROLE_OPEN) {
            log_warn("session %s (%s, %s): opened without a token, which this daemon now "
                     "requires: ending it", s->id, s->peer, s->name[0] ? s->name : "-");
            session_close(s, "authentication turned on at reload", 1);
        }
    }
}
