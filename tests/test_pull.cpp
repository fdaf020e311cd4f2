// `nexus pull`, `models`, `rm` and `-m hf:...` against a local registry
// (tests/support/registry_server.h) that answers as Hugging Face and Ollama
// do: redirects, Range requests, a cut connection, a wrong SHA-256, two
// pulls of one file at once. The model served is the built-in model's file.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "assets/builtin_model.h"
#include "store/model_ref.h"
#include "store/progress.h"
#include "store/registry.h"
#include "support/child_process.h"
#include "support/http_client.h"
#include "support/registry_server.h"
#include "support/test_support.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using nexus::test::CommandResult;
using nexus::test::RegistryServer;
using nexus::test::run_nexus;

const std::string kFile = "stories260K-F16.gguf";

std::string model_bytes() {
  const auto b = nexus::builtin_model_bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Pull : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = nexus::test::make_temp_dir();
    setenv("NEXUS_HOME", home_.c_str(), 1);
    setenv("HF_ENDPOINT", registry_.url().c_str(), 1);
    setenv("NEXUS_OLLAMA_REGISTRY", registry_.url().c_str(), 1);
    unsetenv("HF_TOKEN");
    registry_.add_hf_file("test/stories", "README.md", "# stories\n");
    registry_.add_hf_file("test/stories", kFile, model_bytes());
    registry_.add_hf_file("test/stories", "stories260K-Q8_0.gguf", "not this one");
  }
  void TearDown() override {
    unsetenv("NEXUS_HOME");
    unsetenv("HF_ENDPOINT");
    unsetenv("NEXUS_OLLAMA_REGISTRY");
    unsetenv("HF_TOKEN");
    fs::remove_all(home_);
  }
  std::string stored(const std::string& rel) const { return home_ + "/models/" + rel; }
  std::string hf_path() const { return stored("hf/test/stories/" + kFile); }
  // Whatever the pull left in the model's folder.
  std::vector<std::string> files_in(const std::string& dir) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  RegistryServer registry_;
  std::string home_;
};

}  // namespace

TEST(ModelRef, ParsesBothRegistriesAndRefusesEscapes) {
  using nexus::store::parse_model_ref;
  auto r = parse_model_ref("hf:bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M");
  EXPECT_EQ(r.owner, "bartowski");
  EXPECT_EQ(r.repo, "Llama-3.2-1B-Instruct-GGUF");
  EXPECT_EQ(r.quant, "Q4_K_M");
  r = parse_model_ref("hf:o/r/sub/x.gguf");
  EXPECT_EQ(r.file, "sub/x.gguf");
  r = parse_model_ref("ollama:llama3.2");
  EXPECT_EQ(r.name, "llama3.2");
  EXPECT_EQ(r.tag, "latest");
  r = parse_model_ref("ollama:user/model:7b");
  EXPECT_EQ(r.name, "user/model");
  EXPECT_EQ(r.tag, "7b");
  for (const char* bad : {"hf:", "hf:owner", "hf:o/..", "hf:o/r/../../x.gguf", "hf:o/r/x.bin", "hf:o/r:", "ollama:",
                          "ollama:a:b/c", "ollama:../x", "hf:o/r:Q4 K"})
    EXPECT_THROW(parse_model_ref(bad), nexus::Error) << bad;
}

TEST(ModelRef, QuantTagsMatchWholeWords) {
  using nexus::store::file_has_quant;
  EXPECT_TRUE(file_has_quant("Llama-3.2-1B-Q4_K_M.gguf", "q4_k_m"));
  EXPECT_FALSE(file_has_quant("Llama-3.2-1B-Q4_K_M.gguf", "Q4_K"));
  EXPECT_TRUE(file_has_quant("model.Q8_0.gguf", "Q8_0"));
  EXPECT_FALSE(file_has_quant("model-IQ4_XS.gguf", "Q4_XS"));
}

TEST(ModelRef, PicksTheFileForATag) {
  using nexus::store::parse_model_ref;
  using nexus::store::pick_hf_file;
  const std::vector<std::string> files = {"README.md", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-Q8_0.gguf",
                                          "big-Q6_K-00001-of-00002.gguf", "big-Q6_K-00002-of-00002.gguf"};
  EXPECT_EQ(pick_hf_file(parse_model_ref("hf:o/r:Q8_0"), files), "m-Q8_0.gguf");  // not the vision projector
  EXPECT_EQ(pick_hf_file(parse_model_ref("hf:o/r"), files), "m-Q4_K_M.gguf");     // the default tag
  EXPECT_EQ(pick_hf_file(parse_model_ref("hf:o/r/m-Q8_0.gguf"), files), "m-Q8_0.gguf");
  try {
    pick_hf_file(parse_model_ref("hf:o/r:Q2_K"), files);
    ADD_FAILURE() << "no Q2_K file";
  } catch (const nexus::Error& e) {
    EXPECT_TRUE(contains(e.what(), "no GGUF file for Q2_K")) << e.what();
    EXPECT_TRUE(contains(e.what(), "m-Q4_K_M.gguf")) << e.what();  // lists what there is
  }
  try {
    pick_hf_file(parse_model_ref("hf:o/r:Q6_K"), files);
    ADD_FAILURE() << "split file";
  } catch (const nexus::Error& e) {
    EXPECT_TRUE(contains(e.what(), "split into 2 parts")) << e.what();
  }
}

