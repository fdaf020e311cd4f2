// The kernel table (weight_kernels.h): one row per weight type.
#include "kernels/weight_kernels.h"

#include <array>

#include "kernels/act_quant.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/gemm_ref.h"
#include "kernels/x86/gemm_amx.h"
#include "kernels/x86/gemm_avx2.h"
#include "kernels/x86/gemm_float_avx512.h"
#include "kernels/x86/gemm_kquants.h"
#include "kernels/x86/gemm_kquants_avx512.h"
#include "kernels/x86/gemm_kquants_prefill_avx512.h"
#include "kernels/x86/gemm_legacy.h"
#include "kernels/x86/gemm_prefill_avx512.h"
#include "kernels/x86/gemm_quant_avx512.h"

namespace nexus {
namespace {

using A = ActFormat;

// One row per weight type:
//   {type, activation format, dequantize, {ref, avx2, avx512_vnni, avx512_prefill, amx}}
// nullptr: no kernel of that instruction set (pick_gemm takes the nearest below).
// clang-format off
constexpr TypeKernels kTable[] = {
    {GgmlType::F32, A::F32, dequantize_row_f32,
     {gemm_ref_f32, gemm_f32_avx2, gemm_f32_avx512, nullptr, nullptr}},
    {GgmlType::F16, A::F32, dequantize_row_f16,
     {gemm_ref_f16, gemm_f16_avx2, gemm_f16_avx512, nullptr, nullptr}},
    {GgmlType::BF16, A::F32, dequantize_row_bf16,
     {gemm_ref_bf16, gemm_bf16_avx2, gemm_bf16_avx512, nullptr, nullptr}},
    {GgmlType::Q8_0, A::Q8_32, dequantize_row_q8_0,
     {gemm_ref_q8_0, gemm_q8_0_avx2, gemm_q8_0_avx512, gemm_q8_0_prefill_avx512, gemm_q8_0_amx}},
    {GgmlType::Q4_0, A::Q8_32, dequantize_row_q4_0,
     {gemm_ref_q4_0, gemm_q4_0_avx2, gemm_q4_0_avx512, gemm_q4_0_prefill_avx512, gemm_q4_0_amx}},
    {GgmlType::Q4_1, A::Q8_32, dequantize_row_q4_1,
     {gemm_ref_q4_1, gemm_q4_1_avx2, gemm_q4_1_avx512, nullptr, nullptr}},
    {GgmlType::Q5_0, A::Q8_32, dequantize_row_q5_0,
     {gemm_ref_q5_0, gemm_q5_0_avx2, gemm_q5_0_avx512, nullptr, nullptr}},
    {GgmlType::Q5_1, A::Q8_32, dequantize_row_q5_1,
     {gemm_ref_q5_1, gemm_q5_1_avx2, gemm_q5_1_avx512, nullptr, nullptr}},
    {GgmlType::IQ4_NL, A::Q8_32, dequantize_row_iq4_nl,
     {gemm_ref_iq4_nl, gemm_iq4_nl_avx2, gemm_iq4_nl_avx512, nullptr, nullptr}},
    {GgmlType::Q2_K, A::Q8_K, dequantize_row_q2_k,
     {gemm_ref_q2_k, gemm_q2_k_avx2, gemm_q2_k_avx512, nullptr, nullptr}},
    {GgmlType::Q3_K, A::Q8_K, dequantize_row_q3_k,
     {gemm_ref_q3_k, gemm_q3_k_avx2, gemm_q3_k_avx512, nullptr, nullptr}},
    {GgmlType::Q4_K, A::Q8_K, dequantize_row_q4_k,
     {gemm_ref_q4_k, gemm_q4_k_avx2, gemm_q4_k_avx512, gemm_q4_k_prefill_avx512, nullptr}},
    {GgmlType::Q5_K, A::Q8_K, dequantize_row_q5_k,
     {gemm_ref_q5_k, gemm_q5_k_avx2, gemm_q5_k_avx512, gemm_q5_k_prefill_avx512, nullptr}},
    {GgmlType::Q6_K, A::Q8_K, dequantize_row_q6_k,
     {gemm_ref_q6_k, gemm_q6_k_avx2, gemm_q6_k_avx512, gemm_q6_k_prefill_avx512, nullptr}},
    {GgmlType::IQ4_XS, A::Q8_K, dequantize_row_iq4_xs,
     {gemm_ref_iq4_xs, gemm_iq4_xs_avx2, gemm_iq4_xs_avx512, nullptr, nullptr}},
};
// clang-format on

}  // namespace

int64_t act_block_size(ActFormat f) {
  switch (f) {
    case ActFormat::F32: return 1;
    case ActFormat::Q8_32: return 32;
    case ActFormat::Q8_K: return 256;
  }
  return 1;
}

size_t act_row_bytes(ActFormat f, int64_t n_cols) {
  switch (f) {
    case ActFormat::F32: return static_cast<size_t>(n_cols) * sizeof(float);
    case ActFormat::Q8_32: return static_cast<size_t>(n_cols / 32) * sizeof(BlockQ8Act);
    case ActFormat::Q8_K: return static_cast<size_t>(n_cols / 256) * sizeof(BlockQ8K);
  }
  return 0;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Ref: return "ref";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512_vnni";
    case Isa::Avx512Prefill: return "avx512_prefill";
    case Isa::Amx: return "amx";
  }
  return "unknown";
}

bool cpu_supports(Isa isa) {
  const CpuFeatures& cpu = cpu_features();
  switch (isa) {
    case Isa::Ref: return true;
    case Isa::Avx2: return cpu.avx2;
    case Isa::Avx512:
    case Isa::Avx512Prefill: return cpu.avx512_vnni;
    case Isa::Amx: return cpu.amx_int8 && cpu.avx512_vnni;
  }
  return false;
}

namespace {

// kTable's rows by type id, built once: matmul() asks on every product.
constexpr size_t kMaxTypeId = 64;

const std::array<const TypeKernels*, kMaxTypeId>& rows_by_id() {
  static const std::array<const TypeKernels*, kMaxTypeId> rows = [] {
    std::array<const TypeKernels*, kMaxTypeId> r{};
    for (const TypeKernels& k : kTable) r[static_cast<size_t>(k.type)] = &k;
    return r;
  }();
  return rows;
}

}  // namespace

const TypeKernels* type_kernels(GgmlType type) {
  const auto id = static_cast<size_t>(type);
  return id < kMaxTypeId ? rows_by_id()[id] : nullptr;
}

std::span<const TypeKernels> all_type_kernels() { return kTable; }

std::string supported_weight_types() {
  std::string s;
  for (const TypeKernels& k : kTable) s += (s.empty() ? "" : ", ") + std::string(ggml_type_name(k.type));
  return s;
}

Isa picked_isa(const TypeKernels& k, Isa isa) {
  for (int i = static_cast<int>(isa); i > 0; --i)
    if (k.gemm[static_cast<size_t>(i)]) return static_cast<Isa>(i);
  return Isa::Ref;
}

GemmFn pick_gemm(const TypeKernels& k, Isa isa) { return k.gemm[static_cast<size_t>(picked_isa(k, isa))]; }

}  // namespace nexus
