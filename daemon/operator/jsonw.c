/* SPDX-License-Identifier: BSD-3-Clause */
/* jsonw.c — see jsonw.h. */
#include "jsonw.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>

void jsonw_init(struct jsonw *w, struct evbuffer *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
}

static void put_string(struct evbuffer *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    evbuffer_add(out, "\"", 1);
    const char *run = s; /* bytes passed through as they are, written in one piece */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&')
            continue;
        evbuffer_add(out, run, (size_t)((const char *)p - run));
        char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            esc[2] = 0;
        }
        evbuffer_add(out, esc, strlen(esc));
        run = (const char *)p + 1;
    }
    evbuffer_add(out, run, strlen(run));
    evbuffer_add(out, "\"", 1);
}

/* The comma before a member and its key. */
static void member(struct jsonw *w, const char *key)
{
    if (w->members[w->depth]++)
        evbuffer_add(w->out, ",", 1);
    if (key != NULL) {
        put_string(w->out, key);
        evbuffer_add(w->out, ":", 1);
    }
}

static void open_with(struct jsonw *w, const char *key, char bracket, char closer)
{
    member(w, key);
    assert(w->depth + 1 < JSONW_DEPTH);
    w->depth++;
    w->members[w->depth] = 0;
    w->closer[w->depth] = closer;
    evbuffer_add(w->out, &bracket, 1);
}

void jsonw_object(struct jsonw *w, const char *key)
{
    open_with(w, key, '{', '}');
}

void jsonw_array(struct jsonw *w, const char *key)
{
    open_with(w, key, '[', ']');
}

void jsonw_end(struct jsonw *w)
{
    assert(w->depth > 0);
    evbuffer_add(w->out, &w->closer[w->depth], 1);
    w->depth--;
}

void jsonw_str(struct jsonw *w, const char *key, const char *v)
{
    member(w, key);
    put_string(w->out, v != NULL ? v : "");
}

void jsonw_u64(struct jsonw *w, const char *key, uint64_t v)
{
    member(w, key);
    evbuffer_add_printf(w->out, "%" PRIu64, v);
}

void jsonw_bool(struct jsonw *w, const char *key, int v)
{
    member(w, key);
    evbuffer_add(w->out, v ? "true" : "false", v ? 4 : 5);
}
