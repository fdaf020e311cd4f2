// Structured outputs with the official OpenAI Node SDK against `nexus serve`
// (issue 22 acceptance): 50 zod schemas generated from a seeded PRNG (nested
// objects, arrays, enums, literals, optional fields, unions, strings,
// numbers, integers, booleans, nullable objects / arrays / enums /
// integers), each sent through `zodResponseFormat` with
// `client.beta.chat.completions.parse` and, streamed, with
// `client.beta.chat.completions.stream` + finalChatCompletion(). The grammar
// makes even stories260K write a document valid against the schema; the SDK
// parses it (message.parsed) and the test validates it again with
// schema.parse(). finish_reason must be "stop" (the document finished
// within max_tokens); the streamed text must equal the non-streamed one
// (same seed). Every 5th schema runs at temperature 1 with a seed, the
// others at 0.
//
// What the SDK's helper writes for the less plain cases, all generated here:
//   - .nullable() on a string, number or boolean: {"type": ..., "nullable": true}
//     (OpenAPI 3's keyword);
//   - .optional().nullable(): {"anyOf": [{"anyOf": [{"not": {}}, ...]}, {"type": "null"}]};
//   - .optional() alone becomes a required, non-null property (the SDK warns
//     that the API does not support it; Nexus takes the schema as it is).
//
// Usage: node openai_zod.test.mjs NEXUS_BINARY MODEL_PATH
// Exit codes: 0 pass, 1 fail, 77 skip (model or packages missing outside CI).
import assert from 'node:assert/strict';

import { skipOrFail, testArgs } from './test_args.mjs';
import { startNexus } from './nexus_process.mjs';

const N_SCHEMAS = 50;
const { binary, model } = testArgs('openai_zod.test.mjs');
let OpenAI, z, zodResponseFormat;
try {
  ({ default: OpenAI } = await import('openai'));
  ({ z } = await import('zod'));
  ({ zodResponseFormat } = await import('openai/helpers/zod'));
} catch (e) {
  skipOrFail(`the openai and zod packages are not installed (run scripts/install-deps.sh): ${e.message}`);
}

// mulberry32: a small seeded PRNG, so that the 50 schemas are the same on
// every run.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ['red', 'blue', 'cat', 'dog', 'sun', 'moon', 'tree', 'ship', 'gold', 'rain'];
const KEYS = ['name', 'size', 'kind', 'tags', 'color', 'count', 'ok', 'owner', 'items', 'score', 'mode', 'id'];

// A zod schema and a description of it (for messages). Sizes are kept
// small: strings at most 8 characters, arrays at most 3 items, depth at
// most 3, at most 4 properties, so that the JSON ends well within
// max_tokens (numbers' fractions are the one unbounded part).
function generate(rand, depth = 0) {
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const words = (n) => [...new Set(Array.from({ length: n }, () => pick(WORDS)))];
  const leaf = () => {
    switch (pick(['string', 'number', 'int', 'boolean', 'enum', 'literal', 'int?null', 'enum?null', 'string?null',
                  'boolean?null'])) {
      case 'string': return z.string().max(1 + Math.floor(rand() * 8));
      case 'number': return z.number();
      case 'int': return z.number().int();
      case 'boolean': return z.boolean();
      case 'enum': return z.enum(words(2 + Math.floor(rand() * 3)));
      case 'literal': return z.literal(pick([pick(WORDS), 7, true]));
      case 'int?null': return z.number().int().nullable();
      case 'string?null': return z.string().max(1 + Math.floor(rand() * 8)).nullable();
      case 'boolean?null': return z.boolean().nullable();
      default: return z.enum(words(2)).nullable();
    }
  };
  if (depth >= 3) return leaf();
  const kind = pick(depth === 0 ? ['object', 'object', 'object', 'union'] : ['leaf', 'leaf', 'object', 'array', 'union']);
  if (kind === 'leaf') return leaf();
  if (kind === 'object' || depth === 0 && kind !== 'union') {
    const shape = {};
    const n = 1 + Math.floor(rand() * 4);
    for (let i = 0; i < n; ++i) {
      let field = generate(rand, depth + 1);
      const r = rand();
      if (r < 0.2) field = field.optional();
      else if (r < 0.3) field = field.optional().nullable();
      shape[KEYS[(i * 5 + Math.floor(rand() * 12)) % KEYS.length] + (i ? `_${i}` : '')] = field;
    }
    const o = z.object(shape);
    return depth > 0 && rand() < 0.15 ? o.nullable() : o;
  }
  if (kind === 'array') {
    let a = z.array(generate(rand, depth + 2)).max(1 + Math.floor(rand() * 3));
    if (rand() < 0.3) a = a.min(1);
    return rand() < 0.15 ? a.nullable() : a;
  }
  // A union: of tagged objects (anyOf of objects), of primitives (a type
  // list), or of an object and an array (anyOf).
  const u = pick(['tagged', 'primitives', 'mixed']);
  if (u === 'tagged') {
    return z.union([
      z.object({ type: z.literal('a'), value: generate(rand, depth + 2) }),
      z.object({ type: z.literal('b'), label: z.string().max(6), flag: z.boolean().optional() }),
    ]);
  }
  if (u === 'primitives') return z.union([z.string().max(5), z.number().int(), z.boolean()]).describe('scalar');
  return z.union([z.object({ x: z.number().int() }), z.array(z.enum(words(2))).max(2)]);
}