// A complete pull through the resolve redirect; the store lists it with the
// GGUF's type and architecture; -m then finds it without the registry; rm
// removes it.
TEST_F(Pull, HuggingFaceCompletePullListRunRemove) {
  const CommandResult r = run_nexus("pull hf:test/stories:F16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, hf_path() + "\n");
  EXPECT_EQ(nexus::test::read_file(hf_path()), model_bytes());
  EXPECT_TRUE(contains(r.err, "verified")) << r.err;
  ASSERT_EQ(registry_.requests_to("/test/stories/resolve/main/" + kFile).size(), 1u);
  ASSERT_EQ(registry_.requests_to("/cdn/").size(), 1u);  // the redirect was followed
  EXPECT_EQ(files_in(stored("hf/test/stories")), (std::vector<std::string>{kFile, kFile + ".lock"}));

  const CommandResult again = run_nexus("pull hf:test/stories:F16");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.err, "in the store already")) << again.err;
  EXPECT_EQ(registry_.requests_to("/cdn/").size(), 1u);

  const CommandResult list = run_nexus("models");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(contains(list.out, "hf:test/stories/" + kFile)) << list.out;
  EXPECT_TRUE(contains(list.out, "F16")) << list.out;
  EXPECT_TRUE(contains(list.out, "llama")) << list.out;

  const size_t before = registry_.requests().size();
  const CommandResult run = run_nexus("run -m hf:test/stories:F16 --temp 0 -n 8 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.out.empty());
  EXPECT_EQ(registry_.requests().size(), before) << "a stored model needs no registry";

  const CommandResult rm = run_nexus("rm hf:test/stories/" + kFile);
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_FALSE(fs::exists(hf_path()));
  EXPECT_FALSE(contains(run_nexus("models").out, "hf:test")) << "removed";
  const CommandResult rm_again = run_nexus("rm hf:test/stories/" + kFile);
  EXPECT_EQ(rm_again.exit_code, 1);
  EXPECT_TRUE(contains(rm_again.err, "no model hf:test/stories/" + kFile)) << rm_again.err;
}

// The connection is cut after 100000 bytes: the pull resumes with a Range
// request from there and ends verified.
TEST_F(Pull, ResumesAfterACutConnection) {
  registry_.cut_next_downloads(1, 100000);
  const CommandResult r = run_nexus("pull hf:test/stories:F16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "connection lost at byte 100000")) << r.err;
  const auto cdn = registry_.requests_to("/cdn/");
  ASSERT_EQ(cdn.size(), 2u);
  EXPECT_EQ(cdn[0].range, "");
  EXPECT_EQ(cdn[1].range, "bytes=100000-");
  EXPECT_EQ(nexus::test::read_file(hf_path()), model_bytes());
}

// Every attempt cut: the pull fails, keeps the partial file (never the
// complete name), and the next pull resumes it.
TEST_F(Pull, AnInterruptedPullResumesNextTime) {
  registry_.cut_next_downloads(5, 50000);
  const CommandResult cut = run_nexus("pull hf:test/stories:F16");
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_TRUE(contains(cut.err, "run the pull again to resume")) << cut.err;
  EXPECT_FALSE(fs::exists(hf_path()));
  ASSERT_EQ(fs::file_size(hf_path() + ".partial"), 250000u);
  EXPECT_TRUE(contains(run_nexus("models").out, "NAME")) ;
  EXPECT_FALSE(contains(run_nexus("models").out, "hf:test")) << "a partial file is not a model";

  const CommandResult r = run_nexus("pull hf:test/stories:F16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(registry_.requests_to("/cdn/").back().range, "bytes=250000-");
  EXPECT_EQ(nexus::test::read_file(hf_path()), model_bytes());
  EXPECT_FALSE(fs::exists(hf_path() + ".partial"));
}

// The registry states another SHA-256: refused, and nothing is left in the store.
TEST_F(Pull, WrongChecksumIsRefusedAndNothingKept) {
  registry_.add_hf_file("test/bad", kFile, model_bytes(), std::string(64, 'a'));
  const CommandResult r = run_nexus("pull hf:test/bad");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "SHA-256 mismatch: the registry states " + std::string(64, 'a'))) << r.err;
  EXPECT_TRUE(contains(r.err, "discarded")) << r.err;
  EXPECT_EQ(files_in(stored("hf/test/bad")), (std::vector<std::string>{kFile + ".lock"}));
  EXPECT_FALSE(contains(run_nexus("models").out, "hf:test/bad"));
  const CommandResult serve = run_nexus("run -m hf:test/bad -n 4 -p hi");
  EXPECT_EQ(serve.exit_code, 1) << "an unverified file is never used";
}

