#include "kernels/attention_window.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/quant_blocks.h"

namespace nexus {
namespace {

// Row `p` of a paged K or V as float32, into row[head_dim].
void load_row(const PagedKv& kv, const void* base, int64_t elem0, KvElem elem, int32_t p, int32_t head_dim,
              float* row) {
  const int64_t off = kv.block_table[p / kv.block_size] * kv.block_stride + (p % kv.block_size) * kv.kv_stride;
  switch (elem) {
    case KvElem::F32: std::copy_n(static_cast<const float*>(base) + off, head_dim, row); break;
    case KvElem::F16: {
      const uint16_t* h = static_cast<const uint16_t*>(base) + off;
      for (int32_t i = 0; i < head_dim; ++i) row[i] = fp16_to_fp32(h[i]);
      break;
    }
    case KvElem::Q8_0: {
      const int8_t* v = static_cast<const int8_t*>(base) + off;
      for (int32_t i = 0; i < head_dim; ++i)
        row[i] = static_cast<float>(v[i]) * fp16_to_fp32(kv.scales[(elem0 + off + i) / 32]);
      break;
    }
  }
}

}  // namespace

void attention_head_paged_window(const float* q, const PagedKv& kv, KvElem elem, int32_t first, int32_t n_keys,
                                 int32_t head_dim, float scale, float softcap, float* out) {
  float acc[kMaxHeadDim] = {}, row[kMaxHeadDim];
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  for (int32_t p = first; p < n_keys; ++p) {
    load_row(kv, kv.k, kv.k_elem0, elem, p, head_dim, row);
    float s = 0.0f;
    for (int32_t i = 0; i < head_dim; ++i) s += q[i] * row[i];
    s *= scale;
    if (softcap > 0) s = softcap * std::tanh(s / softcap);
    const float m_new = std::max(m, s);
    const float r = std::exp(m - m_new), e = std::exp(s - m_new);  // r = 0 at the first key
    l = l * r + e;
    load_row(kv, kv.v, kv.v_elem0, elem, p, head_dim, row);
    for (int32_t i = 0; i < head_dim; ++i) acc[i] = acc[i] * r + e * row[i];
    m = m_new;
  }
  const float inv = 1.0f / l;
  for (int32_t i = 0; i < head_dim; ++i) out[i] = acc[i] * inv;
}

}  // namespace nexus
