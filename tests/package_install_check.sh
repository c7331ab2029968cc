#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian packages that package_check.sh (ctest package_deb) left in
# BUILD_DIR/packages into this machine with apt, the way a user does; checks what
# the maintainer scripts did (the unit enabled, the credentials directory root's
# alone, the library known to ldconfig); starts the installed rlockd by hand with
# the installed configuration (against the Redis it names, 127.0.0.1:6379: the one
# answering there, else a private redis-server started here); `rlockctl ping`s it;
# builds a program against the installed library with pkg-config and runs it;
# renders `man 3 rlock_acquire`; then purges the packages and checks nothing of
# them is left. Run by .ci/run (as root) after ./scripts/test, never inside ctest:
# it changes the machine.
#   package_install_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# Under pipefail, `producer | grep -q` fails when grep exits at its first match while the
# producer is still writing (SIGPIPE, status 141; ldconfig -p did so one run in ten):
# every check here lets grep read to the end instead (grep ... > /dev/null).
build=$(cd "$1" && pwd) # apt takes a path to a .deb only with a slash in front
src=$2
pkgs="rlockd librlock0 librlock-dev rlockd-tools"
tmp=$(mktemp -d /tmp/rlock-pkg-install.XXXXXX)
redis_pid=""
rlockd_pid=""
installed=""
cleanup() {
    # A failed check leaves nothing of the packages on the machine.
    [ -n "$installed" ] && DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $pkgs > /dev/null 2>&1
    [ -n "$rlockd_pid" ] && kill "$rlockd_pid" 2>/dev/null && wait "$rlockd_pid" 2>/dev/null
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "run as root: it installs packages"
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
debs=()
for p in $pkgs; do
    f=$build/packages/${p}_${version}_$arch.deb
    [ -f "$f" ] || fail "$f is missing: run ./scripts/test (ctest package_deb) first"
    debs+=("$f")
done
for p in $pkgs; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "ok installed" > /dev/null; then
        fail "$p is already installed on this machine; not touching it"
    fi
done

echo "installing: ${debs[*]}"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" > "$tmp/apt.log" 2>&1 ||
    { cat "$tmp/apt.log"; fail "apt-get install"; }
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" | grep "install ok installed" > /dev/null || fail "$p is not installed"
done
[ -L /etc/systemd/system/multi-user.target.wants/rlockd.service ] || fail "the unit is not enabled"
[ "$(stat -c %a:%U /etc/rlockd/credentials)" = 700:root ] ||
    fail "/etc/rlockd/credentials is $(stat -c %a:%U /etc/rlockd/credentials)"
ldconfig -p | grep 'librlock\.so\.0 ' > /dev/null || fail "ldconfig does not know librlock.so.0"
/usr/sbin/rlockd --test-config -c /etc/rlockd/rlockd.conf > /dev/null || fail "the installed config does not pass --test-config"

# The Redis the installed configuration names.
if [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" != PONG ]; then
    redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
        --maxmemory-policy noeviction > "$tmp/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do
        [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
fi
/usr/sbin/rlockd -c /etc/rlockd/rlockd.conf > "$tmp/rlockd.log" 2>&1 &
rlockd_pid=$!
for _ in $(seq 100); do
    rlockctl ping > "$tmp/ping" 2>&1 && break
    kill -0 "$rlockd_pid" 2>/dev/null || { cat "$tmp/rlockd.log"; fail "the installed rlockd exited"; }
    sleep 0.1
done
rlockctl ping || { cat "$tmp/ping" "$tmp/rlockd.log"; fail "rlockctl ping against the installed rlockd"; }
rlockctl run package-check -- true || fail "rlockctl run against the installed rlockd"

# A program built against the installed library, as its users build one.
cc -o "$tmp/holder" "$src/client/examples/hold_lock.c" $(pkg-config --cflags --libs rlock) ||
    fail "building against the installed librlock with pkg-config"
ldd "$tmp/holder" | grep -E "librlock.so.0 => (/usr)?/lib/" > /dev/null || fail "the program does not load /usr/lib/.../librlock.so.0"
"$tmp/holder" --hold 0 package-check > "$tmp/holder.out" 2>&1 && grep -q "fence" "$tmp/holder.out" ||
    { cat "$tmp/holder.out"; fail "the program built against the installed library"; }
MANWIDTH=80 man 3 rlock_acquire 2>/dev/null | grep "rlock_acquire" > /dev/null || fail "man 3 rlock_acquire"
kill "$rlockd_pid"; wait "$rlockd_pid" || true; rlockd_pid=""

DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $pkgs > "$tmp/purge.log" 2>&1 ||
    { cat "$tmp/purge.log"; fail "apt-get purge"; }
installed=""
for p in $pkgs; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "installed" > /dev/null; then fail "$p is still installed"; fi
done
for f in /usr/sbin/rlockd /usr/bin/rlockctl /etc/rlockd /lib/systemd/system/rlockd.service \
    /etc/systemd/system/multi-user.target.wants/rlockd.service /usr/include/rlock.h; do
    [ -e "$f" ] && fail "$f is left after purge"
done
ldconfig -p | grep 'librlock\.so\.0 ' > /dev/null && fail "ldconfig still lists librlock.so.0 after purge"
echo "package install check: ok"
