# SPDX-License-Identifier: BSD-3-Clause
# bench_report.jq — the figures of docs/benchmarks.md from the results of
# ./scripts/bench (slurped: one array of flat objects, each tagged with test
# and round). Called with --arg what NAME to select one output; each prints
# lines of text (markdown rows or gnuplot data).

def median: sort | if length == 0 then null
    elif length % 2 == 1 then .[(length - 1) / 2]
    else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def fmt(d): if . == null then "–" elif . >= 1e9 then "none in time"
    else (. * pow(10; d) | round / pow(10; d) | tostring) end;
def rounds: map(.round) | unique;
def pick(t; tg; m; r): map(select(.test == t and .target == tg and .mode == m and .round == r)) | .[0];

. as $all |
def per_round(f): [$all | rounds[] as $r | $r | f];
def direct(t; r): $all | pick(t; "redis-direct"; "direct"; r);
def rl(t; m; r): $all | pick(t; "rlockd"; m; r);

# Every target: per-round values, and how they are judged (le: at most, ge: at least).
def targets: [
  {id: "P1", what: "50 threads, sync API, a client each: pairs/s ÷ redis-direct's", unit: "×",
   cmp: "ge", floor: 0.7, goal: 1.0,
   vals: per_round(. as $r | rl("P1"; "sync"; $r).pairs_per_s / direct("P1"; $r).pairs_per_s)},
  {id: "P1s", what: "50 threads sharing one client: pairs/s ÷ redis-direct's (50 threads)",
   unit: "×", cmp: "ge", floor: 0.9, goal: 1.5,
   vals: per_round(. as $r | rl("P1s"; "shared"; $r).pairs_per_s / direct("P1"; $r).pairs_per_s)},
  {id: "P2", what: "1 thread, sync API: p50 of a pair ÷ redis-direct's", unit: "×",
   cmp: "le", floor: 2.5, goal: 2.0,
   vals: per_round(. as $r | rl("P2"; "sync"; $r).p50_us / direct("P2"; $r).p50_us)},
  {id: "P3", what: "async, 8 clients × 64 in flight: pairs/s ÷ redis-benchmark -P 16 ceiling",
   unit: "×", cmp: "ge", floor: 0.4, goal: 0.6,
   vals: per_round(. as $r | rl("P3"; "async"; $r).pairs_per_s /
                   ($all | pick("P3-ceiling"; "redis-benchmark"; null; $r)).pairs_per_s)},
  {id: "P4 CPU", what: "1,000,000 locks held by 1,000 sessions (ttl 30 s): rlockd, % of a core",
   unit: "%", cmp: "le", floor: 20, goal: 10,
   vals: per_round(. as $r | rl("P4"; "hold"; $r).cpu_rlockd_pct)},
  {id: "P4 memory", what: "the same: rlockd RSS per lock above idle", unit: "B", cmp: "le",
   floor: 512, goal: 256, vals: per_round(. as $r | rl("P4"; "hold"; $r).rlockd_bytes_per_lock)},
  {id: "P4 errors", what: "the same: acquires failed, sessions ended, locks lost",
   unit: "", cmp: "le", floor: 0, goal: 0, vals: per_round(. as $r | rl("P4"; "hold"; $r).errors)},
  {id: "P5 memory", what: "10,000 idle sessions: rlockd RSS per session above idle", unit: "B",
   cmp: "le", floor: 4096, goal: 2048,
   vals: per_round(. as $r | rl("P5"; "idle"; $r).rlockd_bytes_per_session)},
  {id: "P5 CPU", what: "the same: rlockd, % of a core", unit: "%", cmp: "le", floor: 5, goal: 5,
   vals: per_round(. as $r | rl("P5"; "idle"; $r).cpu_rlockd_pct)},
  {id: "P5 errors", what: "the same: sessions that ended", unit: "", cmp: "le", floor: 0,
   goal: 0, vals: per_round(. as $r | rl("P5"; "idle"; $r).errors)},
  {id: "P6 handoff", what: "32 threads, 1 resource: p99 release → next grant", unit: "ms",
   cmp: "le", floor: 2, goal: 1,
   vals: per_round(. as $r | rl("P6"; "sync"; $r).handoff_p99_us / 1000)},
  {id: "P6 starved", what: "the same: threads with no pair in the window, plus errors",
   unit: "", cmp: "le", floor: 0, goal: 0,
   vals: per_round(. as $r | rl("P6"; "sync"; $r) | .workers_starved + .errors)},
  {id: "P7 time", what: "a session holding 100,000 locks closes: until no lock key is left",
   unit: "s", cmp: "le", floor: 5, goal: 2,
   vals: per_round(. as $r | rl("P7"; "mass"; $r).keys_gone_ms
                   | if . < 0 then 1e9 else . / 1000 end)}, # 1e9: not within --mass-timeout
  {id: "P7 unconfirmed", what: "the same: keys left + Redis errors + rlockd warnings",
   unit: "", cmp: "le", floor: 0, goal: 0,
   vals: per_round(. as $r | rl("P7"; "mass"; $r)
                   | .keys_left + .redis_errors_during + .rlockd_warnings + .errors)}
];

