#include "kernels/f32_panels.h"

#include <cstring>

namespace nexus {

std::shared_ptr<const float[]> pack_f32_panels(const WeightView& w) {
  if (w.type != GgmlType::F32 || w.n_rows < 2 || !f32_panels_supported()) return nullptr;
  const int64_t n_panels = (w.n_rows + kPanelRows - 1) / kPanelRows;
  std::shared_ptr<float[]> p(new float[static_cast<size_t>(n_panels * kPanelRows * w.n_cols)]());
  for (int64_t r = 0; r < w.n_rows; ++r) {
    const uint8_t* row = w.row(r);
    float* dst = p.get() + (r / kPanelRows) * w.n_cols * kPanelRows + r % kPanelRows;
    for (int64_t c = 0; c < w.n_cols; ++c) std::memcpy(dst + c * kPanelRows, row + 4 * c, 4);
  }
  return p;
}

}  // namespace nexus
