// Tool calling with the official OpenAI Node SDK against `nexus serve`:
// `client.beta.chat.completions.runTools` with two tools and
// tool_choice "required" (the grammar forces a call; stories260K would never
// write one by itself), streamed and not: the SDK parses each call's
// arguments, runs the function, sends the result back as a `tool` message,
// and asks again (maxChatCompletions rounds).
//
// Usage: node openai_tools.test.mjs NEXUS_BINARY MODEL_PATH
// Exit codes: 0 pass, 1 fail, 77 skip (model or SDK missing outside CI).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import assert from 'node:assert/strict';

import { skipOrFail, testArgs } from './test_args.mjs';

const { binary, model } = testArgs('openai_tools.test.mjs');
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

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 8 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
};
const timeSchema = { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] };

async function roundTrip(client, id, stream) {
  const calls = [];
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city',
        parameters: weatherSchema,
        parse: JSON.parse,
        function: (args) => {
          assert.equal(typeof args.city, 'string');
          assert.ok([...args.city].length <= 8, `city ${args.city}`);
          assert.ok(['celsius', 'fahrenheit'].includes(args.unit), `unit ${args.unit}`);
          assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
          calls.push(['get_weather', args]);
          return { temperature: 21, unit: args.unit };
        },
      },
    },
    {
      type: 'function',
      function: {
        name: 'get_time',
        description: 'The time now',
        parameters: timeSchema,
        parse: JSON.parse,
        function: (args) => {
          assert.ok(['UTC', 'CET'].includes(args.zone), `zone ${args.zone}`);
          calls.push(['get_time', args]);
          return '12:00';
        },
      },
    },
  ];
  const runner = client.beta.chat.completions.runTools(
    {
      model: id,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools,
      tool_choice: 'required',
      parallel_tool_calls: false,
      max_tokens: 200,
      temperature: 1,
      seed: 3,
      ...(stream ? { stream: true } : {}),
    },
    { maxChatCompletions: 3 },
  );
  const errors = [];
  runner.on('error', (e) => errors.push(e));
  await runner.done();
  assert.deepEqual(errors, []);
  const completions = runner.allChatCompletions();
  assert.equal(completions.length, 3);
  for (const c of completions) {
    assert.equal(c.choices[0].finish_reason, 'tool_calls');
    assert.equal(c.choices[0].message.tool_calls.length, 1);
  }
  // user, then per round the assistant's call and the tool's result.
  const roles = runner.messages.map((m) => m.role);
  assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool']);
  for (let i = 1; i < runner.messages.length; i += 2) {
    assert.equal(runner.messages[i + 1].tool_call_id, runner.messages[i].tool_calls[0].id);
  }
  assert.equal(calls.length, 3, JSON.stringify(calls));
  return calls;
}

let failed = false;
try {
  const { base, port } = await waitForPort();
  const client = new OpenAI({ baseURL: `${base}:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  const id = (await client.models.list()).data[0].id;
  const whole = await roundTrip(client, id, false);
  const streamed = await roundTrip(client, id, true);
  // Same seed, same prompts: the streamed deltas the SDK put together are
  // the non-streamed calls.
  assert.deepEqual(streamed, whole);
  console.log(`PASS: ${JSON.stringify(whole)}`);
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
