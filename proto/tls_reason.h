/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_reason.h — OpenSSL's first queued error as text, for the daemon's
 * (daemon/session/tls.c) and the client's (client/librlock/tls.c) TLS
 * messages. Header-only: both link OpenSSL already; rlockwire does not.
 */
#ifndef RLOCK_TLS_REASON_H
#define RLOCK_TLS_REASON_H

#include <stddef.h>
#include <stdio.h>

#include <openssl/err.h>

/* The reason of the first queued error into buf, or none when there is none; the queue is
 * emptied. Returns buf. */
static inline const char *tls_reason(char *buf, size_t len, const char *none)
{
    unsigned long e = ERR_get_error();
    snprintf(buf, len, "%s", none);
    if (e != 0) {
        const char *r = ERR_reason_error_string(e);
        if (r != NULL)
            snprintf(buf, len, "%s", r);
        else
            ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

#endif
