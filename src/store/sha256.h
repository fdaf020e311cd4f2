// SHA-256 of a file (FIPS 180-4, OpenSSL's EVP implementation).
#pragma once

#include <string>

namespace nexus::store {

// Lower-case hex digest (64 characters) of the whole file. Throws
// nexus::Error when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace nexus::store
