#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages: ./scripts/package builds them from the tracked files with
# dpkg-buildpackage and lintian passes each (no error, no warning); here their
# control data is checked (dependencies exactly the runtime libraries linked and
# satisfied on this machine, the library's shlibs, symbols and ldconfig trigger,
# the conffile, the unit enabled by the maintainer scripts), each package's files
# against the expected lists, and the four unpack together into a private root
# (its own dpkg database, no chroot, no scripts run) where the daemon and the CLI
# run. The packages stay in BUILD_DIR/packages for .ci/run, which installs them
# (tests/package_install_check.sh).
#   package_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# Under pipefail, `producer | grep -q` fails when grep exits at its first match while the
# producer is still writing (SIGPIPE, status 141; ldconfig -p did so one run in ten):
# every check here lets grep read to the end instead (grep ... > /dev/null).
build=$1
src=$2
out=$build/packages
tmp=$(mktemp -d /tmp/rlock-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$src/scripts/package" "$out" || fail "./scripts/package"
version=$(sed -n 's/^project(rlockd VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ "$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)" = "$version" ] ||
    fail "debian/changelog's version is not the project's $version"
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb() { echo "$out/${1}_${version}_$arch.deb"; }
for p in rlockd librlock0 librlock-dev rlockd-tools; do
    [ -f "$(deb $p)" ] || fail "no $(basename "$(deb $p)") in $out: $(ls "$out")"
done
field() { dpkg-deb --field "$(deb "$1")" "$2"; }
ctrl() { dpkg-deb --ctrl-tarfile "$(deb "$1")" | tar -xO "./$2"; }

# Depends: exactly the shared libraries linked, each satisfied on this machine.
check_depends() { # PACKAGE "NAMES..."
    local depends names
    depends=$(field "$1" Depends)
    names=$(echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort | tr '\n' ' ')
    [ "$names" = "$2" ] || fail "$1 Depends names [$names], expected [$2]"
    echo "$depends" | tr ',' '\n' | sed 's/^ *//' | while read -r dep; do
        name=${dep%% *}
        [ "$name" = librlock0 ] && continue # built here, not installed
        have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null) || fail "$name not installed"
        case $have in "install ok installed "*) ;; *) fail "$name: $have" ;; esac
        if [[ $dep =~ \((..?)\ ([^\)]*)\) ]]; then
            op=${BASH_REMATCH[1]} ver=${BASH_REMATCH[2]}
            case $op in '>=') op=ge ;; '<=') op=le ;; '=') op=eq ;; '>>') op=gt ;; '<<') op=lt ;; esac
            dpkg --compare-versions "${have##* }" "$op" "$ver" || fail "$name ${have##* } does not satisfy $dep"
        fi
    done
}
check_depends rlockd "libc6 libevent-2.1-7 libhiredis0.14 libinih1 libprotobuf-c1 libssl3 libuuid1 "
check_depends librlock0 "libc6 libprotobuf-c1 libssl3 "
check_depends rlockd-tools "libc6 libprotobuf-c1 libssl3 "
check_depends librlock-dev "libprotobuf-c-dev librlock0 libssl-dev "
field librlock-dev Depends | grep -F "librlock0 (= $version)" >/dev/null ||
    fail "librlock-dev does not depend on librlock0 of its own version"
field rlockd Recommends | grep redis-server >/dev/null || fail "rlockd does not recommend redis-server"
for p in librlock0 librlock-dev; do
    [ "$(field $p Multi-Arch)" = same ] || fail "$p is not Multi-Arch: same"
done

# The library tells dependants what they need: shlibs, symbols, the ldconfig trigger.
[ "$(ctrl librlock0 shlibs)" = "librlock 0 librlock0 (>= $version)" ] || fail "shlibs: $(ctrl librlock0 shlibs)"
ctrl librlock0 symbols | sed -n 1p | grep -x "librlock.so.0 librlock0 #MINVER#" >/dev/null ||
    fail "no symbols file for librlock.so.0"
ctrl librlock0 symbols | grep '^ rlock_acquire@Base ' > /dev/null || fail "the symbols file lacks rlock_acquire"
ctrl librlock0 triggers | grep -x "activate-noawait ldconfig" >/dev/null || fail "librlock0 has no ldconfig trigger"

# The daemon: its conffile, the unit enabled and started on install, stopped on removal.
[ "$(ctrl rlockd conffiles)" = /etc/rlockd/rlockd.conf ] || fail "conffiles: $(ctrl rlockd conffiles)"
ctrl rlockd postinst > "$tmp/postinst"
grep -q "deb-systemd-helper enable 'rlockd.service'" "$tmp/postinst" ||
    fail "rlockd's postinst does not enable the unit"
