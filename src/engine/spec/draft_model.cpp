#include "engine/spec/draft_model.h"

#include <algorithm>
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/kv_pool_sizes.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus::spec {
namespace {

// The draft pool: room for max_seqs full contexts of the draft (kv_pool_sizes'
// default budget, at most a quarter of available RAM).
KvPoolSizes draft_pool_sizes(const LlamaConfig& c, KvType kv_type, int32_t max_seqs, int32_t n_ctx,
                             int32_t max_batch_tokens) {
  EngineOptions o;
  o.max_seqs = std::max(1, max_seqs);
  o.max_batch_tokens = max_batch_tokens;
  o.kv_type = kv_type;
  o.kv_memory = 0;
  return kv_pool_sizes(c, o, n_ctx);
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

std::string shown(const std::string& text) { return fmt::format("'{}'", text); }

// How many tokens the draft KV (`have`) keeps of `tokens`: their common
// prefix, short of the last token (the pending one, always run).
size_t common_prefix(std::span<const int32_t> have, std::span<const int32_t> tokens) {
  const size_t limit = tokens.empty() ? 0 : tokens.size() - 1;
  size_t n = 0;
  while (n < have.size() && n < limit && have[n] == tokens[n]) ++n;
  return n;
}

}  // namespace

void check_same_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab())
    throw Error(fmt::format("the draft model's vocabulary has {} tokens, the target's {}", draft.n_vocab(),
                            target.n_vocab()));
  for (int32_t id = 0; id < target.n_vocab(); ++id)
    if (target.token_text(id) != draft.token_text(id))
      throw Error(fmt::format("the draft model's token {} is {}, the target's {}", id, shown(draft.token_text(id)),
                              shown(target.token_text(id))));
  if (target.bos_id() != draft.bos_id())
    throw Error(fmt::format("the draft model's BOS token is {}, the target's {}", draft.bos_id(), target.bos_id()));
  if (target.eos_id() != draft.eos_id())
    throw Error(fmt::format("the draft model's EOS token is {}, the target's {}", draft.eos_id(), target.eos_id()));
}

DraftModel::DraftModel(const LlamaModel& model, ThreadPool& pool, KvType kv_type, int32_t max_seqs, int32_t n_ctx,
                       int32_t max_batch_tokens)
    : DraftModel(model, pool, kv_type, std::min(n_ctx, model.config().n_ctx_train), max_batch_tokens,
                 draft_pool_sizes(model.config(), kv_type, max_seqs, std::min(n_ctx, model.config().n_ctx_train),
                                  max_batch_tokens)) {
  warm_up(std::max(1, max_seqs));
}

DraftModel::DraftModel(const LlamaModel& model, ThreadPool& pool, KvType kv_type, int32_t n_ctx,
                       int32_t max_batch_tokens, KvPoolSizes sizes)
    : model_(model),
      max_batch_tokens_(std::max(1, max_batch_tokens)),
      cache_(model.config(), sizes.n_blocks, kDefaultBlockSize, kv_type, sizes.n_swa_blocks),
      blocks_(cache_.n_blocks(), cache_.block_size(), cache_.n_swa_blocks(), cache_.split() ? model.config().n_swa : 0),
      n_ctx_(std::min(n_ctx, cache_.n_blocks() * cache_.block_size())),
      forward_(model, cache_, pool, n_ctx) {}

DraftModel::~DraftModel() = default;

BlockManager::SeqId DraftModel::entry(uint64_t seq, std::span<const int32_t> tokens) {
  auto [it, added] = seqs_.try_emplace(seq);
  it->second.last_use = n_calls_;
  if (added) {
    it->second.kv = blocks_.create();
    blocks_.match_prefix(it->second.kv, tokens);  // what other sequences' drafts computed
  }
  return it->second.kv;
}

void DraftModel::warm_up(int32_t max_seqs) {
  // Token 0 (any id does) at every position: the K/V is never committed, so
  // never reused. Each sequence reserves len positions and one more for the
  // timed passes. At most 32 each: enough for token_cost's catch-up reading
  // (17 tokens each), and a start that stays short with a large draft and a
  // large --max-batch-tokens.
  constexpr int32_t kMaxLen = 32;
  const int32_t len = std::clamp(std::min(max_batch_tokens_ / max_seqs, kMaxLen), 1, std::max(1, n_ctx_ - 1));
  const std::vector<int32_t> zeros(static_cast<size_t>(len) + 1, 0);
  std::vector<BlockManager::SeqId> kv;
  for (int32_t i = 0; i < max_seqs; ++i) {
    kv.push_back(blocks_.create());
    if (!blocks_.append(kv.back(), zeros)) {
      blocks_.release(kv.back());
      kv.pop_back();
      break;
    }
  }
  // One run per sequence of the first n_seqs, each with its logits row.
  auto pass = [&](size_t n_seqs, int32_t n_past, std::span<const int32_t> tokens, int times) {
    runs_.clear();
    for (size_t i = 0; i < n_seqs; ++i) {
      SeqRun& run = runs_.emplace_back();
      run.tokens = tokens;
      run.n_past = n_past;
      run.block_table = blocks_.block_table(kv[i]);
      run.swa_block_table = blocks_.swa_block_table(kv[i]);
      run.want_logits = true;
    }
    // Its fastest of `times` runs.
    double fastest = 0;
    for (int t = 0; t < times; ++t) {
      const auto start = std::chrono::steady_clock::now();
      forward_.forward(runs_);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fastest = t == 0 ? s : std::min(fastest, s);
    }
    return fastest;
  };
  if (!kv.empty()) {
    const std::span<const int32_t> all(zeros);
    const std::span<const int32_t> prompt = all.first(static_cast<size_t>(len));
    pass(kv.size(), 0, prompt, 1);  // pages in, grows the buffers: not counted
    // A catch-up pass (every sequence's len tokens again), then a proposing
    // pass of one sequence and of all (one token each), each the fastest of
    // kTimings: the OS only ever adds time, and these readings decide whether
    // the draft is tried at all (one pass of one sequence timed once read
    // 130-304 us across 8 constructions: a high one kept a paying draft off
    // for good, since a draft that is not used is not timed again).
    constexpr int kTimings = 5;
    pass_cost_.record(len * static_cast<int32_t>(kv.size()), pass(kv.size(), 0, prompt, kTimings));
    for (const size_t n_seqs : {size_t{1}, kv.size()})
      pass_cost_.record(static_cast<int32_t>(n_seqs),
                        pass(n_seqs, len, all.subspan(static_cast<size_t>(len)), kTimings));
  }
  for (BlockManager::SeqId id : kv) blocks_.release(id);
}

