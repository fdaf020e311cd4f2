// BlockManager: allocation, reference counts, prefix caching (hash chain,
// LRU eviction) and a random workload checked against a shadow model of what
// each block holds.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "engine/block_manager.h"
#include "util/error.h"

using namespace nexus;

namespace {

using V = std::vector<int32_t>;

std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> table_of(const BlockManager& bm, BlockManager::SeqId s) {
  auto t = bm.block_table(s);
  return {t.begin(), t.end()};
}

}  // namespace

TEST(BlockManager, AppendAllocatesBlocksAsTheSequenceGrows) {
  BlockManager bm(8, 4);
  const auto s = bm.create();
  EXPECT_EQ(bm.blocks_needed(s, 5), 2);
  ASSERT_TRUE(bm.append(s, iota_tokens(5, 0)));
  EXPECT_EQ(bm.block_table(s).size(), 2u);
  ASSERT_TRUE(bm.append(s, iota_tokens(3, 5)));  // fills block 2 exactly
  EXPECT_EQ(bm.block_table(s).size(), 2u);
  EXPECT_EQ(bm.blocks_needed(s, 1), 1);
  ASSERT_TRUE(bm.append(s, iota_tokens(1, 8)));
  EXPECT_EQ(bm.block_table(s).size(), 3u);
  EXPECT_EQ(bm.n_tokens(s), 9);
  EXPECT_EQ(bm.n_used(), 3);
  EXPECT_EQ(bm.n_free(), 5);
  bm.validate();
  bm.release(s);
  EXPECT_EQ(bm.n_free(), 8);  // nothing committed: nothing cached
  EXPECT_EQ(bm.n_sequences(), 0);
  bm.validate();
}

TEST(BlockManager, AppendFailsWithoutChangeWhenOutOfBlocks) {
  BlockManager bm(4, 4);
  const auto a = bm.create(), b = bm.create();
  ASSERT_TRUE(bm.append(a, iota_tokens(12, 0)));
  EXPECT_FALSE(bm.can_append(b, 8));
  EXPECT_FALSE(bm.append(b, iota_tokens(8, 100)));
  EXPECT_EQ(bm.n_tokens(b), 0);
  EXPECT_TRUE(bm.block_table(b).empty());
  EXPECT_EQ(bm.n_free(), 1);
  EXPECT_TRUE(bm.append(b, iota_tokens(4, 100)));
  EXPECT_EQ(bm.n_free(), 0);
  bm.validate();
}

TEST(BlockManager, CommittedFullBlocksAreReusedByLaterSequences) {
  BlockManager bm(8, 4);
  const auto prompt = iota_tokens(10, 1);
  const auto a = bm.create();
  ASSERT_TRUE(bm.append(a, prompt));
  bm.commit(a);
  const auto a_table = table_of(bm, a);
  bm.release(a);
  EXPECT_EQ(bm.n_cached(), 2);  // two full blocks; the partial third is freed
  EXPECT_EQ(bm.n_free(), 6);

  const auto b = bm.create();
  EXPECT_EQ(bm.match_prefix(b, prompt), 8);
  EXPECT_EQ(table_of(bm, b), std::vector<int32_t>(a_table.begin(), a_table.begin() + 2));
  EXPECT_EQ(bm.n_tokens(b), 8);
  EXPECT_EQ(bm.n_cached(), 0);
  EXPECT_EQ(bm.ref_count(a_table[0]), 1);
  ASSERT_TRUE(bm.append(b, std::span(prompt).subspan(8)));
  EXPECT_EQ(bm.stats().hit_tokens, 8);
  EXPECT_EQ(bm.stats().queried_tokens, 10);
  bm.validate();
}

TEST(BlockManager, MatchLeavesAtLeastTheLastTokenToEvaluate) {
  BlockManager bm(8, 4);
  const auto prompt = iota_tokens(8, 1);
  const auto a = bm.create();
  ASSERT_TRUE(bm.append(a, prompt));
  bm.commit(a);
  const auto b = bm.create(), c = bm.create();
  EXPECT_EQ(bm.match_prefix(b, prompt), 4);  // both blocks cached, but the last token must be evaluated
  auto longer = prompt;
  longer.push_back(99);
  EXPECT_EQ(bm.match_prefix(c, longer), 8);
  EXPECT_THROW(bm.match_prefix(c, longer), Error);  // not empty any more
  EXPECT_EQ(bm.match_prefix(bm.create(), std::vector<int32_t>{}), 0);
  bm.validate();
}

