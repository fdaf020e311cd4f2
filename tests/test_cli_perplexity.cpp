// `nexus perplexity` end to end on TinyLLama-v0: the printed perplexity equals
// one computed here by hand (LlamaContext::eval_all on each chunk, log-softmax
// in double), KL divergence against itself and against Q8_0, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "model/llama_context.h"
#include "support/loaded_model.h"
#include "support/test_support.h"

namespace {

using nexus::test::number_after;

using Result = nexus::test::CommandResult;
using nexus::test::run_nexus;
const auto quote = nexus::test::shell_quote;

// About 760 tokens of TinyStories-like prose: five chunks of 128.
const char* const kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball. "
    "One day, she saw a big dog under a tree. The dog was sad because it had lost its bone. Lily wanted to help "
    "the dog, so she looked everywhere for the bone. She looked under the slide, behind the swings and near the "
    "pond. At last she found the bone in the sand. The dog was very happy and wagged its tail. Lily and the dog "
    "became best friends, and they played together every day.\n"
    "Tom was a boy who liked to build things. He had a box of blocks, and every morning he built a tall tower. "
    "His sister Sue liked to knock the tower down. Tom was angry at first, but then he had an idea. He asked Sue "
    "to help him build a bigger tower. They worked together all afternoon. When the tower was done, it was the "
    "biggest tower they had ever seen. Mom took a picture of it, and Tom and Sue smiled.\n"
    "In a small house by the sea lived an old cat named Max. Max liked to sleep in the sun and watch the birds. "
    "One morning, a little bird fell out of its nest. Max did not chase the bird. Instead, he sat next to it and "
    "kept it warm until its mother came back. The mother bird sang a happy song to thank Max. From that day on, "
    "the birds were not afraid of Max anymore.\n"
    "Ben and Mia went to the farm with their dad. They saw cows, pigs and a big brown horse. The farmer let them "
    "feed the horse an apple. The horse was gentle and ate the apple from Mia's hand. Ben wanted to ride the "
    "horse, but he was a little scared. Dad held his hand, and Ben sat on the horse for a short ride. He was "
    "proud of himself. On the way home, they sang songs in the car.\n"
    "There was a tiny frog who wanted to see the world. He hopped out of his pond and went into the forest. He "
    "met a kind rabbit who showed him the tall trees and the bright flowers. Then he met a wise owl who told him "
    "stories about the moon. When night came, the frog missed his pond. The rabbit and the owl helped him find "
    "the way back. The frog was happy to be home, but he was glad he had gone on an adventure.\n"
    "Anna had a new blue dress. She wanted to show it to her friend Kim. On the way to Kim's house, it began to "
    "rain. Anna ran under a tree, but her dress got wet and muddy. She was sad and started to cry. Kim saw her "
    "from the window and came out with an umbrella. She gave Anna a towel and a warm cup of milk. Anna's dress "
    "was dirty, but she was happy to have such a good friend.\n"
    "Sam found a shiny stone in the garden. He thought it was magic. He made a wish to fly like a bird, but "
    "nothing happened. He made a wish for a big cake, and nothing happened again. Then his grandma called him "
    "for lunch, and there was a big cake on the table. Sam laughed and said the stone was magic after all. "
    "Grandma smiled and gave him the biggest piece.\n"
    "Every night, Lucy looked at the stars from her bed. She liked to count them, but there were too many. One "
    "night she saw a star move across the sky. Her dad said it was a shooting star and that she could make a "
    "wish. Lucy closed her eyes and wished that she could visit the stars one day. Then she fell asleep and "
    "dreamed of a big rocket that took her up into the sky.\n";

// The test text in a fresh temporary directory.
struct TextFile {
  explicit TextFile(const std::string& text) : dir(nexus::test::make_temp_dir()), path(dir + "/text.txt") {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TextFile() { std::filesystem::remove_all(dir); }
  std::string dir, path;
};

struct HandResult {
  double ppl = 0, uncertainty = 0;
  int n_chunks = 0;
};

// llama-perplexity's method written out plainly: BOS-prefixed tokens, chunks
// of n_ctx from an empty cache with BOS first, the second half scored.
HandResult hand_perplexity(const std::string& model_path, std::string text, int n_ctx, int max_chunks = 0) {
  nexus::test::LoadedModel& m = nexus::test::loaded_model(model_path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  const std::vector<int32_t> tokens = m.tok->encode(text, true);
  HandResult r;
  r.n_chunks = static_cast<int>(tokens.size()) / n_ctx;
  if (max_chunks > 0 && max_chunks < r.n_chunks) r.n_chunks = max_chunks;
  const size_t n_vocab = static_cast<size_t>(m.model.config().n_vocab);
  nexus::LlamaContext ctx(m.model, n_ctx, 1);
  double sum = 0, sum2 = 0;
  int count = 0;
  for (int c = 0; c < r.n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    chunk[0] = m.tok->bos_id();
    ctx.truncate(0);
    const std::span<const float> logits = ctx.eval_all(chunk);
    for (int j = n_ctx / 2; j <= n_ctx - 2; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * n_vocab;
      double max = row[0];
      for (size_t i = 0; i < n_vocab; ++i) max = std::max(max, double{row[i]});
      double z = 0;
      for (size_t i = 0; i < n_vocab; ++i) z += std::exp(double{row[i]} - max);
      const double nll = -(double{row[chunk[j + 1]]} - max - std::log(z));
      sum += nll;
      sum2 += nll * nll;
      ++count;
    }
  }
  const double mean = sum / count;
  r.ppl = std::exp(mean);
  r.uncertainty = r.ppl * std::sqrt((sum2 / count - mean * mean) / (count - 1));
  return r;
}

// The `[i]x.xxxx,` running estimates of stdout.
std::vector<double> running_estimates(const std::string& out) {
  std::vector<double> v;
  const std::regex re(R"(\[([0-9]+)\]([0-9.]+),)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), e; it != e; ++it) v.push_back(std::stod((*it)[2]));
  return v;
}

}  // namespace

TEST(CliPerplexity, MatchesPerplexityComputedByHand) {
  NEXUS_REQUIRE_SHARED(model, "TinyLLama-v0.F32.gguf");
  const TextFile text(kStory);
  const HandResult want = hand_perplexity(model, kStory, 128);
  ASSERT_GE(want.n_chunks, 3);
  const Result r = run_nexus("perplexity -m " + quote(model) + " -f " + quote(text.path) + " -c 128 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double ppl = number_after(r.out, "Final estimate: PPL = ");
  EXPECT_NEAR(ppl, want.ppl, 1e-4 * want.ppl) << r.out;
  EXPECT_NEAR(number_after(r.out, "+/- "), want.uncertainty, 1e-3 * want.uncertainty + 1e-5) << r.out;
  // One running estimate per chunk, the last one the final value.
  const std::vector<double> running = running_estimates(r.out);
  ASSERT_EQ(static_cast<int>(running.size()), want.n_chunks) << r.out;
  EXPECT_DOUBLE_EQ(running.back(), std::round(ppl * 1e4) / 1e4);
  EXPECT_NE(r.err.find(std::to_string(want.n_chunks) + " chunks of 128 tokens, the last 63 of each scored"),
            std::string::npos)
      << r.err;
}

// -b splits each chunk into several passes and --chunks stops early; the
// value is still the hand-computed one over those chunks.
TEST(CliPerplexity, BatchSizeAndChunkLimit) {
  NEXUS_REQUIRE_SHARED(model, "TinyLLama-v0.F32.gguf");
  const TextFile text(kStory);
  const HandResult want = hand_perplexity(model, kStory, 64, 3);
  const Result r = run_nexus("perplexity -m " + quote(model) + " -f " + quote(text.path) + " -c 64 -b 20 --chunks 3 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(number_after(r.out, "Final estimate: PPL = "), want.ppl, 1e-4 * want.ppl) << r.out;
  EXPECT_EQ(running_estimates(r.out).size(), 3u) << r.out;
}

// Without -c, 512 is lowered to TinyLLama's training context of 128, and said so.
TEST(CliPerplexity, DefaultContextIsLoweredToTheTrainingContext) {
  NEXUS_REQUIRE_SHARED(model, "TinyLLama-v0.F32.gguf");
  const TextFile text(kStory);
  const HandResult want = hand_perplexity(model, kStory, 128, 2);
  const Result r = run_nexus("perplexity -m " + quote(model) + " -f " + quote(text.path) + " --chunks 2 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("training context is 128 tokens; using -c 128"), std::string::npos) << r.err;
  EXPECT_NEAR(number_after(r.out, "Final estimate: PPL = "), want.ppl, 1e-4 * want.ppl) << r.out;
}

TEST(CliPerplexity, KlDivergenceOfAModelFromItselfIsZero) {
  NEXUS_REQUIRE_SHARED(model, "TinyLLama-v0.F32.gguf");
  const TextFile text(kStory);
  const Result r = run_nexus("perplexity -m " + quote(model) + " -f " + quote(text.path) +
                             " -c 128 --chunks 3 -t 1 --kl-divergence-base " + quote(model));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(number_after(r.out, "Mean    KLD:"), 0.0) << r.out;
  EXPECT_EQ(number_after(r.out, "Same top p:"), 100.0) << r.out;
  EXPECT_EQ(number_after(r.out, "RMS Δp    :"), 0.0) << r.out;
  EXPECT_EQ(number_after(r.out, "RMS Δlogit:"), 0.0) << r.out;
  EXPECT_EQ(number_after(r.out, "Mean ln(PPL(Q)/PPL(base))     :"), 0.0) << r.out;
  EXPECT_EQ(number_after(r.out, "Scored positions              :"), 3 * 63) << r.out;
}

// Q8_0 against its F32 original: a small positive KL divergence, nearly
// always the same top token; PPL(base) is the F32 model's perplexity.
TEST(CliPerplexity, KlDivergenceOfQ8_0FromF32IsSmall) {
  NEXUS_REQUIRE_SHARED(f32, "TinyLLama-v0.F32.gguf");
  NEXUS_REQUIRE_SHARED(q8, "TinyLLama-v0.Q8_0.gguf");
  const TextFile text(kStory);
  const HandResult base = hand_perplexity(f32, kStory, 128);
  const Result r = run_nexus("perplexity -m " + quote(q8) + " -f " + quote(text.path) +
                             " -c 128 -t 1 --kl-divergence-base " + quote(f32));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double kld = number_after(r.out, "Mean    KLD:");
  EXPECT_GT(kld, 0.0) << r.out;
  EXPECT_LT(kld, 0.01) << r.out;
  EXPECT_GT(number_after(r.out, "Same top p:"), 90.0) << r.out;
  EXPECT_GT(number_after(r.out, "RMS Δlogit:"), 0.0) << r.out;
  EXPECT_NEAR(number_after(r.out, "Mean PPL(base)                :"), base.ppl, 1e-4 * base.ppl) << r.out;
  const double ppl_q = number_after(r.out, "Final estimate: PPL = ");
  EXPECT_NEAR(ppl_q, base.ppl, 0.02 * base.ppl) << r.out;
}

TEST(CliPerplexity, BadInputsFailClearly) {
  NEXUS_REQUIRE_SHARED(model, "TinyLLama-v0.F32.gguf");
  NEXUS_REQUIRE_SHARED(other_vocab, "stories260K.gguf");
  const TextFile story(kStory), empty(""), short_text("Once upon a time, there was a little girl named Lily.\n");
  const std::string m = " -m " + quote(model);
  struct Case {
    std::string args;
    int exit_code;
    std::string says;
  };
  for (const Case& c : {
           Case{"perplexity" + m, 2, "--file is required"},
           Case{"perplexity" + m + " -f " + quote(empty.path) + " -c 128", 1, "is empty"},
           Case{"perplexity" + m + " -f " + quote(short_text.path) + " -c 64", 1, "needs at least 128 (2 x -c)"},
           Case{"perplexity" + m + " -f " + quote(story.dir + "/absent.txt"), 1, "text file not found"},
           Case{"perplexity" + m + " -f " + quote(story.dir), 1, "is a directory"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " -c 128 --kl-divergence-base " + quote(other_vocab), 1,
                "the base model's vocabulary has 512 tokens, the model's 32000: KL divergence needs both to use the "
                "same tokenizer"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " --kl-divergence-base /nonexistent/base.gguf", 1,
                "base model file not found: /nonexistent/base.gguf"},
           Case{"perplexity -m /nonexistent/model.gguf -f " + quote(story.path), 1,
                "model file not found: /nonexistent/model.gguf (pass one with -m PATH)"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " -c 256", 2,
                "-c: 256 exceeds the training context of 128 tokens"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " -c 2", 2, "--ctx-size: 2 is outside 4 to"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " -c abc", 2, "'abc' is not an integer"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " --chunks 0", 2, "--chunks: 0 is outside 1 to"},
           Case{"perplexity" + m + " -f " + quote(story.path) + " -b 0", 2, "--batch-size: 0 is outside 1 to"},
       }) {
    const Result r = run_nexus(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out.find("Final estimate"), std::string::npos) << c.args;
  }
}
