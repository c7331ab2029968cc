# Shared by scripts/run and scripts/test: install what is missing, then build.
# Sourced, not executed.

RLOCK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RLOCK_BUILD=${RLOCK_BUILD:-$RLOCK_ROOT/build}

# Debian 12 packages needed to build and test: the compiler and libraries;
# scdoc for the man pages (man-db renders them in a test); redis-server for the
# integration tests (also as the sentinels and cluster nodes: redis-server --sentinel,
# cluster-enabled yes; redis-tools, which it pulls in, has redis-cli --cluster); systemd for systemd-analyze (the unit's checks; nothing
# here boots it) and strace (the unit's system call filter against rlockd's
# calls); dpkg-dev and file for the .deb (dpkg-shlibdeps);
# python3-prometheus-client parses /metrics in a test.
RLOCK_PACKAGES="build-essential cmake pkg-config libevent-dev libhiredis-dev
libprotobuf-c-dev protobuf-c-compiler libinih-dev check redis-server scdoc man-db
systemd strace dpkg-dev file python3 python3-prometheus-client"

rlock_install_deps() {
    local missing=""
    for p in $RLOCK_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "ok installed" >/dev/null || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
}

# rlock_build [extra cmake args...]
rlock_build() {
    cmake -S "$RLOCK_ROOT" -B "$RLOCK_BUILD" "$@" >/dev/null
    cmake --build "$RLOCK_BUILD" -j "$(nproc)"
}
