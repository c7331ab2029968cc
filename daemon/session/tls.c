/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls.c — OpenSSL contexts and connections for the sessions (tls.h).
 */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "config.h"
#include "secretfile.h"
#include "tls_reason.h"

#define TLS_KEY_FILE_MAX (64 * 1024)
#define TLS_MAX_CERT_LIST (16 * 1024) /* a client's certificate chain */

struct tls_server {
    SSL_CTX *ctx;
};

int tls_parse_client_certs(const char *text)
{
    if (strcmp(text, "none") == 0)
        return TLS_CERTS_NONE;
    if (strcmp(text, "optional") == 0)
        return TLS_CERTS_OPTIONAL;
    if (strcmp(text, "required") == 0)
        return TLS_CERTS_REQUIRED;
    return -1;
}

int tls_parse_min_version(const char *text)
{
    if (strcmp(text, "1.2") == 0)
        return TLS1_2_VERSION;
    if (strcmp(text, "1.3") == 0)
        return TLS1_3_VERSION;
    return -1;
}

/* The TLS library's first queued error as text; the queue is emptied. */
static const char *lib_reason(char *buf, size_t len)
{
    return tls_reason(buf, len, "");
}

/* The private key, read under the secret file rules (owner, mode) like every secret. */
static int load_key(SSL_CTX *ctx, const char *path, char *err, size_t errlen)
{
    char why[256], *text = NULL, reason[160];
    size_t len = 0;
    if (secretfile_read(path, TLS_KEY_FILE_MAX, &text, &len, why, sizeof why) != 0) {
        snprintf(err, errlen, "tls.key_file %s: %s", path, why);
        return -1;
    }
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    EVP_PKEY *key = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    secretfile_free(text, len);
    if (key == NULL) {
        snprintf(err, errlen, "tls.key_file %s: not a PEM private key without a passphrase (%s)",
                 path, lib_reason(reason, sizeof reason));
        return -1;
    }
    int ok = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(key);
    if (!ok) {
        snprintf(err, errlen, "tls.key_file %s: does not match tls.cert_file (%s)", path,
                 lib_reason(reason, sizeof reason));
        return -1;
    }
    return 0;
}

static int load_ca(SSL_CTX *ctx, const char *path, char *err, size_t errlen)
{
    char reason[160];
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(path);
    if (names == NULL || SSL_CTX_load_verify_locations(ctx, path, NULL) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        snprintf(err, errlen, "tls.ca_file %s: no PEM certificate could be read (%s)", path,
                 lib_reason(reason, sizeof reason));
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names); /* the CAs a client certificate may come from */
    return 0;
}

struct tls_server *tls_server_new(const struct config *c, char *err, size_t errlen)
{
    char reason[160];
    int certs = tls_parse_client_certs(c->tls_client_certs);
    int version = tls_parse_min_version(c->tls_min_version);
    if (certs < 0 || version < 0) {
        snprintf(err, errlen, "tls: client_certs or min_version not understood");
        return NULL;
    }
    struct tls_server *t = calloc(1, sizeof *t);
    SSL_CTX *ctx = t != NULL ? SSL_CTX_new(TLS_server_method()) : NULL;
    if (ctx == NULL) {
        snprintf(err, errlen, "tls: cannot make a context (%s)", lib_reason(reason, sizeof reason));
        free(t);
        return NULL;
    }
    t->ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, version);
    /* No renegotiation (a read never has to write mid-stream, and a peer cannot make the
     * daemon redo handshakes), no compression, no session tickets: a client resumes its
     * rlockd session by its secret, never needs a TLS session cached, and an idle
     * connection keeps no buffer. A peer that drops the connection without close_notify is
     * a client that crashed: its session ends as on a plain socket. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_num_tickets(ctx, 0);
    /* A peer without a token may send a certificate chain before its Hello: bound what it
     * makes the daemon hold (OpenSSL's default is 100 KiB) for each pending connection. */
    SSL_CTX_set_max_cert_list(ctx, TLS_MAX_CERT_LIST);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* The session's output buffer moves when it grows between two tries of one write. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert_file) != 1) {
        snprintf(err, errlen, "tls.cert_file %s: no PEM certificate could be read (%s)",
                 c->tls_cert_file, lib_reason(reason, sizeof reason));
        goto fail;
    }
    /* The key from the unit's credentials when the file names none (DynamicUser cannot be
     * given a file's group; a credential is readable by the service alone). */
    char cred[4200];
    const char *key = c->tls_key_file;
    if (key[0] == '\0' && secretfile_credential("tls-key", cred, sizeof cred))
        key = cred;
    if (load_key(ctx, key, err, errlen) != 0)
        goto fail;
    if (c->tls_ca_file[0] != '\0' && load_ca(ctx, c->tls_ca_file, err, errlen) != 0)
        goto fail;
    if (certs != TLS_CERTS_NONE)
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER |
                               (certs == TLS_CERTS_REQUIRED ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           NULL);
    return t;
