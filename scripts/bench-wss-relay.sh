#!/usr/bin/env bash
# Issue 21's persistent-connection target: through `nexus gateway` with TLS,
# across a TCP relay that delays every byte 1 ms each way (a 2 ms round
# trip, scripts/delay_relay.py), the cost of one chat turn (8 prompt words,
# 1 output token, stories260K) as
#   - a new HTTPS connection per request (TCP + TLS 1.3 handshakes each time),
#   - one kept-alive HTTPS connection,
#   - a realtime session over WSS (--turns 10: turns 2..10 reuse the session).
# Alternated rounds; prints TTFT p50 per setup and the WSS turn's saving.
#
# Usage: scripts/bench-wss-relay.sh BUILD_DIR [ROUNDS] [DELAY_MS]
# Needs openssl and python3. Loopback only; every process it starts is
# stopped at exit.
set -euo pipefail
build=${1:?usage: bench-wss-relay.sh BUILD_DIR [ROUNDS] [DELAY_MS]}
rounds=${2:-3}
delay=${3:-1}
nexus=$build/src/nexus
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null

# start VAR CMD...: starts CMD in the background (in this shell, so that
# the exit trap stops it) and sets VAR to the port of its "listening on" /
# "relaying" line.
start() {
  local var=$1 out=$tmp/out.$RANDOM
  shift
  "$@" >"$out" 2>/dev/null &
  pids+=($!)
  for _ in $(seq 100); do
    if grep -qE '^(listening on|relaying) ' "$out"; then
      printf -v "$var" '%s' "$(grep -oE '[0-9]+$' "$out" | head -1)"
      return
    fi
    sleep 0.1
  done
  echo "no start-up line from: $*" >&2
  exit 1
}

start replica "$nexus" serve --port 0 --threads 1
start gateway "$nexus" gateway --listen 127.0.0.1:0 --replica "http://127.0.0.1:$replica" \
  --tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem"
start relay python3 "$(dirname "$0")/delay_relay.py" 0 127.0.0.1 "$gateway" "$delay"

bench() {  # transport, sessions, turns -> JSON file
  "$nexus" bench --url "https://127.0.0.1:$relay" --cacert "$tmp/cert.pem" --endpoint chat --transport "$1" \
    -c 1 -n "$2" --turns "$3" --warmup 2 --max-tokens 1 --prompt-tokens 8 --no-progress --json "$tmp/$1.json" \
    >/dev/null 2>&1
}
p50() {  # JSON file, python expression over the phase p -> number
  python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['phases'][0]; print('%.3f' % ($2))" "$1"
}

echo "| round | new HTTPS connection per turn, TTFT p50 ms | kept-alive HTTPS, TTFT p50 ms | WSS turns 2-10, TTFT p50 ms (median of the turns) | WSS turn 1 (connect + TLS + upgrade) ms |"
echo "| --- | --- | --- | --- | --- |"
for r in $(seq "$rounds"); do
  bench http 30 1
  bench http-keepalive 30 1
  bench ws 5 10
  new=$(p50 "$tmp/http.json" "p['ttft_ms']['p50']")
  kept=$(p50 "$tmp/http-keepalive.json" "p['ttft_ms']['p50']")
  wss=$(p50 "$tmp/ws.json" "sorted(t['ttft_ms']['p50'] for t in p['ttft_by_turn'] if t['turn'] > 1)[4]")
  first=$(p50 "$tmp/ws.json" "[t['ttft_ms']['p50'] for t in p['ttft_by_turn'] if t['turn'] == 1][0]")
  echo "| $r | $new | $kept | $wss | $first |"
  echo "$new $kept $wss" >>"$tmp/rows"
done
python3 - "$tmp/rows" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
new, kept, wss = (statistics.median(c) for c in zip(*rows))
print(f"\nmedians: new connection {new:.3f} ms, kept-alive {kept:.3f} ms, WSS turn {wss:.3f} ms")
print(f"WSS turn vs a new HTTPS connection: {100 * (1 - wss / new):.0f}% lower in total;"
      f" overhead above a kept-alive round trip {wss - kept:+.3f} vs {new - kept:+.3f} ms:"
      f" {100 * (1 - (wss - kept) / (new - kept)):.0f}% lower")
PY
