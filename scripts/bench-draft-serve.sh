#!/usr/bin/env bash
# A draft model in `nexus serve` under changing load (issue 24, "never
# slower"): servers that live through every phase, one without a draft and
# one or more with `--draft-model`, take the same `nexus bench` runs in
# alternated order, phase after phase (by default 12 runs at 1 stream, then
# 6 at 2 and 6 at 4). Prints each run's output tokens/s, the medians'
# ratios to the server without a draft, and the draft tokens each drafting
# server proposed in the phase. Client and servers share the machine, as a
# loaded single-host deployment does.
#   scripts/bench-draft-serve.sh [BUILD_DIR] [OTHER_NEXUS ...]
# OTHER_NEXUS: further nexus binaries (another build) run with the draft.
# Environment: MODEL, DRAFT (default: the d256 llama and its Q4_0 copy in
# ../shared/models/arch), PHASES ("STREAMS:REQUESTS:RUNS ..."), BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
shift || true
model=${MODEL:-../shared/models/arch/llama-d256-F32.gguf}
draft=${DRAFT:-../shared/models/arch/llama-d256-Q4_0.gguf}
phases=${PHASES:-1:20:12 2:48:6 4:96:6}
base=${BASE_PORT:-18600}
nexus=$build/src/nexus
[[ -x $nexus ]] || { echo "build $build first (nexus)" >&2; exit 1; }
for f in "$model" "$draft"; do [[ -f $f ]] || { echo "missing $f" >&2; exit 1; }; done

# Server i: 0 has no draft; 1 is this build with the draft; 2.. the others.
bins=("$nexus" "$nexus" "$@")
names=("no draft" "draft" "$@")
# A port that already answers would be measured as ours: refuse it.
for i in "${!bins[@]}"; do
  if curl -sf --max-time 2 "localhost:$((base + i))/health" >/dev/null; then
    echo "port $((base + i)) already serves something: pick free ports with BASE_PORT" >&2
    exit 1
  fi
done
logs=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait; rm -rf "$logs"' EXIT
for i in "${!bins[@]}"; do
  args=(serve -m "$model" --port $((base + i)))
  ((i > 0)) && args+=(--draft-model "$draft")
  "${bins[$i]}" "${args[@]}" >"$logs/$i.log" 2>&1 &
  pids+=($!)
done
for i in "${!bins[@]}"; do
  for _ in $(seq 300); do
    kill -0 "${pids[$i]}" 2>/dev/null || break
    curl -sf --max-time 2 "localhost:$((base + i))/health" >/dev/null && break
    sleep 0.2
  done
  if ! kill -0 "${pids[$i]}" 2>/dev/null || ! curl -sf --max-time 2 "localhost:$((base + i))/health" >/dev/null; then
    echo "server ${names[$i]} (port $((base + i))) did not start:" >&2
    tail -3 "$logs/$i.log" >&2
    exit 1
  fi
done

run() {  # PORT STREAMS REQUESTS -> output tokens/s
  "$nexus" bench --url "http://127.0.0.1:$1" -c "$2" -n "$3" --max-tokens 64 --prompt-tokens 8 --ignore-eos \
    --extra-body '{"temperature":0}' --no-progress --json - 2>/dev/null | jq '.phases[0].output_token_throughput|floor'
}
proposed() {
  curl -s --max-time 5 "localhost:$1/metrics" | awk '/^nexus_spec_proposed_tokens_total\{proposer="draft"\}/ {print $2}'
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

n=${#bins[@]}
echo "$(git rev-parse --short HEAD), $(date -u +%F); model $model, draft $draft"
for phase in $phases; do
  IFS=: read -r streams requests runs <<<"$phase"
  declare -A tps=()
  before=()
  for ((i = 1; i < n; ++i)); do before[i]=$(proposed $((base + i))); done
  for ((r = 0; r < runs; ++r)); do
    for ((j = 0; j < n; ++j)); do  # rotate who goes first
      i=$(((j + r) % n))
      tps[$i]+="$(run $((base + i)) "$streams" "$requests") "
    done
  done
  echo
  echo "$streams streams, $runs runs of $requests requests:"
  m0=$(median ${tps[0]})
  for ((i = 0; i < n; ++i)); do
    m=$(median ${tps[$i]})
    line="  ${names[$i]}: ${tps[$i]}| median $m, $(awk -v a="$m" -v b="$m0" 'BEGIN {printf "%.3f", a / b}')x"
    ((i > 0)) && line+=", $(($(proposed $((base + i))) - before[i])) draft tokens proposed"
    echo "$line"
  done
  unset tps
done
