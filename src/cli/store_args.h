// What `nexus pull`, `models`, `rm` and `-m hf:...` share: the store's
// options from the environment (docs/models.md).
#pragma once

#include <cstdio>
#include <string>

#include "store/pull.h"

namespace nexus::cli {

// Download events as "nexus: ..." lines on stderr, the progress line where
// stderr is a terminal (else a line every 5 s).
inline store::DownloadOptions download_options() {
  store::DownloadOptions o;
  o.log = [](const std::string& line) { std::fprintf(stderr, "nexus: %s\n", line.c_str()); };
  return o;
}

}  // namespace nexus::cli
