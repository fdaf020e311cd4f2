#!/usr/bin/env bash
# CPU benchmark of Nexus on synthetic 1B-class models and stories260K, printed
# as markdown for docs/benchmarks.md.
#
#   scripts/bench-cpu.sh            full run: pp128, pp512, tg128, 3 repetitions
#   scripts/bench-cpu.sh --quick    sanity run: pp16, tg8, 1 repetition
#
# Environment:
#   NEXUS_MODEL_CACHE  where the synthetic models are kept (default
#                      ~/.cache/nexus/models; never inside the repository).
#                      They are created only when missing (~0.6 + 1.1 GB).
#   NEXUS_BIN          the nexus binary (default build/release/src/nexus,
#                      built with the release preset when missing).
#   THREADS            threads for the 1B models (default 2).
#   REPS, PP, TG       repetitions, prefill and decode sizes (bench-model -r -p -n).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

quick=0
[ "${1:-}" = "--quick" ] && quick=1
threads=${THREADS:-2}
if [ $quick = 1 ]; then
  reps=${REPS:-1} pp=${PP:-16} tg=${TG:-8} bw_mib=1024
else
  reps=${REPS:-3} pp=${PP:-128,512} tg=${TG:-128} bw_mib=1024
fi

cache=${NEXUS_MODEL_CACHE:-$HOME/.cache/nexus/models}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd -P)
case "$cache/" in
  "$repo"/*) echo "bench-cpu: NEXUS_MODEL_CACHE ($cache) is inside the repository; choose a folder outside it" >&2; exit 2 ;;
esac

bin=${NEXUS_BIN:-build/release/src/nexus}
if [ ! -x "$bin" ]; then
  echo "bench-cpu: building $bin (release preset)" >&2
  cmake --preset release >/dev/null
  cmake --build --preset release --target nexus >&2
fi

vocab=../shared/models/tokenizers/ggml-vocab-llama-spm.gguf
stories=../shared/models/stories260K.gguf
for f in "$vocab" "$stories"; do
  [ -f "$f" ] || { echo "bench-cpu: missing shared file $f" >&2; exit 2; }
done

# Synthetic models are deterministic (seed 1): an existing file is reused.
for type in Q8_0 Q4_0; do
  out="$cache/synth-tinyllama-1.1b-$type.gguf"
  if [ ! -f "$out" ]; then
    echo "bench-cpu: creating $out" >&2
    "$bin" synth --preset tinyllama-1.1b --type "$type" --vocab-from "$vocab" --seed 1 -o "$out" >&2
  fi
done

# Start from a cold page cache for the models, as a server does after a
# reboot: nexus maps the weights with MADV_HUGEPAGE, and pages read through
# that mapping come in as 2 MiB folios; pages cached earlier (just written by
# synth, or read before) stay in small ones, which costs decode ~10%.
# dd's nocache flag drops the file's clean cached pages (GNU coreutils).
for type in Q8_0 Q4_0; do
  f="$cache/synth-tinyllama-1.1b-$type.gguf"
  sync "$f"
  dd if="$f" iflag=nocache count=0 status=none || echo "bench-cpu: could not drop the page cache of $f" >&2
done

bench() {  # title, then bench-model arguments
  local title=$1
  shift
  echo "### $title"
  echo
  "$bin" bench-model -q --bw-mib "$bw_mib" -r "$reps" "$@"
  echo
}

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
echo "## CPU results ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
echo
echo "Machine: ${cpu:-unknown CPU}, $(nproc) logical cores. Models: \`nexus synth --preset tinyllama-1.1b\`" \
  "(random weights, TinyLlama-1.1B shape, llama-spm vocabulary) and the real stories260K." \
  "pp = prefill of N tokens in one eval, after one untimed run; tg = N decode steps of one token; mean ± stddev over $reps runs." \
  "bound t/s = DRAM read bandwidth (same threads, 2 MiB pages) / weight bytes read per token, for each tg run from readings taken just before and after it;" \
  "% of bound = the mean of the runs' shares. The bandwidth line above each table is the reading before the tests."
echo
for type in Q8_0 Q4_0; do
  bench "tinyllama-1.1b (synthetic) $type, $threads threads" \
    -m "$cache/synth-tinyllama-1.1b-$type.gguf" -t "$threads" -p "$pp" -n "$tg"
done
bench "stories260K F32, decode, 1 thread" -m "$stories" -t 1 -p 0 -n "$tg"
