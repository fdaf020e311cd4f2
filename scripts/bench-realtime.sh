#!/usr/bin/env bash
# Realtime sessions vs HTTP: round trip of a 1-token generation (new HTTP
# connection per request, keep-alive, WebSocket session), TTFT of turn 5
# (WebSocket session vs stateless HTTP resending the history), interrupt
# latency, and the server's memory per idle WebSocket connection (1000 held
# at once). Prints a Markdown section for docs/benchmarks.md.
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
