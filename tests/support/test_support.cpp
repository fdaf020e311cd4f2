#include "support/test_support.h"

#include <cstdlib>
#include <filesystem>
#include <random>

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

}  // namespace nexus::test