// Two pulls of one file at once: one downloads, the other waits on the lock
// and finds the file there; the bytes cross the network once.
TEST_F(Pull, ConcurrentPullsOfOneFileDownloadOnce) {
  registry_.set_chunk_delay(std::chrono::milliseconds(30));  // 37 chunks, over 1 s: the pulls overlap
  auto a = std::async(std::launch::async, [] { return run_nexus("pull hf:test/stories:F16"); });
  auto b = std::async(std::launch::async, [] { return run_nexus("pull hf:test/stories/" + kFile); });
  const CommandResult ra = a.get(), rb = b.get();
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(ra.out, rb.out);
  EXPECT_EQ(registry_.requests_to("/cdn/").size(), 1u);
  EXPECT_TRUE(contains(ra.err + rb.err, "in the store already")) << ra.err << rb.err;
  EXPECT_TRUE(contains(ra.err + rb.err, "waiting for another pull")) << ra.err << rb.err;
  EXPECT_EQ(nexus::test::read_file(hf_path()), model_bytes());
}

TEST_F(Pull, OllamaManifestAndBlob) {
  registry_.add_ollama_model("library/tiny", "latest", model_bytes());
  const CommandResult r = run_nexus("pull ollama:tiny");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string path = stored("ollama/library/tiny/latest.gguf");
  EXPECT_EQ(r.out, path + "\n");
  EXPECT_EQ(nexus::test::read_file(path), model_bytes());
  EXPECT_EQ(registry_.requests_to("/v2/library/tiny/manifests/latest").size(), 1u);
  EXPECT_EQ(registry_.requests_to("/v2/library/tiny/blobs/sha256:").size(), 1u);
  EXPECT_EQ(registry_.requests_to("/cdn/").size(), 1u);
  EXPECT_TRUE(contains(run_nexus("models").out, "ollama:tiny:latest"));
  const CommandResult missing = run_nexus("pull ollama:tiny:7b");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "HTTP 404")) << missing.err;
}

TEST_F(Pull, HfTokenIsSentAsBearer) {
  setenv("HF_TOKEN", "hf_secret", 1);
  ASSERT_EQ(run_nexus("pull hf:test/stories:F16").exit_code, 0);
  const auto tree = registry_.requests_to("/api/models/test/stories/tree/main");
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_EQ(tree[0].authorization, "Bearer hf_secret");
}

TEST_F(Pull, OfflineIsAClearError) {
  setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);
  const CommandResult r = run_nexus("pull hf:test/stories:F16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "cannot reach 127.0.0.1:1")) << r.err;
  EXPECT_TRUE(contains(r.err, "offline?")) << r.err;
  const CommandResult missing = run_nexus("pull hf:test/absent");
  EXPECT_EQ(missing.exit_code, 1);
}

// `nexus serve -m hf:...` pulls what is missing, then serves it.
TEST_F(Pull, ServePullsThenServes) {
  nexus::test::ChildProcess proc(
      {nexus::test::nexus_binary(), "serve", "-m", "hf:test/stories:F16", "--port", "0", "--threads", "1"});
  const auto line = proc.read_line();
  ASSERT_TRUE(line && line->rfind("listening on http://127.0.0.1:", 0) == 0) << line.value_or("(no line)");
  EXPECT_EQ(nexus::test::read_file(hf_path()), model_bytes());
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  nexus::test::HttpClient c("127.0.0.1", port);
  const auto models = c.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(nlohmann::json::parse(models.body)["data"][0]["id"], "stories260K-F16");
  const auto done = c.post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})");
  EXPECT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(proc.stop(SIGTERM), 0);
}

TEST(Progress, LineShowsBytesRateAndEta) {
  const uint64_t mib = 1 << 20;
  const std::string bar = nexus::store::Progress::line(50 * mib, 100 * mib, 10.0 * mib, true);
  EXPECT_TRUE(contains(bar, "50.0/100.0 MiB  50% [============>")) << bar;
  EXPECT_TRUE(contains(bar, "10.0 MiB/s  ETA 5s")) << bar;
  const std::string plain = nexus::store::Progress::line(90 * mib, 100 * mib, 1.0 * mib / 60, false);
  EXPECT_FALSE(contains(plain, "[")) << plain;
  EXPECT_TRUE(contains(plain, "ETA 10m00s")) << plain;
}
