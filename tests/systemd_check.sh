#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# systemd/rlockd.service, checked with systemd's own tools (nothing here
# boots systemd):
#  - systemd-analyze verify, clean, on a scratch root that holds this
#    machine's systemd units and /bin/kill plus the project installed under
#    /usr (so the unit's ExecStart=, ExecReload= and man: links resolve to
#    what was installed, not to files of the host);
#  - systemd-analyze security --offline=true: overall exposure 1.4 or lower;
#  - what the unit must say: Type=notify, ExecStartPre= the config test,
#    ExecReload= SIGHUP, Restart=on-failure with RestartSec= at most a fifth
#    of the daemon's session timeout (read from rlockd itself: sessions must
#    be able to resume on the restarted daemon), a dynamic user, the runtime
#    directory and the watchdog.
#   systemd_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
unit=$src/systemd/rlockd.service
tmp=$(mktemp -d /tmp/rlock-systemd.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed (Debian package systemd)"

root=$tmp/root
DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null
cmp "$unit" "$root/usr/lib/systemd/system/rlockd.service" || fail "installed unit differs"
host_units=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
cp -a --no-clobber "$host_units/." "$root/usr/lib/systemd/system/"
# Debian 12 has a merged /usr; ExecReload='s program comes from the host, like the units.
mkdir -p "$root/usr/bin"
ln -s usr/bin "$root/bin"
reload_bin=$(sed -n 's/^ExecReload=\([^ ]*\).*/\1/p' "$unit")
[ -x "$reload_bin" ] || fail "ExecReload= runs $reload_bin, which this machine lacks"
cp "$reload_bin" "$root$reload_bin"

out=$(MANPATH=$root/usr/share/man systemd-analyze verify --root="$root" rlockd.service 2>&1) ||
    fail "systemd-analyze verify failed: $out"
[ -z "$out" ] || fail "systemd-analyze verify is not clean: $out"

sec=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) ||
    fail "systemd-analyze security failed: $sec"
score=$(echo "$sec" | sed -n 's/.*Overall exposure level for rlockd.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || fail "no exposure level in: $sec"
awk -v s="$score" 'BEGIN { exit !(s <= 1.4) }' ||
    fail "exposure $score is above 1.4: $(echo "$sec" | grep '✗')"
echo "systemd-analyze security: exposure $score"

# One value of the [Service] section (the last one set), or "".
key() { sed -n "/^\[Service\]/,/^\[/ s/^$1=//p" "$unit" | tail -n1; }
# A systemd or rlockd duration in milliseconds: 30s, 1min, 500ms, 1h, 2m, bare seconds.
ms() {
    awk -v d="$1" 'BEGIN {
        if (match(d, /^[0-9.]+/) == 0) { print -1; exit }
        n = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
        f = -1
        if (u == "ms") f = 1
        if (u == "" || u == "s" || u == "sec") f = 1000
        if (u == "m" || u == "min") f = 60000
        if (u == "h") f = 3600000
        print (f < 0) ? -1 : n * f }'
}
[ "$(key Type)" = notify ] || fail "Type= is not notify"
key ExecStartPre | grep -- '--test-config' >/dev/null || fail "ExecStartPre= does not test the config"
key ExecReload | grep -E 'kill (-HUP|-s HUP|-SIGHUP) \$MAINPID' > /dev/null || fail "ExecReload= does not send SIGHUP"
[ "$(key Restart)" = on-failure ] || fail "Restart= is not on-failure"
timeout=$("$root/usr/sbin/rlockd" --dump-config -c "$root/etc/rlockd/rlockd.conf" |
    awk -F' *= *' '/^\[/ { s = $0 } s == "[session]" && $1 == "timeout" { print $2 }')
restart_ms=$(ms "$(key RestartSec)")
timeout_ms=$(ms "$timeout")
# Sessions resume on the restarted daemon only within their timeout: leave them most of it.
[ "$timeout_ms" -gt 0 ] && [ "$restart_ms" -gt 0 ] && [ $((restart_ms * 5)) -le "$timeout_ms" ] ||
    fail "RestartSec=$(key RestartSec) is not at most a fifth of session.timeout ($timeout)"
grep -q '^# .*RestartSec' "$unit" || fail "no comment says why RestartSec is what it is"
[ "$(key DynamicUser)" = yes ] || fail "no dedicated user (DynamicUser=yes)"
[ "$(key RuntimeDirectory)" = rlockd ] || fail "RuntimeDirectory= is not rlockd"
[ -n "$(key WatchdogSec)" ] || fail "no WatchdogSec="
for want in NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes ProtectHome=yes \
            MemoryDenyWriteExecute=yes SystemCallFilter=@system-service \
            "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX"; do
    grep -qx "$want" "$unit" || fail "the unit lacks $want"
done
# ExecStartPre's command passes on the installed configuration.
"$root/usr/sbin/rlockd" --test-config -c "$root/etc/rlockd/rlockd.conf" >/dev/null ||
    fail "rlockd --test-config fails on the installed rlockd.conf"
echo "systemd check: ok"
