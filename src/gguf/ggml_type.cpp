#include "gguf/ggml_type.h"

#include <array>
#include <ostream>

namespace nexus {
namespace {

struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};

// Block sizes and bytes per block from ggml's type_traits table.
constexpr std::array kTypes = {
    Entry{0, {"F32", 1, 4, true}},
    Entry{1, {"F16", 1, 2, true}},
    Entry{2, {"Q4_0", 32, 18, true}},
    Entry{3, {"Q4_1", 32, 20, false}},
    Entry{6, {"Q5_0", 32, 22, false}},
    Entry{7, {"Q5_1", 32, 24, false}},
    Entry{8, {"Q8_0", 32, 34, true}},
    Entry{9, {"Q8_1", 32, 36, false}},
    Entry{10, {"Q2_K", 256, 84, false}},
    Entry{11, {"Q3_K", 256, 110, false}},
    Entry{12, {"Q4_K", 256, 144, false}},
    Entry{13, {"Q5_K", 256, 176, false}},
    Entry{14, {"Q6_K", 256, 210, false}},
    Entry{15, {"Q8_K", 256, 292, false}},
    Entry{24, {"I8", 1, 1, false}},
    Entry{25, {"I16", 1, 2, false}},
    Entry{26, {"I32", 1, 4, false}},
    Entry{27, {"I64", 1, 8, false}},
    Entry{28, {"F64", 1, 8, false}},
    Entry{30, {"BF16", 1, 2, true}},
};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t type_id) {
  for (const Entry& e : kTypes)
    if (e.id == type_id) return &e.traits;
  return nullptr;
}

size_t ggml_row_size(GgmlType type, uint64_t n) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  return t ? static_cast<size_t>(n / t->block_size * t->type_size) : 0;
}

std::string_view ggml_type_name(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<uint32_t>(type));
  return t ? t->name : std::string_view("unknown");
}

std::ostream& operator<<(std::ostream& os, GgmlType type) { return os << ggml_type_name(type); }

}  // namespace nexus
