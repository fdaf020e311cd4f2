// Each CUDA kernel against the CPU reference on random inputs (label `cuda`).
// Without a GPU (or without a CUDA build) every test skips with the reason.
// Bounds: float weights are widened exactly on both sides, so matvec differs
// from a float64 reference only by float32 summation order (1e-4 of sum|w x|);
// the CPU's quantized kernels also round activations to 8 bits (matmul.h),
// the GPU's do not, so they are compared with the float64 dot of the
// dequantized weights, and the cuBLAS path gets 2e-3 (fp16 inputs) or 1e-2
// (bf16 inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_device.h"

#ifdef NEXUS_HAVE_CUDA
#include "gguf/ggml_type.h"
#include "kernels/attention.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/dequant.h"
#include "kernels/ops.h"
#include "kernels/quant_blocks.h"
#include "model/quantize_ref.h"
#endif

using namespace nexus;

#define NEXUS_REQUIRE_CUDA()                                              \
  do {                                                                    \
    std::string why_;                                                     \
    if (!cuda_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

#ifndef NEXUS_HAVE_CUDA
TEST(CudaKernels, NotBuilt) { GTEST_SKIP() << kNoCudaBuildMessage; }
#else

using cuda::DeviceBuffer;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A random [rows, cols] weight stored as `type` on the host, and its exact float values.
struct HostWeight {
  GgmlType type;
  int64_t rows, cols;
  size_t row_bytes;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized
};

HostWeight make_weight(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  HostWeight w{type, rows, cols, ggml_row_size(type, static_cast<uint64_t>(cols)), {}, {}};
  const std::vector<float> src = randn(static_cast<size_t>(rows * cols), seed, 0.1f);
  w.bytes.resize(w.row_bytes * rows);
  w.values.resize(src.size());
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = w.bytes.data() + r * w.row_bytes;
    const float* s = src.data() + r * cols;
    switch (type) {
      case GgmlType::F32: std::memcpy(dst, s, cols * 4); break;
      case GgmlType::F16:
        for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(dst)[c] = fp32_to_fp16(s[c]);
        break;
      case GgmlType::BF16:
        for (int64_t c = 0; c < cols; ++c) reinterpret_cast<uint16_t*>(dst)[c] = fp32_to_bf16(s[c]);
        break;
      default: quantize_row_ref(type, s, dst, cols); break;
    }
    dequantize_row(type, dst, w.values.data() + r * cols, cols);
  }
  return w;
}

struct DevWeight {
  DeviceBuffer<uint8_t> buf;
  cuda::DeviceWeight w;
};

DevWeight upload(const HostWeight& h) {
  DevWeight d;
  d.buf.resize(h.bytes.size());
  d.buf.upload(h.bytes.data(), h.bytes.size());
  d.w = {h.type, d.buf.get(), h.rows, h.cols, h.row_bytes};
  return d;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& v) {
  DeviceBuffer<T> b(v.size());
  b.upload(v.data(), v.size());
  return b;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer<T>& b, size_t n) {
  std::vector<T> v(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  b.download(v.data(), n);
  return v;
}

// |got - sum w x| <= tol * sum |w x| for every output, against float64.
void expect_matmul_close(const HostWeight& w, const std::vector<float>& x, const std::vector<float>& y, int32_t n,
                         double tol, const std::string& what) {
  for (int32_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < w.cols; ++c) {
        const double p = static_cast<double>(w.values[r * w.cols + c]) * x[t * w.cols + c];
        s += p;
        a += std::fabs(p);
      }
      ASSERT_NEAR(y[t * w.rows + r], s, tol * a + 1e-6) << what << " token " << t << " row " << r;
    }
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                           GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool is_kquant(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

}  // namespace

TEST(CudaKernels, MatvecEveryTypeAndTokenCount) {
  NEXUS_REQUIRE_CUDA();
  for (GgmlType type : kTypes)
    // K-quants: whole super-blocks; 768 = 3 of them puts Q6_K blocks at both
    // 4-byte alignments within a row, 4096 gives each lane 4 units.
    for (int64_t cols : is_kquant(type) ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{64, 256, 96}) {
      const HostWeight hw = make_weight(type, 37, cols, 7);
      DevWeight dw = upload(hw);
      for (int32_t n : {1, 3, 8, 11}) {
        const std::vector<float> x = randn(static_cast<size_t>(n * cols), 11 + n);
        auto dx = to_device(x);
        DeviceBuffer<float> dy(static_cast<size_t>(n) * hw.rows);
        cuda::matvec(dw.w, dx.get(), dy.get(), n, nullptr);
        expect_matmul_close(hw, x, to_host(dy, dy.size()), n, 1e-4,
                            std::string(ggml_type_name(type)) + " cols " + std::to_string(cols));
      }
    }
}

TEST(CudaKernels, MatvecUnalignedF16RowsUseTheScalarPath) {
  NEXUS_REQUIRE_CUDA();
  const HostWeight hw = make_weight(GgmlType::F16, 9, 36, 3);  // 72-byte rows: not 16-byte multiples
  DevWeight dw = upload(hw);
  const std::vector<float> x = randn(36 * 2, 5);
  auto dx = to_device(x);
  DeviceBuffer<float> dy(2 * 9);
  cuda::matvec(dw.w, dx.get(), dy.get(), 2, nullptr);
  expect_matmul_close(hw, x, to_host(dy, dy.size()), 2, 1e-4, "f16 unaligned");
}

TEST(CudaKernels, MatmulCublasPathEveryType) {
  NEXUS_REQUIRE_CUDA();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  const int64_t cols = 256;  // whole K-quant super-blocks
  for (GgmlType type : kTypes) {
    const HostWeight hw = make_weight(type, 70, cols, 9);
    DevWeight dw = upload(hw);
    // A tiny dequantization chunk (max_weight_elems = 3 rows) exercises the row chunking.
    cuda::CudaMatmul mm(s, 40, cols, 3 * cols);
    const int32_t n = 40;
    ASSERT_FALSE(cuda::use_matvec(n));
    const std::vector<float> x = randn(static_cast<size_t>(n * cols), 21);
    auto dx = to_device(x);
    DeviceBuffer<float> dy(static_cast<size_t>(n) * hw.rows);
    mm.run(dw.w, dx.get(), dy.get(), n);
    CUDA_CHECK(cudaStreamSynchronize(s));
    // fp16 inputs round x by 2^-11, bf16 by 2^-8 (relative).
    const double tol = type == GgmlType::F32 ? 1e-4 : type == GgmlType::BF16 ? 1e-2 : 2e-3;
    expect_matmul_close(hw, x, to_host(dy, dy.size()), n, tol,
                        std::string("cublas ") + std::string(ggml_type_name(type)));
    EXPECT_THROW(mm.run(dw.w, dx.get(), dy.get(), 41), Error);
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

// Runs without a GPU too: the weight checks come before any CUDA call.
TEST(CudaKernels, WeightChecksRefuseOtherTypesAndPartialSuperBlocksByName) {
  for (GgmlType t : kTypes) EXPECT_TRUE(cuda::supported_weight_type(t)) << ggml_type_name(t);
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::IQ4_XS})
    EXPECT_FALSE(cuda::supported_weight_type(t)) << ggml_type_name(t);
  EXPECT_FALSE(cuda::quantized_weight_type(GgmlType::F16));
  EXPECT_TRUE(cuda::quantized_weight_type(GgmlType::Q6_K));
  alignas(16) static uint8_t dummy[4096];
  auto message = [](const cuda::DeviceWeight& w) {
    try {
      cuda::matvec(w, nullptr, nullptr, 1, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({GgmlType::Q3_K, dummy, 1, 256, 110}).find("unsupported weight type Q3_K"), std::string::npos);
  EXPECT_NE(message({GgmlType::Q4_K, dummy, 1, 128, 72}).find("not whole super-blocks"), std::string::npos);
  EXPECT_NE(message({GgmlType::Q6_K, dummy, 1, 256, 212}).find("padded Q6_K rows"), std::string::npos);
  EXPECT_NE(message({GgmlType::Q5_K, dummy + 2, 1, 256, 176}).find("not 16-byte aligned"), std::string::npos);
}

TEST(CudaKernels, RmsNormRopeSwigluAdd) {
  NEXUS_REQUIRE_CUDA();
  const int32_t n = 5, E = 96, n_head = 3, hd = 32, n_rot = 32;
  const std::vector<float> x = randn(n * E, 1), w = randn(E, 2), up = randn(n * E, 3);
  std::vector<int32_t> pos = {0, 1, 17, 300, 4095};
  auto dx = to_device(x), dw = to_device(w), dup = to_device(up);
  auto dpos = to_device(pos);
  DeviceBuffer<float> dout(n * E);
  cuda::rmsnorm(dout.get(), dx.get(), nullptr, dw.get(), n, E, 1e-5f, nullptr);
  std::vector<float> got = to_host(dout, n * E), want(n * E);
  for (int32_t t = 0; t < n; ++t) rmsnorm(&want[t * E], &x[t * E], w.data(), E, 1e-5f);
  for (int i = 0; i < n * E; ++i) ASSERT_NEAR(got[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-6f) << "rmsnorm " << i;

  // Gathered rows: row i of the output is the norm of input row rows[i].
  auto drows = to_device(std::vector<int32_t>{4, 0});
  cuda::rmsnorm(dout.get(), dx.get(), drows.get(), dw.get(), 2, E, 1e-5f, nullptr);
  got = to_host(dout, 2 * E);
  for (int c = 0; c < E; ++c) ASSERT_NEAR(got[c], want[4 * E + c], 1e-5f * std::fabs(want[4 * E + c]) + 1e-6f);

  std::vector<float> r = x;
  auto dr = to_device(r);
  cuda::rope(dr.get(), dpos.get(), n, n_head, hd, n_rot, 10000.0f, nullptr);
  got = to_host(dr, n * E);
  for (int32_t t = 0; t < n; ++t) rope(&r[t * E], n_head, hd, n_rot, pos[t], 10000.0f);
  for (int i = 0; i < n * E; ++i) ASSERT_NEAR(got[i], r[i], 1e-5f * (std::fabs(r[i]) + 1.0f)) << "rope " << i;

  std::vector<float> g = x;
  auto dg = to_device(g);
  cuda::swiglu(dg.get(), dup.get(), n * E, nullptr);
  got = to_host(dg, n * E);
  swiglu(g.data(), up.data(), n * E);
  for (int i = 0; i < n * E; ++i) ASSERT_NEAR(got[i], g[i], 1e-6f * (std::fabs(g[i]) + 1.0f)) << "swiglu " << i;

  auto da = to_device(x);
  cuda::add_inplace(da.get(), dup.get(), n * E, nullptr);
  got = to_host(da, n * E);
  for (int i = 0; i < n * E; ++i) ASSERT_EQ(got[i], x[i] + up[i]);
}

TEST(CudaKernels, GatherRowsAndDequantizeMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (GgmlType type : kTypes) {
    const int64_t C = is_kquant(type) ? 768 : 64;
    const HostWeight hw = make_weight(type, 10, C, 4);
    DevWeight dw = upload(hw);
    auto ids = to_device(std::vector<int32_t>{7, 0, 7, 9});
    DeviceBuffer<float> out(4 * C);
    cuda::gather_rows_f32(dw.w, ids.get(), 4, out.get(), nullptr);
    const std::vector<float> got = to_host(out, 4 * C);
    const int rows[] = {7, 0, 7, 9};
    for (int i = 0; i < 4; ++i)
      for (int c = 0; c < C; ++c) ASSERT_EQ(got[i * C + c], hw.values[rows[i] * C + c]) << ggml_type_name(type);
    DeviceBuffer<uint16_t> h(3 * C);
    cuda::dequantize_f16(dw.w, 2, 3, h.get(), nullptr);
    const std::vector<uint16_t> hv = to_host(h, 3 * C);
    for (int i = 0; i < 3 * C; ++i) ASSERT_EQ(hv[i], fp32_to_fp16(hw.values[2 * C + i])) << ggml_type_name(type);
  }
}

TEST(CudaKernels, ArgmaxTiesLowestAndSkipsNan) {
  NEXUS_REQUIRE_CUDA();
  const int32_t V = 5000;
  std::vector<float> l = randn(3 * V, 8);
  l[0 * V + 4321] = 50.0f;
  l[1 * V + 17] = 60.0f;
  l[1 * V + 4000] = 60.0f;  // tie: the lower id wins
  l[1 * V + 3] = NAN;
  for (int i = 0; i < V; ++i) l[2 * V + i] = NAN;  // all NaN: 0
  auto dl = to_device(l);
  DeviceBuffer<int32_t> out(3);
  cuda::argmax_rows(dl.get(), 3, V, out.get(), nullptr);
  EXPECT_EQ(to_host(out, 3), (std::vector<int32_t>{4321, 17, 0}));
}

TEST(CudaKernels, PagedAttentionMatchesCpuPagedF16) {
  NEXUS_REQUIRE_CUDA();
  for (int32_t hd : {32, 64, 128, 256}) {
    const int32_t n_head = 4, n_head_kv = 2, bs = 16, n_layer = 2, layer = 1, n_blocks = 9;
    const int32_t KV = n_head_kv * hd;
    const int64_t layer_elems = 2LL * bs * KV, block_elems = n_layer * layer_elems;
    std::vector<uint16_t> cache(static_cast<size_t>((n_blocks + 1) * block_elems));
    const std::vector<float> vals = randn(cache.size(), 31);
    for (size_t i = 0; i < cache.size(); ++i) cache[i] = fp32_to_fp16(vals[i]);
    // Two sequences with scattered blocks; tokens at positions 0, 37 (seq 0) and 100 (seq 1).
    const int32_t bt_stride = 8;
    std::vector<int32_t> bt = {3, 7, 1, 0, 0, 0, 0, 0, 8, 2, 5, 6, 4, 0, 0, 0};
    std::vector<int32_t> pos = {0, 37, 100}, seq = {0, 0, 1};
    const int32_t n = 3;
    const std::vector<float> q = randn(n * n_head * hd, 32);
    auto dc = to_device(cache);
    auto dbt = to_device(bt), dpos = to_device(pos), dseq = to_device(seq);
    auto dq = to_device(q);
    DeviceBuffer<float> dout(n * n_head * hd);
    cuda::PagedCache pc{dc.get(), bs, KV, block_elems, layer_elems};
    cuda::BatchMeta bm{dpos.get(), dseq.get(), dbt.get(), bt_stride};
    cuda::paged_attention(pc, bm, layer, dq.get(), dout.get(), n, n_head, n_head_kv, hd, nullptr);
    const std::vector<float> got = to_host(dout, dout.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> want(hd);
    for (int32_t t = 0; t < n; ++t)
      for (int32_t h = 0; h < n_head; ++h) {
        PagedKv kv;
        const int64_t off = static_cast<int64_t>(h / (n_head / n_head_kv)) * hd;
        kv.k = cache.data() + layer * layer_elems + off;
        kv.v = cache.data() + layer * layer_elems + layer_elems / 2 + off;
        kv.block_table = bt.data() + seq[t] * bt_stride;
        kv.block_size = bs;
        kv.block_stride = block_elems;
        kv.kv_stride = KV;
        attention_head_paged_f16(&q[(t * n_head + h) * hd], kv, pos[t] + 1, hd, scale, want.data());
        for (int32_t d = 0; d < hd; ++d)
          ASSERT_NEAR(got[(t * n_head + h) * hd + d], want[d], 1e-4f) << "hd " << hd << " t " << t << " h " << h;
      }
  }
}

TEST(CudaKernels, KvWriteRoundsToF16AtTheBlockTableSlot) {
  NEXUS_REQUIRE_CUDA();
  const int32_t bs = 16, KV = 8, n_layer = 2, n_blocks = 4;
  const int64_t layer_elems = 2LL * bs * KV, block_elems = n_layer * layer_elems;
  DeviceBuffer<uint16_t> dc(static_cast<size_t>(n_blocks * block_elems));
  CUDA_CHECK(cudaMemset(dc.get(), 0, dc.bytes()));
  std::vector<int32_t> bt = {2, 3}, pos = {17}, seq = {0};
  auto dbt = to_device(bt), dpos = to_device(pos), dseq = to_device(seq);
  const std::vector<float> k = randn(KV, 1), v = randn(KV, 2);
  auto dk = to_device(k), dv = to_device(v);
  cuda::PagedCache pc{dc.get(), bs, KV, block_elems, layer_elems};
  cuda::BatchMeta bm{dpos.get(), dseq.get(), dbt.get(), 2};
  cuda::kv_write(pc, bm, 1, dk.get(), dv.get(), 1, nullptr);
  const std::vector<uint16_t> c = to_host(dc, dc.size());
  const int64_t k_off = 3 * block_elems + 1 * layer_elems + 1 * KV;  // block bt[17/16]=3, slot 1
  for (int i = 0; i < KV; ++i) {
    EXPECT_EQ(c[k_off + i], fp32_to_fp16(k[i]));
    EXPECT_EQ(c[k_off + layer_elems / 2 + i], fp32_to_fp16(v[i]));
  }
  size_t nonzero = 0;
  for (uint16_t e : c) nonzero += e != 0;
  EXPECT_LE(nonzero, static_cast<size_t>(2 * KV));  // nothing else written
}

#endif  // NEXUS_HAVE_CUDA
