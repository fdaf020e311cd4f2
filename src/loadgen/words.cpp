#include "loadgen/words.h"

#include <array>
#include <string_view>

namespace nexus::loadgen {

namespace {

// Everyday words that a small story model (TinyStories) has seen too.
constexpr std::array<std::string_view, 160> kWords = {
    "the",   "a",     "and",   "little", "big",    "dog",    "cat",    "bird",  "tree",  "house",
    "park",  "ball",  "girl",  "boy",    "mom",    "dad",    "friend", "happy", "sad",   "red",
    "blue",  "green", "sun",   "moon",   "star",   "sky",    "water",  "fish",  "boat",  "car",
    "road",  "hill",  "river", "flower", "garden", "apple",  "cake",   "milk",  "bread", "toy",
    "box",   "door",  "room",  "bed",    "book",   "story",  "day",    "night", "morning", "time",
    "once",  "upon",  "went",  "saw",    "found",  "made",   "played", "ran",   "jumped", "said",
    "looked", "wanted", "liked", "loved", "helped", "smiled", "laughed", "sang", "walked", "talked",
    "was",   "is",    "had",   "has",    "did",    "could",  "would",  "will",  "can",   "very",
    "so",    "then",  "but",   "with",   "to",     "of",     "in",     "on",    "at",    "for",
    "from",  "up",    "down",  "out",    "over",   "under",  "near",   "far",   "all",   "some",
    "one",   "two",   "three", "many",   "new",    "old",    "good",   "nice",  "kind",  "brave",
    "small", "soft",  "warm",  "cold",   "fast",   "slow",   "loud",   "quiet", "funny", "shiny",
    "he",    "she",   "they",  "we",     "you",    "it",     "his",    "her",   "their", "our",
    "lily",  "tom",   "ben",   "sue",    "tim",    "max",    "anna",   "sam",   "mia",   "leo",
    "hat",   "cup",   "shoe",  "kite",   "drum",   "bike",   "train",  "rock",  "stick", "leaf",
    "snow",  "rain",  "wind",  "cloud",  "sea",    "sand",   "shell",  "bug",   "frog",  "bear",
};

}  // namespace

std::string random_words(int32_t n_words, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  std::string out;
  out.reserve(static_cast<size_t>(n_words > 0 ? n_words : 1) * 6);
  for (int32_t i = 0; i < (n_words > 0 ? n_words : 1); ++i) {
    if (i) out += ' ';
    out += kWords[pick(rng)];
  }
  return out;
}

size_t word_list_size() { return kWords.size(); }

}  // namespace nexus::loadgen