grep -q "_dh_action=.*start" "$tmp/postinst" && grep -q "deb-systemd-invoke \$_dh_action 'rlockd.service'" "$tmp/postinst" ||
    fail "rlockd's postinst does not start the unit"
ctrl rlockd prerm | grep "deb-systemd-invoke stop 'rlockd.service'" > /dev/null ||
    fail "rlockd's prerm does not stop the unit"
ctrl rlockd postinst | grep "install -d -m 0700 /etc/rlockd/credentials" > /dev/null ||
    fail "rlockd's postinst does not make the credentials directory"

# Each package's files.
files() { dpkg-deb --contents "$(deb "$1")" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort; }
expect() { # PACKAGE, the list on stdin; a package's doc files are added
    sort -u > "$tmp/expected"
    printf '/usr/share/doc/%s/changelog.gz\n/usr/share/doc/%s/copyright\n' "$1" "$1" >> "$tmp/expected"
    sort -o "$tmp/expected" "$tmp/expected"
    files "$1" > "$tmp/files"
    diff -u "$tmp/expected" "$tmp/files" || fail "the files of $1 differ from the expected list"
}
expect rlockd <<LIST
/etc/rlockd/rlockd.conf
/lib/systemd/system/rlockd.service
/usr/sbin/rlockd
/usr/share/man/man5/rlockd.conf.5.gz
/usr/share/man/man8/rlockd.8.gz
LIST
expect librlock0 <<LIST
/usr/lib/$multiarch/librlock.so.0
/usr/lib/$multiarch/librlock.so.$version
LIST
expect rlockd-tools <<LIST
/usr/bin/rlockctl
/usr/share/bash-completion/completions/rlockctl
/usr/share/man/man1/rlockctl.1.gz
LIST
# The C API's man pages and links (man/CMakeLists.txt lists what it installs); the
# per-configuration CMake targets file is named after the build type.
targets=$(files librlock-dev | grep "^/usr/lib/$multiarch/cmake/rlock/rlockTargets-[a-z]*\.cmake$") ||
    fail "no rlockTargets-<config>.cmake in librlock-dev"
{ grep '^man3/' "$build/man/manifest.txt" | sed 's|^|/usr/share/man/|'
  echo "$targets"
  cat <<LIST
/usr/include/rlock.h
/usr/include/rlock_event.h
/usr/lib/$multiarch/cmake/rlock/rlockConfig.cmake
/usr/lib/$multiarch/cmake/rlock/rlockConfigVersion.cmake
/usr/lib/$multiarch/cmake/rlock/rlockTargets.cmake
/usr/lib/$multiarch/librlock.a
/usr/lib/$multiarch/librlock.so
/usr/lib/$multiarch/pkgconfig/rlock.pc
LIST
} | expect librlock-dev

# debian/copyright carries LICENSE's text.
sed -n '/^Redistribution/,$p' "$src/LICENSE" > "$tmp/license"
sed -n '/^License: BSD-3-Clause$/,$p' "$src/debian/copyright" | sed -n '/^ Redistribution/,$p' |
    sed 's/^ //; s/^\.$//' > "$tmp/copyright"
diff -u "$tmp/license" "$tmp/copyright" || fail "debian/copyright's licence text is not LICENSE's"

# Unpack the four into a private root with its own dpkg database (no scripts run).
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-depends --unpack "$(deb rlockd)" "$(deb librlock0)" "$(deb librlock-dev)" \
    "$(deb rlockd-tools)" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg --unpack"; }
dpkg --root="$root" -L rlockd | grep -x /usr/sbin/rlockd >/dev/null || fail "dpkg does not list /usr/sbin/rlockd"
if ldd "$root/usr/sbin/rlockd" | grep 'not found' >/dev/null; then fail "rlockd: $(ldd "$root/usr/sbin/rlockd")"; fi
"$root/usr/sbin/rlockd" --version | grep "^rlockd $version" >/dev/null || fail "the packaged rlockd does not run"
"$root/usr/bin/rlockctl" --version | grep "$version" >/dev/null || fail "the packaged rlockctl does not run"
for f in usr/sbin/rlockd usr/bin/rlockctl "usr/lib/$multiarch/librlock.so.$version"; do
    file -b "$root/$f" | grep 'not stripped' > /dev/null && fail "$f is not stripped"
    # Debian's hardening: full RELRO and bind-now, PIE executables.
    readelf -d "$root/$f" | grep 'BIND_NOW\|FLAGS_1.*NOW' > /dev/null || fail "$f is not linked with -z now"
done
echo "package check: ok"