fail:
    tls_server_free(t);
    return NULL;
}

void tls_server_free(struct tls_server *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx); /* each SSL made from it holds a reference of its own */
    free(t);
}

SSL *tls_accept_new(struct tls_server *t, int fd)
{
    SSL *ssl = SSL_new(t->ctx);
    if (ssl == NULL)
        return NULL;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

/* Map the result rc of an SSL call that failed. */
static ssize_t tls_failed(SSL *ssl, int rc, int *want, const char **why)
{
    static char reason[168]; /* the daemon is one thread; read before the next call */
    char lib[160];
    int saved = errno;
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        *want = TLS_WANT_READ;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        *want = TLS_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (saved == EINTR || saved == EAGAIN) {
            *want = TLS_WANT_READ;
            errno = EAGAIN;
            return -1;
        }
        if (saved == 0)
            return 0; /* end of stream */
        *why = "connection error";
        errno = saved;
        return -1;
    default:
        lib_reason(lib, sizeof lib);
        snprintf(reason, sizeof reason, "TLS: %s", lib[0] != '\0' ? lib : "protocol error");
        *why = reason;
        errno = EPROTO;
        return -1;
    }
}

ssize_t tls_read(SSL *ssl, void *buf, size_t len, int *want, const char **why)
{
    size_t got = 0;
    ERR_clear_error();
    errno = 0;
    int rc = SSL_read_ex(ssl, buf, len, &got);
    if (rc == 1)
        return (ssize_t)got;
    return tls_failed(ssl, rc, want, why);
}

ssize_t tls_write(SSL *ssl, const void *buf, size_t len, int *want, const char **why)
{
    size_t put = 0;
    ERR_clear_error();
    errno = 0;
    int rc = SSL_write_ex(ssl, buf, len, &put);
    if (rc == 1)
        return (ssize_t)put;
    ssize_t r = tls_failed(ssl, rc, want, why);
    if (r == 0) { /* the peer closed while we wrote */
        *why = "connection closed by client";
        errno = EPIPE;
        return -1;
    }
    return r;
}

int tls_pending(const SSL *ssl)
{
    return SSL_pending(ssl);
}

size_t tls_peer_entry(SSL *ssl, char *buf, size_t len)
{
    if (!SSL_is_init_finished(ssl) || SSL_get_verify_result(ssl) != X509_V_OK)
        return 0;
    X509 *cert = SSL_get0_peer_certificate(ssl);
    if (cert == NULL)
        return 0;
    const X509_NAME *subject = X509_get_subject_name(cert);
    int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at < 0)
        return 0;
    const ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    const unsigned char *name = ASN1_STRING_get0_data(cn);
    size_t n = (size_t)ASN1_STRING_length(cn);
    if (n == 0 || strlen("cert:") + n >= len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (name[i] < 0x21 || name[i] > 0x7e)
            return 0;
    memcpy(buf, "cert:", 5);
    memcpy(buf + 5, name, n);
    buf[5 + n] = '\0';
    return 5 + n;
}

const char *tls_describe(SSL *ssl, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s", SSL_get_version(ssl), SSL_get_cipher_name(ssl));
    return buf;
}

void tls_close(SSL *ssl, int failed)
{
    if (ssl == NULL)
        return;
    if (!failed && SSL_is_init_finished(ssl)) {
        ERR_clear_error();
        (void)SSL_shutdown(ssl); /* close_notify if the socket takes it now; no wait */
    }
    ERR_clear_error();
    SSL_free(ssl);
}
