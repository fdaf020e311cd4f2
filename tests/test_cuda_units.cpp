// The CUDA unit readers (kernels/cuda/weight_units.cuh) run on the host: they
// are __host__ __device__, so this file, compiled by the host compiler, reads
// every unit of random rows through them and compares each value bit for bit
// with the CPU's dequantize_row_* (the same float operations on both sides; a
// NaN only has to meet a NaN; FMA contraction cannot change a value, see
// Q45_KProductsAreExactSoFmaCannotChangeThem). This is what checks the K-quant layouts of the
// GPU path on machines without a GPU; the device-only parts (intrinsics,
// the kernels around the readers) are left to test_cuda_kernels.
//
// Blocks are random bytes -- every packed scale and code pattern -- with the
// fp16 super-block scales drawn from normal, subnormal, zero and negative
// values (and, in some blocks, left as random bits: inf and NaN included).
// Rows of 1, 3 and 4 super-blocks put Q6_K blocks (210 bytes) at every
// address mod 4 the GPU sees, so both paths of its funnel-shift reads run.
// Built only with NEXUS_CUDA (tests/CMakeLists.txt); it needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "kernels/cuda/weight_units.cuh"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"
#include "model/quantize_ref.h"

namespace nexus {
namespace {

// 16-byte aligned storage, as cudaMalloc gives the device.
struct alignas(16) Chunk {
  uint8_t b[16];
};

struct Rows {
  std::vector<Chunk> store;
  int64_t n_rows, n_cols;
  size_t row_bytes;
  uint8_t* row(int64_t r) { return reinterpret_cast<uint8_t*>(store.data()) + r * row_bytes; }
};

Rows make_rows(GgmlType type, int64_t n_rows, int64_t n_cols) {
  Rows r{{}, n_rows, n_cols, ggml_row_size(type, static_cast<uint64_t>(n_cols))};
  r.store.resize((r.row_bytes * n_rows + 15) / 16);
  return r;
}

// A random fp16 scale: mostly normal values of either sign, sometimes zero,
// subnormal or (raw = true) any 16 bits.
uint16_t random_scale(std::mt19937& rng, bool raw) {
  if (raw) return static_cast<uint16_t>(rng());
  switch (rng() % 8) {
    case 0: return 0;
    case 1: return static_cast<uint16_t>((rng() & 0x8000) | (rng() % 0x400));  // subnormal
    default: {
      std::uniform_real_distribution<float> d(-4.0f, 4.0f);
      return fp32_to_fp16(std::ldexp(d(rng), -static_cast<int>(rng() % 12)));
    }
  }
}

// Fills every block of the rows with random bytes, then puts random scales
// at the given offsets of each block (-1: none).
void fill_random(Rows& rows, size_t block_bytes, int d_off, int dmin_off, uint32_t seed) {
  std::mt19937 rng(seed);
  uint8_t* p = reinterpret_cast<uint8_t*>(rows.store.data());
  for (size_t i = 0; i < rows.store.size() * 16; ++i) p[i] = static_cast<uint8_t>(rng());
  const size_t n_blocks = rows.row_bytes / block_bytes;
  for (int64_t r = 0; r < rows.n_rows; ++r)
    for (size_t b = 0; b < n_blocks; ++b) {
      uint8_t* blk = rows.row(r) + b * block_bytes;
      const bool raw = rng() % 16 == 0;
      for (int off : {d_off, dmin_off}) {
        if (off < 0) continue;
        const uint16_t h = random_scale(rng, raw);
        std::memcpy(blk + off, &h, 2);
      }
    }
}

bool same_value(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

// Every unit of every row through Unit::load against dequantize_row.
template <typename Unit>
void expect_units_match(GgmlType type, Rows& rows, const std::string& what) {
  ASSERT_EQ(rows.n_cols % Unit::kVals, 0);
  std::vector<float> want(static_cast<size_t>(rows.n_cols));
  float got[Unit::kVals];
  int64_t finite = 0;
  for (int64_t r = 0; r < rows.n_rows; ++r) {
    dequantize_row(type, rows.row(r), want.data(), rows.n_cols);
    for (int64_t u = 0; u < rows.n_cols / Unit::kVals; ++u) {
      Unit::load(rows.row(r), u, got);
      for (int j = 0; j < Unit::kVals; ++j) {
        const float w = want[u * Unit::kVals + j];
        ASSERT_TRUE(same_value(got[j], w)) << what << ": row " << r << " unit " << u << " value " << j << ": "
                                           << got[j] << " vs " << w;
        finite += std::isfinite(w);
      }
    }
  }
  // The scales keep most values finite: the comparison is not NaN against NaN.
  EXPECT_GT(finite, rows.n_rows * rows.n_cols / 2) << what;
}

template <typename Unit>
void check_random(GgmlType type, size_t block_bytes, int d_off, int dmin_off, uint32_t seed) {
  for (int64_t n_blocks : {1, 3, 4}) {
    const int64_t block_vals = static_cast<int64_t>(ggml_type_traits(static_cast<uint32_t>(type))->block_size);
    Rows rows = make_rows(type, 7, n_blocks * block_vals);
    fill_random(rows, block_bytes, d_off, dmin_off, seed + static_cast<uint32_t>(n_blocks));
    expect_units_match<Unit>(type, rows,
                             std::string(ggml_type_name(type)) + " random, " + std::to_string(n_blocks) + " blocks");
  }
}

// Rows quantized from Gaussian floats by the reference quantizer: the blocks
// real files hold.
template <typename Unit>
void check_quantized(GgmlType type, int64_t n_cols, uint32_t seed) {
  Rows rows = make_rows(type, 5, n_cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> src(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < rows.n_rows; ++r) {
    for (float& x : src) x = d(rng);
    quantize_row_ref(type, src.data(), rows.row(r), n_cols);
  }
  expect_units_match<Unit>(type, rows, std::string(ggml_type_name(type)) + " quantized");
}

}  // namespace

TEST(CudaUnits, Q4_KMatchesDequantizeRow) {
  check_random<cuda::UnitQ4K>(GgmlType::Q4_K, sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin),
                              1);
  check_quantized<cuda::UnitQ4K>(GgmlType::Q4_K, 768, 2);
}

TEST(CudaUnits, Q5_KMatchesDequantizeRow) {
  check_random<cuda::UnitQ5K>(GgmlType::Q5_K, sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin),
                              3);
  check_quantized<cuda::UnitQ5K>(GgmlType::Q5_K, 768, 4);
}

TEST(CudaUnits, Q6_KMatchesDequantizeRow) {
  check_random<cuda::UnitQ6K>(GgmlType::Q6_K, sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), -1, 5);
  check_quantized<cuda::UnitQ6K>(GgmlType::Q6_K, 768, 6);
}

