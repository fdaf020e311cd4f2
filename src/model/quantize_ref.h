// Reference conversion of float32 rows to the weight types Nexus computes
// with, for writing model files (nexus synth) and for benchmarks.
//
// Source: ggml's reference quantizers in ggml-quants.c (llama.cpp build of
// February 2025), reproduced arithmetically -- the same float operations in
// the same order, compiled without FMA contraction (src/CMakeLists.txt) -- so
// that rows match, byte for byte, what llama-quantize writes for the same
// floats without an importance matrix (tests/test_quantize_types checks every
// type against files llama.cpp wrote). Rounding "nearest" below is ggml's
// nearest_int: to nearest, ties to even. "fp16(v)" rounds to nearest even.
//
// Blocks of 32 (quantize_row_*_ref):
//   Q8_0: amax = max |x|, d = amax / 127, id = 1/d (0 if d = 0),
//        q = roundf(x * id); stored d is fp16(d).
//   Q4_0: m = the value of largest magnitude (signed; the first one on ties),
//        d = m / -8, id = 1/d (0 if d = 0), q = min(15, trunc(x * id + 8.5));
//        value j goes to the low nibble of byte j, value j + 16 to its high
//        nibble; stored d is fp16(d).
//   Q5_0: as Q4_0 with d = m / -16, q = min(31, trunc(x * id + 16.5)); the
//        fifth bit of value j in bit j of qh.
//   Q4_1 / Q5_1: d = (max - min) / 15 (31), m = min, q = trunc((x - min) * id
//        + 0.5) (Q4_1 clamped to 15); stored fp16(d), fp16(min).
// Super-blocks of 256 (quantize_row_q*_K_ref; model/quant_search.h has the
// searches). Each sub-block gets a float scale (and min) from a search; the
// scales are quantized against one fp16 super-block scale; then every value is
// requantized, nearest, with the decoded sub-block scale (sub-blocks whose
// decoded scale is 0 keep the search's codes):
//   Q2_K: 16 x 16, make_qkx2_quants(nmax 3, weights |x|, least |error|,
//        scales (-0.5 + 0.1 is + 3) / (max - min), is = 0..15); 4-bit scale
//        and min, each = nearest(15 * v / max v), d = fp16(max scale / 15),
//        dmin = fp16(max min / 15); q = clamp(nearest((x + dmin m) / (d s)), 0, 3).
//   Q3_K: 16 x 16, make_q3_quants(nmax 4, weights x^2, five code-moving
//        passes); 6-bit scales l = clamp(nearest(-32 s / S), -32, 31) for S the
//        scale of largest magnitude, d = fp16(S / -32); q = clamp(nearest(x /
//        (d l)), -4, 3) + 4.
//   Q4_K / Q5_K: 8 x 32, make_qkx2_quants(nmax 15 / 31, weights rms(x) + |x|,
//        least squared error, (rmin + 0.1 is + nmax) / (max - min) with rmin
//        -1 / -0.5 and is = 0..20 / 0..15); 6-bit scale and min =
//        min(63, nearest(63 v / max v)), d = fp16(max scale / 63), dmin =
//        fp16(max min / 63); q = clamp(nearest((x + dmin m) / (d s)), 0, nmax).
//   Q6_K: 16 x 16, make_qx_quants(nmax 32, weights x^2, scales -(32 + 0.1 is)
//        / max, is = -9..9); int8 scales min(127, nearest(-128 s / S)), d =
//        fp16(S / -128); q = clamp(nearest(x / (d l)), -32, 31) + 32. A
//        super-block whose scales are all below 1e-15 is all zero bytes.
// Non-linear 4-bit (quantize_row_iq4_nl_impl, as quantize_iq4_nl /
// quantize_iq4_xs call it: no importance weights, ntry = 7):
//   IQ4_NL, per 32: weights x^2; trial scales d = max / 127, then id =
//        (t - 127) / max for t = -7..7, each with codes = the nearest of the 16
//        levels to id * x and refit d = sum(w q x) / sum(w q^2), keeping the
//        largest sum(w q x)^2 / sum(w q^2); stored fp16(d), codes re-picked
//        with 1/d (unrounded).
//   IQ4_XS, per 256: IQ4_NL's search per block of 32; 6-bit block scales l =
//        clamp(nearest(s / d), -32, 31) with d = S / -32 (S: the block scale
//        of largest magnitude), stored fp16(d); codes re-picked with 1/(d l).
//   F16 / BF16: round to nearest even (kernels/quant_blocks.h).
//
//
// Throughput, one core (g++ 12 -O3, x86-64-v3, CPU time on a shared machine;
// ns per value / s per 100M values): Q4_0, Q4_1, Q5_0, Q5_1 about 1.3 / 0.13;
// Q8_0 4.3 / 0.43; Q3_K 9 / 0.9; Q6_K 11 / 1.1; IQ4_NL, IQ4_XS 16 / 1.6;
// Q2_K 20 / 2.0; Q5_K 24 / 2.4; Q4_K 31 / 3.1. The searches try each
// sub-block's candidate scales 8 at a time in vector lanes
// (model/quant_simd.h), which keeps every sum in ggml's order. A 1.1B model
// to Q4_K_M is about 35 core-seconds.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace nexus {

// Writes n values of src as one row of `type` to dst, which must hold
// ggml_row_size(type, n) bytes. n must be a multiple of the type's block
// size (32 or 256). Throws nexus::Error for a type other than F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS
// or an n that is not a multiple of its block size. Allocates nothing.
void quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace nexus
