// Per-type reference quantizers behind quantize_row_ref (model/quantize_ref.h
// documents each algorithm and its source). Each writes nb consecutive
// blocks from nb * block-size floats; none allocates.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace nexus::quant {

// model/quantize_legacy.cpp: blocks of 32.
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);

// model/quantize_kquants.cpp: super-blocks of 256.
void quantize_q2_K(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_K(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_K(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_K(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_K(const float* x, BlockQ6_K* y, int64_t nb);

// model/quantize_iq4.cpp: IQ4_NL blocks of 32, IQ4_XS super-blocks of 256.
void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIq4Xs* y, int64_t nb);
// The index of the kIq4nlValues level nearest to v, exactly as ggml's
// best_index_int8 picks it (ties and float rounding included; NaN -> 15).
int iq4nl_nearest_level(float v);

}  // namespace nexus::quant
