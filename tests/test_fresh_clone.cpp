// Acceptance (issue 23): on a fresh clone with no ../shared beside it, the
// README's first command serves the built-in model and a chat completion
// answers.
//
// The test copies the repository's tracked files (what a clone has: the
// working tree's tracked content, `git stash create`, through `git archive`)
// into a temporary folder with nothing beside it, checks that every file the
// build embeds is in the copy, puts the `nexus` binary built from these
// sources where the README's command expects it (a full build of the copy
// would take minutes on 2 cores), runs that command from the copy with a
// fresh HOME, and sends a chat completion and GET /.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
namespace fs = std::filesystem;

namespace {

// The last command of the README's first ```sh block (the one after the last "&&").
std::string readme_serve_command() {
  const std::string readme = read_file(std::string(NEXUS_SOURCE_DIR) + "/README.md");
  const size_t open = readme.find("```sh\n");
  if (open == std::string::npos) return "";
  const size_t close = readme.find("\n```", open + 6);
  std::string block = readme.substr(open + 6, close - open - 6);
  const size_t amp = block.rfind("&& ");
  if (amp != std::string::npos) block = block.substr(amp + 3);
  while (!block.empty() && (block.back() == '\n' || block.back() == ' ')) block.pop_back();
  return block;
}

int sh(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST(FreshClone, ReadmeFirstCommandServesTheBuiltinModel) {
  const std::string command = readme_serve_command();
  ASSERT_EQ(command, "./build/release/src/nexus serve") << "the README's first command changed; update this test";

  const std::string src = NEXUS_SOURCE_DIR;
  if (!fs::exists(fs::path(src) / ".git")) {
    if (std::getenv("CI") && std::string(std::getenv("CI")) == "true") FAIL() << src << " is not a git checkout";
    GTEST_SKIP() << src << " is not a git checkout: nothing to clone";
  }
  const std::string tmp = make_temp_dir();
  const std::string dst = tmp + "/nexus";
  fs::create_directories(dst);
  // `git stash create` records uncommitted edits as a commit object; it needs
  // an identity, which a CI clone may not have configured. On a clean tree
  // (CI's clone) it prints nothing and exits 1: HEAD is then the tree.
  const std::string log = tmp + "/archive.log";
  ASSERT_EQ(sh("{ cd " + shell_quote(src) +
               " && { c=$(git -c user.name=nexus-test -c user.email=test@localhost stash create) || [ $? -eq 1 ]; }"
               " && git archive --format=tar ${c:-HEAD} | tar -x -C " +
               shell_quote(dst) + "; } >" + shell_quote(log) + " 2>&1"),
            0)
      << read_file(log);
  ASSERT_FALSE(fs::exists(tmp + "/shared"));

  // What the build embeds must be tracked, byte for byte, or a clone's build fails.
  for (const char* rel : {"assets/models/stories260K-F16.gguf", "assets/web/index.html", "assets/web/style.css",
                          "assets/web/chat.js", "assets/web/dashboard.js", "assets/web/chart.js",
                          "assets/web/auth.js", "assets/web/sdk/index.js", "assets/web/sdk/completions.js",
                          "assets/web/sdk/http.js", "assets/web/sdk/errors.js", "assets/web/sdk/retry.js",
                          "assets/web/sdk/sse.js", "assets/web/sdk/realtime.js"}) {
    SCOPED_TRACE(rel);
    ASSERT_TRUE(fs::exists(dst + "/" + rel));
    EXPECT_EQ(read_file(dst + "/" + rel), read_file(src + "/" + rel));
  }

  fs::create_directories(dst + "/build/release/src");
  fs::copy_file(nexus_binary(), dst + "/build/release/src/nexus");
  fs::create_directories(tmp + "/home");
  ChildProcess serve({"/bin/sh", "-c",
                      "cd " + shell_quote(dst) + " && HOME=" + shell_quote(tmp + "/home") + " exec " + command +
                          " --port 0 --threads 1"});
  const auto line = serve.read_line();
  ASSERT_TRUE(line.has_value()) << "no startup line";
  std::smatch m;
  ASSERT_TRUE(std::regex_match(*line, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))"))) << *line;
  HttpClient c("127.0.0.1", static_cast<uint16_t>(std::stoi(m[1])));
  const HttpResponse r = c.post(
      "/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":16,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["model"], "stories260K");
  EXPECT_FALSE(j["choices"][0]["message"]["content"].get<std::string>().empty()) << r.body;
  const HttpResponse page = c.get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(serve.stop(SIGTERM), 0);
  fs::remove_all(tmp);
}
