#!/usr/bin/env bash
# Builds the SDK (tsc) and runs its node --test suites against NEXUS_BINARY
# serving NEXUS_MODEL (CTest passes both: tests/CMakeLists.txt).
# Exit 77 (CTest: skipped) when TypeScript is not installed, outside CI.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -f node_modules/typescript/bin/tsc ]; then
  echo "typescript is not installed in clients/typescript (run scripts/install-deps.sh)" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
node node_modules/typescript/bin/tsc -p tsconfig.json
# Node 22+ has WebSocket built in; Node 20-21 behind a flag.
flags=()
node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' || flags+=(--experimental-websocket)
exec node "${flags[@]}" --test test/