def meets(v; limit; cmp): v != null and (if cmp == "ge" then v >= limit else v <= limit end);
def digits: if .unit == "×" then 2 elif .unit == "B" or .unit == "" then 0 else 1 end;

if $what == "targets" then
  targets[] | . as $t | ($t.vals | map(select(. != null)) | median) as $m |
  "| \($t.id) | \($t.what) | " + ($t.vals | map(fmt($t | digits)) | join(" | ")) +
  " | **\($m | fmt($t | digits))** \(if $m != null and $m >= 1e9 then "" else $t.unit end) | \(if $t.cmp == "ge" then "≥" else "≤" end) \($t.floor) | \(if $t.cmp == "ge" then "≥" else "≤" end) \($t.goal) | " +
  (if meets($m; $t.floor; $t.cmp) then "PASS" else "**MISS**" end) + " | " +
  (if meets($m; $t.goal; $t.cmp) then "yes" else "no" end) + " |"
elif $what == "pairs" then
  map(select(.mode == "sync" or .mode == "shared" or .mode == "async" or .mode == "direct"))
  | sort_by(.round)[] |
  "| \(.round) | \(.test) | \(.target) \(.mode) | \(if .mode == "async" then "\(.conns)×\(.inflight)" else .threads end) | \(.resources) | \(.pairs_per_s | round) | \(.p50_us) | \(.p90_us) | \(.p99_us) | \(.p999_us) | \(.handoff_p50_us) | \(.handoff_p99_us) | \(.attempts_per_pair) | \(.worker_pairs_min)–\(.worker_pairs_max) | \(.errors) | \(.cpu_client_us_per_pair) | \(.cpu_rlockd_us_per_pair) | \(.cpu_redis_us_per_pair) |"
elif $what == "ceiling" then
  map(select(.test == "P3-ceiling")) | sort_by(.round)[] |
  "| \(.round) | \(.ops_per_s | round) | \(.pairs_per_s | round) |"
elif $what == "hold" then
  map(select(.mode == "hold")) | sort_by(.round)[] |
  "| \(.round) | \(.locks_held) | \(.sessions) | \(.acquires_per_s) | \(.rlockd_rss_idle_kb) | \(.rlockd_rss_held_kb) | \(.rlockd_rss_end_kb) | \(.rlockd_bytes_per_lock) | \(.redis_bytes_per_lock) | \(.cpu_rlockd_pct) | \(.cpu_redis_pct) | \(.errors) |"
elif $what == "idle" then
  map(select(.mode == "idle")) | sort_by(.round)[] |
  "| \(.round) | \(.sessions) | \(.connect_s) | \(.rlockd_rss_idle_kb) | \(.rlockd_rss_sessions_kb) | \(.rlockd_rss_end_kb) | \(.rlockd_bytes_per_session) | \(.cpu_rlockd_pct) | \(.cpu_redis_pct) | \(.errors) |"
elif $what == "mass" then
  map(select(.mode == "mass")) | sort_by(.round)[] |
  "| \(.round) | \(.locks) | \(.acquires_per_s) | \(.close_call_ms) | \(.daemon_released_ms) | \(.keys_gone_ms) | \(.keys_left) | \(.redis_errors_during) | \(.rlockd_warnings) | \(.errors) |"
