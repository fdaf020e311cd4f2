// `nexus --help`: its list of subcommands, and the docs that name them
// (README.md, docs/ARCHITECTURE.md) name the same ones, so a new subcommand
// cannot ship undocumented.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "support/test_support.h"

namespace {

using nexus::test::read_file;
using nexus::test::run_nexus;

// The names under "Subcommands:" in CLI11's help text.
std::set<std::string> help_subcommands(const std::string& help) {
  std::set<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_list = true;
    } else if (in_list) {
      std::smatch m;
      if (std::regex_search(line, m, std::regex(R"(^  ([a-z][a-z0-9-]*)\s)"))) names.insert(m[1]);
    }
  }
  return names;
}

// The `backticked` names after the first "subcommands" in a doc, up to the
// end of that sentence.
std::set<std::string> doc_subcommands(const std::string& doc) {
  const size_t at = doc.find("subcommands");
  if (at == std::string::npos) return {};
  std::smatch end;
  const std::string rest = doc.substr(at);
  const std::string part = std::regex_search(rest, end, std::regex(R"(\.\s)")) ? rest.substr(0, end.position(0)) : rest;
  std::set<std::string> names;
  const std::regex name(R"(`([a-z][a-z0-9-]*)`)");
  for (std::sregex_iterator it(part.begin(), part.end(), name), e; it != e; ++it) names.insert((*it)[1]);
  return names;
}

TEST(CliHelp, DocsListEverySubcommand) {
  const nexus::test::CommandResult r = run_nexus("--help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::set<std::string> cli = help_subcommands(r.out);
  for (const char* expected : {"serve", "run", "info", "tokenize", "bench", "bench-model", "synth"})
    EXPECT_TRUE(cli.count(expected)) << expected << " missing from:\n" << r.out;
  for (const char* doc : {"README.md", "docs/ARCHITECTURE.md"}) {
    const std::string text = read_file(std::string(NEXUS_SOURCE_DIR) + "/" + doc);
    ASSERT_FALSE(text.empty()) << doc;
    EXPECT_EQ(doc_subcommands(text), cli) << doc << "'s list of subcommands differs from `nexus --help`";
  }
}

}  // namespace
