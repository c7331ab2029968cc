/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls.h — TLS on the sessions' own non-blocking sockets ([tls] listen).
 *
 * OpenSSL works directly on the accepted socket: the session reads and
 * writes through tls_read / tls_write instead of recv / send, and keeps its
 * own buffers, its per-turn caps and its single flush per loop turn exactly
 * as on a plain socket (libevent's OpenSSL bufferevents would bring a second
 * set of buffers and callbacks that the session's framing does not need).
 * The handshake runs inside those reads and writes, driven by the session's
 * read and write events, and must be over before the Hello deadline
 * (server.hello_timeout) like everything else a connection does before Hello.
 *
 * A struct tls_server is one SSL_CTX: certificate, key, the CA that verifies
 * client certificates, the lowest protocol version. A reload builds a new one
 * and swaps it in; sessions keep the context they were accepted with (each
 * SSL holds a reference), so a new certificate never ends an open session.
 */
#ifndef RLOCKD_TLS_H
#define RLOCKD_TLS_H

#include <stddef.h>
#include <sys/types.h>

struct config;
struct ssl_st;
struct tls_server;

/* Client certificates: [tls] client_certs. */
enum tls_client_certs { TLS_CERTS_NONE, TLS_CERTS_OPTIONAL, TLS_CERTS_REQUIRED };

/* What a tls_read or tls_write that returned -1 with errno EAGAIN waits for. */
enum tls_want { TLS_WANT_READ = 1, TLS_WANT_WRITE = 2 };

/*
 * A context from the [tls] keys of c: reads cert_file, key_file and ca_file
 * now. NULL with the problem in err ("tls.cert_file /x: No such file or
 * directory", "tls.key_file: does not match the certificate", ...).
 */
struct tls_server *tls_server_new(const struct config *c, char *err, size_t errlen);

/* Drop the daemon's reference; sessions accepted with it keep theirs. Accepts NULL. */
void tls_server_free(struct tls_server *t);

/* A server-side TLS connection on fd, or NULL (out of memory). */
struct ssl_st *tls_accept_new(struct tls_server *t, int fd);

/*
 * Read up to len decrypted bytes. > 0: bytes read; 0: the peer closed (close_notify
 * or end of stream); -1 with errno EAGAIN: *want says what to wait for; -1 with
 * another errno: the connection failed, *why says why (a static string or the
 * TLS library's reason, for the session's close line).
 */
ssize_t tls_read(struct ssl_st *ssl, void *buf, size_t len, int *want, const char **why);

/* Write up to len bytes; the same results as tls_read (0 is never returned). */
ssize_t tls_write(struct ssl_st *ssl, const void *buf, size_t len, int *want, const char **why);

/* Bytes decrypted and waiting inside the TLS connection (the socket no longer shows them). */
int tls_pending(const struct ssl_st *ssl);

/*
 * The name of the client certificate the handshake verified (its subject's common
 * name), written "cert:NAME" as the token file names it: its length, or 0 when the
 * client sent none (or the handshake is not over). A name with a blank, a control
 * or a non-ASCII byte, or longer than fits, gives 0: it could not be named in the file.
 */
size_t tls_peer_entry(struct ssl_st *ssl, char *buf, size_t len);

/* "TLSv1.3 TLS_AES_256_GCM_SHA384": for the session's log line. */
const char *tls_describe(struct ssl_st *ssl, char *buf, size_t len);

/* Send close_notify if the connection is sound (never waits) and free it. Accepts NULL. */
void tls_close(struct ssl_st *ssl, int failed);

/* The [tls] client_certs and min_version values as text, checked: -1 when unknown. */
int tls_parse_client_certs(const char *text);
int tls_parse_min_version(const char *text);

#endif
