#!/usr/bin/env bash
# One-shot check of the CUDA backend on a GPU machine (docs/cuda.md):
#   1. configure + build the release preset with CUDA (sm_90),
#   2. run the CTest label `cuda` (kernels vs CPU, model vs CPU, graphs),
#   3. benchmarks: HBM copy bandwidth, then prefill and batched decode
#      (batch 1/8/32) of synthetic tinyllama-1.1b (F16, Q4_0) and an
#      8B-class shape (Q4_0, then F16 if time allows).
# Results go to $OUT (default ./gpu-check-out): one log per step and a
# summary.md. Every step is time-boxed and a failure does not stop the
# later steps, so one run gives as much evidence as possible.
# Usage: OUT=/path scripts/gpu-check.sh [--skip-8b-f16]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
MODELS=${MODELS_DIR:-/tmp/nexus-gpu-models}
mkdir -p "$MODELS"
skip_f16_8b=0
[ "${1:-}" = "--skip-8b-f16" ] && skip_f16_8b=1
summary="$OUT/summary.md"
: > "$summary"
log() { echo "$*" | tee -a "$summary"; }

step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  log "- $name: rc=$rc, $((SECONDS - t0)) s (log: $name.log)"
  return $rc
}

log "# nexus gpu-check $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ)"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || log "- nvidia-smi failed"
jobs=$(nproc)

step configure 300 cmake --preset release -DNEXUS_CUDA=ON || { log "configure failed: stopping"; exit 1; }
step build 900 cmake --build --preset release -j "$jobs" || { log "build failed: stopping"; exit 1; }
grep -q "NEXUS_HAVE_CUDA" build/release/build.ninja || log "- WARNING: build.ninja has no NEXUS_HAVE_CUDA (CUDA off?)"
nexus=build/release/src/nexus

step test-cuda 600 ctest --test-dir build/release -L cuda --output-on-failure
# Did anything skip? (A skip on a GPU machine means the device was not seen.)
grep -E "Skipped|SKIPPED|no CUDA device" "$OUT/test-cuda.log" | head -20 >> "$summary"
step test-all 900 ctest --test-dir build/release -j "$jobs" -LE cuda --output-on-failure

synth() {  # synth OUTFILE TYPE ARGS...
  local f=$1 type=$2; shift 2
  [ -f "$f" ] && return 0
  "$nexus" synth "$@" --type "$type" -o "$f"
}
bench() {  # bench NAME MODEL EXTRA...
  local name=$1 model=$2; shift 2
  step "bench-$name" 420 "$nexus" bench-model --device cuda -m "$model" -p 512 -n 128 -b 1,8,32 -r 3 "$@"
  sed -n '1,40p' "$OUT/bench-$name.log" >> "$summary"
}

step synth-tinyllama-f16 300 synth "$MODELS/tinyllama-f16.gguf" F16 --preset tinyllama-1.1b
bench tinyllama-f16 "$MODELS/tinyllama-f16.gguf"
step synth-tinyllama-q4 300 synth "$MODELS/tinyllama-q4_0.gguf" Q4_0 --preset tinyllama-1.1b
bench tinyllama-q4_0 "$MODELS/tinyllama-q4_0.gguf"
# Split: half the layers on the CPU (that the path runs, not its speed).
step bench-split 300 "$nexus" bench-model --device cuda --gpu-layers 11 -m "$MODELS/tinyllama-q4_0.gguf" -p 64 -n 16 -b 1 -r 1
# The CLI end to end, on a shared model with a tokenizer when the checkout has ../shared.
if [ -f ../shared/models/TinyLLama-v0.Q4_0.gguf ]; then
  step run-cli 120 "$nexus" run --device cuda -m ../shared/models/TinyLLama-v0.Q4_0.gguf -p "Once upon a time" -n 32 --temp 0
else
  log "- run-cli: skipped (no ../shared/models; the model-level cuda tests skipped too)"
fi

shape8b=(--dim 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 --ctx 8192)
step synth-8b-q4 600 synth "$MODELS/8b-q4_0.gguf" Q4_0 "${shape8b[@]}"
bench 8b-q4_0 "$MODELS/8b-q4_0.gguf"
if [ $skip_f16_8b -eq 0 ]; then
  step synth-8b-f16 900 synth "$MODELS/8b-f16.gguf" F16 "${shape8b[@]}"
  bench 8b-f16 "$MODELS/8b-f16.gguf"
fi
log "done"
