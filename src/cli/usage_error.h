// nexus::cli::UsageError: a bad command line found after parsing.
#pragma once

#include "util/error.h"

namespace nexus::cli {

// A bad command line found after CLI11 has parsed it (a value only the
// model can check, an unsupported combination of options): main() prints
// it as CLI11 prints its own usage errors and exits 2. Failures of the work
// itself (a missing or malformed model, an unreachable server) throw Error
// and exit 1. The message names the option: "--n-prompt: 5000 exceeds ...".
class UsageError : public Error {
 public:
  using Error::Error;
};

}  // namespace nexus::cli
