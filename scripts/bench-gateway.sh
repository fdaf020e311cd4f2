#!/usr/bin/env bash
# The gateway's targets (issue 21), measured on loopback with the built-in
# stories260K model:
#  1. added latency: TTFT p50 and ITL p50 through `nexus gateway` minus direct
#     to the same replica, `nexus bench` runs alternated ROUNDS times in one go
#     (so drift of a shared VM hits both sides alike);
#  2. throughput: non-streamed 1-token completions per second through the
#     gateway with 1 and 2 replicas on the same cores (wrk; `nexus bench`
#     always streams), with the CPU seconds each process used, and the same
#     load sent directly to one replica for reference.
#   scripts/bench-gateway.sh [BUILD_DIR] [ROUNDS]    (default build/release, 3)
# Environment: WRK_SECONDS (default 10), WRK_CONNECTIONS (default 32).
# Optional tools: wrk (the throughput part), socat (a plain-relay side in the
# latency part); Debian: apt-get install -y wrk socat.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-3}
wrk_seconds=${WRK_SECONDS:-10}
wrk_conns=${WRK_CONNECTIONS:-32}
nexus=$build/src/nexus
[[ -x $nexus ]] || { echo "build $build first (src/nexus)" >&2; exit 1; }
tck=$(getconf CLK_TCK)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background and waits for its
# "listening on http://127.0.0.1:PORT" line; sets $pid and $url.
# (Not called in $(...): the process must be this shell's child to be killed.)
start() {
  local name=$1; shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do grep -qs 'listening on' "$tmp/$name.out" && break; sleep 0.05; done
  url=$(sed -n 's/.*listening on \(http:\/\/[0-9.]*:[0-9]*\).*/\1/p' "$tmp/$name.out" | head -1)
  [[ -n $url ]] || { echo "$name did not start:" >&2; cat "$tmp/$name.err" >&2; exit 1; }
}
# Replicas and the gateway write one log line per request to stderr: it goes
# to a file here (one write(2) per request stays in the numbers).
serve() { start "$1" "$nexus" serve --port 0 --threads 1; }
gateway() {
  local name=$1; shift
  local args=()
  for u in "$@"; do args+=(--replica "$u"); done
  start "$name" "$nexus" gateway --listen 127.0.0.1:0 "${args[@]}"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime, all threads
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }  # the machine: user nice system irq softirq

commit=$(git rev-parse --short HEAD)
echo "## nexus gateway (issue 21): $commit, $(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# ---- 1. added latency --------------------------------------------------------
serve r0; r0=$url
gateway g0 "$r0"; g0=$url; g0_pid=$pid
sides=(direct gateway)
# With socat, a third side: a plain TCP relay in front of the same replica,
# the cost of one more loopback hop with no HTTP work (what any proxy pays).
if command -v socat >/dev/null; then
  relay_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  socat "TCP-LISTEN:$relay_port,bind=127.0.0.1,reuseaddr,fork,nodelay" "TCP:${r0#http://},nodelay" 2>/dev/null &
  pids+=($!)
  sleep 0.2
  sides+=(relay)
