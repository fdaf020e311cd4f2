// GGUF metadata values: type names, array sizes and one-line rendering for
// `nexus info`.
#include <algorithm>

#include <fmt/format.h>

#include "gguf/gguf_file.h"

namespace nexus {

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: return "UINT8";
    case GgufValueType::INT8: return "INT8";
    case GgufValueType::UINT16: return "UINT16";
    case GgufValueType::INT16: return "INT16";
    case GgufValueType::UINT32: return "UINT32";
    case GgufValueType::INT32: return "INT32";
    case GgufValueType::FLOAT32: return "FLOAT32";
    case GgufValueType::BOOL: return "BOOL";
    case GgufValueType::STRING: return "STRING";
    case GgufValueType::ARRAY: return "ARRAY";
    case GgufValueType::UINT64: return "UINT64";
    case GgufValueType::INT64: return "INT64";
    case GgufValueType::FLOAT64: return "FLOAT64";
  }
  return "unknown";
}

size_t GgufArray::size() const {
  switch (elem_type) {
    case GgufValueType::STRING: return strings.size();
    case GgufValueType::ARRAY: return arrays.size();
    case GgufValueType::FLOAT32: case GgufValueType::FLOAT64: return floats.size();
    default: return ints.size();
  }
}

namespace {

constexpr size_t kMaxStringChars = 120;  // longer strings (chat templates) are cut

// Quoted, with control characters and quotes escaped so one value stays on
// one line whatever bytes the file holds.
std::string quote(const std::string& s) {
  std::string out = "\"";
  const size_t n = std::min(s.size(), kMaxStringChars);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
  if (s.size() > n) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Floats stored as FLOAT32 print with float precision (1e-05, not 9.99999974e-06).
std::string format_float(double d, GgufValueType t) {
  return t == GgufValueType::FLOAT32 ? fmt::format("{}", static_cast<float>(d)) : fmt::format("{}", d);
}

std::string format_int(int64_t i, GgufValueType t) {
  if (t == GgufValueType::BOOL) return i ? "true" : "false";
  if (t == GgufValueType::UINT64) return fmt::format("{}", static_cast<uint64_t>(i));
  return fmt::format("{}", i);
}

}  // namespace

std::string gguf_value_to_string(const GgufValue& v, size_t max_array_items) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return fmt::format("{}", *u);
  if (const auto* i = std::get_if<int64_t>(&v.v)) return fmt::format("{}", *i);
  if (const auto* d = std::get_if<double>(&v.v)) return format_float(*d, v.type);
  if (const auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (const auto* s = std::get_if<std::string>(&v.v)) return quote(*s);
  const auto& ap = std::get<std::shared_ptr<GgufArray>>(v.v);
  if (!ap) return "[]";
  const GgufArray& a = *ap;
  const size_t n = a.size();
  const size_t shown = std::min(n, max_array_items);
  std::string out = fmt::format("[{} x {}] [", n, gguf_value_type_name(a.elem_type));
  for (size_t k = 0; k < shown; ++k) {
    if (k) out += ", ";
    switch (a.elem_type) {
      case GgufValueType::STRING: out += quote(a.strings[k]); break;
      case GgufValueType::ARRAY: out += gguf_value_to_string(a.arrays[k], max_array_items); break;
      case GgufValueType::FLOAT32: case GgufValueType::FLOAT64: out += format_float(a.floats[k], a.elem_type); break;
      default: out += format_int(a.ints[k], a.elem_type);
    }
  }
  if (shown < n) out += shown ? ", ..." : "...";
  out += "]";
  return out;
}

}  // namespace nexus
