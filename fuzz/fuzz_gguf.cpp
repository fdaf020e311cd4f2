// libFuzzer target for the GGUF parser: any byte string must either parse or
// throw nexus::Error; never crash, hang, leak or read out of bounds (run under
// ASan/UBSan). After a successful parse everything the parser produced is
// touched, so a wrong bounds check shows up as an ASan report.
// How to run it: docs/fuzzing.md.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace {

volatile uint64_t g_sink;  // keeps the reads below from being optimised away

void touch(const nexus::GgufFile& f) {
  uint64_t acc = f.version() + f.alignment();
  for (const auto& [key, value] : f.metadata()) {
    acc += gguf_value_to_string(value).size();
    acc += gguf_value_to_string(value, 1000000).size();  // every array element
    // Every typed getter, matching type or not: must return or throw nexus::Error.
    try { acc += f.get_string(key).has_value(); } catch (const nexus::Error&) {}
    try { acc += static_cast<uint64_t>(f.get_int(key).value_or(0)); } catch (const nexus::Error&) {}
    try { acc += f.get_float(key).has_value(); } catch (const nexus::Error&) {}
    try { acc += f.get_bool(key).value_or(false); } catch (const nexus::Error&) {}
    try { if (const nexus::GgufArray* a = f.get_array(key)) acc += a->size(); } catch (const nexus::Error&) {}
    acc += f.find(key) == &value;
  }
  for (const nexus::TensorInfo& t : f.tensors()) {
    acc += f.find_tensor(t.name) == &t;
    acc += t.n_elements() + t.n_rows() + nexus::ggml_row_size(t.type, t.ne[0]);
    // Every byte of tensor data must lie inside the input.
    for (uint64_t i = 0; i < t.n_bytes; ++i) acc += t.data[i];
  }
  g_sink = acc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    nexus::GgufFile f(std::span<const uint8_t>(data, size), "fuzz-input");
    touch(f);
  } catch (const nexus::Error&) {
    // Expected for malformed input.
  }
  return 0;
}
