#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# symbols_check.sh LIBDIR — librlock.a and librlock.so define no global symbol
# but the public rlock_* API: an application linking either may use any other
# name (wire_*, rlock__v1__* of its own protobuf code, ...) without a clash.
set -eu
libdir=$1
fail=0
for lib in "$libdir/librlock.a" "$libdir/librlock.so"; do
    case $lib in
    *.a) syms=$(nm -g --defined-only "$lib" | awk 'NF == 3 {print $3}') ;;
    *) syms=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}') ;;
    esac
    n=$(printf '%s\n' "$syms" | grep -c . || true)
    bad=$(printf '%s\n' "$syms" | grep -v '^rlock_[a-z]' || true)
    if [ "$n" -lt 10 ]; then
        echo "FAIL: $lib exports only $n symbols: the check would prove nothing"
        fail=1
    elif [ -n "$bad" ]; then
        echo "FAIL: $lib exports names outside rlock_*:"
        printf '%s\n' "$bad" | head -20
        fail=1
    else
        echo "ok: $lib exports $n symbols, all rlock_*"
    fi
done
exit $fail