// The SDK warns once per .optional() (the API wants .nullable() too);
// counted, not printed.
let optionalWarnings = 0;
function responseFormat(schema, name) {
  const warn = console.warn;
  console.warn = (msg) => {
    if (String(msg).includes('.optional()')) ++optionalWarnings;
    else warn(msg);
  };
  try {
    return zodResponseFormat(schema, name);
  } finally {
    console.warn = warn;
  }
}

function checkCompletion(c, schema, what) {
  const choice = c.choices[0];
  assert.equal(choice.finish_reason, 'stop', `${what}: finish_reason ${choice.finish_reason}: ${choice.message.content}`);
  assert.notEqual(choice.message.parsed, null, `${what}: nothing parsed from ${choice.message.content}`);
  const again = schema.safeParse(choice.message.parsed);
  assert.ok(again.success, `${what}: ${choice.message.content}\n${again.success ? '' : again.error.message}`);
  assert.deepEqual(JSON.parse(choice.message.content), choice.message.parsed);
  return choice.message.content;
}

const rand = prng(20260522);
const server = await startNexus(binary, ['serve', '-m', model, '--port', '0', '--threads', '1']).catch((e) => {
  console.error('FAIL:', e.message);
  process.exit(1);
});
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const counts = { whole: 0, streamed: 0, nullable: 0, not: 0 };
const failures = [];
const t0 = Date.now();
try {
  const id = (await client.models.list()).data[0].id;
  for (let i = 0; i < N_SCHEMAS; ++i) {
    const schema = generate(rand);
    const rf = responseFormat(schema, `schema_${i}`);
    const text = JSON.stringify(rf.json_schema.schema);
    if (text.includes('"nullable":true')) ++counts.nullable;
    if (text.includes('"not":{}')) ++counts.not;
    const params = {
      model: id,
      messages: [
        { role: 'system', content: 'Reply with JSON only.' },
        { role: 'user', content: `Fill in record ${i}.` },
      ],
      response_format: rf,
      max_tokens: 400,
      temperature: i % 5 === 4 ? 1 : 0,
      seed: 1000 + i,
    };
    let whole = null;
    try {
      whole = checkCompletion(await client.beta.chat.completions.parse(params), schema, `schema ${i}`);
      ++counts.whole;
    } catch (e) {
      failures.push(`schema ${i} (not streamed): ${e.message}\n  ${text}`);
    }
    try {
      const stream = client.beta.chat.completions.stream(params);
      const streamed = checkCompletion(await stream.finalChatCompletion(), schema, `schema ${i} streamed`);
      if (whole !== null) assert.equal(streamed, whole, `schema ${i}: streamed text differs`);
      ++counts.streamed;
    } catch (e) {
      failures.push(`schema ${i} (streamed): ${e.message}\n  ${text}`);
    }
    if (process.env.NEXUS_ZOD_VERBOSE) console.log(`schema ${i}: ${text}\n  -> ${whole}`);
  }
} catch (e) {
  failures.push(`${e.stack ?? e}`);
} finally {
  const code = await server.stop();
  if (code !== 0) failures.push(`nexus serve exited with code ${code} after SIGTERM`);
}
// The generator must have written both of the helper's less plain forms.
if (counts.nullable === 0 || counts.not === 0)
  failures.push(`schemas with "nullable": ${counts.nullable}, with {"not": {}}: ${counts.not} (want both > 0)`);
const summary = `${counts.whole}/${N_SCHEMAS} schemas parsed and validated not streamed, ${counts.streamed}/${N_SCHEMAS} ` +
  `streamed (${counts.nullable} with "nullable", ${counts.not} with {"not": {}}; ` +
  `${optionalWarnings} .optional() warnings from the SDK), ${((Date.now() - t0) / 1000).toFixed(1)} s`;
if (failures.length) {
  for (const f of failures) console.error('FAIL:', f);
  console.error(`FAIL: ${summary}`);
  process.exit(1);
}
console.log(`PASS: ${summary}`);
