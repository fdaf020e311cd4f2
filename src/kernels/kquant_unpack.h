// K-quant super-blocks (quant_blocks.h) unpacked to integers: the packed
// sub-block scales and mins, and each of the 256 values' integer level. The
// dequantizers (dequant_kquants.cpp) and the reference products
// (gemm_ref_kquants.cpp) both read blocks through these, so the portable
// code decodes the layouts in one place; the SIMD kernels decode them again
// with vector operations and are tested bit for bit against the reference.
//
// Source: ggml's ggml-quants.c (get_scale_min_k4, dequantize_row_q*_K).
//
// Value order, v = 0..255 of a super-block:
//   Q2_K, Q3_K: h = v / 128, j = (v % 128) / 32, l = v % 32: bits 2j..2j+1 of
//     qs[32 h + l]; Q3_K's high bit is bit 4h + j of hmask[l] (clear means
//     minus 4). Sub-block (of 16) v / 16.
//   Q4_K, Q5_K: c = v / 64, l = v % 32: the low nibble of qs[32 c + l] for
//     v % 64 < 32, else the high one; Q5_K's fifth bit (+16) is bit v / 32 of
//     qh[l]. Sub-block (of 32) v / 32.
//   Q6_K: h = v / 128, k = (v % 128) / 32, l = v % 32: the low nibble (k = 0,
//     1) or high nibble (k = 2, 3) of ql[64 h + 32 (k % 2) + l], bits 2k..2k+1
//     of qh[32 h + l] above it, minus 32. Sub-block (of 16) v / 16.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace nexus {

// Q4_K / Q5_K: 8 six-bit scales and 8 six-bit mins from 12 bytes. Sub-blocks
// 0..3 hold their scale in bits 0..5 of bytes 0..3 and their min in bits 0..5
// of bytes 4..7; sub-blocks 4..7 keep their low 4 bits in the nibbles of bytes
// 8..11 (scale low, min high) and their top 2 bits in bits 6..7 of bytes 0..3
// (scale) and 4..7 (min).
inline void unpack_q4k_scales(const uint8_t* packed, uint8_t* scale, uint8_t* min) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = packed[j] & 63;
    min[j] = packed[j + 4] & 63;
    scale[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    min[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// Q3_K: 16 six-bit scales from 12 bytes, returned signed (stored value - 32).
// Low 4 bits: the low nibbles of bytes 0..7 (scales 0..7), then their high
// nibbles (scales 8..15); top 2 bits of scale j: bits 2 (j / 4) .. +1 of byte
// 8 + j % 4.
inline void unpack_q3k_scales(const uint8_t* packed, int8_t* scale) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scale[j] = static_cast<int8_t>((low | high << 4) - 32);
  }
}

// One super-block as integers: value v = d * scale[v / 16] * q[v] - dmin *
// min[v / 16] (Q3_K and Q6_K: min = 0 and no dmin). Q4_K / Q5_K's scales of
// 32 values appear twice (sub-blocks 2s and 2s + 1 of 16).
struct KQuantInts {
  int8_t q[kQK_K];   // Q2_K 0..3, Q3_K -4..3, Q4_K 0..15, Q5_K 0..31, Q6_K -32..31
  int16_t scale[16];
  int16_t min[16];
};

inline void unpack(const BlockQ2_K& b, KQuantInts& out) {
  for (int v = 0; v < kQK_K; ++v)
    out.q[v] = static_cast<int8_t>((b.qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3);
  for (int s = 0; s < 16; ++s) {
    out.scale[s] = b.scales[s] & 0x0f;
    out.min[s] = b.scales[s] >> 4;
  }
}

inline void unpack(const BlockQ3_K& b, KQuantInts& out) {
  for (int v = 0; v < kQK_K; ++v) {
    const int h = v / 128, j = (v % 128) / 32, l = v % 32;
    const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
    const bool high = (b.hmask[l] >> (4 * h + j)) & 1;
    out.q[v] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
  int8_t sc[16];
  unpack_q3k_scales(b.scales, sc);
  for (int s = 0; s < 16; ++s) out.scale[s] = sc[s], out.min[s] = 0;
}

// Q4_K and Q5_K share their nibbles and scales; qh is null for Q4_K.
inline void unpack_q45k(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, KQuantInts& out) {
  for (int v = 0; v < kQK_K; ++v) {
    const uint8_t byte = qs[32 * (v / 64) + v % 32];
    int q = v % 64 < 32 ? byte & 0x0f : byte >> 4;
    if (qh != nullptr) q |= ((qh[v % 32] >> (v / 32)) & 1) << 4;
    out.q[v] = static_cast<int8_t>(q);
  }
  uint8_t sc[8], mn[8];
  unpack_q4k_scales(scales, sc, mn);
  for (int s = 0; s < 16; ++s) out.scale[s] = sc[s / 2], out.min[s] = mn[s / 2];
}
inline void unpack(const BlockQ4_K& b, KQuantInts& out) { unpack_q45k(b.scales, b.qs, nullptr, out); }
inline void unpack(const BlockQ5_K& b, KQuantInts& out) { unpack_q45k(b.scales, b.qs, b.qh, out); }

inline void unpack(const BlockQ6_K& b, KQuantInts& out) {
  for (int v = 0; v < kQK_K; ++v) {
    const int h = v / 128, k = (v % 128) / 32, l = v % 32;
    const uint8_t byte = b.ql[64 * h + 32 * (k % 2) + l];
    const int low = k < 2 ? byte & 0x0f : byte >> 4;
    const int high = (b.qh[32 * h + l] >> (2 * k)) & 3;
    out.q[v] = static_cast<int8_t>((low | high << 4) - 32);
  }
  for (int s = 0; s < 16; ++s) out.scale[s] = b.scales[s], out.min[s] = 0;
}

}  // namespace nexus
