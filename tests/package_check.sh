#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package: cpack builds it from the build tree; its control data
# names the right dependencies (exactly the runtime libraries rlockd and
# librlock link, each installed here at a version that satisfies it), its
# conffile and its files; and it unpacks with dpkg into a private root (an
# empty dpkg database of its own, no chroot), where the daemon and the CLI run.
#   package_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d /tmp/rlock-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$tmp" && cpack --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
    { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/out/*.deb)
[ "${#debs[@]}" -eq 1 ] && [ -f "${debs[0]}" ] || fail "expected one .deb, got: ${debs[*]}"
deb=${debs[0]}
version=$(sed -n 's/^project(rlockd VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = rlockd ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), not $version"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
dpkg-deb --info "$deb"

# Depends: exactly the shared libraries linked, each satisfied on this machine.
depends=$(field Depends)
names=$(echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort | tr '\n' ' ')
want="libc6 libevent-2.1-7 libhiredis0.14 libinih1 libprotobuf-c1 libssl3 libuuid1 "
[ "$names" = "$want" ] || fail "Depends names [$names], expected [$want]"
echo "$depends" | tr ',' '\n' | sed 's/^ *//' | while read -r dep; do
    name=${dep%% *}
    have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null) || fail "$name not installed"
    case $have in "install ok installed "*) ;; *) fail "$name: $have" ;; esac
    if [[ $dep =~ \((..?)\ ([^\)]*)\) ]]; then
        op=${BASH_REMATCH[1]} ver=${BASH_REMATCH[2]}
        case $op in '>=') op=ge ;; '<=') op=le ;; '=') op=eq ;; '>>') op=gt ;; '<<') op=lt ;; esac
        dpkg --compare-versions "${have##* }" "$op" "$ver" || fail "$name ${have##* } does not satisfy $dep"
    fi
done
field Recommends | grep redis-server >/dev/null || fail "redis-server is not recommended"

# The conffile, and the files.
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles > "$tmp/conffiles"
[ "$(cat "$tmp/conffiles")" = /etc/rlockd/rlockd.conf ] || fail "conffiles: $(cat "$tmp/conffiles")"
dpkg-deb --contents "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort > "$tmp/files"
cat > "$tmp/expected" <<LIST
/etc/rlockd/rlockd.conf
/usr/bin/rlockctl
/usr/include/rlock.h
/usr/include/rlock_event.h
/usr/lib/cmake/rlock/rlockConfig.cmake
/usr/lib/cmake/rlock/rlockConfigVersion.cmake
/usr/lib/cmake/rlock/rlockTargets.cmake
/usr/lib/librlock.a
/usr/lib/librlock.so
/usr/lib/librlock.so.0
/usr/lib/librlock.so.$version
/usr/lib/pkgconfig/rlock.pc
/usr/lib/systemd/system/rlockd.service
/usr/sbin/rlockd
/usr/share/bash-completion/completions/rlockctl
/usr/share/doc/rlockd/copyright
/usr/share/man/man1/rlockctl.1.gz
/usr/share/man/man3/librlock.3.gz
/usr/share/man/man5/rlockd.conf.5.gz
/usr/share/man/man8/rlockd.8.gz
LIST
# And the C API's man pages and links (man/CMakeLists.txt lists what it installs).
sed 's|^|/usr/share/man/|' "$build/man/manifest.txt" >> "$tmp/expected"
sort -u -o "$tmp/expected" "$tmp/expected"
# The per-configuration targets file is named after the build type.
grep -v '^/usr/lib/cmake/rlock/rlockTargets-[a-z]*\.cmake$' "$tmp/files" > "$tmp/files.common"
grep -q '^/usr/lib/cmake/rlock/rlockTargets-[a-z]*\.cmake$' "$tmp/files" || fail "no rlockTargets-<config>.cmake"
diff -u "$tmp/expected" "$tmp/files.common" || fail "the package's files differ from the expected list"

# Unpack into a private root with its own dpkg database (no chroot, no scripts run).
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --unpack "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg --unpack"; }
dpkg --root="$root" -L rlockd | grep -x /usr/sbin/rlockd >/dev/null || fail "dpkg does not list /usr/sbin/rlockd"
grep -q '^License: BSD-3-Clause$' "$root/usr/share/doc/rlockd/copyright" ||
    fail "the package's copyright file names no BSD-3-Clause licence"
[ -e "$root/etc/rlockd/rlockd.conf" ] || [ -e "$root/etc/rlockd/rlockd.conf.dpkg-new" ] ||
    fail "rlockd.conf not unpacked"
if ldd "$root/usr/sbin/rlockd" | grep 'not found' >/dev/null; then fail "rlockd: $(ldd "$root/usr/sbin/rlockd")"; fi
"$root/usr/sbin/rlockd" --version | grep "^rlockd $version" >/dev/null || fail "the packaged rlockd does not run"
"$root/usr/bin/rlockctl" --version >/dev/null || fail "the packaged rlockctl does not run"
[ "$(file -b "$root/usr/sbin/rlockd" | grep -c 'not stripped')" -eq 0 ] || fail "rlockd is not stripped"
echo "package check: ok"
