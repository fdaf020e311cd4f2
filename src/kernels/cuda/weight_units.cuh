// Device-side readers of a weight row, one "unit" at a time (CUDA only).
//
// A unit is the group of values one thread widens to float32 in one go:
//   Q8_0, Q4_0: one 32-value block (quant_blocks.h; d * q, d * (nibble - 8));
//   F16, BF16:  8 values = one 16-byte load (rows whose byte size is a
//               multiple of 16; the Scalar variants serve the others);
//   F32:        4 values = one 16-byte load (same condition).
// Blocks of Q8_0 (34 B) and Q4_0 (18 B) are only 2-byte aligned, so they are
// read with 16-bit and byte loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace nexus::cuda {

__device__ __forceinline__ float half_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

struct UnitQ8_0 {
  static constexpr int kVals = 32;
  static constexpr int kBytes = 34;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + u * kBytes;
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(q[j]);
  }
};

struct UnitQ4_0 {
  static constexpr int kVals = 32;
  static constexpr int kBytes = 18;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + u * kBytes;
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
    const uint16_t* q16 = reinterpret_cast<const uint16_t*>(b + 2);  // 2-byte aligned
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint16_t two = q16[j];
      const int lo0 = two & 0xF, hi0 = (two >> 4) & 0xF;       // byte 2j
      const int lo1 = (two >> 8) & 0xF, hi1 = (two >> 12) & 0xF;  // byte 2j+1
      w[2 * j] = d * static_cast<float>(lo0 - 8);
      w[2 * j + 1] = d * static_cast<float>(lo1 - 8);
      w[2 * j + 16] = d * static_cast<float>(hi0 - 8);
      w[2 * j + 17] = d * static_cast<float>(hi1 - 8);
    }
  }
};

struct UnitF16x8 {
  static constexpr int kVals = 8;
  static constexpr int kBytes = 16;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + u * kBytes);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = half_bits_to_float(static_cast<uint16_t>(words[j] & 0xFFFF));
      w[2 * j + 1] = half_bits_to_float(static_cast<uint16_t>(words[j] >> 16));
    }
  }
};

struct UnitBF16x8 {
  static constexpr int kVals = 8;
  static constexpr int kBytes = 16;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + u * kBytes);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = bf16_bits_to_float(static_cast<uint16_t>(words[j] & 0xFFFF));
      w[2 * j + 1] = bf16_bits_to_float(static_cast<uint16_t>(words[j] >> 16));
    }
  }
};

struct UnitF32x4 {
  static constexpr int kVals = 4;
  static constexpr int kBytes = 16;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    const float4 v = *reinterpret_cast<const float4*>(row + u * kBytes);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  }
};

struct UnitF16 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[u]);
  }
};

struct UnitBF16 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 2;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[u]);
  }
};

struct UnitF32 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 4;
  __device__ __forceinline__ static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = reinterpret_cast<const float*>(row)[u];
  }
};

}  // namespace nexus::cuda
