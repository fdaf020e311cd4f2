// Host-side decisions of the GPU backend that need no GPU (so they are built
// and tested everywhere): how many layers go to the GPU, and which CUDA-graph
// batch bucket a decode step of n sequences replays.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus {

// --gpu-layers N: -1 = all; N > n_layer is clamped to n_layer (as llama.cpp's
// -ngl 99 means "everything"). Throws nexus::Error for N < -1 or N == 0
// (zero GPU layers is the CPU backend: --device cpu).
int32_t resolve_gpu_layers(int32_t requested, int32_t n_layer);

// Decode batch buckets up to max_seqs: 1, 2, 4, 8, then multiples of 8
// (16, 24, 32, ...), with max_seqs itself last. A decode step of n sequences
// replays the graph of the smallest bucket >= n, padded with dummy rows, so a
// handful of graphs cover every batch size without re-capture. Throws
// nexus::Error when max_seqs < 1.
std::vector<int32_t> decode_buckets(int32_t max_seqs);

// The smallest bucket >= n (buckets ascending), or -1 when n exceeds them all
// or n < 1.
int32_t pick_bucket(std::span<const int32_t> buckets, int32_t n);

}  // namespace nexus
