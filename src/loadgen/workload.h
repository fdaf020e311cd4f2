// Workload: what each benchmark session asks for.
//
// A session is `turns` sequential requests; turn k > 0 resends the whole
// history (prompt/user messages and the server's replies so far), as a chat
// client over stateless HTTP does. Session i's content depends only on
// (seed, i), never on scheduling, so a run is reproducible with --seed.
// Content is either synthetic (random words, lengths from distributions) or
// taken from a prompts file (JSONL, see parse_prompts_jsonl).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/distribution.h"

namespace nexus::loadgen {

// The API a request speaks: /v1/completions (a prompt), or one of the
// message APIs: /v1/chat/completions, /v1/responses (OpenAI's Responses
// API, docs/agents.md), /v1/messages (Anthropic's Messages API).
enum class Api { Completions, Chat, Responses, Messages };
bool message_api(Api api);    // every one but Completions
const char* api_name(Api a);  // "completions", "chat", "responses", "messages" (--endpoint)

// One request, independent of the wire format (each Transport encodes it).
struct RequestSpec {
  Api api = Api::Completions;
  std::string prompt;                                   // Completions: the whole text so far
  nlohmann::json messages = nlohmann::json::array();    // message APIs: [{role, content}, ...], a preamble as "system"
  int32_t max_tokens = 16;
  bool ignore_eos = false;
  std::string model;  // "" = no "model" field
  uint64_t session = 0;
  int32_t turn = 0;   // 0-based turn index within the session
  int32_t turns = 1;  // the session's number of turns (turn == turns - 1: its last request)
  // Responses over WebSocket: before turn 0, prefill the preamble (the
  // leading system messages) with a `generate: false` response.create, as
  // Codex CLI does; not counted in the turn's times.
  bool warm_up = false;
};

// One line of a prompts file: {"prompt": "..."} or {"messages": [...]},
// optionally "max_tokens".
struct PromptEntry {
  std::optional<std::string> prompt;
  nlohmann::json messages;  // null when the line has "prompt"
  std::optional<int32_t> max_tokens;
};

// Parses JSONL text; blank lines are skipped. `name` is used in errors,
// which name the line (nexus::Error). At least one entry is required.
std::vector<PromptEntry> parse_prompts_jsonl(const std::string& text, const std::string& name);
std::vector<PromptEntry> load_prompts_jsonl(const std::string& path);

// Default words per synthetic prompt (turn): about 35 tokens with a llama
// tokenizer, so a prompt leaves room for a completion even in a 128-token
// context (TinyLLama-v0, the smallest models people try first). Longer
// prompts are a --prompt-tokens away.
inline constexpr int32_t kDefaultPromptWords = 32;

struct WorkloadOptions {
  Api api = Api::Completions;
  // An agent's preamble: a system message of this many words, the same in
  // every session (drawn from the seed alone), before the first turn; 0 =
  // none. Message APIs only.
  int32_t preamble_words = 0;
  bool warm_up = false;  // RequestSpec::warm_up
  LengthDistribution prompt_tokens = LengthDistribution::fixed(kDefaultPromptWords);  // words per prompt/turn
  LengthDistribution max_tokens = LengthDistribution::fixed(128);
  int32_t turns = 1;
  bool ignore_eos = false;
  std::string model;
  uint64_t seed = 0;
  std::vector<PromptEntry> prompts;  // empty = synthetic
};

// One turn's new input: user text, or a full message list (file "messages").
struct TurnPlan {
  std::string user_text;
  nlohmann::json messages;  // non-null: replaces the history (turns == 1 only)
  int32_t max_tokens = 16;
};

class Workload {
 public:
  explicit Workload(WorkloadOptions opts);  // validates (nexus::Error)
  const WorkloadOptions& options() const { return opts_; }
  std::vector<TurnPlan> session(uint64_t index) const;

 private:
  WorkloadOptions opts_;
};

// The history of one session: builds each turn's request and records replies.
class Conversation {
 public:
  Conversation(const Workload& w, uint64_t session_index);
  int32_t turns() const { return static_cast<int32_t>(plan_.size()); }
  RequestSpec request(int32_t turn);               // appends turn's input to the history
  void add_reply(const std::string& text);         // the server's answer to the last request

 private:
  const WorkloadOptions& opts_;
  uint64_t index_;
  std::vector<TurnPlan> plan_;
  std::string text_;
  nlohmann::json messages_ = nlohmann::json::array();
};

}  // namespace nexus::loadgen
