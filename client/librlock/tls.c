/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls.c — TLS to daemons written tls://HOST:PORT or tls://unix:PATH.
 *
 * The engine's socket reads and writes go through rlk_sock_read and
 * rlk_sock_write, which run OpenSSL on the same non-blocking socket when the
 * connection is a TLS one. The handshake needs no step of its own: the first
 * write (the Hello, or a moved session's Resume) starts it, and the reads and
 * writes the reactor, a leading caller or rlock_async_process already make
 * carry it on. So the blocking and asynchronous clients and session moves
 * all get TLS the same way, and a handshake that fails ends the connection
 * like any read error, with the reason ("TLS: certificate verify failed: ...").
 *
 * Two notes keep the event loops right: a TLS write that must first read (a
 * handshake message is due) does not ask for writability, or the loop would
 * spin; and decrypted bytes OpenSSL holds are read before the engine goes back
 * to poll, since the socket no longer shows them.
 */
#include "rlock_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls_reason.h"

#define TLS_PREFIX "tls://"
#define TLS_PREFIX_LEN 6

/*
 * A socket BIO that writes with MSG_NOSIGNAL: OpenSSL's own writes with write(2), which
 * raises SIGPIPE on a connection the daemon closed, and a library must not kill (or make
 * handle signals) the program that uses it. Everything but read and write is the socket
 * BIO's (the fd, not closed by the BIO).
 */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    BIO_clear_retry_flags(b);
    ssize_t n = send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)n;
}

static int nosig_read(BIO *b, char *buf, int len)
{
    int fd = -1;
    BIO_get_fd(b, &fd);
    BIO_clear_retry_flags(b);
    ssize_t n = recv(fd, buf, (size_t)len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(b);
    return (int)n;
}

static void nosig_init(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "rlock socket");
    if (m == NULL || BIO_meth_set_write(m, nosig_write) != 1 ||
        BIO_meth_set_read(m, nosig_read) != 1 ||
        BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) != 1 ||
        BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
        BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1) {
        BIO_meth_free(m);
        return;
    }
    nosig_method = m;
}

int rlk_addr_tls(const char *address)
{
    return strncmp(address, TLS_PREFIX, TLS_PREFIX_LEN) == 0;
}

const char *rlk_addr_plain(const char *address)
{
    return rlk_addr_tls(address) ? address + TLS_PREFIX_LEN : address;
}

/* The TLS library's first queued error as text; the queue is emptied. */
static const char *lib_reason(char *buf, size_t len)
{
    return tls_reason(buf, len, "unknown error");
}

static int copy_opt(char **dst, const char *src)
{
    if (src == NULL || src[0] == '\0')
        return 0;
    *dst = strdup(src);
    return *dst != NULL ? 0 : -1;
}

int rlk_tls_keep_opts(struct rlock_client *c, const struct rlock_options *o)
{
    return copy_opt(&c->tls_ca_file, o->tls_ca_file) | copy_opt(&c->tls_cert_file, o->tls_cert_file) |
           copy_opt(&c->tls_key_file, o->tls_key_file) |
           copy_opt(&c->tls_server_name, o->tls_server_name);
}