fi
declare -A side_url=([direct]=$r0 [gateway]=$g0 [relay]=http://127.0.0.1:${relay_port:-0})
bench_args=(--warmup 30 --max-tokens 16 --ignore-eos --prompt-tokens 8 --transport http-keepalive --no-progress)
# Around each gateway run: the gateway's own histogram (request in to first
# byte out, less the replica's time) and its CPU ticks, to tell its own work
# from the hop's.
gateway_probe() {
  echo "$(curl -s "$g0/metrics" | awk '/^nexus_gateway_added_latency_seconds_(sum|count) /{printf "%s ", $2}')$(cpu_ticks "$g0_pid")"
}
for c in 1 8; do
  n=$((c == 1 ? 300 : 400))
  for r in $(seq "$rounds"); do
    for side in "${sides[@]}"; do
      if [[ $side == gateway ]]; then before=$(gateway_probe); fi
      "$nexus" bench --url "${side_url[$side]}" -c "$c" -n "$n" "${bench_args[@]}" --json "$tmp/lat-$c-$r-$side.json" >/dev/null 2>"$tmp/bench.err" || { cat "$tmp/bench.err" >&2; exit 1; }
      if [[ $side == gateway ]]; then echo "$before $(gateway_probe)" >>"$tmp/gateway-$c"; fi
    done
  done
done
python3 - "$tmp" "$rounds" "$tck" "${sides[@]}" <<'PY'
import json, statistics, sys
tmp, rounds, tck, sides = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
def p50s(c, r, side):
    p = json.load(open(f"{tmp}/lat-{c}-{r}-{side}.json"))["phases"][0]
    assert p["failed"] == 0, (side, p["errors"], p["error_examples"])
    return [p[k]["p50"] for k in ("ttft_ms", "itl_ms", "tpot_ms")]
print("Added latency: `nexus bench -c C -n N --warmup 30 --max-tokens 16 --ignore-eos --prompt-tokens 8 "
      "--transport http-keepalive`")
print(f"against each side in turn, {rounds} rounds (direct: the replica; gateway: `nexus gateway` in front of it"
      + ("; relay: socat, a plain TCP relay in front of it" if "relay" in sides else "") + "). p50s in ms;")
print("target: TTFT p50 <= 0.1 and ITL p50 <= 0.02 above direct.")
print()
names = ("TTFT", "ITL", "TPOT")
print("| c | round | " + " | ".join(f"{m} p50 {s}" for m in names for s in sides) + " |")
print("| --- | --- | " + " | ".join("---" for _ in names for _ in sides) + " |")
for c in (1, 8):
    diffs = {s: [] for s in sides[1:]}  # per side: rounds x (ttft, itl, tpot) minus direct
    for r in range(1, rounds + 1):
        v = {s: p50s(c, r, s) for s in sides}
        for s in sides[1:]: diffs[s].append([a - b for a, b in zip(v[s], v["direct"])])
        print(f"| {c} | {r} | " + " | ".join(f"{v[s][m]:.4f}" for m in range(3) for s in sides) + " |")
    med = {s: [statistics.median(col) for col in zip(*diffs[s])] for s in sides[1:]}
    print(f"| {c} | median of (side - direct) | " +
          " | ".join("" if s == "direct" else f"**{med[s][m]:+.4f}**" for m in range(3) for s in sides) + " |")
print()
for c in (1, 8):
    rows = [list(map(float, l.split())) for l in open(f"{tmp}/gateway-{c}")]
    s, n, t = (sum(r[3 + i] - r[i] for r in rows) for i in range(3))
    tokens = n * 16  # --max-tokens 16 --ignore-eos, warm-ups included like the CPU
    print(f"c={c}: the gateway's own `nexus_gateway_added_latency_seconds` (received to first byte relayed, less the "
          f"replica's time) mean {s / n * 1e3:.4f} ms over {n:.0f} requests (warm-ups included); its CPU "
          f"{t / tck / n * 1e6:.0f} us per request, {t / tck / tokens * 1e6:.1f} us per streamed token.")
print()
PY
kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=()

# ---- 2. throughput -----------------------------------------------------------
if ! command -v wrk >/dev/null; then
  echo "Throughput: skipped, wrk is not installed (Debian: apt-get install -y wrk)."
  exit 0
fi
cat >"$tmp/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"prompt":"Once","max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
LUA
# completed REPLICA_URL...: finished requests summed over the replicas'
# /metrics, to check that wrk's answers were generations, not errors.
completed() {
  local n=0
  for u in "$@"; do n=$((n + $(curl -s "$u/metrics" | awk '/^nexus_requests_total/{s += $2} END {printf "%d", s}'))); done
  echo "$n"
}
echo "Throughput (\`wrk -t1 -c$wrk_conns -d${wrk_seconds}s\`, POST /v1/completions {\"prompt\":\"Once\",\"max_tokens\":1}, not streamed;"
echo "CPU: seconds of utime+stime over the run from /proc/PID/stat; target >= 5,000 requests/s through the gateway):"
echo
echo "| setup | requests/s | requests | non-2xx | socket errors | generations counted by the replicas | latency p50 / p99 | CPU s: gateway | replicas | wrk | rest of the machine |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
# run_wrk LABEL TARGET_URL GATEWAY_PID|- REPLICA_PID... -- REPLICA_URL...
run_wrk() {
  local label=$1 target=$2 gw=$3; shift 3
  local rpids=() rurls=()
  while [[ $1 != -- ]]; do rpids+=("$1"); shift; done; shift
  rurls=("$@")
  # A short warm-up: connection pools, the engine's first steps.
  wrk -t1 -c"$wrk_conns" -d1s -s "$tmp/post.lua" "$target/v1/completions" >/dev/null
  local gw0=0 r0=() m0 c0 gw1=0 r1=() m1 c1 p
  [[ $gw == - ]] || gw0=$(cpu_ticks "$gw")
  for p in "${rpids[@]}"; do r0+=("$(cpu_ticks "$p")"); done
  c0=$(completed "${rurls[@]}"); m0=$(busy_ticks)
  # bash's `time` reports wrk's own CPU (user, system) after it exits.
  { TIMEFORMAT='%U %S'; time wrk -t1 -c"$wrk_conns" -d"${wrk_seconds}s" --latency -s "$tmp/post.lua" "$target/v1/completions" >"$tmp/wrk.out"; } 2>"$tmp/wrk.time"
  m1=$(busy_ticks); c1=$(completed "${rurls[@]}")
  [[ $gw == - ]] || gw1=$(cpu_ticks "$gw")
  for p in "${rpids[@]}"; do r1+=("$(cpu_ticks "$p")"); done
  python3 - "$label" "$tmp/wrk.out" "$tmp/wrk.time" "$tck" "$gw" "$gw0" "$gw1" "$m0" "$m1" "$c0" "$c1" "${r0[*]}" "${r1[*]}" <<'PY'
import re, sys
label, out, tfile = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read().split()
tck, gw = float(sys.argv[4]), sys.argv[5]
gw0, gw1, m0, m1, c0, c1 = map(float, sys.argv[6:12])
reps = [(float(b) - float(a)) / tck for a, b in zip(sys.argv[12].split(), sys.argv[13].split())]
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
sock = re.search(r"Socket errors: (.*)", out)
lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
wrk_cpu = float(tfile[0]) + float(tfile[1])
gw_cpu = (gw1 - gw0) / tck if gw != "-" else None
machine = (m1 - m0) / tck
rest = machine - sum(reps) - (gw_cpu or 0) - wrk_cpu
gw_cell = "-" if gw_cpu is None else f"{gw_cpu:.2f} ({gw_cpu / total * 1e6:.0f} us/request)"
print(f"| {label} | {rps:.0f} | {total} | {non2xx.group(1) if non2xx else 0} | {sock.group(1) if sock else 'none'} | "
      f"{c1 - c0:.0f} | {lat.get('50', '?')} / {lat.get('99', '?')} | {gw_cell} | "
      f"{' + '.join(f'{r:.2f}' for r in reps)} | {wrk_cpu:.2f} | {rest:.2f} |")
PY
}
serve t0; t0_pid=$pid; t0=$url
serve t1; t1_pid=$pid; t1=$url
run_wrk "direct, 1 replica" "$t0" - "$t0_pid" -- "$t0"
gateway g1 "$t0"; g1_pid=$pid
run_wrk "gateway, 1 replica" "$url" "$g1_pid" "$t0_pid" -- "$t0"
kill "$g1_pid"; wait "$g1_pid" 2>/dev/null || true
gateway g2 "$t0" "$t1"; g2_pid=$pid
run_wrk "gateway, 2 replicas" "$url" "$g2_pid" "$t0_pid" "$t1_pid" -- "$t0" "$t1"
echo
echo "CPU seconds over the ${wrk_seconds} s run, of $(nproc) cores x ${wrk_seconds} s; \"rest of the machine\": /proc/stat busy"
echo "time less these processes (other jobs on the VM). The replicas count up to $wrk_conns more generations than wrk's"
echo "requests: those in flight when wrk stopped."
