// BlockManager with a sliding-window pool: the windowed table gives back the
// blocks behind the window, the prefix cache reuses a prefix only where the
// windowed blocks its next query reads are still cached, truncate() never
// keeps a prefix whose window was given back, and a random workload keeps
// every invariant with a shadow of what each windowed block holds.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "engine/block_manager.h"
#include "util/error.h"

using namespace nexus;

namespace {

constexpr int32_t kNo = BlockManager::kNoBlock;

std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// The first windowed block a query at `pos` reads (block size bs, window w).
int32_t first_needed(int32_t pos, int32_t w, int32_t bs) { return std::max(0, pos - w + 1) / bs; }

// Appends tokens one at a time with a commit after each, as decode does.
void decode(BlockManager& bm, BlockManager::SeqId s, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) {
    ASSERT_TRUE(bm.append(s, std::span(&t, 1)));
    bm.commit(s);
  }
}

}  // namespace

TEST(BlockManagerWindow, ConstructorNeedsBothWindowAndBlocks) {
  EXPECT_THROW(BlockManager(8, 4, 4, 0), Error);
  EXPECT_THROW(BlockManager(8, 4, 0, 5), Error);
  EXPECT_THROW(BlockManager(8, 4, -1, 5), Error);
  BlockManager plain(8, 4);
  EXPECT_FALSE(plain.has_window_pool());
  const auto s = plain.create();
  ASSERT_TRUE(plain.append(s, iota_tokens(9, 0)));
  EXPECT_TRUE(plain.swa_block_table(s).empty());
  EXPECT_EQ(plain.n_swa_held(s), 0);
}

// 200 tokens through a windowed pool of 4 blocks: without the blocks given
// back the 50 the sequence spans could never fit.
TEST(BlockManagerWindow, DecodeHoldsAtMostTheWindowPlusOneBlock) {
  constexpr int32_t kBs = 4, kWindow = 5;
  BlockManager bm(64, kBs, 4, kWindow);
  const auto s = bm.create();
  // A query's 5 positions span at most ceil((5 - 1) / 4) + 1 = 2 blocks
  // (within the documented ceil(window / block_size) + 1).
  const int32_t bound = (kWindow - 1 + kBs - 1) / kBs + 1;
  for (int32_t n = 1; n <= 200; ++n) {
    const int32_t t = n % 7;
    ASSERT_TRUE(bm.append(s, std::span(&t, 1))) << "token " << n;
    ASSERT_LE(bm.n_swa_held(s), bound) << "after appending token " << n;
    bm.commit(s);
    const auto table = bm.swa_block_table(s);
    ASSERT_EQ(table.size(), bm.block_table(s).size());
    for (int32_t i = 0; i < static_cast<int32_t>(table.size()); ++i)
      ASSERT_EQ(table[i] == kNo, i < first_needed(n, kWindow, kBs)) << "entry " << i << " at " << n << " tokens";
    ASSERT_NO_THROW(bm.validate()) << n;
  }
  EXPECT_EQ(bm.block_table(s).size(), 50u);  // the global layers keep the whole history
  EXPECT_EQ(bm.stats().swa_blocks_per_seq_max, bound);
  EXPECT_GT(bm.stats().swa_evictions, 0);  // given-back blocks were cached, then reused
  bm.release(s);
  EXPECT_EQ(bm.swa_pool().n_used(), 0);
  bm.validate();
}

TEST(BlockManagerWindow, CanAppendChecksTheWindowedPoolForThisStepsChunkOnly) {
  BlockManager bm(64, 4, 3, 5);
  const auto s = bm.create();
  EXPECT_FALSE(bm.can_append(s, 40));     // 10 windowed blocks at once
  EXPECT_TRUE(bm.can_append(s, 40, 12));  // a first chunk of 12 tokens: 3
  EXPECT_FALSE(bm.can_append(s, 40, 13));
  EXPECT_FALSE(bm.append(s, iota_tokens(13, 0)));
  EXPECT_EQ(bm.n_tokens(s), 0);
  // Chunks of 4: each commit gives back what the next chunk needs.
  for (int32_t c = 0; c < 10; ++c) {
    ASSERT_TRUE(bm.can_append(s, 40 - 4 * c, 4)) << c;
    ASSERT_TRUE(bm.append(s, iota_tokens(4, 4 * c))) << c;
    bm.commit(s);
  }
  bm.validate();
}

