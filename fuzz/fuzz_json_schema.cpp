// libFuzzer target: the JSON-schema compiler (src/grammar/json_schema.h) and
// the matcher over the grammar it makes. The input is parsed as JSON (as the
// server parses it, with --max-json-depth at its largest, 4096); a
// document that parses is compiled (compile_json_schema, and
// json_schema_rules as tool calls embed it); nexus::Error is the expected
// refusal. A grammar that compiles is checked as a request's is before
// generation (check_followable; GrammarLimit is the request's 400), then
// walked by a Matcher over a small
// vocabulary (every single byte, and a few multi-byte JSON pieces): each step
// asks allowed_tokens() and accepts one allowed token picked from a hash of
// the input, for at most kSteps tokens; a GrammarLimit there is the
// request's 400 too (the engine's error_code). Findings besides crashes,
// sanitizer reports and hangs:
//   - any other nexus::Error from check_followable or the walk (the server's
//     500: the engine fails the generation without an error_code);
//   - a token allowed_tokens() allows that accept() then refuses;
//   - a state that is not a complete sentence but allows no token (every
//     byte is a token, so a live grammar always has one);
//   - an output the matcher calls complete that is not one JSON document
//     (nlohmann::json::parse), except when it holds a \u escape (the grammar
//     takes any 4 hex digits; a lone surrogate is not JSON to nlohmann).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab_trie.h"
#include "json_mutator.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace {

constexpr int kSteps = 64;

const std::shared_ptr<const nexus::grammar::VocabTrie>& vocab() {
  static const auto v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    for (const char* p : {"{\"", "\":", "\",", "\"}", "],", "[]", "{}", "true", "false", "null", "  ", "\n ",
                          "\\u00", "\\n", "12", "0.5", "e+", "-0", "\xC3\xA9", "\xF0\x9F\x98\x80", "\":\"", "\"]"})
      pieces.emplace_back(p);
    return std::make_shared<const nexus::grammar::VocabTrie>(pieces);
  }();
  return v;
}

[[noreturn]] void finding(const char* what, const std::string& out) {
  std::fprintf(stderr, "fuzz_json_schema: %s; output so far (%zu bytes): %s\n", what, out.size(), out.c_str());
  std::abort();
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return nexus::fuzz::mutate_json_input(data, size, max_size, seed, nexus::fuzz::Framing::Whole);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // As the server parses a request (util/json_depth.h), at the largest limit
  // --max-json-depth takes, so the compiler's own 128 still meets deeper
  // documents. Unbounded, ordered_json's parse itself recurses per level: a
  // member added to an object copies the members before it when the vector
  // grows (pair<const string, json> moves only by copying the string, so
  // not noexcept), and 24,000 levels overflowed ASan's stack there.
  const auto schema = nexus::parse_json_bounded_or_discarded<nlohmann::ordered_json>(in, nexus::kMaxJsonDepthLimit);
  if (schema.is_discarded()) return 0;
  std::shared_ptr<const nexus::grammar::Grammar> g;
  try {
    g = std::make_shared<const nexus::grammar::Grammar>(nexus::grammar::compile_json_schema(schema));
    (void)nexus::grammar::json_schema_rules(schema, "t0-");
  } catch (const nexus::Error&) {
    return 0;
  }
  try {
    nexus::grammar::check_followable(g);
  } catch (const nexus::grammar::GrammarLimit&) {
    return 0;  // grammar_too_complex
  } catch (const nexus::Error& e) {
    finding("check_followable threw an error other than GrammarLimit (a 500)", e.what());
  }

  // Walk the grammar: the choices come from an FNV-1a hash of the input.
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  nexus::grammar::Matcher m(g, vocab());
  std::string out;
  std::vector<int32_t> allowed;
  try {
    for (int step = 0; step < kSteps && !m.done(); ++step) {
      const std::vector<uint64_t>& mask = m.allowed_tokens();
      allowed.clear();
      for (size_t w = 0; w < mask.size(); ++w)
        for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      if (allowed.empty()) {
        if (!m.can_end()) finding("no token allowed in a state that cannot end", out);
        break;
      }
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      const std::string& piece = vocab()->piece(allowed[(h >> 33) % allowed.size()]);
      if (!m.accept(piece)) finding("accept() refused a token allowed_tokens() allowed", out);
      out += piece;
    }
  } catch (const nexus::grammar::GrammarLimit&) {
    return 0;  // bounds of the matcher (too many stacks or states): the request's 400
  } catch (const nexus::Error& e) {
    finding("the walk threw an error other than GrammarLimit (a 500)", out + " / " + e.what());
  }
  if (m.can_end() && out.find("\\u") == std::string::npos &&
      !nlohmann::json::accept(out))
    finding("a complete output is not JSON", out);
  return 0;
}
