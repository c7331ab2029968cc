#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# localize_archive.sh ARCHIVE — turn a static library into one relocatable
# object whose only global symbols are those compiled with default
# visibility (librlock: rlock_*). The objects are linked together first
# (ld -r), so the calls between them are resolved, then every hidden symbol
# is made local: an application linking the archive can define wire_* or
# rlock__v1__* of its own without a clash.
set -eu
archive=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
ar x "$archive"
ld -r -o combined.o ./*.o
objcopy --localize-hidden combined.o
rm -f "$archive"
ar rcs "$archive" combined.o
