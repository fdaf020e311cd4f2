// Decode product kernels for the weight types Q4_1, Q5_0, Q5_1, IQ4_NL
// (blocks of 32, activations ActFormat::Q8_32: BlockQ8Act) and IQ4_XS
// (super-blocks of 256, activations ActFormat::Q8_K: BlockQ8K), in two
// instruction sets:
//   *_avx2   (gemm_legacy_avx2.cpp): AVX2 + FMA + F16C, the build's baseline;
//   *_avx512 (gemm_legacy_avx512.cpp): AVX-512 F/BW/VL/DQ + VNNI; call only
//            when cpu_features().avx512_vnni.
// Signature and contract: GemmFn (weight_kernels.h). Rows [r0, r1) of the
// weight (rows row_bytes apart, GGUF layout) against n_tokens activation rows
// of n_cols values, y[t * ldy + r]. n_cols: a multiple of 32 (256 for
// IQ4_XS). Each (row, token) gets the same bits whatever n_tokens, r0 and r1
// are; they agree with the reference kernels (gemm_ref.h) to float32
// rounding, not bit for bit (the float sums run in another order).
//
// Built for decode (1-8 tokens, the weight streamed once from DRAM): one
// weight row against a tile of up to 4 tokens, each weight block decoded
// once per tile, software prefetch of the weight stream, integer products
// (u8 x s8: maddubs/madd on AVX2, vpdpbusd on AVX-512), IQ4 levels through a
// 16-entry byte shuffle of kIq4nlValues. Activation quants must lie in
// [-127, 127], as quantize_act_q8 / quantize_act_q8k give them.
//
// Source of the arithmetic: ggml's ggml_vec_dot_{q4_1_q8_1, q5_0_q8_0,
// q5_1_q8_1, iq4_nl_q8_0, iq4_xs_q8_K} (ggml-cpu quants.c).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus {

#define NEXUS_GEMM_LEGACY(name)                                                                               \
  void gemm_##name(const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int64_t n_cols, const void* x, \
                   int64_t n_tokens, float* y, int64_t ldy)
NEXUS_GEMM_LEGACY(q4_1_avx2);
NEXUS_GEMM_LEGACY(q5_0_avx2);
NEXUS_GEMM_LEGACY(q5_1_avx2);
NEXUS_GEMM_LEGACY(iq4_nl_avx2);
NEXUS_GEMM_LEGACY(iq4_xs_avx2);
NEXUS_GEMM_LEGACY(q4_1_avx512);
NEXUS_GEMM_LEGACY(q5_0_avx512);
NEXUS_GEMM_LEGACY(q5_1_avx512);
NEXUS_GEMM_LEGACY(iq4_nl_avx512);
NEXUS_GEMM_LEGACY(iq4_xs_avx512);
#undef NEXUS_GEMM_LEGACY

}  // namespace nexus
