#!/usr/bin/env bash
# Resident memory of `nexus serve` on a model: idle, after 100, 1000 and 2000
# requests (sequential completions of up to 64 tokens, half of them
# streamed), next to the KV pool's size. Prints a markdown table for
# docs/benchmarks.md.
# Usage: scripts/bench-memory.sh [MODEL] [NEXUS_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-../shared/models/stories260K.gguf}
nexus=${2:-build/release/src/nexus}
log=$(mktemp)
"$nexus" serve -m "$model" --port 0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
  port=$(grep -oE 'listening on http://[^ ]+:[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "${port:-}" ] || { echo "server did not start:"; cat "$log"; exit 1; }
url="http://127.0.0.1:$port"
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
send() {
  local i
  for i in $(seq "$1"); do
    local stream=false
    (( i % 2 == 0 )) && stream=true
    curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"prompt\": \"Once upon a time $i\", \"max_tokens\": 64, \"temperature\": 0.8, \"seed\": $i, \"stream\": $stream}" >/dev/null
  done
}
curl -sf "$url/health" >/dev/null
idle=$(rss_kb)
send 100
after100=$(rss_kb)
send 900
after1000=$(rss_kb)
send 1000
after2000=$(rss_kb)
weights=$(stat -c %s "$model")
# The KV pool is reserved at startup and its pages are committed on first
# use, so RSS climbs towards idle + pool and then stays there.
pool=$(sed -n 's/.*KV pool .*, \([0-9.]*\) MiB).*/\1/p' "$log" | head -1)
echo "| model | file size | KV pool | RSS idle | RSS after 100 requests | after 1000 | after 2000 |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk -v m="$(basename "$model")" -v w="$weights" -v p="${pool:-?}" -v a="$idle" -v b="$after100" -v c="$after1000" \
  -v d="$after2000" \
  'BEGIN { printf "| %s | %.1f MB | %s MiB | %.1f MB | %.1f MB | %.1f MB | %.1f MB |\n", m, w / 1048576, p, a / 1024, b / 1024, c / 1024, d / 1024 }'
