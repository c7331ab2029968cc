#!/usr/bin/env bash
# Install the build into a temporary prefix and build a client program against
# it the way a user would: through pkg-config, shared and static.
#   install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d /tmp/rlock-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in sbin/rlockd bin/rlockctl include/rlock.h etc/rlockd/rlockd.conf; do
    [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
pcdir=$(dirname "$(find "$prefix" -name rlock.pc | head -n1)")
[ -n "$pcdir" ] || { echo "FAIL: rlock.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$pcdir
libdir=$(pkg-config --variable=libdir rlock)

# The shared library exports the public API and nothing else.
bad=$(nm -D --defined-only "$libdir/librlock.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^rlock_/ {print $3}')
[ -z "$bad" ] || { echo "FAIL: librlock.so exports non-API symbols: $bad"; exit 1; }

example=$src/client/examples/hold_lock.c
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$example" $(pkg-config --cflags --libs rlock) \
    -Wl,-rpath,"$libdir" -o "$prefix/ex-shared"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$example" $(pkg-config --cflags rlock) \
    "$libdir/librlock.a" $(pkg-config --libs --static rlock | sed 's/-lrlock//') \
    -o "$prefix/ex-static"
"$prefix/ex-shared" --help >/dev/null
"$prefix/ex-static" --help >/dev/null
"$prefix/sbin/rlockd" --test-config -c "$prefix/etc/rlockd/rlockd.conf" >/dev/null
echo "install check: ok"
