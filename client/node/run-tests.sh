#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs the Node.js client's tests (node --test) against an rlockd binary: each
# test file starts its own redis-server and rlockd. Installs the dependencies
# first (npm ci, from package-lock.json) when node_modules is missing or older
# than the lock file. Fails, never skips, when a tool is missing.
#
#   client/node/run-tests.sh [RLOCKD_BIN]     (default: $RLOCKD_BIN, else build/bin/rlockd)
set -eu
case $0 in */*) here=${0%/*} ;; *) here=. ;; esac
here=$(cd "$here" && pwd)
repo=$(cd "$here/../.." && pwd)

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

command -v node >/dev/null 2>&1 ||
    fail "node is not installed: the Node.js client (client/node) needs Node.js 18 or later to be tested"
command -v npm >/dev/null 2>&1 ||
    fail "npm is not installed: the Node.js client (client/node) needs it to install its dependencies"
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 18 ] || fail "node $(node --version) is too old: the Node.js client needs 18 or later"
command -v redis-server >/dev/null 2>&1 || fail "redis-server is not installed"
command -v openssl >/dev/null 2>&1 || fail "openssl is not installed (the TLS test makes its certificates with it)"

RLOCKD_BIN=${1:-${RLOCKD_BIN:-$repo/build/bin/rlockd}}
[ -x "$RLOCKD_BIN" ] || fail "no rlockd at $RLOCKD_BIN (build it, or pass its path)"
export RLOCKD_BIN

cd "$here"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "npm ci in $here"
    npm ci --no-audit --no-fund || fail "npm ci failed in $here"
fi

# One test file at a time (each runs its own daemons), where node can be told.
flags=""
if node --help | grep -q -- '--test-concurrency'; then
    flags="$flags --test-concurrency=1"
fi
if node --help | grep -q -- '--test-timeout'; then
    flags="$flags --test-timeout=300000"
fi
# shellcheck disable=SC2086
exec node --test $flags test/*.test.js
