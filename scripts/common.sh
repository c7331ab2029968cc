# SPDX-License-Identifier: BSD-3-Clause
# Shared by scripts/run and scripts/test: install what is missing, then build.
# Sourced, not executed.

RLOCK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RLOCK_BUILD=${RLOCK_BUILD:-$RLOCK_ROOT/build}

# Debian 12 packages. To build and run the product: the compiler and libraries,
# scdoc for the man pages, redis-server (./scripts/run starts a private one).
RLOCK_RUN_PACKAGES="build-essential cmake pkg-config libevent-dev libhiredis-dev
libprotobuf-c-dev protobuf-c-compiler libinih-dev libssl-dev uuid-dev redis-server scdoc"
# To test as well: Check; man-db renders the man pages in a test, and mandoc lints them;
# redis-server also serves as the sentinels and cluster nodes (redis-server --sentinel,
# cluster-enabled yes; redis-tools, which it pulls in, has redis-cli --cluster); systemd for
# systemd-analyze (the unit's checks; nothing here boots it) and strace (the unit's
# system call filter against rlockd's calls); dpkg-dev and file for the .deb
# (dpkg-shlibdeps); python3-prometheus-client parses /metrics in a test; python3-protobuf
# and protoc (protobuf-compiler) encode requests as a second, independent encoder.
# To build the Debian packages (./scripts/package): debhelper, lintian to check them.
RLOCK_PACKAGE_PACKAGES="debhelper lintian"
RLOCK_PACKAGES="$RLOCK_RUN_PACKAGES $RLOCK_PACKAGE_PACKAGES check man-db mandoc systemd strace dpkg-dev file python3
openssl python3-prometheus-client python3-protobuf protobuf-compiler"

# rlock_install_deps [PACKAGES [APT-GET OPTIONS...]]: install what is missing of PACKAGES
# (default: all).
rlock_install_deps() {
    local missing="" packages=${1:-$RLOCK_PACKAGES}
    shift || true
    for p in $packages; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "ok installed" >/dev/null || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "installing:$missing" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" $missing >/dev/null
}

# rlock_install_node: Node.js 18 or later and npm, for the Node.js client's tests
# (client/node). A node already on PATH is kept (a machine may have its own, with npm
# inside, which Debian's npm package would conflict with); without one, Debian 12's
# nodejs (18.19) and npm are installed.
rlock_install_node() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 && return 0
    command -v node >/dev/null 2>&1 && ! dpkg-query -W -f='${Status}' nodejs 2>/dev/null |
        grep "ok installed" >/dev/null && return 0 # a node of its own: run-tests.sh says what lacks
    rlock_install_deps "nodejs npm"
}

# rlock_install_browser: Chromium and its WebDriver (chromium, chromium-driver), in which a
# test loads the status page. Without the packages they recommend (printing, desktop
# integration): a headless browser needs none of them.
rlock_install_browser() {
    rlock_install_deps "chromium chromium-driver" --no-install-recommends
}

# rlock_install_promtool: promtool (a test checks /metrics and the alert rules with it).
# Debian ships it in the prometheus package, whose install would also enable and start a
# Prometheus server on port 9090 wherever systemd runs: the package is downloaded instead
# and only its promtool, a static program, copied to /usr/local/bin.
rlock_install_promtool() {
    command -v promtool >/dev/null 2>&1 && return 0
    local sudo="" tmp
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    tmp=$(mktemp -d /tmp/rlock-promtool.XXXXXX)
    chmod 755 "$tmp" # apt downloads as the _apt user where it can
    echo "installing: promtool (from Debian's prometheus package)" >&2
    (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 ||
        { $sudo apt-get update -qq && apt-get download prometheus >/dev/null; }; } &&
        dpkg-deb -x prometheus_*.deb root &&
        $sudo install -m 755 root/usr/bin/promtool /usr/local/bin/promtool) ||
        { rm -rf "$tmp"; echo "cannot install promtool" >&2; return 1; }
    rm -rf "$tmp"
}

# rlock_build [extra cmake args...]: configure and build everything (tests included).
rlock_build() {
    cmake -S "$RLOCK_ROOT" -B "$RLOCK_BUILD" -DBUILD_TESTING=ON "$@" >/dev/null
    cmake --build "$RLOCK_BUILD" -j "$(nproc)"
}

# rlock_build_product: rlockd and rlockctl. A new build tree is configured without the
# tests (-DBUILD_TESTING=OFF: no Check needed); one the tests built is left as it is
# configured, and only the two programs are brought up to date in it.
rlock_build_product() {
    if [ ! -f "$RLOCK_BUILD/CMakeCache.txt" ]; then
        cmake -S "$RLOCK_ROOT" -B "$RLOCK_BUILD" -DBUILD_TESTING=OFF >/dev/null
    fi
    cmake --build "$RLOCK_BUILD" -j "$(nproc)" --target rlockd rlockctl
}