TEST(BlockManager, SharedBlocksAreCountedAndCachedWhenTheLastUserLeaves) {
  BlockManager bm(8, 4);
  const auto prompt = iota_tokens(9, 1);
  const auto a = bm.create();
  ASSERT_TRUE(bm.append(a, prompt));
  bm.commit(a);
  const auto b = bm.create();
  ASSERT_EQ(bm.match_prefix(b, prompt), 8);
  const int32_t first = bm.block_table(a)[0];
  EXPECT_EQ(bm.ref_count(first), 2);
  EXPECT_EQ(bm.n_used(), 3);  // two shared + a's partial block
  bm.release(a);
  EXPECT_EQ(bm.ref_count(first), 1);
  EXPECT_EQ(bm.n_cached(), 0);
  bm.release(b);
  EXPECT_EQ(bm.ref_count(first), 0);
  EXPECT_EQ(bm.n_cached(), 2);
  bm.validate();
}

TEST(BlockManager, UncommittedBlocksAreNeverShared) {
  BlockManager bm(8, 4);
  const auto prompt = iota_tokens(9, 1);
  const auto a = bm.create();
  ASSERT_TRUE(bm.append(a, prompt));  // K/V not computed yet
  EXPECT_EQ(bm.match_prefix(bm.create(), prompt), 0);
  bm.release(a);
  EXPECT_EQ(bm.n_cached(), 0);
  bm.validate();
}

TEST(BlockManager, HashChainKeysABlockByItsWholePrefix) {
  BlockManager bm(16, 4);
  const std::vector<int32_t> x{1, 2, 3, 4}, y{5, 6, 7, 8}, z{9, 9, 9, 9};
  auto cat = [](std::initializer_list<std::vector<int32_t>> parts) {
    std::vector<int32_t> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    out.push_back(0);  // a last token to evaluate
    return out;
  };
  const auto a = bm.create();
  ASSERT_TRUE(bm.append(a, cat({x, y})));
  bm.commit(a);
  EXPECT_EQ(bm.match_prefix(bm.create(), cat({z, y})), 0);   // y after another prefix is another block
  EXPECT_EQ(bm.match_prefix(bm.create(), cat({y})), 0);      // y as the first block too
  EXPECT_EQ(bm.match_prefix(bm.create(), cat({x, z})), 4);   // x matches, the chain stops at z
  EXPECT_EQ(bm.match_prefix(bm.create(), cat({x, y, z})), 8);
  bm.validate();
}

TEST(BlockManager, EvictsLeastRecentlyReleasedOnlyWhenNoBlockIsFree) {
  BlockManager bm(5, 2);
  const auto one = bm.create(), two = bm.create();
  ASSERT_TRUE(bm.append(one, V{1, 2, 3, 4}));
  ASSERT_TRUE(bm.append(two, V{5, 6, 7, 8}));
  bm.commit(one);
  bm.commit(two);
  bm.release(one);  // released first: its tail [3,4] is the LRU head, then [1,2]
  bm.release(two);
  EXPECT_EQ(bm.n_cached(), 4);
  EXPECT_EQ(bm.n_free(), 1);

  const auto fresh = bm.create();
  ASSERT_TRUE(bm.append(fresh, V{42, 43}));  // takes the free block: nothing evicted
  EXPECT_EQ(bm.stats().evictions, 0);
  EXPECT_EQ(bm.n_cached(), 4);
  ASSERT_TRUE(bm.append(fresh, V{44}));      // no free block: evicts [3,4]
  EXPECT_EQ(bm.stats().evictions, 1);
  EXPECT_EQ(bm.n_cached(), 3);
  bm.validate();

  EXPECT_EQ(bm.match_prefix(bm.create(), V{1, 2, 3, 4, 0}), 2);  // [1,2] survived, [3,4] did not
  EXPECT_EQ(bm.match_prefix(bm.create(), V{5, 6, 7, 8, 0}), 4);
  EXPECT_FALSE(bm.append(bm.create(), V{1, 1, 1}));  // everything left is in use
  bm.validate();
}

TEST(BlockManager, DuplicateBlocksComputedConcurrentlyStayPrivate) {
  BlockManager bm(8, 4);
  const auto prompt = iota_tokens(8, 1);
  const auto a = bm.create(), b = bm.create();
  ASSERT_TRUE(bm.append(a, prompt));
  ASSERT_TRUE(bm.append(b, prompt));
  bm.commit(a);
  bm.commit(b);
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.n_cached(), 2);  // a's copies; b's went back to the free list
  EXPECT_EQ(bm.n_free(), 6);
  bm.validate();
}

TEST(BlockManager, RejectsBadArgumentsAndUnknownSequences) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
  BlockManager bm(4, 4);
  EXPECT_THROW(bm.release(123), Error);
  EXPECT_THROW(bm.append(123, V{1}), Error);
  EXPECT_THROW(bm.block_table(123), Error);
  const auto s = bm.create();
  EXPECT_THROW(bm.blocks_needed(s, -1), Error);
  bm.release(s);
  EXPECT_THROW(bm.commit(s), Error);
}