elif $what == "errors" then
  map(select((.errors // 0) > 0 or (.rlockd_warnings // 0) > 0)) | sort_by(.round)[] |
  "| \(.round) | \(.test) | \(.target) \(.mode) | \(.errors) | \(to_entries | map(select(.key | startswith("errors_"))) | map("\(.key | ltrimstr("errors_")) \(.value)") | join(", ")) | \(.rlockd_warnings // 0) | \(.first_error // "" | gsub("\\|"; "/")) |"
elif $what == "commands" then
  map(select(.round == 1)) | map(.test + "\t" + .cmd) | unique[] 
elif $what == "sweep" then
  # threads, then for redis-direct and rlockd: median, min, max pairs/s; median p50, p99 (µs)
  map(select(.test == "sweep")) | group_by(.threads)[] | . as $g |
  [($g | map(select(.mode == "direct"))), ($g | map(select(.mode == "sync")))] as [$d, $s] |
  [$g[0].threads,
   ($d | map(.pairs_per_s) | median), ($d | map(.pairs_per_s) | min), ($d | map(.pairs_per_s) | max),
   ($s | map(.pairs_per_s) | median), ($s | map(.pairs_per_s) | min), ($s | map(.pairs_per_s) | max),
   ($d | map(.p50_us) | median), ($d | map(.p99_us) | median),
   ($s | map(.p50_us) | median), ($s | map(.p99_us) | median),
   ($s | map(.cpu_rlockd_pct) | median), ($s | map(.cpu_rlockd_us_per_pair) | median),
   ($d | map(.cpu_redis_us_per_pair) | median), ($s | map(.cpu_redis_us_per_pair) | median)]
  | map(tostring) | join(" ")
elif $what == "scale" then
  # held locks, then medians over the rounds: rlockd and Redis % of a core, bytes per lock
  map(select((.test == "scale" or .test == "P4") and .mode == "hold")) | group_by(.locks_held)[] |
  [.[0].locks_held, .[0].sessions, (map(.cpu_rlockd_pct) | median), (map(.cpu_redis_pct) | median),
   (map(.rlockd_bytes_per_lock) | median), (map(.redis_bytes_per_lock) | median),
   (map(.errors) | add)] | map(tostring) | join(" ")
elif $what == "peers" or $what == "peers_plot" then
  # One row per peer and concurrency: medians over the rounds, and the median of the
  # per-round ratio to redis-direct at the same concurrency (P2's 1 thread, P1's 50).
  def base(w; r): if w == 1 then direct("P2"; r) elif w == 50 then direct("P1"; r) else null end;
  def own(w; r): if w == 1 then rl("P2"; "sync"; r) elif w == 50 then rl("P1"; "sync"; r) else null end;
  ($all | map(select(.test == "peers")) | map(.threads) | unique) as $ws |
  [$ws[] as $w |
    ([{name: "redis-direct (C, hiredis)", runs: [$all | rounds[] as $r | base($w; $r)]},
      {name: "rlockd (C, librlock)", runs: [$all | rounds[] as $r | own($w; $r)]}] +
     ($all | map(select(.test == "peers" and .threads == $w)) | group_by(.target)
      | map({name: ({"seed": "seed article (Node.js, ioredis)", "redlock": "node-redlock",
                     "etcd": "etcd lock (Node.js, etcd3)", "etcd-http": "etcd lock (Node.js http, JSON gateway)", "rlockd-node": "rlockd (Node.js client)"}[.[0].target] // .[0].target),
             runs: .})))[]
    | .runs |= map(select(. != null)) | select(.runs | length > 0)
    | {w: $w, name: .name, runs: .runs,
       ratio: (.runs | map(. as $x | base($w; $x.round).pairs_per_s as $b
                           | if $b == null or $b == 0 then empty else $x.pairs_per_s / $b end) | median)}] as $rows |
  if $what == "peers" then
    $rows[] | .runs as $x |
    "| \(.name) | \(.w) | \($x | map(.pairs_per_s) | median | round) | \(.ratio | fmt(2)) | \($x | map(.p50_us) | median | fmt(0)) | \($x | map(.p99_us) | median | fmt(0)) | \($x | map(.cpu_client_us_per_pair) | median | fmt(1)) | \($x | map((.cpu_rlockd_us_per_pair // 0) + (.cpu_redis_us_per_pair // 0) + (.cpu_etcd_us_per_pair // 0)) | median | fmt(1)) | \($x | map(.errors) | add) |"
  else
    # gnuplot rows: name, pairs/s at 1 worker, at 50 (medians; "-" when absent)
    ($rows | group_by(.name) | map({name: .[0].name,
       one: (map(select(.w == 1)) | .[0].runs // [] | map(.pairs_per_s) | median),
       fifty: (map(select(.w == 50)) | .[0].runs // [] | map(.pairs_per_s) | median)}))[]
    | "\"\(.name)\" \(.one // "-") \(.fifty // "-")"
  end
elif $what == "latency" or $what == "cpu" then
  # one row per configuration: medians over the rounds
  [["P2", "direct", "\"redis-direct 1t\""], ["P2", "sync", "\"rlockd 1t\""],
   ["P1", "direct", "\"redis-direct 50t\""], ["P1", "sync", "\"rlockd sync 50t\""],
   ["P1s", "shared", "\"rlockd shared 50t\""], ["P3", "async", "\"rlockd async 8x64\""],
   ["P6", "direct", "\"redis-direct 32t 1 res\""], ["P6", "sync", "\"rlockd 32t 1 res\""]][] as [$t, $m, $name] |
  ($all | map(select(.test == $t and .mode == $m))) as $runs |
  select($runs | length > 0) |
  if $what == "latency" then
    [$name, ($runs | map(.p50_us) | median), ($runs | map(.p90_us) | median),
     ($runs | map(.p99_us) | median), ($runs | map(.p999_us) | median)]
  else
    [$name, ($runs | map(.cpu_client_us_per_pair) | median),
     ($runs | map(.cpu_rlockd_us_per_pair) | median), ($runs | map(.cpu_redis_us_per_pair) | median)]
  end | map(tostring) | join(" ")
else
  error("unknown selection \($what)")
end
