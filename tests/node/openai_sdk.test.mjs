// Client compatibility: the official OpenAI Node SDK against `nexus serve`.
//
// Usage: node openai_sdk.test.mjs NEXUS_BINARY MODEL_PATH [--through-gateway]
// Spawns `nexus serve -m MODEL --port 0` (and the gateway, see below), reads
// the port from its "listening on http://HOST:PORT" line, then checks a streamed and a
// non-streamed chat completion, a completion, models.list and an error.
// Exit codes: 0 pass, 1 fail, 77 skip (model or SDK missing outside CI).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

import { skipOrFail, testArgs } from './test_args.mjs';
import { startNexus } from './nexus_process.mjs';

const { binary, model } = testArgs('openai_sdk.test.mjs');
let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  skipOrFail(`the openai package is not installed (run scripts/install-deps.sh): ${e.message}`);
}

// With --through-gateway the SDK talks to `nexus gateway --api-keys FILE` in
// front of the server, with a key from that file (issue 21, access), and a
// wrong key must surface as the SDK's AuthenticationError.
const throughGateway = process.argv.includes('--through-gateway');
const key = 'sk-nexus-sdk-test';
const started = [];
const dir = mkdtempSync(join(tmpdir(), 'nexus-sdk-'));
async function start(args) {
  const p = await startNexus(binary, args);
  started.push(p);
  return p;
}

let failed = false;
try {
  const serve = await start(['serve', '-m', model, '--port', '0', '--threads', '1']);
  let base = serve.url;
  if (throughGateway) {
    const keys = join(dir, 'keys.txt');
    writeFileSync(keys, `${key} sdk-test\n`);
    base = (await start(['gateway', '--listen', '127.0.0.1:0', '--replica', serve.url, '--api-keys', keys])).url;
    const wrong = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-wrong', maxRetries: 0, timeout: 60000 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  }
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });

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

  // logprobs through the SDK's types (issue 22): at temperature 0 each
  // chosen token is the most likely one, so its logprob is the largest of
  // its top_logprobs and equals that entry; every logprob is <= 0 and the
  // top ones' probabilities sum to at most 1. (That the values equal the
  // log-softmax of the engine's logits is checked against the model in
  // tests/test_server_logprobs.cpp.)
  const scored = await client.chat.completions.create({
    model: id,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    max_tokens: 8,
    temperature: 0,
    logprobs: true,
    top_logprobs: 5,
  });
  const lp = scored.choices[0].logprobs.content;
  assert.ok(lp.length > 0, 'no logprobs');
  assert.equal(lp.map((t) => t.token).join(''), scored.choices[0].message.content);
  for (const t of lp) {
    assert.ok(t.logprob <= 0, `logprob ${t.logprob}`);
    assert.equal(t.top_logprobs.length, 5);
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6, `${t.logprob} vs ${t.top_logprobs[0].logprob}`);
    assert.ok(t.top_logprobs.reduce((sum, x) => sum + Math.exp(x.logprob), 0) <= 1 + 1e-6);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
  }

  // n: 4 at temperature 1 with a seed: choice i equals one request with
  // seed + i (docs/server.md, "Several choices").
  const many = await client.chat.completions.create({
    model: id,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
    max_tokens: 10,
    temperature: 1,
    seed: 4242,
    n: 4,
  });
  assert.equal(many.choices.length, 4);
  const texts = new Set();
  for (const [i, choice] of many.choices.entries()) {
    assert.equal(choice.index, i);
    const one = await client.chat.completions.create({
      model: id,
      messages: [{ role: 'user', content: 'Tell me a story.' }],
      max_tokens: 10,
      temperature: 1,
      seed: 4242 + i,
    });
    assert.equal(choice.message.content, one.choices[0].message.content, `choice ${i}`);
    texts.add(choice.message.content);
  }
  assert.ok(texts.size > 1, 'four seeds gave one text');

  // Errors surface as the SDK's typed errors.
  await assert.rejects(
    client.chat.completions.create({ model: id, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400,
  );
  console.log(`PASS${throughGateway ? ' (through the gateway)' : ''}: streamed ${chunks} chunks: ${JSON.stringify(streamed)}`);
} catch (e) {
  failed = true;
  console.error('FAIL:', e);
} finally {
  rmSync(dir, { recursive: true, force: true });
  for (const p of started.reverse()) {
    const code = await p.stop();
    if (code !== 0) {
      console.error(`FAIL: a nexus process exited with code ${code} after SIGTERM`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
