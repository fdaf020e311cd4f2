// The built-in default model (assets/models/stories260K-F16.gguf embedded in
// the binary): parsed in place from the binary's bytes, and what `nexus run`,
// `tokenize`, `info` and `serve` use with no -m. The CLI tests run a copy of
// the binary from a temporary folder, with HOME and the working directory
// there, so no file of the repository or ../shared can be what they find.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "assets/builtin_model.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "support/child_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;
using nexus::test::CommandResult;
using nexus::test::read_file;
using nexus::test::shell_quote;

const std::string kAsset = std::string(NEXUS_SOURCE_DIR) + "/assets/models/stories260K-F16.gguf";

// A folder holding only a copy of the nexus binary.
struct LoneBinary {
  LoneBinary() : dir(nexus::test::make_temp_dir()), binary(dir + "/nexus") {
    fs::copy_file(nexus::test::nexus_binary(), binary);
  }
  ~LoneBinary() { fs::remove_all(dir); }

  // `nexus ARGS` run from `dir`, HOME and NEXUS_HOME there too.
  CommandResult run(const std::string& args) const {
    const std::string out = dir + "/out", err = dir + "/err";
    const std::string cmd = "cd " + shell_quote(dir) + " && HOME=" + shell_quote(dir) + " NEXUS_HOME=" +
                            shell_quote(dir + "/store") + " ./nexus " + args + " </dev/null >out 2>err";
    const int status = std::system(cmd.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  std::string dir, binary;
};

}  // namespace

// The embedded bytes are the asset's bytes, page-aligned, and parse as the
// model they are without a copy.
TEST(BuiltinModel, BytesAreTheAssetAndParseInPlace) {
  const std::span<const uint8_t> bytes = nexus::builtin_model_bytes();
  const std::string asset = read_file(kAsset);
  ASSERT_FALSE(asset.empty()) << kAsset;
  ASSERT_EQ(bytes.size(), asset.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), asset);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 4096, 0u);

  nexus::GgufFile gguf(bytes, "stories260K (built-in)");
  EXPECT_EQ(gguf.path(), "stories260K (built-in)");
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  ASSERT_FALSE(gguf.tensors().empty());
  for (const nexus::TensorInfo& t : gguf.tensors()) {
    EXPECT_GE(t.data, bytes.data()) << t.name;  // zero-copy: every tensor points into the binary
    EXPECT_LE(t.data + t.n_bytes, bytes.data() + bytes.size()) << t.name;
  }
  const nexus::LlamaModel model(gguf);
  EXPECT_EQ(model.config().n_embd, 64);
  EXPECT_EQ(model.config().n_layer, 5);
}

// `nexus run` with no -m, nothing beside the binary: it generates, and the
// text is the asset file's own greedy continuation.
TEST(BuiltinModel, RunWithoutModelUsesIt) {
  LoneBinary lone;
  const CommandResult r = lone.run("run --temp 0 -n 24 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 20u) << r.out;
  const CommandResult from_file = lone.run("run -m " + shell_quote(kAsset) + " --temp 0 -n 24 -t 1 -p 'Once upon a time'");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(r.out, from_file.out);
  EXPECT_FALSE(fs::exists(lone.dir + "/store")) << "the built-in model needs no store";
}

TEST(BuiltinModel, TokenizeAndInfoWithoutModel) {
  LoneBinary lone;
  const CommandResult ids = lone.run("tokenize --ids-only 'Hello world'");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  const CommandResult ids_file = lone.run("tokenize -m " + shell_quote(kAsset) + " --ids-only 'Hello world'");
  EXPECT_EQ(ids.out, ids_file.out);
  EXPECT_EQ(ids.out.rfind("1 ", 0), 0u) << ids.out;  // BOS first

  const CommandResult info = lone.run("info --no-tensors");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("stories260K (built-in)"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("F16"), std::string::npos) << info.out;
}

// -m still overrides: a missing file is named, not replaced by the built-in.
TEST(BuiltinModel, ExplicitModelStillOverrides) {
  LoneBinary lone;
  const CommandResult r = lone.run("run -m absent.gguf -n 4 -p hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model file not found: absent.gguf"), std::string::npos) << r.err;
}

// `nexus serve` with no -m serves it: /v1/models names it and a chat
// completion answers.
TEST(BuiltinModel, ServeWithoutModelAnswersChat) {
  LoneBinary lone;
  nexus::test::ChildProcess proc({"/usr/bin/env", "-C", lone.dir, "HOME=" + lone.dir,
                                  "NEXUS_HOME=" + lone.dir + "/store", lone.binary, "serve", "--port", "0",
                                  "--threads", "1"});
  const auto line = proc.read_line();
  ASSERT_TRUE(line && line->rfind("listening on http://127.0.0.1:", 0) == 0) << line.value_or("(no line)");
  const uint16_t port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));

  nexus::test::HttpClient c("127.0.0.1", port);
  const auto models = c.get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const auto list = nlohmann::json::parse(models.body);
  ASSERT_EQ(list.at("data").size(), 1u) << models.body;
  EXPECT_EQ(list["data"][0].at("id"), "stories260K");

  const auto chat = c.post("/v1/chat/completions",
                           R"({"model": "stories260K", "messages": [{"role": "user", "content": "Tell me a story"}],
                               "max_tokens": 16, "temperature": 0})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  const auto body = nlohmann::json::parse(chat.body);
  EXPECT_FALSE(body["choices"][0]["message"]["content"].get<std::string>().empty()) << chat.body;
  EXPECT_GT(body["usage"]["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(proc.stop(SIGTERM), 0);
}
