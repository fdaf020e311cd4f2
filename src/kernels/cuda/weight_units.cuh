// Readers of a weight row, one "unit" at a time, for the CUDA kernels and,
// through __host__ __device__, for host tests (tests/test_cuda_units.cpp runs
// every reader on the CPU against the dequantize_row_* references).
//
// A unit is the group of values one thread widens to float32 in one go:
//   Q8_0, Q4_0: one 32-value block (quant_blocks.h; d * q, d * (nibble - 8));
//   Q4_K, Q5_K: one 32-value sub-block; unit u is sub-block u % 8 of
//               super-block u / 8 ((d * scale) * q - dmin * min);
//   Q6_K:       32 values = two 16-value sub-blocks, same numbering
//               ((d * scale) * (q - 32));
//   F16, BF16:  8 values = one 16-byte load (rows whose byte size is a
//               multiple of 16; the Scalar variants serve the others);
//   F32:        4 values = one 16-byte load (same condition).
// The matvec kernel gives lane i of a warp units i, i + 32, ... of a row, so
// one warp step reads 32 consecutive units: four K-quant super-blocks.
// Alignment: blocks of Q8_0 (34 B), Q4_0 (18 B) and Q6_K (210 B) are only
// 2-byte aligned; Q8_0 / Q4_0 are read with 16-bit and byte loads, Q6_K with
// aligned 32-bit loads and funnel shifts. Q4_K (144 B) and Q5_K (176 B) blocks
// are 16-byte aligned when the data is, and are read with 16-byte loads.
// K-quant weights therefore need 16-byte aligned data (cudaMalloc gives 256)
// and unpadded rows; matvec.cu checks both.
// K-quant values equal dequantize_row_q*_k (dequant_kquants.cpp) bit for bit:
// the same float operations in the same order. For Q4_K / Q5_K, dl * q - ml
// with dl = d * scale is the same value whether or not a compiler fuses it
// into an FMA (nvcc does, GCC at -O2 does, GCC at -O0 does not): d has 11
// significant bits, scale 6 and q 5, so dl and dl * q are exact in float32
// and the subtraction is the only rounding (test_cuda_units checks this for
// every fp16 d).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/quant_blocks.h"

#define NEXUS_UNIT_FN __host__ __device__ __forceinline__
// `#pragma unroll` is nvcc's device spelling and GCC's is its own; nvcc's
// host pass, where these functions never run, gets neither (it warns on both).
#if defined(__CUDA_ARCH__)
#define NEXUS_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define NEXUS_UNROLL
#else
#define NEXUS_UNROLL _Pragma("GCC unroll 32")
#endif

namespace nexus::cuda {

NEXUS_UNIT_FN float half_bits_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return fp16_to_fp32(h);
#endif
}
NEXUS_UNIT_FN float bf16_bits_to_float(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
#else
  return bf16_to_fp32(h);
#endif
}

// A T at p (aligned for T on the device; any address on the host). Weights
// are read-only while a kernel runs: the device reads go through __ldg.
template <typename T>
NEXUS_UNIT_FN T load_as(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const T*>(p));
#else
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
#endif
}

// The 32-bit word hi:lo shifted right by sh (0..31) bits, low half.
NEXUS_UNIT_FN uint32_t funnel_right(uint32_t lo, uint32_t hi, uint32_t sh) {
#ifdef __CUDA_ARCH__
  return __funnelshift_r(lo, hi, sh);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (sh & 31));
#endif
}

