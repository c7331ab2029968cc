#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Every file the project wrote under daemon/ client/ proto/ lua/ tests/ scripts/
# cmake/ (sources, headers, scripts, Lua, JavaScript and TypeScript, the schema,
# CMake files) names its
# licence in its first three lines; LICENSE holds the text.
#
#   tests/spdx_check.sh SOURCE-DIR
src=${1:?usage: spdx_check.sh SOURCE-DIR}
cd "$src" || exit 1
[ -f LICENSE ] && grep -q "BSD 3-Clause License" LICENSE || { echo "FAIL: no BSD-3-Clause LICENSE"; exit 1; }
# Tracked files in a git work tree (a clone, or a worktree whose .git is a file);
# otherwise every file, less what npm installs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list=$(git ls-files daemon client proto lua tests scripts cmake)
else
    list=$(find daemon client proto lua tests scripts cmake -type f -not -path '*/node_modules/*')
fi
missing=0
checked=0
for f in $list; do
    case "$f" in
    */corpus/*|*.md|*.txt) case "$f" in */CMakeLists.txt) ;; *) continue ;; esac ;;
    esac
    case "$f" in
    *.c|*.h|*.lua|*.proto|*.cmake|*.in|*.sh|*.py|*.jq|*.js|*.mjs|*.ts|*/CMakeLists.txt) ;;
    *) head -c 2 "$f" | grep '#!' > /dev/null || continue ;;
    esac
    checked=$((checked + 1))
    if ! head -n 3 "$f" | grep 'SPDX-License-Identifier: BSD-3-Clause' > /dev/null; then
        echo "no SPDX line: $f"
        missing=$((missing + 1))
    fi
done
[ "$checked" -gt 100 ] || { echo "FAIL: only $checked files checked"; exit 1; }
[ "$missing" -eq 0 ] || { echo "FAIL: $missing of $checked files name no licence"; exit 1; }
echo "$checked files carry the SPDX line"
