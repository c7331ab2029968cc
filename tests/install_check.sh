#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the build the way a package does (prefix /usr, into a DESTDIR) and
# check what a user gets: every file in its place, the unit as shipped, the man
# pages rendering, and client/examples/ building and running against the
# installed tree through pkg-config and through find_package(rlock), shared
# and static. Then an install under another prefix, whose unit must point there.
#   install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d /tmp/rlock-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

root=$tmp/root
DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null
usr=$root/usr
libdir=$(dirname "$(find "$usr" -name librlock.so.0 -print -quit)")
[ -n "$libdir" ] && [ "$libdir" != . ] || fail "librlock.so.0 not installed"
for f in usr/sbin/rlockd usr/bin/rlockctl usr/include/rlock.h usr/include/rlock_event.h \
         etc/rlockd/rlockd.conf usr/lib/systemd/system/rlockd.service \
         usr/share/man/man8/rlockd.8.gz usr/share/man/man1/rlockctl.1.gz \
         usr/share/man/man3/librlock.3.gz usr/share/man/man5/rlockd.conf.5.gz \
         usr/share/bash-completion/completions/rlockctl \
         "${libdir#"$root"/}/librlock.so" "${libdir#"$root"/}/librlock.a" \
         "${libdir#"$root"/}/pkgconfig/rlock.pc" "${libdir#"$root"/}/cmake/rlock/rlockConfig.cmake"; do
    [ -e "$root/$f" ] || fail "$f not installed"
done
# Every man page and link the build made: the C API's pages, one of them for each function.
while read -r f; do
    [ -e "$usr/share/man/$f" ] || fail "usr/share/man/$f not installed"
done < "$build/man/manifest.txt"
[ -L "$usr/share/man/man3/rlock_shutdown.3.gz" ] || fail "rlock_shutdown(3) is not a link to rlock_close(3)"
# Build helpers stay out of the install.
for f in rlockd-confdoc rlock-example rlock-holder; do
    [ -z "$(find "$root" -name "$f")" ] || fail "$f was installed"
done
cmp "$src/systemd/rlockd.service" "$usr/lib/systemd/system/rlockd.service" ||
    fail "the unit installed under /usr differs from systemd/rlockd.service"
cmp "$src/conf/rlockd.conf" "$root/etc/rlockd/rlockd.conf" || fail "rlockd.conf differs"

# Each page renders without a warning, and rlockd.conf(5) names every key the daemon has.
for page in "$usr"/share/man/man*/*.gz; do
    errs=$(MANWIDTH=80 man -l "$page" 2>&1 >/dev/null) || fail "man -l $page failed: $errs"
    [ -z "$errs" ] || fail "man -l $page: $errs"
    name=$(basename "$page" .gz)
    MANWIDTH=80 man -l "$page" 2>/dev/null | grep "^NAME" >/dev/null || fail "$name has no NAME section"
done
conf_page=$(MANWIDTH=200 man -l "$usr/share/man/man5/rlockd.conf.5.gz" 2>/dev/null)
keys=$("$usr/sbin/rlockd" --dump-config -c "$root/etc/rlockd/rlockd.conf" |
    awk -F' *= *' '/^\[/ { s = substr($0, 2, length($0) - 2); next }
                   /^[a-z_]+ *=/ { print s "." $1 }')
[ "$(echo "$keys" | wc -l)" -gt 20 ] || fail "--dump-config listed too few keys: $keys"
for k in $keys; do
    echo "$conf_page" | grep "^ *$k = " >/dev/null || fail "rlockd.conf(5) lacks $k"
done

# The shared library exports the public API and nothing else.
bad=$(nm -D --defined-only "$libdir/librlock.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^rlock_/ {print $3}')
[ -z "$bad" ] || fail "librlock.so exports non-API symbols: $bad"

# The example through pkg-config, shared and static.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --variable=libdir rlock)" -ef "$libdir" ] || fail "rlock.pc does not point at $libdir"
example=$src/client/examples/hold_lock.c
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$example" $(pkg-config --cflags --libs rlock) \
    -Wl,-rpath,"$libdir" -o "$tmp/ex-shared"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$example" $(pkg-config --cflags rlock) \
    "$libdir/librlock.a" $(pkg-config --libs --static rlock | sed 's/-lrlock//') \
    -o "$tmp/ex-static"
"$tmp/ex-shared" --help >/dev/null
"$tmp/ex-static" --help >/dev/null
ldd "$tmp/ex-shared" | grep "$libdir/librlock.so.0" >/dev/null ||
    fail "ex-shared does not load the installed librlock: $(ldd "$tmp/ex-shared")"

# client/examples/ through find_package(rlock), shared and static.
cmake -S "$src/client/examples" -B "$tmp/examples" -DCMAKE_PREFIX_PATH="$usr" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/examples.log" 2>&1 ||
    { cat "$tmp/examples.log"; fail "configuring client/examples against the install"; }
cmake --build "$tmp/examples" >>"$tmp/examples.log" 2>&1 ||
    { cat "$tmp/examples.log"; fail "building client/examples against the install"; }
"$tmp/examples/rlock-example" --help >/dev/null
"$tmp/examples/rlock-example-static" --help >/dev/null
ldd "$tmp/examples/rlock-example" | grep "$libdir/librlock.so.0" >/dev/null ||
    fail "rlock-example (find_package) does not load the installed librlock: $(ldd "$tmp/examples/rlock-example")"
if ldd "$tmp/examples/rlock-example-static" | grep librlock >/dev/null; then
    fail "rlock-example-static loads librlock.so"
fi
grep -q "$usr/include" "$tmp/examples/CMakeFiles/rlock-example.dir/flags.make" ||
    fail "rlock::rlock does not carry the installed include directory"

"$usr/sbin/rlockd" --test-config -c "$root/etc/rlockd/rlockd.conf" >/dev/null

# Any other prefix: everything under it, and a unit that runs what was installed there.
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
unit=$prefix/lib/systemd/system/rlockd.service
[ -e "$prefix/etc/rlockd/rlockd.conf" ] || fail "rlockd.conf not under the prefix"
grep -qx "ExecStart=$prefix/sbin/rlockd -c $prefix/etc/rlockd/rlockd.conf" "$unit" ||
    fail "the unit under $prefix does not run $prefix/sbin/rlockd: $(grep ^ExecStart= "$unit")"
grep -qx "ExecStartPre=$prefix/sbin/rlockd --test-config -c $prefix/etc/rlockd/rlockd.conf" "$unit" ||
    fail "ExecStartPre under $prefix: $(grep ^ExecStartPre= "$unit")"
echo "install check: ok"