// A prompt whose global blocks are all cached but whose windowed blocks near
// its end were evicted is matched only up to the longest prefix whose window
// is still cached -- here the one another sequence holds.
TEST(BlockManagerWindow, PrefixIsReusedOnlyWhereItsWindowIsStillCached) {
  constexpr int32_t kBs = 4, kWindow = 5;
  BlockManager bm(32, kBs, 6, kWindow);
  const std::vector<int32_t> T = iota_tokens(40, 100);
  const std::vector<int32_t> first20(T.begin(), T.begin() + 20);
  const auto c = bm.create();
  ASSERT_TRUE(bm.append(c, first20));  // one chunk of 20 tokens
  bm.commit(c);                        // keeps only windowed block 4 (positions 16..19)
  EXPECT_EQ(bm.n_swa_held(c), 1);

  const auto a = bm.create();
  std::vector<int32_t> p21(T.begin(), T.begin() + 21);
  EXPECT_EQ(bm.match_prefix(a, p21), 20);  // its window is c's block 4
  EXPECT_EQ(bm.swa_block_table(a)[4], bm.swa_block_table(c)[4]);
  decode(bm, a, std::vector<int32_t>(T.begin() + 20, T.end()));
  bm.release(a);  // its windowed blocks 5..9 are cached
  // Unrelated tokens, never committed, take every other windowed block.
  const auto d = bm.create();
  ASSERT_TRUE(bm.append(d, iota_tokens(20, 900)));
  bm.release(d);
  bm.validate();

  std::vector<int32_t> p41 = T;
  p41.push_back(7);
  const auto e = bm.create();
  EXPECT_EQ(bm.match_prefix(e, p41), 20) << "global blocks for 40 tokens are cached, the window only at 20";
  const auto table = bm.swa_block_table(e);
  ASSERT_EQ(table.size(), 5u);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(table[i], kNo);
  EXPECT_EQ(table[4], bm.swa_block_table(c)[4]);
  EXPECT_EQ(bm.n_swa_held(e), 1);
  bm.validate();

  // Without a window pool the same history matches all 40.
  BlockManager plain(32, kBs);
  const auto x = plain.create();
  ASSERT_TRUE(plain.append(x, T));
  plain.commit(x);
  plain.release(x);
  EXPECT_EQ(plain.match_prefix(plain.create(), p41), 40);
}

TEST(BlockManagerWindow, TruncateNeverKeepsAPrefixWhoseWindowWasGivenBack) {
  constexpr int32_t kBs = 4, kWindow = 8;
  BlockManager bm(32, kBs, 8, kWindow);
  const auto s = bm.create();
  decode(bm, s, iota_tokens(42, 1));  // windowed blocks 0..7 given back (first needed at 42: 8)
  EXPECT_EQ(bm.truncate(s, 41), 41);  // inside the private partial block, window still held
  bm.validate();
  EXPECT_EQ(bm.truncate(s, 37), 0) << "36 would need windowed block 7, given back";
  EXPECT_TRUE(bm.block_table(s).empty());
  EXPECT_TRUE(bm.swa_block_table(s).empty());
  bm.validate();
  decode(bm, s, iota_tokens(10, 1));  // the emptied sequence grows again
  bm.validate();
}

