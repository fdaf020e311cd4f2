// `nexus tokenize`: shows how a model's tokenizer splits a text.
//
//   nexus tokenize [-m MODEL] [--no-bos] [--ids-only] [--special] [TEXT]
//
// TEXT, or all of stdin when TEXT is not given (bytes as they are, a final
// newline included), is encoded with BOS (when the vocabulary adds one,
// unless --no-bos). --special recognises special tokens written in the text
// (e.g. "<|im_start|>"); without it they are tokenized as plain text.
// Control tokens (BOS, ...) are always shown by their text.
// Output: one line per token, `ID<TAB>'PIECE'`, where PIECE is the token's
// bytes with \n \t \r \\ \' escaped and other control or invalid UTF-8 bytes
// as \xNN; with --ids-only, the ids on one line separated by spaces.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/open_model.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace nexus::cli {
namespace {

std::string escape_piece(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const unsigned char c = static_cast<unsigned char>(piece[i]);
    const utf8::Decoded d = utf8::decode(piece, i);
    if (!d.valid) {
      out += fmt::format("\\x{:02x}", c);
    } else if (d.len > 1) {
      out.append(piece, i, d.len);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\'') {
      out += "\\'";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
    i += d.len;
  }
  return out;
}

struct Options {
  std::string model;  // empty: the built-in model
  bool no_bos = false;
  bool ids_only = false;
  bool special = false;
  std::string text;
};

int run(const Options& o, bool have_text) {
  std::string text = o.text;
  if (!have_text) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const OpenedModel m = open_model(o.model);
  const auto tok = Tokenizer::from_gguf(*m.gguf);
  const std::vector<int32_t> ids = tok->encode(text, !o.no_bos, o.special);
  std::string out;
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}{}", i ? " " : "", ids[i]);
    out += '\n';
  } else {
    for (int32_t id : ids) {
      // Control tokens would print as '' otherwise; show them by name.
      out += fmt::format("{}\t'{}'\n", id, escape_piece(tok->token_to_piece(id, true)));
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto o = std::make_shared<Options>();
  sub.add_option("-m,--model", o->model, kModelHelp)->check(model_path());
  sub.add_flag("--no-bos", o->no_bos, "do not add BOS");
  sub.add_flag("--ids-only", o->ids_only, "print only the ids, space-separated");
  sub.add_flag("--special", o->special, "parse special tokens written in the text");
  CLI::Option* text = sub.add_option("text", o->text, "text to tokenize (default: stdin)");
  return [o, text] { return run(*o, text->count() > 0); };
}

const CommandRegistrar reg{{"tokenize", "show the token ids and pieces of a text", setup}};

}  // namespace
}  // namespace nexus::cli
