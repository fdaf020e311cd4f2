// Client compatibility: Anthropic's official TypeScript SDK
// (@anthropic-ai/sdk) against `nexus serve`'s Messages API (POST
// /v1/messages, POST /v1/messages/count_tokens; src/server/anthropic):
//   - messages.create at temperature 0 equals messages.stream(...)
//     .finalMessage() (text, stop_reason, usage.output_tokens);
//   - a tool_use / tool_result round trip with tool_choice {"type": "any"}
//     (the grammar forces the call; stories260K would never write one by
//     itself); a tool_result for an unknown tool_use_id is a 400 in
//     Anthropic's error shape;
//   - messages.countTokens = usage.input_tokens +
//     usage.cache_read_input_tokens (input_tokens leaves out the cached
//     prompt tokens, as Anthropic counts them), = usage.input_tokens on a
//     prompt nothing was cached for;
//   - max_tokens missing and an image block: 400s naming them;
//   - with `nexus serve --api-key K`: the SDK's x-api-key K works, a wrong
//     key is a 401 authentication_error in Anthropic's shape.
//
// Usage: node anthropic_sdk.test.mjs NEXUS_BINARY MODEL_PATH
// Exit codes: 0 pass, 1 fail, 77 skip (model or SDK missing outside CI).
import assert from 'node:assert/strict';

import { skipOrFail, testArgs } from './test_args.mjs';
import { startNexus } from './nexus_process.mjs';

const { binary, model } = testArgs('anthropic_sdk.test.mjs');
let Anthropic;
try {
  ({ default: Anthropic } = await import('@anthropic-ai/sdk'));
} catch (e) {
  skipOrFail(`the @anthropic-ai/sdk package is not installed (run scripts/install-deps.sh): ${e.message}`);
}

const KEY = 'sk-ant-nexus-test';
const started = [];
async function start(args) {
  const p = await startNexus(binary, ['serve', '-m', model, '--port', '0', '--threads', '1', ...args]);
  started.push(p);
  return p;
}

// The served model's id (the Messages API checks `model` against it).
async function modelId(url, headers = {}) {
  const r = await fetch(`${url}/v1/models`, { headers });
  assert.equal(r.status, 200);
  return (await r.json()).data[0].id;
}

function client(url, apiKey = 'unused') {
  return new Anthropic({ baseURL: url, apiKey, maxRetries: 0, timeout: 60000 });
}

// Anthropic's error body: {"type": "error", "error": {"type", "message"}}.
function anthropicError(e, cls, status, type) {
  assert.ok(e instanceof cls, `${e}`);
  assert.equal(e.status, status);
  assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
  assert.equal(e.error.error?.type, type, JSON.stringify(e.error));
  assert.equal(typeof e.error.error.message, 'string');
  assert.equal(e.type, type);
  return true;
}

const text = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

const weatherTool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] },
};

