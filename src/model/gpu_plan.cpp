#include "model/gpu_plan.h"

#include <string>

#include "util/error.h"

namespace nexus {

int32_t resolve_gpu_layers(int32_t requested, int32_t n_layer) {
  if (requested == -1) return n_layer;
  if (requested < -1) throw Error("--gpu-layers must be -1 (all) or a positive count, got " + std::to_string(requested));
  if (requested == 0) throw Error("--gpu-layers 0 puts nothing on the GPU: use --device cpu");
  return requested > n_layer ? n_layer : requested;
}

std::vector<int32_t> decode_buckets(int32_t max_seqs) {
  if (max_seqs < 1) throw Error("decode buckets: max_seqs must be at least 1, got " + std::to_string(max_seqs));
  std::vector<int32_t> b;
  for (int32_t v = 1; v <= 8 && v < max_seqs; v *= 2) b.push_back(v);
  for (int32_t v = 16; v < max_seqs; v += 8) b.push_back(v);
  b.push_back(max_seqs);
  return b;
}

int32_t pick_bucket(std::span<const int32_t> buckets, int32_t n) {
  if (n < 1) return -1;
  for (int32_t b : buckets)
    if (b >= n) return b;
  return -1;
}

}  // namespace nexus