int rlk_tls_setup(struct rlock_client *c, char *err, size_t errlen)
{
    int any = 0;
    for (unsigned i = 0; i < c->addrs->n; i++)
        any |= rlk_addr_tls(c->addrs->a[i]);
    if (!any)
        return 0; /* TLS options are for tls:// addresses; a list without one ignores them */
    if ((c->tls_cert_file == NULL) != (c->tls_key_file == NULL)) {
        snprintf(err, errlen, "tls_cert_file and tls_key_file go together");
        return -1;
    }
    char reason[160];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "TLS: cannot make a context (%s)", lib_reason(reason, sizeof reason));
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* The output buffer may move (grow) between two tries of one write. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    const char *what = NULL;
    if (c->tls_ca_file != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, c->tls_ca_file, NULL) != 1)
            what = "tls_ca_file";
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        what = "the system's CA certificates";
    }
    if (what == NULL && c->tls_cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert_file) != 1)
            what = "tls_cert_file";
        else if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key_file, SSL_FILETYPE_PEM) != 1 ||
                 SSL_CTX_check_private_key(ctx) != 1)
            what = "tls_key_file";
    }
    if (what != NULL) {
        const char *path = strcmp(what, "tls_ca_file") == 0     ? c->tls_ca_file
                           : strcmp(what, "tls_cert_file") == 0 ? c->tls_cert_file
                           : strcmp(what, "tls_key_file") == 0  ? c->tls_key_file
                                                                : "";
        snprintf(err, errlen, "%s %s: %s", what, path, lib_reason(reason, sizeof reason));
        SSL_CTX_free(ctx);
        return -1;
    }
    c->tls_ctx = ctx;
    return 0;
}

/* The name the daemon's certificate must carry: tls_server_name, else the address's host. */
static int expect_name(SSL *ssl, const struct rlock_client *c, const char *address)
{
    const char *plain = rlk_addr_plain(address);
    char host[256];
    if (c->tls_server_name != NULL) {
        snprintf(host, sizeof host, "%s", c->tls_server_name);
    } else if (strncmp(plain, "unix:", 5) == 0) {
        return 0; /* a socket file: the CA alone vouches, unless a name is given */
    } else {
        const char *start = plain, *end;
        if (plain[0] == '[') {
            start = plain + 1;
            end = strchr(start, ']');
        } else {
            end = strrchr(plain, ':');
        }
        if (end == NULL || (size_t)(end - start) >= sizeof host)
            return -1;
        memcpy(host, start, (size_t)(end - start));
        host[end - start] = '\0';
    }
    unsigned char ip[16];
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    if (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1)
        return X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1 ? 0 : -1;
    X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set1_host(ssl, host) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1)
        return -1;
    return 0;
}

