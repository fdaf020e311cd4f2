// Grammar mask cost per token (constrained decoding), no model: a JSON
// document valid against a typical schema is "generated" token by token
// over a real vocabulary: at each step the allowed-token mask is computed
// (timed), then the longest allowed token that continues the document is
// taken, as a model that agrees with it would. Prints p50 / p99 / max of the
// mask time and the count of slow masks (first visits of states), twice:
// each document a fresh grammar (nothing cached: a schema never seen), and
// all documents on one automaton (what the engine does for requests with
// the same schema, grammar/automaton_cache.h). Target (issue 22): p50 <= 50 us, p99 <= 500 us on
// a 32k vocabulary.
//
// usage: bench_grammar [VOCAB.gguf] [DOCS]
//   default: ../shared/models/TinyLLama-v0.F32.gguf (32000 SentencePiece
//   tokens), 20 documents (different values each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "grammar/json_schema.h"
#include "grammar/loop_index.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;

namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string"}},"required":["street","city"]},
  "active":{"type":"boolean"},"role":{"enum":["admin","user","guest"]}},
  "required":["name","age","email","tags","address","active","role"]})";

std::string document(int i) {
  return "{\"name\": \"Person number " + std::to_string(i) + "\", \"age\": " + std::to_string(20 + i) +
         ", \"email\": \"p" + std::to_string(i) + "@example.com\", \"tags\": [\"alpha\", \"beta gamma\", \"t" +
         std::to_string(i) + "\"], \"address\": {\"street\": \"" + std::to_string(i) +
         " Main Street\", \"city\": \"Springfield\"}, \"active\": " + (i % 2 ? "true" : "false") +
         ", \"role\": \"user\"}";
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/models/TinyLLama-v0.F32.gguf";
  const int docs = argc > 2 ? std::atoi(argv[2]) : 20;
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  std::vector<std::string> pieces(static_cast<size_t>(tok->n_vocab()));
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (!tok->is_eog(id)) pieces[static_cast<size_t>(id)] = tok->token_to_piece(id, false);
  const auto t0 = std::chrono::steady_clock::now();
  auto trie = std::make_shared<grammar::VocabTrie>(pieces);
  trie->loop_index(grammar::json_string_loop_bytes());  // as the engine does with the trie, off its thread
  const double trie_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto g = std::make_shared<const grammar::Grammar>(
      grammar::compile_json_schema(nlohmann::ordered_json::parse(kSchema)));

  std::printf("vocabulary %d tokens (%s), trie and JSON string loop index built in %.1f ms; %d documents\n",
              tok->n_vocab(), path.c_str(), trie_ms, docs);
  std::printf("| mask time (us) | tokens | p50 | p99 | max | masks over 30 us (p50 of those) |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const bool shared : {false, true}) {
    // fresh: every document a new grammar (its own automaton, nothing cached);
    // shared: one automaton for all, as the engine keeps one per grammar text.
    const auto automaton = std::make_shared<grammar::Automaton>(g, trie);
    std::vector<double> all, first;
    for (int d = 0; d < docs; ++d) {
      grammar::Matcher m = shared ? grammar::Matcher(automaton) : grammar::Matcher(g, trie);
      const std::string doc = document(d);
      size_t at = 0;
      while (at < doc.size()) {
        const auto a = std::chrono::steady_clock::now();
        const std::vector<uint64_t>& mask = m.allowed_tokens();
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
        all.push_back(us);
        // Longest allowed piece that continues the document.
        int32_t best = -1;
        for (int32_t id = 0; id < tok->n_vocab(); ++id) {
          if (!((mask[static_cast<size_t>(id) / 64] >> (id % 64)) & 1)) continue;
          const std::string& p = pieces[static_cast<size_t>(id)];
          if (doc.compare(at, p.size(), p) == 0 && (best < 0 || p.size() > pieces[static_cast<size_t>(best)].size()))
            best = id;
        }
        if (best < 0) {
          std::fprintf(stderr, "no allowed token continues the document at byte %zu: %s\n", at, doc.c_str() + at);
          return 1;
        }
        if (us > 30) first.push_back(us);
        m.accept(pieces[static_cast<size_t>(best)]);
        at += pieces[static_cast<size_t>(best)].size();
      }
    }
    std::printf("| %s | %zu | %.1f | %.1f | %.1f | %zu (%.1f) |\n",
                shared ? "one automaton for all documents" : "a fresh grammar per document", all.size(),
                pct(all, 0.5), pct(all, 0.99), pct(all, 1.0), first.size(), pct(first, 0.5));
  }
  return 0;
}
