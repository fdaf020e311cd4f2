#include "support/test_support.h"

#include <cmath>
#include <cstdlib>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <regex>

namespace nexus::test {

std::string shared_model_path(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(NEXUS_SOURCE_DIR) / ".." / "shared" / "models" / rel;
  return std::filesystem::weakly_canonical(p).string();
}

bool require_file(const std::string& path) {
  if (std::filesystem::exists(path)) return true;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") {
    ADD_FAILURE() << "shared file missing under CI=true: " << path;
  }
  return false;
}

std::string nexus_binary() { return NEXUS_BINARY; }

std::string make_temp_dir() {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("nexus-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CommandResult run_nexus(const std::string& args, const std::string& stdin_text) {
  const std::string dir = make_temp_dir();
  const std::string out = dir + "/out", err = dir + "/err", in = dir + "/in";
  std::ofstream(in) << stdin_text;
  const std::string cmd = shell_quote(nexus_binary()) + " " + args + " <" + shell_quote(in) + " >" + shell_quote(out) +
                          " 2>" + shell_quote(err);
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove_all(dir);
  return r;
}

double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return std::nan("");
  std::smatch m;
  const std::string rest = text.substr(at + label.size());
  if (!std::regex_search(rest, m, std::regex(R"([-+]?[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?)"))) return std::nan("");
  return std::stod(m[0]);
}

}  // namespace nexus::test
