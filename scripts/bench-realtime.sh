#!/usr/bin/env bash
# Realtime sessions vs HTTP: round trip of a 1-token generation (new HTTP
# connection per request, keep-alive, WebSocket session), TTFT of turn 5
# (WebSocket session vs stateless HTTP resending the history), interrupt
# latency, the server's per-token overhead (client ITL p50 of a 200-token
# stream minus the engine's mean step time, WebSocket session and HTTP SSE
# keep-alive, measured with `nexus bench`), and the server's memory per idle
# WebSocket connection (1000 held at once). Prints a Markdown section for
# docs/benchmarks.md.
#   scripts/bench-realtime.sh [BUILD_DIR] [REPS]    (default build/release, 100)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
reps=${2:-100}
model=../shared/models/stories260K.gguf
nexus=$build/src/nexus
[[ -x $nexus && -x $build/tests/test_realtime_e2e ]] || { echo "build $build first (nexus, test_realtime_e2e)" >&2; exit 1; }

log=$(mktemp)
"$nexus" serve -m "$model" --port 0 --threads 1 >"$log" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)

echo "## Real-time sessions (WebSocket) vs HTTP"
echo
echo "Command: \`scripts/bench-realtime.sh $build $reps\` (stories260K, one kernel"
echo "thread, loopback, Node 20 client; $(git rev-parse --short HEAD), $(date -u +%F))."
echo
node --experimental-websocket --no-warnings scripts/bench-realtime.mjs "$port" "$reps"
# Per-token overhead: rows appended to the table above, then a note.
python3 - "$nexus" "$port" "$reps" <<'PY'
import json, subprocess, sys, urllib.request
nexus, port, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
tokens, sessions = 200, max(5, reps // 10)

def step_totals():
    # nexus_step_seconds: one observation per engine step (one forward pass).
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    got = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("nexus_step_seconds_sum", "nexus_step_seconds_count"):
            got[name] = float(value)
    return got["nexus_step_seconds_sum"], got["nexus_step_seconds_count"]

notes = []
for transport, label in (("ws", "WebSocket session"), ("http-keepalive", "HTTP SSE keep-alive")):
    s0, c0 = step_totals()
    out = subprocess.run([nexus, "bench", "--url", f"http://127.0.0.1:{port}", "--transport", transport,
                          "--requests", str(sessions), "--max-tokens", str(tokens), "--ignore-eos",
                          "--prompt-tokens", "8", "--extra-body", '{"temperature": 0}', "--no-progress",
                          "--json", "-"], check=True, capture_output=True, text=True).stdout
    s1, c1 = step_totals()
    p = json.loads(out)["phases"][0]
    assert p["failed"] == 0, p["errors"]
    step_ms = (s1 - s0) / (c1 - c0) * 1e3
    itl = p["itl_ms"]
    print(f"| server per-token overhead, {label}: client ITL p50/p90 − engine step mean "
          f"({sessions} × {tokens}-token streams) | {itl['count']} | {itl['p50'] - step_ms:.4f} | "
          f"{itl['p90'] - step_ms:.4f} |")
    tpot = p["tpot_ms"]["p50"]
    notes.append(f"{label}: ITL p50 {itl['p50'] * 1e3:.1f} µs − step {step_ms * 1e3:.1f} µs = "
                 f"**{(itl['p50'] - step_ms) * 1e3:.1f} µs** (TPOT p50 − step: {(tpot - step_ms) * 1e3:.1f} µs)")
print()
print("Server per-token overhead (target p50 <= 20 µs): the client's inter-token latency (`nexus bench`, "
      "one stream at a time) minus the engine's mean step time, from `nexus_step_seconds` in GET /metrics "
      "before and after the run (delta sum / delta count; a step is the forward pass only, so the "
      "difference is sampling, detokenizing and delivery; it includes each request's one prefill step). "
      "A client that falls behind reads tokens in bursts, which pulls ITL p50 down (negative values: the "
      "client was starved of CPU); TPOT p50 (whole stream / tokens) is the steadier per-token figure. "
      + "; ".join(notes) + ".")
PY
echo
mem=$(mktemp)
NEXUS_REALTIME_MEMORY_OUT=$mem "$build/tests/test_realtime_e2e" --gtest_filter='*ThousandIdle*' >/dev/null 2>&1
python3 - "$mem" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"Idle WebSocket connections: RSS of `nexus serve` {m['rss_before_kib']/1024:.1f} MiB -> "
      f"{m['rss_after_kib']/1024:.1f} MiB with {m['connections']} more held open: "
      f"**{m['per_connection_kib']:.1f} KiB per idle connection** (target <= 64 KB).")
PY
rm -f "$mem"
