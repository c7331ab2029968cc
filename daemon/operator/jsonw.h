/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * jsonw.h — writing JSON into an evbuffer, for the status page's data
 * (status.c). Objects and arrays nest up to JSONW_DEPTH; the writer puts the
 * commas. Strings are escaped so that the text is safe inside HTML as well:
 * '<', '>' and '&' become \u003c, \u003e and \u0026, controls \u00XX.
 */
#ifndef RLOCKD_JSONW_H
#define RLOCKD_JSONW_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#define JSONW_DEPTH 8

struct jsonw {
    struct evbuffer *out;
    int depth;
    uint8_t members[JSONW_DEPTH]; /* 1 once the object or array at that depth has one */
    char closer[JSONW_DEPTH];     /* '}' or ']' for the one open at that depth */
};

void jsonw_init(struct jsonw *w, struct evbuffer *out);
/* Open an object or an array; key names it inside an object (NULL inside an array or at
 * the top). Deeper than JSONW_DEPTH is a programming error (asserted). */
void jsonw_object(struct jsonw *w, const char *key);
void jsonw_array(struct jsonw *w, const char *key);
/* Close the innermost object or array. */
void jsonw_end(struct jsonw *w);
void jsonw_str(struct jsonw *w, const char *key, const char *v);
void jsonw_u64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_bool(struct jsonw *w, const char *key, int v);

#endif