ProposerCost DraftModel::token_cost(int32_t others) const {
  const int32_t m = std::max(others, 0);
  const double pass_s = pass_cost_.seconds(m + 1) - (m > 0 ? pass_cost_.seconds(m) : 0.0);
  // The catch-up: what each further token adds to a pass, read over
  // kCatchUp tokens.
  constexpr int32_t kCatchUp = 16;
  const double catch_up_s = (pass_cost_.seconds(1 + kCatchUp) - pass_cost_.seconds(1)) / kCatchUp;
  return {.token_s = std::max(0.0, pass_s),
          .catch_up_s = std::max(0.0, catch_up_s),
          .known = pass_cost_.seconds(1) > 0};
}

int32_t DraftModel::behind(uint64_t seq, std::span<const int32_t> tokens) const {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return static_cast<int32_t>(tokens.size());
  return static_cast<int32_t>(tokens.size() - common_prefix(blocks_.tokens(it->second.kv), tokens));
}

void DraftModel::release(uint64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  blocks_.release(it->second.kv);
  seqs_.erase(it);
}

bool DraftModel::evict_one() {
  auto oldest = seqs_.end();
  for (auto it = seqs_.begin(); it != seqs_.end(); ++it)
    if (it->second.last_use < n_calls_ && (oldest == seqs_.end() || it->second.last_use < oldest->second.last_use))
      oldest = it;
  if (oldest == seqs_.end()) return false;
  blocks_.release(oldest->second.kv);
  seqs_.erase(oldest);
  return true;
}

bool DraftModel::append(BlockManager::SeqId kv, std::span<const int32_t> tokens) {
  while (!blocks_.can_append(kv, static_cast<int32_t>(tokens.size())))
    if (!evict_one()) return false;
  return blocks_.append(kv, tokens);
}

void DraftModel::propose(std::span<Request> reqs) {
  ++n_calls_;
  live_.clear();
  int32_t budget = max_batch_tokens_;
  for (Request& r : reqs) {
    r.out->clear();
    const auto len = static_cast<int32_t>(r.tokens.size());
    // Pass j writes position len - 2 + j; the last pass (j = k) writes none.
    const int32_t k = std::min(r.k, n_ctx_ - len + 1);
    if (k < 1 || len < 1 || budget == 0) continue;
    r.out->reserve(static_cast<size_t>(k));
    const BlockManager::SeqId kv = entry(r.seq, r.tokens);
    // Keep what the tokens still start with (a rejected draft's tail goes),
    // and at least the pending token to run.
    const size_t common = common_prefix(blocks_.tokens(kv), r.tokens);
    const int32_t n_past = blocks_.truncate(kv, static_cast<int32_t>(common));
    const int32_t n = std::min(len - n_past, budget);
    const std::span<const int32_t> run = r.tokens.subspan(static_cast<size_t>(n_past), static_cast<size_t>(n));
    if (!append(kv, run)) continue;
    budget -= n;
    live_.push_back(Live{&r, kv, n_past, run, n_past + n == len ? k : 0});
  }
  try {
    while (!live_.empty()) {
      const auto start = std::chrono::steady_clock::now();
      int32_t pass_tokens = 0;
      runs_.clear();
      for (const Live& l : live_) {
        pass_tokens += static_cast<int32_t>(l.run.size());
        SeqRun& run = runs_.emplace_back();
        run.tokens = l.run;
        run.n_past = l.n_past;
        run.block_table = blocks_.block_table(l.kv);
        run.swa_block_table = blocks_.swa_block_table(l.kv);
        run.want_logits = l.k > 0;
      }
      const std::span<const float> logits = forward_.forward(runs_);
      const auto nv = static_cast<size_t>(model_.config().n_vocab);
      size_t row = 0;
      size_t kept = 0;
      for (Live& l : live_) {
        blocks_.commit(l.kv);
        if (l.k == 0) continue;  // caught up a chunk only
        std::vector<int32_t>& out = *l.req->out;
        out.push_back(argmax(logits.subspan(row++ * nv, nv)));
        if (static_cast<int32_t>(out.size()) == l.k) continue;
        l.n_past += static_cast<int32_t>(l.run.size());
        l.run = std::span<const int32_t>(&out.back(), 1);  // out's capacity is k: never moves
        if (append(l.kv, l.run)) live_[kept++] = l;
      }
      live_.resize(kept);
      pass_cost_.record(pass_tokens, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  } catch (...) {
    for (Request& r : reqs) {
      r.out->clear();
      release(r.seq);
    }
    live_.clear();
    throw;
  }
}

}  // namespace nexus::spec
