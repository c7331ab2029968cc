#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tls_certs.sh DIR: the certificates test_tls uses, made with openssl(1) into DIR.
#   ca.pem                    the CA the daemon and its clients trust
#   srv.pem srv.key           the daemon's, from ca: CN and DNS name localhost, IP 127.0.0.1
#   cli.pem cli.key           a client's, from ca: CN ops-admin
#   ca2.pem                   another CA
#   srv2.pem srv2.key         the daemon's, from ca2 (the certificate a reload swaps in)
#   cli2.pem cli2.key         a client's from ca2, which the daemon does not trust
# EC P-256 keys, mode 0600 (the daemon's key file rules).
set -eu
d=$1
mkdir -p "$d"
cd "$d"
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 3650 -subj "/CN=$2" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
}
# leaf NAME CA CN EXT
leaf() {
    key "$1.key"
    openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3"
    printf '%s\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 3650 \
        -out "$1.pem" -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
srv_ext="subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
cli_ext="extendedKeyUsage=clientAuth"
ca ca "rlockd test CA"
ca ca2 "rlockd other CA"
leaf srv ca localhost "$srv_ext"
leaf srv2 ca2 localhost "$srv_ext"
leaf cli ca ops-admin "$cli_ext"
leaf cli2 ca2 ops-admin "$cli_ext"
chmod 0644 ./*.pem