// Random admissions, chunked growth, commits, truncations and releases with
// a small windowed pool. A shadow records the token prefix each windowed
// block holds K/V for; every table entry a query can read (from the window
// of the sequence's end on) must hold exactly the sequence's own prefix.
TEST(BlockManagerWindow, RandomWorkloadKeepsInvariantsAndReadsOnlyItsOwnWindow) {
  constexpr int32_t kBs = 4, kWindow = 6;
  BlockManager bm(64, kBs, 20, kWindow);
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> stems(3);
  for (auto& s : stems)
    for (int i = 0; i < 24; ++i) s.push_back(static_cast<int32_t>(rng() % 4));
  std::map<int32_t, std::vector<int32_t>> holds;  // windowed block -> prefix it holds
  std::vector<BlockManager::SeqId> live;
  int64_t hits = 0;
  auto record = [&](BlockManager::SeqId s) {
    auto toks = bm.tokens(s);
    auto table = bm.swa_block_table(s);
    for (size_t i = 0; i < table.size(); ++i) {
      if (table[i] == kNo) continue;
      const size_t end = std::min(toks.size(), (i + 1) * kBs);
      auto& h = holds[table[i]];
      if (bm.swa_pool().ref_count(table[i]) == 1 || h.size() < end) h.assign(toks.begin(), toks.begin() + end);
    }
  };
  auto check_window = [&](BlockManager::SeqId s, int step) {
    auto toks = bm.tokens(s);
    auto table = bm.swa_block_table(s);
    const int32_t n = static_cast<int32_t>(toks.size());
    for (int32_t i = first_needed(n, kWindow, kBs); i < static_cast<int32_t>(table.size()); ++i) {
      ASSERT_NE(table[i], kNo) << "step " << step;
      const auto& h = holds[table[i]];
      const size_t want = std::min<size_t>(toks.size(), static_cast<size_t>(i + 1) * kBs);
      ASSERT_GE(h.size(), want) << "step " << step;
      ASSERT_TRUE(std::equal(toks.begin(), toks.begin() + static_cast<ptrdiff_t>(want), h.begin()))
          << "step " << step << ": windowed block " << table[i] << " holds another prefix";
    }
  };
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 3 || live.empty()) {
      std::vector<int32_t> p(stems[rng() % stems.size()]);
      p.resize(rng() % p.size() + 1);
      for (int i = static_cast<int>(rng() % 5); i > 0; --i) p.push_back(static_cast<int32_t>(rng() % 4));
      const auto s = bm.create();
      const int32_t m = bm.match_prefix(s, p);
      ASSERT_EQ(m % kBs, 0);
      hits += m;
      ASSERT_NO_FATAL_FAILURE(check_window(s, step));
      const int32_t chunk = std::min<int32_t>(static_cast<int32_t>(p.size()) - m, 1 + static_cast<int32_t>(rng() % 6));
      if (bm.append(s, std::span(p).subspan(static_cast<size_t>(m), static_cast<size_t>(chunk)))) {
        record(s);
        bm.commit(s);
        live.push_back(s);
      } else {
        bm.release(s);
      }
    } else if (op < 8) {
      const auto s = live[rng() % live.size()];
      std::vector<int32_t> more(rng() % 3 + 1);
      for (auto& t : more) t = static_cast<int32_t>(rng() % 4);
      const bool can = bm.can_append(s, static_cast<int32_t>(more.size()));
      ASSERT_EQ(bm.append(s, more), can);
      if (can) {
        record(s);
        bm.commit(s);
      }
    } else if (op == 8) {
      const auto s = live[rng() % live.size()];
      bm.truncate(s, static_cast<int32_t>(rng() % (bm.n_tokens(s) + 1)));
    } else {
      const size_t i = rng() % live.size();
      bm.release(live[i]);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    ASSERT_NO_THROW(bm.validate()) << "step " << step;
    for (auto s : live) ASSERT_NO_FATAL_FAILURE(check_window(s, step));
    ASSERT_EQ(bm.swa_pool().n_used() + bm.swa_pool().n_free() + bm.swa_pool().n_cached(), 20);
  }
  EXPECT_GT(hits, 0);
  EXPECT_GT(bm.stats().swa_evictions, 0);
  for (auto s : live) bm.release(s);
  EXPECT_EQ(bm.swa_pool().n_used(), 0);
  bm.validate();
}