// Q6_K rows of an odd number of blocks start at 2 mod 4 every other row; the
// reader must not care where the row starts within its (aligned) buffer.
TEST(CudaUnits, Q6_KBlocksAtEveryAlignment) {
  Rows rows = make_rows(GgmlType::Q6_K, 8, 256);  // 210-byte rows: starts at 0, 2, 4, ..., 14 mod 16
  fill_random(rows, sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), -1, 7);
  std::vector<int> seen(16, 0);
  for (int64_t r = 0; r < rows.n_rows; ++r) seen[reinterpret_cast<uintptr_t>(rows.row(r)) % 16] = 1;
  for (int m = 0; m < 16; m += 2) EXPECT_TRUE(seen[m]) << "no row at " << m << " mod 16";
  expect_units_match<cuda::UnitQ6K>(GgmlType::Q6_K, rows, "Q6_K alignment");
}

// Why Q4_K / Q5_K agree whatever the compilers contract: for every finite
// fp16 d, 6-bit scale and 5-bit q, d * scale and (d * scale) * q are exact in
// float32, so dl * q - ml rounds once with or without an FMA.
TEST(CudaUnits, Q45_KProductsAreExactSoFmaCannotChangeThem) {
  int64_t inexact = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isfinite(d)) continue;
    for (int sc = 0; sc < 64; ++sc) {
      const float dl = d * static_cast<float>(sc);
      inexact += static_cast<double>(dl) != static_cast<double>(d) * sc;
      for (int q = 0; q < 32; ++q)
        inexact += static_cast<double>(dl * static_cast<float>(q)) != static_cast<double>(dl) * q;
    }
  }
  EXPECT_EQ(inexact, 0);
}

// The readers the kernels already had, through the same host path.
TEST(CudaUnits, LegacyAndFloatUnitsMatchDequantizeRow) {
  {
    Rows rows = make_rows(GgmlType::Q8_0, 5, 96);
    fill_random(rows, sizeof(BlockQ8_0), offsetof(BlockQ8_0, d), -1, 8);
    expect_units_match<cuda::UnitQ8_0>(GgmlType::Q8_0, rows, "Q8_0");
  }
  {
    Rows rows = make_rows(GgmlType::Q4_0, 5, 96);
    fill_random(rows, sizeof(BlockQ4_0), offsetof(BlockQ4_0, d), -1, 9);
    expect_units_match<cuda::UnitQ4_0>(GgmlType::Q4_0, rows, "Q4_0");
  }
  // Float rows from Gaussian values (random bits would be mostly fine too,
  // but not "mostly finite" for F32).
  std::mt19937 rng(10);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Rows f32 = make_rows(GgmlType::F32, 3, 64), f16 = make_rows(GgmlType::F16, 3, 64),
       bf16 = make_rows(GgmlType::BF16, 3, 64);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      const float x = d(rng);
      std::memcpy(f32.row(r) + 4 * c, &x, 4);
      const uint16_t h = fp32_to_fp16(x), b = fp32_to_bf16(x);
      std::memcpy(f16.row(r) + 2 * c, &h, 2);
      std::memcpy(bf16.row(r) + 2 * c, &b, 2);
    }
  expect_units_match<cuda::UnitF32x4>(GgmlType::F32, f32, "F32x4");
  expect_units_match<cuda::UnitF32>(GgmlType::F32, f32, "F32");
  expect_units_match<cuda::UnitF16x8>(GgmlType::F16, f16, "F16x8");
  expect_units_match<cuda::UnitF16>(GgmlType::F16, f16, "F16");
  expect_units_match<cuda::UnitBF16x8>(GgmlType::BF16, bf16, "BF16x8");
  expect_units_match<cuda::UnitBF16>(GgmlType::BF16, bf16, "BF16");
}

}  // namespace nexus
