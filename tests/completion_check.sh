#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rlockctl's bash completion against the rlockctl it completes: the commands
# it offers are exactly those `rlockctl --help` lists (and the known ones are
# there), options complete for rlockctl and for a command, a file option
# completes files, and after `--` a command name completes.
#   completion_check.sh SCRIPT RLOCKCTL
set -uo pipefail
script=$1
ctl=$2
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=/dev/null
. "$script" || fail "cannot source $script"

# complete WORDS...: COMPREPLY for the command line WORDS (the last one being completed).
complete_line() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    _rlockctl
    printf '%s\n' "${COMPREPLY[@]}" | sort
}

listed=$("$ctl" --help | awk '/^Commands:/ { on = 1; next } on && NF == 0 { on = 0 } on { print $1 }' | sort)
[ "$(echo "$listed" | wc -l)" -ge 10 ] || fail "rlockctl --help lists too few commands: $listed"
offered=$(complete_line "$ctl" "")
[ "$offered" = "$listed" ] || fail "commands offered [$offered], rlockctl --help lists [$listed]"
for c in run elect leader ping stats info sessions locks release kill-session; do
    echo "$offered" | grep -x "$c" > /dev/null || fail "command $c not offered"
done
[ "$(complete_line "$ctl" ki)" = kill-session ] || fail "ki does not complete to kill-session"
[ "$(complete_line "$ctl" --ser)" = --server ] || fail "--ser: $(complete_line "$ctl" --ser)"
[ "$(complete_line "$ctl" locks --pre)" = --prefix ] || fail "locks --pre: $(complete_line "$ctl" locks --pre)"
[ "$(complete_line "$ctl" --server 127.0.0.1:7483 locks --pre)" = --prefix ] ||
    fail "an option's value taken for the command"
complete_line "$ctl" run --no-w | grep -x -- --no-watchdog > /dev/null || fail "run --no-w"
# The options a command's --help lists, every one offered.
for o in $("$ctl" release --help | sed -n 's/^ \{1,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p'); do
    complete_line "$ctl" release "${o:0:4}" | grep -x -- "$o" > /dev/null || fail "release ${o:0:4} does not offer $o"
done
dir=$(mktemp -d /tmp/rlock-compl.XXXXXX)
trap 'rm -rf "$dir"' EXIT
touch "$dir/token.txt"
[ "$(complete_line "$ctl" --token-file "$dir/tok")" = "$dir/token.txt" ] || fail "--token-file does not complete files"
complete_line "$ctl" run demo -- slee | grep -x sleep > /dev/null || fail "the command after -- does not complete"
[ -z "$(complete_line "$ctl" run demo -- sleep 1)" ] || fail "words after the command get offers"
echo "completion: $(echo "$offered" | wc -l) commands, options and files complete"
