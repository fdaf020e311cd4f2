#!/usr/bin/env bash
# Issue 36's agent-loop targets: an agent's conversation (a PREAMBLE-word
# system preamble, then TURNS turns that each add a TOOL-word tool output and
# get ANSWER tokens back) against `nexus serve` over the Responses API's
# WebSocket mode (with and without Codex's generate:false warm-up) and
# against llama.cpp's `llama-server` (cache_prompt, its default) with the
# same conversation sent as chat completions, one server at a time on the
# same model file, 2 threads. Then SESSIONS such sessions at once on each
# (llama-server with -np SESSIONS and SESSIONS times the context, which it
# splits between its slots). Also one fresh TOOL-word prompt, the warm-up
# target's yardstick. Prints `nexus bench`'s report of each run (TTFT,
# prefilled + cached tokens per turn).
#   scripts/bench-agent-loop.sh MODEL.gguf LLAMA_SERVER [BUILD_DIR]
# MODEL: e.g. `nexus synth --preset tinyllama-1.1b --type F16 --vocab-from
# ../shared/models/TinyLLama-v0.F32.gguf --ctx 16384` quantized to Q4_K_M.
# Environment: PREAMBLE (5600 words, about 6,000 tokens with a llama
# vocabulary), TOOL (280 words, about 300 tokens), ANSWER (30), TURNS (10),
# SESSIONS (4; 1 skips the runs of several sessions), CTX (16384), PORT
# (18700), SERVERS ("nexus llama": the servers to run, in order). On a
# 2-core VM one session of the defaults takes about 12 minutes per server.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?MODEL.gguf}
llama=${2:?path to llama-server}
build=${3:-build/release}
preamble=${PREAMBLE:-5600} tool=${TOOL:-280} answer=${ANSWER:-30} turns=${TURNS:-10}
sessions=${SESSIONS:-4} ctx=${CTX:-16384} port=${PORT:-18700}
nexus=$build/src/nexus
url=http://127.0.0.1:$port
pid=
stop() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap stop EXIT
wait_up() {
  for _ in $(seq 1 600); do curl -sf "$url/health" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "server did not come up" >&2; exit 1
}
bench() {  # label, then nexus bench arguments
  local label=$1; shift
  echo "== $label"
  "$nexus" bench --url "$url" --preamble-tokens "$preamble" --prompt-tokens "$tool" --max-tokens "$answer" \
    --ignore-eos --turns "$turns" --no-progress --timeout 3600 --extra-body '{"temperature": 0}' "$@" 2>&1 |
    sed -n '/^  TTFT /p;/TTFT by turn/,$p'
}
fresh() {  # one TOOL-word prompt, nothing cached (a new seed each run)
  echo "== $1: one fresh $tool-word prompt"
  "$nexus" bench --url "$url" --endpoint chat --prompt-tokens "$tool" --max-tokens 1 --requests 1 \
    --seed "$RANDOM" --no-progress 2>&1 | sed -n '/^  TTFT /p'
}

for server in ${SERVERS:-nexus llama}; do
  # Each server on its own port: a port just closed by the previous one can
  # refuse llama-server's bind for a while (seen after Nexus's run).
  port=$((port + 1)) url=http://127.0.0.1:$((port))
  if [[ $server == nexus ]]; then
    "$nexus" serve --model "$model" --port "$port" -t 2 -c "$ctx" >/tmp/bench-agent-nexus.log 2>&1 & pid=$!
    wait_up
    fresh nexus
    bench "nexus, Responses WebSocket mode, 1 session" --endpoint responses --transport ws --requests 1 --seed 1
    bench "nexus, Responses WebSocket mode + warm-up, 1 session" --endpoint responses --transport ws --warm-up \
      --requests 1 --seed 2
    if ((sessions > 1)); then
      bench "nexus, Responses WebSocket mode, $sessions sessions" --endpoint responses --transport ws \
        --requests "$sessions" --concurrency "$sessions" --seed 3
    fi
    stop
  else
    "$llama" -m "$model" --port "$port" -t 2 -c "$ctx" -np 1 >/tmp/bench-agent-llama.log 2>&1 & pid=$!
    wait_up
    fresh llama-server
    bench "llama-server, chat completions (cache_prompt), 1 session" --endpoint chat --requests 1 --seed 1
    stop
    if ((sessions > 1)); then
      "$llama" -m "$model" --port "$port" -t 2 -c $((ctx * sessions)) -np "$sessions" >/tmp/bench-agent-llama.log 2>&1 &
      pid=$!
      wait_up
      bench "llama-server -np $sessions, chat completions (cache_prompt), $sessions sessions" --endpoint chat \
        --requests "$sessions" --concurrency "$sessions" --seed 3
      stop
    fi
  fi
done
