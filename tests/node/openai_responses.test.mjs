// The Responses API (POST /v1/responses, GET / DELETE /v1/responses/{id},
// GET /v1/responses/{id}/input_items; src/server/responses) with the
// official OpenAI Node SDK against `nexus serve`:
//   - responses.create at temperature 0 equals responses.stream(...)
//     .finalResponse() (output_text, usage.output_tokens); the streamed
//     events' sequence_number counts 0, 1, 2, ... and the last event is
//     response.completed or response.incomplete;
//   - a function tool with tool_choice "required" (the grammar forces the
//     call; stories260K would never write one by itself): a function_call
//     item whose arguments parse; the call's output sent back with
//     previous_response_id; an unknown call_id is a 400 naming
//     input[0].call_id;
//   - text.format json_schema through responses.parse + zodTextFormat, the
//     result validated by the SDK and by schema.parse();
//   - previous_response_id (store true): the continued prompt starts with
//     the stored one, so the second request reads cached tokens;
//   - retrieve, input_items, delete; an unknown previous_response_id is a
//     400 previous_response_not_found.
//
// Usage: node openai_responses.test.mjs NEXUS_BINARY MODEL_PATH
// Exit codes: 0 pass, 1 fail, 77 skip (model or packages missing outside CI).
import assert from 'node:assert/strict';

import { skipOrFail, testArgs } from './test_args.mjs';
import { startNexus } from './nexus_process.mjs';

const { binary, model } = testArgs('openai_responses.test.mjs');
let OpenAI, z, zodTextFormat;
try {
  ({ default: OpenAI } = await import('openai'));
  ({ z } = await import('zod'));
  ({ zodTextFormat } = await import('openai/helpers/zod'));
} catch (e) {
  skipOrFail(`the openai and zod packages are not installed (run scripts/install-deps.sh): ${e.message}`);
}

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 8 } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

// A stream's events and its final response; checks the sequence numbers and
// the terminal event.
async function streamed(client, params) {
  const stream = client.responses.stream(params);
  const events = [];
  for await (const ev of stream) events.push(ev);
  const final = await stream.finalResponse();
  assert.ok(events.length >= 3, `${events.length} events`);
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i, `event ${i} (${ev.type}) sequence_number ${ev.sequence_number}`));
  assert.equal(events[0].type, 'response.created');
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), `last event ${last.type}`);
  assert.equal(last.response.status, last.type === 'response.completed' ? 'completed' : 'incomplete');
  return { events, final, last };
}

// The output's text (what the SDK's output_text joins; openai 4.x sets
// output_text on responses.create and .parse results, not on a stream's
// finalResponse() without a text format).
function outputText(response) {
  return response.output.filter((item) => item.type === 'message')
    .flatMap((item) => item.content.filter((c) => c.type === 'output_text').map((c) => c.text)).join('');
}

function functionCalls(response) {
  return response.output.filter((item) => item.type === 'function_call');
}

