#include "cli/memory_arg.h"

#include <cmath>
#include <cstdlib>

#include "cli/usage_error.h"
#include "util/system_memory.h"

namespace nexus::cli {

int64_t parse_memory_arg(const std::string& text, const char* flag) {
  const auto bad = [&] {
    return UsageError(std::string(flag) + ": '" + text +
                      "' is not a size: use bytes (e.g. 536870912, 512M, 2G)"
                      " or a fraction of available RAM (e.g. 0.25)");
  };
  if (text.empty()) throw bad();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v) || v < 0) throw bad();
  const std::string suffix(end);
  if (text.find('.') != std::string::npos && suffix.empty()) {  // a fraction of RAM
    if (v <= 0 || v >= 1) throw bad();
    const int64_t ram = available_ram_bytes();
    if (ram <= 0) throw Error(std::string(flag) + ": the available RAM is unknown here; give a size in bytes");
    return static_cast<int64_t>(v * static_cast<double>(ram));
  }
  double scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1024.0;
  else if (suffix == "M" || suffix == "m") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) throw bad();
  const double bytes = v * scale;
  if (bytes > 9.0e18) throw bad();
  return static_cast<int64_t>(bytes);
}

}  // namespace nexus::cli