// 32 bytes at p (16-byte aligned) as 8 little-endian words: two 16-byte loads.
NEXUS_UNIT_FN void load_32_bytes_a16(const uint8_t* p, uint32_t* w) {
  const uint4 a = load_as<uint4>(p), b = load_as<uint4>(p + 16);
  w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
  w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

// 32 bytes at p (2-byte aligned) as 8 little-endian words, from nine aligned
// 32-bit loads starting at p rounded down to 4 bytes. Reads up to 2 bytes
// before p (never before a 4-byte aligned buffer that p lies in) and up to 4
// after its 32 bytes.
NEXUS_UNIT_FN void load_32_bytes_a2(const uint8_t* p, uint32_t* w) {
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) & 2);
  const uint8_t* base = p - mis;
  uint32_t v[9];
  NEXUS_UNROLL
  for (int i = 0; i < 9; ++i) v[i] = load_as<uint32_t>(base + 4 * i);
  NEXUS_UNROLL
  for (int i = 0; i < 8; ++i) w[i] = funnel_right(v[i], v[i + 1], mis * 8);
}

NEXUS_UNIT_FN uint32_t byte_of(const uint32_t* w, int j) { return (w[j >> 2] >> (8 * (j & 3))) & 0xff; }

struct UnitQ8_0 {
  static constexpr int kVals = 32;
  static constexpr int kBytes = 34;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + u * kBytes;
    const float d = half_bits_to_float(load_as<uint16_t>(b));
    NEXUS_UNROLL
    for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(load_as<int8_t>(b + 2 + j));
  }
};

struct UnitQ4_0 {
  static constexpr int kVals = 32;
  static constexpr int kBytes = 18;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + u * kBytes;
    const float d = half_bits_to_float(load_as<uint16_t>(b));
    NEXUS_UNROLL
    for (int j = 0; j < 8; ++j) {
      const uint16_t two = load_as<uint16_t>(b + 2 + 2 * j);  // 2-byte aligned
      const int lo0 = two & 0xF, hi0 = (two >> 4) & 0xF;       // byte 2j
      const int lo1 = (two >> 8) & 0xF, hi1 = (two >> 12) & 0xF;  // byte 2j+1
      w[2 * j] = d * static_cast<float>(lo0 - 8);
      w[2 * j + 1] = d * static_cast<float>(lo1 - 8);
      w[2 * j + 16] = d * static_cast<float>(hi0 - 8);
      w[2 * j + 17] = d * static_cast<float>(hi1 - 8);
    }
  }
};

// Q4_K and Q5_K (kFifthBit): sub-block s = u % 8 of super-block u / 8. The
// first 16 bytes of a block are d, dmin and the 12 packed scale bytes (one
// load); the sub-block's nibbles are the low (s even) or high (s odd) halves
// of qs[32 (s / 2) ..][32], Q5_K's fifth bits bit s of qh[0..32).
template <bool kFifthBit>
struct UnitQ45K {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  static constexpr int kVals = 32;
  static constexpr int kBlockBytes = static_cast<int>(sizeof(Block));
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int s = static_cast<int>(u & 7);
    const uint4 head = load_as<uint4>(b);
    const uint32_t sc_lo = head.y, mn_lo = head.z, hi = head.w;  // scales[0..4), [4..8), [8..12)
    // unpack_q4k_scales (kquant_unpack.h) for one sub-block.
    const int j = s & 3;
    const uint32_t sc = s < 4 ? byte_of(&sc_lo, j) & 63 : (byte_of(&hi, j) & 0x0f) | ((byte_of(&sc_lo, j) >> 6) << 4);
    const uint32_t mn = s < 4 ? byte_of(&mn_lo, j) & 63 : (byte_of(&hi, j) >> 4) | ((byte_of(&mn_lo, j) >> 6) << 4);
    const float dl = half_bits_to_float(static_cast<uint16_t>(head.x & 0xffff)) * static_cast<float>(sc);
    const float ml = half_bits_to_float(static_cast<uint16_t>(head.x >> 16)) * static_cast<float>(mn);
    uint32_t qs[8];
    load_32_bytes_a16(b + offsetof(Block, qs) + 32 * (s >> 1), qs);
    const int nib = 4 * (s & 1);
    uint32_t qh[8] = {};
    if constexpr (kFifthBit) load_32_bytes_a16(b + offsetof(BlockQ5_K, qh), qh);
    NEXUS_UNROLL
    for (int l = 0; l < 32; ++l) {
      uint32_t q = (byte_of(qs, l) >> nib) & 0x0f;
      if constexpr (kFifthBit) q |= ((byte_of(qh, l) >> s) & 1) << 4;
      w[l] = dl * static_cast<float>(q) - ml;
    }
  }
};
using UnitQ4K = UnitQ45K<false>;
using UnitQ5K = UnitQ45K<true>;

