// StopMatcher: stop strings found across arbitrary delta boundaries.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sampling/stop_matcher.h"

using nexus::StopMatcher;

namespace {

struct Outcome {
  std::string text;  // everything emitted, flush included
  bool stopped = false;
  std::string stop;
};

Outcome run(std::vector<std::string> stops, const std::vector<std::string>& deltas) {
  StopMatcher m(std::move(stops));
  Outcome o;
  for (const std::string& d : deltas) {
    auto r = m.feed(d);
    o.text += r.text;
    if (r.stopped) {
      o.stopped = true;
      o.stop = r.stop;
    }
  }
  o.text += m.flush();
  return o;
}

}  // namespace

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.feed("Hello").text, "Hello");
  EXPECT_EQ(m.feed(" world").text, " world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  Outcome o = run({""}, {"abc", "def"});
  EXPECT_EQ(o.text, "abcdef");
  EXPECT_FALSE(o.stopped);
}

TEST(StopMatcher, StopInsideOneDelta) {
  StopMatcher m({"END"});
  auto r = m.feed("Hello END world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_EQ(r.stop, "END");
  auto after = m.feed("more");
  EXPECT_TRUE(after.stopped);
  EXPECT_EQ(after.text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopSplitAcrossManyDeltas) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.feed("Hel").text, "Hel");
  EXPECT_EQ(m.feed("lo E").text, "lo ");  // "E" might start END
  EXPECT_EQ(m.held_bytes(), 1u);
  auto r = m.feed("N");
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.stopped);
  r = m.feed("D and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.feed("abc E").text, "abc ");
  EXPECT_EQ(m.feed("N").text, "");
  EXPECT_EQ(m.feed("ough").text, "ENough");
  EXPECT_EQ(m.feed(" E").text, " ");
  EXPECT_EQ(m.flush(), "E");  // the stream ended: held text is not a stop
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, SelfOverlappingStop) {
  // "aaab" contains "aab" starting at 1: only the first "a" is output.
  Outcome o = run({"aab"}, {"a", "a", "a", "b", "c"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "a");
}

TEST(StopMatcher, EarliestMatchWins) {
  Outcome o = run({"b", "ab"}, {"xab"});
  EXPECT_EQ(o.text, "x");
  EXPECT_EQ(o.stop, "ab");
  Outcome o2 = run({"long stop", "op"}, {"a long st", "op here"});
  EXPECT_EQ(o2.text, "a ");
  EXPECT_EQ(o2.stop, "long stop");
}

TEST(StopMatcher, MultiByteStop) {
  Outcome o = run({"é!"}, {"caf", "é", "!", " next"});
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "caf");
  Outcome o2 = run({"é!"}, {"caf", "é", "?"});
  EXPECT_FALSE(o2.stopped);
  EXPECT_EQ(o2.text, "café?");
}

TEST(StopMatcher, RandomSplitsAgreeWithFind) {
  // Property: for any split of the text into deltas, the output is the text
  // up to the first occurrence of the earliest stop (or all of it).
  std::mt19937 rng(12345);
  const std::vector<std::string> stops = {"\n\nUser:", "abab", "xyz"};
  const std::string alphabet = "abxyz\nUser: ";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    const std::string expected = text.substr(0, cut);

    std::vector<std::string> deltas;
    for (size_t i = 0; i < text.size();) {
      size_t n = 1 + rng() % 4;
      deltas.push_back(text.substr(i, n));
      i += n;
    }
    Outcome o = run(stops, deltas);
    ASSERT_EQ(o.text, expected) << "text: " << text;
    ASSERT_EQ(o.stopped, cut != std::string::npos) << "text: " << text;
  }
}