let failed = false;
const serve = await startNexus(binary, ['serve', '-m', model, '--port', '0', '--threads', '1']).catch((e) => {
  console.error('FAIL:', e.message);
  process.exit(1);
});
const notes = [];
try {
  const client = new OpenAI({ baseURL: `${serve.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  const id = (await client.models.list()).data[0].id;

  // 1. Not streamed = streamed, greedy. stories260K never ends a story by
  // itself at temperature 0, so this one stops at max_output_tokens
  // (incomplete). openai 4.x's ResponseStream takes the final response from
  // response.completed only (on response.incomplete finalResponse() is the
  // accumulated snapshot: text, but the usage of response.created, null),
  // so the streamed usage is read from the terminal event.
  {
    const params = { model: id, input: 'Tell me a story.', max_output_tokens: 24, temperature: 0, store: false };
    const whole = await client.responses.create(params);
    assert.equal(whole.object, 'response');
    assert.ok(whole.output_text.length > 0, 'empty output_text');
    assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 24, `output_tokens ${whole.usage.output_tokens}`);
    const { final, last } = await streamed(client, params);
    assert.equal(outputText(whole), whole.output_text);
    assert.equal(outputText(final), whole.output_text);
    assert.equal(outputText(last.response), whole.output_text);
    assert.equal(last.response.status, whole.status);
    assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(last.response.usage.input_tokens, whole.usage.input_tokens);
    if (final.usage) assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    notes.push(`text: ${whole.status}, ${whole.usage.output_tokens} tokens`);
  }

  // 2. A tool call (seeded sampling: greedy stories260K gets stuck inside
  // the call), not streamed and streamed: the same call, and this one
  // completes, so finalResponse() is the response.completed response.
  let call;
  let callResponse;
  {
    const params = {
      model: id,
      input: 'What is the weather in Paris?',
      tools: [weatherTool],
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_output_tokens: 200,
      temperature: 1,
      seed: 3,
    };
    callResponse = await client.responses.create(params);
    assert.equal(callResponse.status, 'completed', JSON.stringify(callResponse.output));
    const calls = functionCalls(callResponse);
    assert.equal(calls.length, 1, JSON.stringify(callResponse.output));
    call = calls[0];
    assert.equal(call.name, 'get_weather');
    assert.match(call.call_id, /^call_/);
    assert.equal(call.status, 'completed');
    const args = JSON.parse(call.arguments);
    assert.deepEqual(Object.keys(args), ['city']);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length <= 8, `city ${args.city}`);

    const { events, final } = await streamed(client, { ...params, store: false });
    assert.equal(events.at(-1).type, 'response.completed');
    const streamedCalls = functionCalls(final);
    assert.equal(streamedCalls.length, 1);
    assert.equal(streamedCalls[0].name, call.name);
    assert.equal(streamedCalls[0].arguments, call.arguments);
    assert.equal(final.usage.output_tokens, callResponse.usage.output_tokens);
    assert.ok(events.some((ev) => ev.type === 'response.function_call_arguments.delta'));
    const done = events.find((ev) => ev.type === 'response.function_call_arguments.done');
    assert.equal(done?.arguments, call.arguments);
    notes.push(`call: get_weather(${call.arguments})`);
  }

  // The call's output, continuing the stored response.
  {
    const next = await client.responses.create({
      model: id,
      previous_response_id: callResponse.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21}' }],
      // Tools are not carried over by previous_response_id (OpenAI's rule):
      // an agent sends them every time, and the prompt's prefix is then the same.
      tools: [weatherTool],
      max_output_tokens: 16,
      temperature: 0,
    });
    assert.equal(next.previous_response_id, callResponse.id);
    assert.ok(['completed', 'incomplete'].includes(next.status), next.status);
    assert.ok(next.usage.output_tokens > 0);
    // The stored response's prompt and output come first: read from the cache.
    assert.ok(next.usage.input_tokens > callResponse.usage.input_tokens, JSON.stringify(next.usage));
    assert.ok(next.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(next.usage));

    // An output for no call of the input or of the continued response.
    await assert.rejects(
      client.responses.create({
        model: id,
        previous_response_id: callResponse.id,
        input: [{ type: 'function_call_output', call_id: 'call_unknown', output: 'x' }],
        max_output_tokens: 4,
      }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, 'input[0].call_id');
        assert.equal(e.type, 'invalid_request_error');
        return true;
      },
    );
  }

  // 3. Structured output: responses.parse with zodTextFormat. Short strings
  // and an enum keep the document well within max_output_tokens.
  {
    const Pet = z.object({
      name: z.string().max(8),
      kind: z.enum(['cat', 'dog', 'bird']),
      age: z.number().int(),
      happy: z.boolean(),
    });
    const params = {
      model: id,
      instructions: 'Reply with JSON only.',
      input: 'Describe a pet.',
      text: { format: zodTextFormat(Pet, 'pet') },
      max_output_tokens: 200,
      temperature: 0,
      store: false,
    };
    const parsed = await client.responses.parse(params);
    assert.equal(parsed.status, 'completed', `${parsed.status}: ${parsed.output_text}`);
    assert.equal(parsed.text.format.type, 'json_schema');
    assert.notEqual(parsed.output_parsed, null, `nothing parsed from ${parsed.output_text}`);
    const again = Pet.safeParse(parsed.output_parsed);
    assert.ok(again.success, `${parsed.output_text}\n${again.success ? '' : again.error.message}`);
    assert.deepEqual(JSON.parse(parsed.output_text), parsed.output_parsed);

    // The same streamed (it completes: finalResponse() carries the usage).
    const { final } = await streamed(client, params);
    assert.equal(final.output_text, parsed.output_text);
    assert.deepEqual(final.output_parsed, parsed.output_parsed);
    assert.equal(final.usage.output_tokens, parsed.usage.output_tokens);
    notes.push(`parsed: ${parsed.output_text}`);
  }

  // 4. previous_response_id across two stored text responses: the second
  // prompt is the first prompt, its output and the new input, the first
  // part read from the cache. (No instructions: previous_response_id does
  // not carry them over, as in OpenAI's API, so the second prompt would
  // not start with the first.)
  {
    const first = await client.responses.create({
      model: id,
      input: 'Once upon a time there was a little fox who lived in the forest.',
      max_output_tokens: 16,
      temperature: 0,
      store: true,
    });
    assert.equal(first.store, true);
    const second = await client.responses.create({
      model: id,
      previous_response_id: first.id,
      input: 'What happened next?',
      max_output_tokens: 16,
      temperature: 0,
    });
    assert.equal(second.previous_response_id, first.id);
    assert.ok(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens - 2,
              `${JSON.stringify(first.usage)} then ${JSON.stringify(second.usage)}`);
    assert.ok(second.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
    notes.push(`continued: input ${second.usage.input_tokens}, cached ${second.usage.input_tokens_details.cached_tokens}`);

    // 5. Retrieve, input items, delete.
    const got = await client.responses.retrieve(second.id);
    assert.equal(got.id, second.id);
    assert.equal(got.object, 'response');
    assert.equal(got.previous_response_id, first.id);
    assert.deepEqual(got.output, second.output);
    assert.deepEqual(got.usage, second.usage);
    const items = [];
    for await (const item of client.responses.inputItems.list(second.id)) items.push(item);
    assert.ok(items.length >= 1, 'no input items');
    assert.ok(items.some((it) => it.type === 'message' && it.role === 'user' &&
                                 it.content.some((c) => c.type === 'input_text' && c.text === 'What happened next?')),
              JSON.stringify(items));
    await client.responses.del(second.id);
    await assert.rejects(client.responses.retrieve(second.id),
                         (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
    // The first one is still there.
    assert.equal((await client.responses.retrieve(first.id)).id, first.id);

    // An unknown (here: deleted) previous response.
    await assert.rejects(
      client.responses.create({ model: id, previous_response_id: second.id, input: 'And then?', max_output_tokens: 4 }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `${e}`);
        assert.equal(e.code, 'previous_response_not_found');
        assert.equal(e.param, 'previous_response_id');
        return true;
      },
    );
  }
  console.log(`PASS: ${notes.join('; ')}`);
} catch (e) {
  failed = true;
  console.error('FAIL:', e);
} finally {
  const code = await serve.stop();
  if (code !== 0) {
    console.error(`FAIL: nexus serve exited with code ${code} after SIGTERM`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