let failed = false;
const notes = [];
try {
  const serve = await start([]);
  const anthropic = client(serve.url);
  const id = await modelId(serve.url);

  // 1. countTokens on a prompt nothing was cached for (this server's first
  // generation): it is the request's whole input_tokens; the same request
  // again reads its prompt from the cache, and input_tokens +
  // cache_read_input_tokens is still the count.
  {
    const params = {
      model: id,
      max_tokens: 8,
      temperature: 0,
      system: 'You tell short stories.',
      messages: [{ role: 'user', content: 'Once upon a time there was a little fox.' }],
    };
    const { max_tokens, temperature, ...countParams } = params;
    const count = await anthropic.messages.countTokens(countParams);
    assert.ok(Number.isInteger(count.input_tokens) && count.input_tokens > 0, JSON.stringify(count));
    const fresh = await anthropic.messages.create(params);
    assert.equal(fresh.usage.cache_read_input_tokens, 0, JSON.stringify(fresh.usage));
    assert.equal(fresh.usage.input_tokens, count.input_tokens, JSON.stringify(fresh.usage));
    const again = await anthropic.messages.create(params);
    assert.ok(again.usage.cache_read_input_tokens > 0, JSON.stringify(again.usage));
    assert.equal(again.usage.input_tokens + again.usage.cache_read_input_tokens, count.input_tokens,
                 JSON.stringify(again.usage));
    assert.equal(text(again), text(fresh));
    notes.push(`count ${count.input_tokens} = ${again.usage.input_tokens} + ${again.usage.cache_read_input_tokens} cached`);
  }

  // 2. Not streamed = streamed, greedy.
  {
    const params = {
      model: id,
      max_tokens: 24,
      temperature: 0,
      messages: [{ role: 'user', content: 'Tell me a story.' }],
    };
    const whole = await anthropic.messages.create(params);
    assert.equal(whole.type, 'message');
    assert.equal(whole.role, 'assistant');
    assert.equal(whole.model, id);
    assert.ok(text(whole).length > 0, 'empty text');
    assert.ok(['end_turn', 'max_tokens'].includes(whole.stop_reason), whole.stop_reason);
    assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 24, JSON.stringify(whole.usage));

    const stream = anthropic.messages.stream(params);
    const events = [];
    let streamedText = '';
    stream.on('streamEvent', (ev) => events.push(ev.type));
    stream.on('text', (delta) => { streamedText += delta; });
    const final = await stream.finalMessage();
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
    assert.ok(events.includes('content_block_delta') && events.includes('message_delta'), events.join(','));
    assert.equal(text(final), text(whole));
    assert.equal(streamedText, text(whole));
    assert.equal(await stream.finalText(), text(whole));
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
                 whole.usage.input_tokens + whole.usage.cache_read_input_tokens,
                 `${JSON.stringify(final.usage)} vs ${JSON.stringify(whole.usage)}`);
    notes.push(`text: ${whole.stop_reason}, ${whole.usage.output_tokens} tokens`);
  }

  // 3. Tool round trip. disable_parallel_tool_use: one call, then the turn
  // ends (with parallel calls allowed stories260K keeps calling until
  // max_tokens).
  {
    const question = { role: 'user', content: 'What is the weather in Paris?' };
    const params = {
      model: id,
      max_tokens: 200,
      temperature: 0,
      tools: [weatherTool],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      messages: [question],
    };
    const first = await anthropic.messages.create(params);
    assert.equal(first.stop_reason, 'tool_use', JSON.stringify(first.content));
    const uses = first.content.filter((b) => b.type === 'tool_use');
    assert.equal(uses.length, 1, JSON.stringify(first.content));
    const use = uses[0];
    assert.equal(use.name, 'get_weather');
    assert.equal(typeof use.id, 'string');
    assert.ok(use.id.length > 0);
    assert.deepEqual(Object.keys(use.input), ['city']);
    assert.equal(typeof use.input.city, 'string');
    assert.ok([...use.input.city].length <= 8, `city ${use.input.city}`);

    // Streamed: the same call, its input from input_json_delta events.
    const final = await anthropic.messages.stream(params).finalMessage();
    assert.equal(final.stop_reason, 'tool_use');
    const streamedUses = final.content.filter((b) => b.type === 'tool_use');
    assert.equal(streamedUses.length, 1);
    assert.equal(streamedUses[0].name, use.name);
    assert.deepEqual(streamedUses[0].input, use.input);
    assert.equal(final.usage.output_tokens, first.usage.output_tokens);

    const second = await anthropic.messages.create({
      ...params,
      max_tokens: 16,
      tool_choice: { type: 'auto' },
      messages: [
        question,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 degrees, sunny' }] },
      ],
    });
    assert.equal(second.type, 'message');
    assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(second.stop_reason), second.stop_reason);
    assert.ok(second.usage.output_tokens > 0);

    await assert.rejects(
      anthropic.messages.create({
        ...params,
        max_tokens: 4,
        messages: [
          question,
          { role: 'assistant', content: first.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_unknown', content: 'x' }] },
        ],
      }),
      (e) => {
        anthropicError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
        assert.match(e.error.error.message, /toolu_unknown/);
        assert.match(e.error.error.message, /messages\[2\]\.content\[0\]/);
        return true;
      },
    );
    notes.push(`tool_use: get_weather(${JSON.stringify(use.input)})`);
  }

  // 4. Refused requests.
  await assert.rejects(
    anthropic.messages.create({ model: id, messages: [{ role: 'user', content: 'Hi' }] }),
    (e) => {
      anthropicError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
      assert.match(e.error.error.message, /max_tokens/);
      return true;
    },
  );
  await assert.rejects(
    anthropic.messages.create({
      model: id,
      max_tokens: 8,
      messages: [{
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        ],
      }],
    }),
    (e) => {
      anthropicError(e, Anthropic.BadRequestError, 400, 'invalid_request_error');
      assert.match(e.error.error.message, /image/);
      assert.match(e.error.error.message, /messages\[0\]\.content\[1\]/);
      return true;
    },
  );

  // 5. --api-key: the SDK sends its apiKey as x-api-key.
  {
    const guarded = await start(['--api-key', KEY]);
    const gid = await modelId(guarded.url, { 'x-api-key': KEY });
    const ok = await client(guarded.url, KEY).messages.create({
      model: gid,
      max_tokens: 4,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    assert.equal(ok.type, 'message');
    const count = await client(guarded.url, KEY).messages.countTokens({
      model: gid,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    assert.ok(count.input_tokens > 0);
    for (const call of [
      (c) => c.messages.create({ model: gid, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] }),
      (c) => c.messages.stream({ model: gid, max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage(),
      (c) => c.messages.countTokens({ model: gid, messages: [{ role: 'user', content: 'Hi' }] }),
    ]) {
      await assert.rejects(call(client(guarded.url, 'sk-ant-wrong')),
                           (e) => anthropicError(e, Anthropic.AuthenticationError, 401, 'authentication_error'));
    }
    notes.push('x-api-key');
  }
  console.log(`PASS: ${notes.join('; ')}`);
} catch (e) {
  failed = true;
  console.error('FAIL:', e);
} finally {
  for (const p of started.reverse()) {
    const code = await p.stop();
    if (code !== 0) {
      console.error(`FAIL: nexus serve exited with code ${code} after SIGTERM`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
