// nexus::Error: the one exception type of libnexus.
//
// Loaders (GGUF, tokenizer, model) throw it with a message that names the
// problem and, where there is one, the file; the CLI prints what() and exits
// non-zero, the server turns it into an OpenAI-style JSON error.
#pragma once

#include <stdexcept>
#include <string>

namespace nexus {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace nexus