int rlk_tls_attach(struct rlock_client *c, const char *address)
{
    rlk_tls_detach(c);
    if (!rlk_addr_tls(address))
        return 0;
    if (c->tls_ctx == NULL)
        return -1;
    pthread_once(&nosig_once, nosig_init);
    SSL *ssl = SSL_new(c->tls_ctx);
    BIO *bio = nosig_method != NULL ? BIO_new(nosig_method) : NULL;
    if (ssl == NULL || bio == NULL || expect_name(ssl, c, address) != 0) {
        BIO_free(bio);
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    BIO_set_fd(bio, c->fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, bio, bio); /* the SSL owns the BIO now */
    SSL_set_connect_state(ssl);
    c->ssl = ssl;
    return 0;
}

void rlk_tls_detach(struct rlock_client *c)
{
    /* No close_notify: the connection is being shut down or left, and the socket is not
     * closed here (the engine and the move own it). */
    SSL_free(c->ssl);
    c->ssl = NULL;
    c->tls_read_wants_write = c->tls_write_wants_read = 0;
    ERR_clear_error();
}

void rlk_tls_free(struct rlock_client *c)
{
    rlk_tls_detach(c);
    SSL_CTX_free(c->tls_ctx);
    c->tls_ctx = NULL;
    free(c->tls_ca_file);
    free(c->tls_cert_file);
    free(c->tls_key_file);
    free(c->tls_server_name);
    c->tls_ca_file = c->tls_cert_file = c->tls_key_file = c->tls_server_name = NULL;
}

/* The connection ended: 0 (end of stream), or -1 (why) when the handshake was not over. */
static ssize_t handshake_cut(struct rlock_client *c, char *why, size_t whylen)
{
    if (SSL_is_init_finished(c->ssl))
        return 0;
    snprintf(why, whylen, "TLS: the daemon closed the connection during the handshake (is "
                          "this address one of its tls.listen addresses?)");
    errno = EPROTO;
    return -1;
}

/* An SSL call failed with rc: EAGAIN (with the direction noted), 0 at the end, or -1 (why). */
static ssize_t failed(struct rlock_client *c, int rc, int reading, char *why, size_t whylen)
{
    int saved = errno;
    char reason[160];
    switch (SSL_get_error(c->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        if (!reading)
            c->tls_write_wants_read = 1;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        if (reading)
            c->tls_read_wants_write = 1;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return handshake_cut(c, why, whylen);
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (saved == 0)
            return handshake_cut(c, why, whylen);
        errno = saved;
        snprintf(why, whylen, "%s: %s", reading ? "read" : "write", strerror(saved));
        return -1;
    default: {
        long v = SSL_get_verify_result(c->ssl);
        lib_reason(reason, sizeof reason);
        if (v != X509_V_OK)
            snprintf(why, whylen, "TLS: %s: %s (the daemon's certificate; check tls_ca_file "
                                  "and the name it was issued for)",
                     reason, X509_verify_cert_error_string(v));
        else if (strstr(reason, "alert") != NULL)
            snprintf(why, whylen, "TLS: %s (the daemon refused this client: a client "
                                  "certificate missing or not from a CA it trusts, or the "
                                  "TLS version)",
                     reason);
        else if (!SSL_is_init_finished(c->ssl))
            snprintf(why, whylen, "TLS: %s (the daemon did not answer in TLS: is this address "
                                  "one of its tls.listen addresses?)",
                     reason);
        else
            snprintf(why, whylen, "TLS: %s", reason);
        errno = EPROTO;
        return -1;
    }
    }
}

ssize_t rlk_sock_read(struct rlock_client *c, void *buf, size_t len, char *why, size_t whylen)
{
    if (c->ssl == NULL) {
        ssize_t n = read(c->fd, buf, len);
        if (n < 0)
            snprintf(why, whylen, "read: %s", strerror(errno));
        return n;
    }
    c->tls_write_wants_read = 0; /* this read is what a waiting write waited for */
    c->tls_read_wants_write = 0;
    size_t got = 0;
    ERR_clear_error();
    errno = 0;
    int rc = SSL_read_ex(c->ssl, buf, len, &got);
    return rc == 1 ? (ssize_t)got : failed(c, rc, 1, why, whylen);
}

ssize_t rlk_sock_write(struct rlock_client *c, const void *buf, size_t len, char *why,
                       size_t whylen)
{
    if (c->ssl == NULL) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            snprintf(why, whylen, "write: %s", strerror(errno));
        return n;
    }
    c->tls_write_wants_read = 0;
    size_t put = 0;
    ERR_clear_error();
    errno = 0;
    int rc = SSL_write_ex(c->ssl, buf, len, &put);
    if (rc == 1)
        return (ssize_t)put;
    ssize_t r = failed(c, rc, 0, why, whylen);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EPROTO)) {
        /* Under TLS 1.3 the client's handshake is over before the daemon has checked the
         * client's certificate: a refusal arrives as an alert after the daemon closed, and
         * the first write fails. Read the alert, if it came, for the reason. */
        char scratch[256], alert[RLK_REASON_BYTES];
        size_t got = 0;
        ERR_clear_error();
        errno = 0;
        int rrc = SSL_read_ex(c->ssl, scratch, sizeof scratch, &got);
        if (rrc != 1 && SSL_get_error(c->ssl, rrc) == SSL_ERROR_SSL &&
            failed(c, rrc, 1, alert, sizeof alert) < 0)
            snprintf(why, whylen, "%s", alert);
        else if (r == 0)
            snprintf(why, whylen, "write: the daemon closed the connection");
        ERR_clear_error();
        errno = EPIPE;
        return -1;
    }
    return r;
}

int rlk_sock_pending(const struct rlock_client *c)
{
    return c->ssl != NULL && SSL_pending(c->ssl) > 0;
}
