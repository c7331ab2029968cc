#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Fails when a source of daemon/ or client/ includes a project header by a
# relative path ("../lock/lock.h"): the per-layer include paths are what keep
# a layer from seeing the ones above it, and such a path would go around them.
root=${1:?usage: relative_includes.sh SOURCE-DIR}
found=$(grep -rn --include='*.c' --include='*.h' '#include "[^"]*/' "$root/daemon" "$root/client")
if [ -n "$found" ]; then
    echo "includes by path (use the header's name; the layer's include paths find it):"
    echo "$found"
    exit 1
fi
echo "no include by path in daemon/ or client/"
