// The built-in default model: assets/models/stories260K-F16.gguf, embedded in
// the binary at build time (builtin_model.cpp, an assembler .incbin), so
// every command has a model with no file beside the binary. Licence and
// provenance: assets/models/README.md.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace nexus {

// The model's id: what `nexus serve` names in /v1/models and accepts in "model".
inline constexpr std::string_view kBuiltinModelName = "stories260K";

// The GGUF file's bytes, in the binary's read-only data (page-aligned, as a
// mapping would be; never copied): parse them with
// GgufFile(builtin_model_bytes(), name), which bounds-checks them as it does
// a file. Valid for the life of the process.
std::span<const uint8_t> builtin_model_bytes();

}  // namespace nexus
