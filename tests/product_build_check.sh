#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The product alone, as a packager builds it: -DBUILD_TESTING=OFF, the Release
# type, warnings as errors, on a machine without Check. Check's pkg-config file
# is hidden (PKG_CONFIG_LIBDIR names a directory of links to every other one),
# so a configure that still asks for it fails here.
#
#   tests/product_build_check.sh SOURCE-DIR BUILD-DIR
set -eu
src=${1:?usage: product_build_check.sh SOURCE-DIR BUILD-DIR}
build=${2:?usage: product_build_check.sh SOURCE-DIR BUILD-DIR}
pc=$(mktemp -d)
trap 'rm -rf "$pc"' EXIT
for dir in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
    [ -d "$dir" ] || continue
    for f in "$dir"/*.pc; do
        [ -e "$f" ] || continue
        [ "$(basename "$f")" = check.pc ] || ln -sf "$f" "$pc/"
    done
done
export PKG_CONFIG_LIBDIR="$pc" PKG_CONFIG_PATH=
if pkg-config --exists check; then
    echo "FAIL: Check is still visible through $pc" >&2
    exit 1
fi
rm -rf "$build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRLOCK_WERROR=ON -DBUILD_TESTING=OFF \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)"
for f in bin/rlockd bin/rlockctl lib/librlock.so lib/librlock.a; do
    [ -e "$build/$f" ] || { echo "FAIL: $f was not built" >&2; exit 1; }
done
extra=$(find "$build/bin" -name 'itest_*' -o -name 'unit_*' -o -name 'rlock-bench' -o -name 'fuzz_*')
if [ -n "$extra" ]; then
    echo "FAIL: a product build built tests: $extra" >&2
    exit 1
fi
rm -f "$build.configure.log"
echo "product build: rlockd, rlockctl and librlock built without Check (Release, -Werror)"