// Random admissions, growth, commits and releases over prompts that share
// prefixes. A shadow records, for every block, the token prefix whose K/V it
// would hold; every prefix hit must hand out blocks holding exactly the
// matched prefix (never a stale, evicted or partial one), and the pool's
// invariants must hold after every operation.
TEST(BlockManager, RandomWorkloadKeepsInvariantsAndReusesOnlyMatchingBlocks) {
  constexpr int32_t kBlocks = 48, kBs = 4;
  BlockManager bm(kBlocks, kBs);
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> stems(4);
  for (auto& s : stems)
    for (int i = 0; i < 12; ++i) s.push_back(static_cast<int32_t>(rng() % 5));  // small alphabet: collisions of blocks
  std::map<int32_t, std::vector<int32_t>> holds;  // block -> prefix it holds K/V for
  std::vector<BlockManager::SeqId> live;
  int64_t hits = 0;

  auto record = [&](BlockManager::SeqId s) {  // what the forward pass would write
    auto toks = bm.tokens(s);
    auto table = bm.block_table(s);
    for (size_t i = 0; i < table.size(); ++i) {
      const size_t end = std::min(toks.size(), (i + 1) * kBs);
      auto& h = holds[table[i]];
      if (bm.ref_count(table[i]) == 1 || h.size() < end) h.assign(toks.begin(), toks.begin() + end);
    }
  };

  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 3 || live.empty()) {  // admit a prompt: a stem's prefix plus a random tail
      std::vector<int32_t> p(stems[rng() % stems.size()]);
      p.resize(rng() % p.size() + 1);
      for (int i = static_cast<int>(rng() % 9); i > 0; --i) p.push_back(static_cast<int32_t>(rng() % 5));
      const auto s = bm.create();
      const int32_t m = bm.match_prefix(s, p);
      ASSERT_EQ(m % kBs, 0);
      ASSERT_LT(m, static_cast<int32_t>(p.size()));
      hits += m;
      auto table = bm.block_table(s);
      for (int32_t i = 0; i < m / kBs; ++i) {
        const auto& h = holds[table[i]];
        ASSERT_EQ(h.size(), static_cast<size_t>((i + 1) * kBs)) << "step " << step;
        ASSERT_TRUE(std::equal(h.begin(), h.end(), p.begin())) << "block " << table[i] << " holds another prefix";
      }
      if (bm.append(s, std::span(p).subspan(static_cast<size_t>(m)))) {
        record(s);
        if (rng() % 4) bm.commit(s);
        live.push_back(s);
      } else {
        bm.release(s);
      }
    } else if (op < 8) {  // decode a few tokens of a live sequence
      const auto s = live[rng() % live.size()];
      std::vector<int32_t> more(rng() % 3 + 1);
      for (auto& t : more) t = static_cast<int32_t>(rng() % 5);
      const int32_t before = bm.n_tokens(s);
      const bool can = bm.can_append(s, static_cast<int32_t>(more.size()));
      ASSERT_EQ(bm.append(s, more), can);
      ASSERT_EQ(bm.n_tokens(s), before + (can ? static_cast<int32_t>(more.size()) : 0));
      if (can) {
        record(s);
        bm.commit(s);
      }
    } else {  // a sequence finishes
      const size_t i = rng() % live.size();
      bm.release(live[i]);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    ASSERT_NO_THROW(bm.validate()) << "step " << step;
    ASSERT_EQ(bm.n_used() + bm.n_free() + bm.n_cached(), kBlocks);
  }
  EXPECT_GT(hits, 0);                 // the workload did exercise reuse
  EXPECT_GT(bm.stats().evictions, 0);  // and eviction
  for (auto s : live) bm.release(s);
  EXPECT_EQ(bm.n_used(), 0);
  bm.validate();
}

TEST(BlockManager, TruncateKeepsPrivatePartialBlocksAndDropsSharedOnes) {
  BlockManager bm(8, 4);
  const auto s = bm.create();
  ASSERT_TRUE(bm.append(s, iota_tokens(10, 1)));  // blocks: [1..4] [5..8] [9,10]
  bm.commit(s);                                   // the two full blocks are hashed
  EXPECT_EQ(bm.truncate(s, 9), 9);                // inside the private partial block: kept
  EXPECT_EQ(bm.n_tokens(s), 9);
  EXPECT_EQ(bm.block_table(s).size(), 3u);
  EXPECT_EQ(bm.truncate(s, 6), 4);                // inside a hashed block: dropped whole
  EXPECT_EQ(bm.block_table(s).size(), 1u);
  EXPECT_EQ(bm.truncate(s, 100), 4);              // clamped
  bm.validate();
  // The chain hash restarts after the kept block: re-appending the same
  // tokens and committing makes them findable again.
  ASSERT_TRUE(bm.append(s, iota_tokens(6, 5)));
  bm.commit(s);
  const auto t = bm.create();
  EXPECT_EQ(bm.match_prefix(t, iota_tokens(10, 1)), 8);
  bm.validate();
  bm.release(s);
  bm.release(t);
  EXPECT_EQ(bm.n_used(), 0);
  bm.validate();
}
