#include "loadgen/workload.h"

#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "loadgen/words.h"
#include "util/error.h"

namespace nexus::loadgen {

using nlohmann::json;

namespace {

PromptEntry parse_entry(const std::string& line, const std::string& where) {
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(where + ": not a JSON object");
  PromptEntry e;
  const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
  if (has_prompt == has_messages) throw Error(where + ": needs exactly one of \"prompt\" or \"messages\"");
  if (has_prompt) {
    if (!j["prompt"].is_string()) throw Error(where + ": \"prompt\" must be a string");
    e.prompt = j["prompt"].get<std::string>();
  } else {
    const json& m = j["messages"];
    if (!m.is_array() || m.empty()) throw Error(where + ": \"messages\" must be a non-empty array");
    for (const json& msg : m) {
      if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
        throw Error(where + ": every message needs a string \"role\"");
      }
    }
    e.messages = m;
  }
  if (j.contains("max_tokens")) {
    const json& mt = j["max_tokens"];
    if (!mt.is_number_integer() || mt.get<int64_t>() < 1 || mt.get<int64_t>() > (1 << 24)) {
      throw Error(where + ": \"max_tokens\" must be a positive integer");
    }
    e.max_tokens = mt.get<int32_t>();
  }
  return e;
}

}  // namespace

bool message_api(Api api) { return api != Api::Completions; }

const char* api_name(Api a) {
  switch (a) {
    case Api::Completions: return "completions";
    case Api::Chat: return "chat";
    case Api::Responses: return "responses";
    case Api::Messages: return "messages";
  }
  return "?";
}

std::vector<PromptEntry> parse_prompts_jsonl(const std::string& text, const std::string& name) {
  std::vector<PromptEntry> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    out.push_back(parse_entry(line, fmt::format("{}:{}", name, n)));
  }
  if (out.empty()) throw Error(name + ": no prompts (expected one JSON object per line)");
  return out;
}

std::vector<PromptEntry> load_prompts_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open prompts file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_prompts_jsonl(ss.str(), path);
}

Workload::Workload(WorkloadOptions opts) : opts_(std::move(opts)) {
  if (opts_.turns < 1) throw Error("--turns must be >= 1");
  if (opts_.preamble_words < 0) throw Error("--preamble-tokens must be >= 0");
  if (opts_.preamble_words > 0 && !message_api(opts_.api))
    throw Error("--preamble-tokens needs a message API (--endpoint chat, responses or messages)");
  for (const PromptEntry& e : opts_.prompts) {
    if (!e.messages.is_null() && !message_api(opts_.api)) {
      throw Error("prompts file has \"messages\" entries: use a message API (--endpoint chat, responses or messages)");
    }
    if (!e.messages.is_null() && opts_.turns > 1) {
      throw Error("prompts file \"messages\" entries cannot be combined with --turns > 1");
    }
  }
}

std::vector<TurnPlan> Workload::session(uint64_t index) const {
  // One generator per session, seeded from (seed, index): order-independent.
  std::seed_seq seq{static_cast<uint32_t>(opts_.seed), static_cast<uint32_t>(opts_.seed >> 32),
                    static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32)};
  std::mt19937_64 rng(seq);
  std::vector<TurnPlan> turns(static_cast<size_t>(opts_.turns));
  for (int32_t k = 0; k < opts_.turns; ++k) {
    TurnPlan& t = turns[static_cast<size_t>(k)];
    t.max_tokens = opts_.max_tokens.sample(rng);
    if (opts_.prompts.empty()) {
      t.user_text = random_words(opts_.prompt_tokens.sample(rng), rng);
      continue;
    }
    const uint64_t line = (index * static_cast<uint64_t>(opts_.turns) + static_cast<uint64_t>(k)) %
                          opts_.prompts.size();
    const PromptEntry& e = opts_.prompts[line];
    if (e.prompt) t.user_text = *e.prompt;
    t.messages = e.messages;
    if (e.max_tokens) t.max_tokens = *e.max_tokens;
  }
  return turns;
}

Conversation::Conversation(const Workload& w, uint64_t session_index)
    : opts_(w.options()), index_(session_index), plan_(w.session(session_index)) {
  if (opts_.preamble_words > 0) {
    // The same for every session: a generator of the seed alone.
    std::seed_seq seq{static_cast<uint32_t>(opts_.seed), static_cast<uint32_t>(opts_.seed >> 32), 0x9e3779b9u};
    std::mt19937_64 rng(seq);
    messages_.push_back({{"role", "system"}, {"content", random_words(opts_.preamble_words, rng)}});
  }
}

RequestSpec Conversation::request(int32_t turn) {
  const TurnPlan& t = plan_.at(static_cast<size_t>(turn));
  RequestSpec r;
  r.api = opts_.api;
  r.max_tokens = t.max_tokens;
  r.ignore_eos = opts_.ignore_eos;
  r.model = opts_.model;
  r.session = index_;
  r.turn = turn;
  r.turns = turns();
  r.warm_up = opts_.warm_up;
  if (message_api(opts_.api)) {
    if (!t.messages.is_null()) {
      messages_ = t.messages;
    } else {
      messages_.push_back({{"role", "user"}, {"content", t.user_text}});
    }
    r.messages = messages_;
  } else {
    text_ += text_.empty() ? t.user_text : "\n" + t.user_text;
    r.prompt = text_;
  }
  return r;
}

void Conversation::add_reply(const std::string& text) {
  if (message_api(opts_.api)) {
    messages_.push_back({{"role", "assistant"}, {"content", text}});
  } else {
    text_ += text;
  }
}

}  // namespace nexus::loadgen
