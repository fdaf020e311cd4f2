// The SDK against a real `nexus serve` (NEXUS_BINARY, NEXUS_MODEL) and against
// scripted fake servers for the retry rules. Run: npm test (builds first).
// The model is TinyLLama-v0 (context 128, ~1 ms a token on one thread): slow
// enough that an abort after 3 tokens lands mid-generation.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { APIError, ConnectionError, AbortError, Nexus, backoffMs, realtimeProtocols } from '../dist/index.js';
import { fakeServer, metric, serverInputs, startNexus } from './server.mjs';

const inputs = serverInputs();
const ci = process.env.CI === 'true';
if (inputs.skip && ci) throw new Error(`${inputs.skip} (CI=true)`);

const fastRetry = { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 20 };

describe('against nexus serve', { skip: inputs.skip }, () => {
  let server, client;
  before(async () => {
    server = await startNexus(inputs.binary, inputs.model);
    client = new Nexus({ baseURL: server.url, retry: fastRetry });
  });
  after(() => server?.stop());

  test('a streamed chat equals the non-streamed one at temperature 0', async () => {
    const params = { messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 24, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const s = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    assert.match(s.id, /^chatcmpl-/);
    let text = '';
    for await (const chunk of s.stream) text += chunk.choices[0]?.delta.content ?? '';
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(s.metadata.finish_reason, whole.choices[0].finish_reason);
    assert.equal(s.metadata.usage.completion_tokens, whole.usage.completion_tokens);
    assert.ok(s.metadata.timings.ttft_ms > 0);
    assert.equal(s.metadata.model, whole.model);
  });

  test('completions, models and a server error as APIError', async () => {
    const c = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
    assert.equal(c.object, 'text_completion');
    const models = await client.models.list();
    assert.equal(models.data[0].id, c.model);
    await assert.rejects(client.completions.create({ prompt: 'x', max_tokens: -1 }), (e) => {
      assert.ok(e instanceof APIError);
      assert.equal(e.status, 400);
      assert.equal(e.error.param, 'max_tokens');
      return true;
    });
  });

  test('a realtime session: for await over its events, interrupt and redirect', async () => {
    const session = await client.realtime.connect({ session: { temperature: 0, max_tokens: 100, ignore_eos: true } });
    assert.ok(session.info.n_ctx > 0);
    session.send({ role: 'user', content: 'Tell me about a cat.' });
    session.create();
    const seen = [];
    let deltas = 0;
    for await (const ev of session) {
      if (ev.type === 'error') assert.fail(JSON.stringify(ev));
      seen.push(ev.type);
      if (ev.type === 'response.delta' && ++deltas === 3) session.interrupt();
      if (ev.type === 'response.done') {
        assert.equal(ev.response.finish_reason, 'cancelled');
        break;
      }
    }
    assert.deepEqual(seen.slice(0, 2), ['session.updated', 'response.created']);
    // Redirect with nothing running = append + create.
    session.redirect({ role: 'user', content: 'Now a dog.' }, { max_tokens: 5 });
    let done;
    for await (const ev of session) {
      if (ev.type === 'error') assert.fail(JSON.stringify(ev));
      if (ev.type === 'response.done') {
        done = ev;
        break;
      }
    }
    assert.equal(done.response.finish_reason, 'length');
    assert.ok(done.response.usage.cached_tokens > 0, 'the second turn reuses the session KV');
    session.close();
    for await (const _ of session) { /* drain to the close */ }
  });

  test('an abort mid-stream frees the server\'s sequence', async () => {
    const before = metric(await client.metrics(), 'nexus_requests_total{finish_reason="cancelled"}') ?? 0;
    const ac = new AbortController();
    const s = await client.completions.create(
      { prompt: 'Once upon a time', max_tokens: 120, ignore_eos: true, temperature: 0, stream: true },
      { signal: ac.signal });
    let n = 0;
    await assert.rejects(async () => {
      for await (const _ of s.stream) if (++n === 3) ac.abort();
    }, (e) => e instanceof AbortError);
    // The server notices the closed connection at its next token.
    let text = '';
    for (let i = 0; i < 100; ++i) {
      text = await client.metrics();
      if ((metric(text, 'nexus_requests_total{finish_reason="cancelled"}') ?? 0) > before) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(metric(text, 'nexus_requests_total{finish_reason="cancelled"}'), before + 1);
    assert.equal(metric(text, 'nexus_running_sequences'), 0);
  });
});

describe('a realtime session with --api-key', { skip: inputs.skip }, () => {
  let server;
  before(async () => { server = await startNexus(inputs.binary, inputs.model, ['--api-key', 'sk-rt']); });
  after(() => server?.stop());

  test('the key goes as the subprotocol openai-insecure-api-key.KEY', async () => {
    await assert.rejects(new Nexus({ baseURL: server.url }).realtime.connect(), (e) => e instanceof ConnectionError);
    await assert.rejects(new Nexus({ baseURL: server.url, apiKey: 'sk-wrong' }).realtime.connect(),
                         (e) => e instanceof ConnectionError);
    assert.deepEqual(realtimeProtocols('sk-rt'), ['realtime', 'openai-insecure-api-key.sk-rt']);
    assert.deepEqual(realtimeProtocols(''), []);
    // The client's apiKey, or one given to connect() (a page that asked for it).
    for (const [options, connect] of [[{ apiKey: 'sk-rt' }, {}], [{}, { apiKey: 'sk-rt' }]]) {
      const session = await new Nexus({ baseURL: server.url, ...options }).realtime.connect(connect);
      assert.ok(session.info.n_ctx > 0);
      session.send('Once upon a time');
      session.create({ max_tokens: 2 });
      let done;
      for await (const ev of session) if (ev.type === 'response.done' && (done = ev)) break;
      assert.equal(done.response.usage.completion_tokens, 2);
      session.close();
    }
  });
});

describe('retries', () => {
  test('a 503 before any byte is retried, honouring Retry-After', async () => {
    const fake = await fakeServer((req, res, n) => {
      if (n === 1) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
        return res.end(JSON.stringify({ error: { message: 'draining', type: 'server_error', code: null } }));
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 0, model: 'm',
                               choices: [{ index: 0, text: 'ok', finish_reason: 'stop', logprobs: null }] }));
    });
    const client = new Nexus({ baseURL: fake.url, retry: fastRetry });
    const c = await client.completions.create({ prompt: 'x' });
    assert.equal(c.choices[0].text, 'ok');
    assert.equal(fake.count(), 2);
    await fake.close();
  });

  test('a stream cut after its first token is not retried', async () => {
    const fake = await fakeServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ id: 'cmpl-2', object: 'text_completion', created: 0, model: 'm',
                                          choices: [{ index: 0, text: 'first', finish_reason: null }] })}\n\n`);
      setTimeout(() => res.socket.destroy(), 20);
    });
    const client = new Nexus({ baseURL: fake.url, retry: fastRetry });
    const s = await client.completions.create({ prompt: 'x', stream: true });
    const texts = [];
    await assert.rejects(async () => {
      for await (const c of s.stream) texts.push(c.choices[0].text);
    }, (e) => e instanceof ConnectionError);
    assert.deepEqual(texts, ['first']);
    assert.equal(fake.count(), 1);
    await fake.close();
  });

  test('a 400 is not retried; retries stop at the budget', async () => {
    const fake = await fakeServer((req, res, n) => {
      res.writeHead(n === 1 ? 400 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'no', type: 'invalid_request_error', param: 'prompt', code: null } }));
    });
    const client = new Nexus({ baseURL: fake.url, retry: fastRetry });
    await assert.rejects(client.completions.create({ prompt: 'x' }), (e) => e.status === 400);
    assert.equal(fake.count(), 1);
    await assert.rejects(client.completions.create({ prompt: 'x' }), (e) => e.status === 503);
    assert.equal(fake.count(), 1 + 3);  // the first try and two retries
    await fake.close();
  });

  test('backoff: full jitter under an exponential ceiling; Retry-After wins', () => {
    const o = { maxRetries: 5, baseDelayMs: 100, maxDelayMs: 1000 };
    assert.equal(backoffMs(0, o, null, () => 0.5), 50);
    assert.equal(backoffMs(3, o, null, () => 0.999), 799.2);
    assert.equal(backoffMs(9, o, null, () => 1), 1000);
    assert.equal(backoffMs(0, o, '2', () => 0), 1000);  // capped
    assert.equal(backoffMs(0, o, '0.25', () => 0), 250);
  });
});