// Q6_K: values 32 k .. 32 k + 31 of super-block u / 8, k = u % 8 (h = k / 4,
// c = k % 4): low 4 bits in the low (c < 2) or high nibbles of
// ql[64 h + 32 (c % 2) ..][32], high 2 bits at bits 2c of qh[32 h ..][32];
// sub-blocks 2k and 2k + 1 (int8 scales[2k], scales[2k + 1]).
struct UnitQ6K {
  static constexpr int kVals = 32;
  static constexpr int kBlockBytes = static_cast<int>(sizeof(BlockQ6_K));
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int k = static_cast<int>(u & 7), h = k >> 2, c = k & 3;
    uint32_t ql[8], qh[8];
    load_32_bytes_a2(b + offsetof(BlockQ6_K, ql) + 64 * h + 32 * (c & 1), ql);
    load_32_bytes_a2(b + offsetof(BlockQ6_K, qh) + 32 * h, qh);
    const uint16_t sc = load_as<uint16_t>(b + offsetof(BlockQ6_K, scales) + 2 * k);
    const float d = half_bits_to_float(load_as<uint16_t>(b + offsetof(BlockQ6_K, d)));
    const float dl0 = d * static_cast<float>(static_cast<int8_t>(sc & 0xff));
    const float dl1 = d * static_cast<float>(static_cast<int8_t>(sc >> 8));
    const int nib = 4 * (c >> 1);
    NEXUS_UNROLL
    for (int l = 0; l < 32; ++l) {
      const int q = static_cast<int>(((byte_of(ql, l) >> nib) & 0x0f) | (((byte_of(qh, l) >> (2 * c)) & 3) << 4));
      w[l] = (l < 16 ? dl0 : dl1) * static_cast<float>(q - 32);
    }
  }
};

struct UnitF16x8 {
  static constexpr int kVals = 8;
  static constexpr int kBytes = 16;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint4 v = load_as<uint4>(row + u * kBytes);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    NEXUS_UNROLL
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = half_bits_to_float(static_cast<uint16_t>(words[j] & 0xFFFF));
      w[2 * j + 1] = half_bits_to_float(static_cast<uint16_t>(words[j] >> 16));
    }
  }
};

struct UnitBF16x8 {
  static constexpr int kVals = 8;
  static constexpr int kBytes = 16;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const uint4 v = load_as<uint4>(row + u * kBytes);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    NEXUS_UNROLL
    for (int j = 0; j < 4; ++j) {
      w[2 * j] = bf16_bits_to_float(static_cast<uint16_t>(words[j] & 0xFFFF));
      w[2 * j + 1] = bf16_bits_to_float(static_cast<uint16_t>(words[j] >> 16));
    }
  }
};

struct UnitF32x4 {
  static constexpr int kVals = 4;
  static constexpr int kBytes = 16;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    const float4 v = load_as<float4>(row + u * kBytes);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  }
};

struct UnitF16 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 2;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = half_bits_to_float(load_as<uint16_t>(row + u * kBytes));
  }
};

struct UnitBF16 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 2;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = bf16_bits_to_float(load_as<uint16_t>(row + u * kBytes));
  }
};

struct UnitF32 {
  static constexpr int kVals = 1;
  static constexpr int kBytes = 4;
  NEXUS_UNIT_FN static void load(const uint8_t* row, int64_t u, float* w) {
    w[0] = load_as<float>(row + u * kBytes);
  }
};

}  // namespace nexus::cuda
