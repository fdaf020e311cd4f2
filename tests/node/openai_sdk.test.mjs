// Client compatibility: the official OpenAI Node SDK against `nexus serve`.
//
// Usage: node openai_sdk.test.mjs NEXUS_BINARY MODEL_PATH
// Spawns `nexus serve -m MODEL --port 0`, reads the port from its
// "listening on http://HOST:PORT" line, then checks a streamed and a
// non-streamed chat completion, a completion, models.list and an error.
// Exit codes: 0 pass, 1 fail, 77 skip (model or SDK missing outside CI).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import assert from 'node:assert/strict';

const SKIP = 77;
const [binary, model] = process.argv.slice(2);
const ci = process.env.CI === 'true';

function skipOrFail(why) {
  console.error(`${ci ? 'FAIL' : 'SKIP'}: ${why}${ci ? ' (CI=true)' : ''}`);
  process.exit(ci ? 1 : SKIP);
}

if (!binary || !model) {
  console.error('usage: node openai_sdk.test.mjs NEXUS_BINARY MODEL_PATH');
  process.exit(1);
}
if (!existsSync(model)) skipOrFail(`model not found: ${model}`);
let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  skipOrFail(`the openai package is not installed (run scripts/install-deps.sh): ${e.message}`);
}

const server = spawn(binary, ['serve', '-m', model, '--port', '0', '--threads', '1'],
                     { stdio: ['ignore', 'pipe', 'inherit'] });
const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));

function waitForPort() {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no "listening on" line within 60 s')), 60000);
    const lines = createInterface({ input: server.stdout });
    lines.on('line', (line) => {
      const m = /^listening on (http:\/\/[^\s]+):(\d+)$/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ base: m[1], port: Number(m[2]) });
      }
    });
    server.on('exit', (code) => reject(new Error(`nexus serve exited early (code ${code})`)));
  });
}

let failed = false;
try {
  const { base, port } = await waitForPort();
  assert.ok(port > 0);
  const client = new OpenAI({ baseURL: `${base}:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });

  const models = await client.models.list();
  const id = models.data[0].id;
  assert.equal(typeof id, 'string');

  // Streaming chat completion.
  const stream = await client.chat.completions.create({
    model: id,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    max_tokens: 24,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = '';
  let role = null;
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.role) role = choice.delta.role;
    if (choice.delta.content) streamed += choice.delta.content;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.equal(role, 'assistant');
  assert.ok(streamed.length > 0, 'streamed text is empty');
  assert.ok(['stop', 'length'].includes(finish), `finish_reason ${finish}`);
  assert.ok(usage && usage.completion_tokens > 0, 'no usage chunk');
  assert.ok(chunks >= 3);

  // The same request without streaming gives the same text (greedy).
  const whole = await client.chat.completions.create({
    model: id,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.content, streamed);
  assert.equal(whole.usage.completion_tokens, usage.completion_tokens);

  const completion = await client.completions.create({ model: id, prompt: 'Once upon a time', max_tokens: 8 });
  assert.equal(completion.object, 'text_completion');
  assert.equal(typeof completion.choices[0].text, 'string');

  // Errors surface as the SDK's typed errors.
  await assert.rejects(
    client.chat.completions.create({ model: id, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400,
  );
  console.log(`PASS: streamed ${chunks} chunks: ${JSON.stringify(streamed)}`);
} catch (e) {
  failed = true;
  console.error('FAIL:', e);
} finally {
  server.kill('SIGTERM');
  const { code, signal } = await exited;
  if (code !== 0) {
    console.error(`FAIL: nexus serve exited with code ${code} signal ${signal} after SIGTERM`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
