// Scale searches of ggml's K-quant reference quantizers (see quant_search.h).
// Every sum runs in index order and every product in ggml's association
// ((w * x) * l, not w * (x * l)): float addition and multiplication are not
// associative, and a different last bit can flip a comparison between two
// candidate scales.
#include "model/quant_search.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quant_simd.h"

namespace nexus::quant {
namespace {

// The signed value of largest magnitude (the first one on ties) and that
// magnitude.
void signed_absmax(int n, const float* x, float* max, float* amax) {
  *max = 0.0f;
  *amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      *max = x[i];
    }
  }
}

int clamp_code(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

}  // namespace

float make_qx_quants_rmse1(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_absmax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  // Weighted least squares with w = x^2: the best scale for fixed codes l
  // is sum(w x l) / sum(w l^2), and its fit is better the larger
  // sum(w x l)^2 / sum(w l^2). Lane 0 holds the starting scale -nmax / max,
  // lanes 1..18 the neighbours is = -9..-1, 1..9 in ggml's order; each lane
  // sums over the values in index order, as ggml's loop per candidate does.
  constexpr int kCandidates = 19, kVecs = 3, kMaxN = 16;
  float iscale[kVecs * 8];
  iscale[0] = static_cast<float>(-nmax) / max;
  for (int c = 1; c < kVecs * 8; ++c) {
    const int is = c <= 9 ? c - 10 : c - 9;
    iscale[c] = c < kCandidates ? -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max : iscale[0];
  }
  I8 codes[kVecs][kMaxN];
  F8 is8[kVecs], slx[kVecs], sl2[kVecs];
  for (int v = 0; v < kVecs; ++v) {
    std::memcpy(&is8[v], iscale + 8 * v, sizeof is8[v]);
    slx[v] = sl2[v] = splat(0.0f);
  }
  for (int i = 0; i < n; ++i) {
    const float w = x[i] * x[i];
    const F8 xi = splat(x[i]), wx = splat(w * x[i]), w8 = splat(w);
#pragma GCC unroll 3
    for (int v = 0; v < kVecs; ++v) {
      const I8 l = clamp(nearest_int8(is8[v] * xi), -nmax, nmax - 1);
      codes[v][i] = l + splat_i(nmax);
      const F8 fl = to_float(l);
      slx[v] += wx * fl;
      sl2[v] += w8 * fl * fl;
    }
  }
  float sumlx[kVecs * 8], suml2[kVecs * 8];
  std::memcpy(sumlx, slx, sizeof sumlx);
  std::memcpy(suml2, sl2, sizeof suml2);
  float scale = suml2[0] != 0.0f ? sumlx[0] / suml2[0] : 0.0f;
  float best = scale * sumlx[0];
  int pick = 0;
  for (int c = 1; c < kCandidates; ++c)
    if (suml2[c] > 0.0f && sumlx[c] * sumlx[c] > best * suml2[c]) {
      scale = sumlx[c] / suml2[c];
      best = scale * sumlx[c];
      pick = c;
    }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(codes[pick / 8][i][pick % 8]);
  return scale;
}

float make_q3_quants_rmse(int n, int nmax, const float* x, int8_t* L) {
  float max, amax;
  signed_absmax(n, x, &max, &amax);
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_code(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // Coordinate descent: for each value, the code that is best given all the
  // others (x * sum_l2 / sum_lx without it), kept when the fit improves.
  for (int pass = 0; pass < 5; ++pass) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0.0f) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int new_l = clamp_code(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  // ggml of February 2025 divides without a guard; suml2 > 0 whenever
  // amax >= kGroupMaxEps (the largest value gets a nonzero code).
  return sumlx / suml2;
}

namespace {

// make_qkx2_quants' trial scales, evaluated 8 per vector, Vecs vectors at
// once: for each lane, the codes, the weighted least-squares scale and min
// (min clamped to <= 0), D (the fit is used only when D > 0) and the
// weighted error of the fit. All under one min.
constexpr int kQkx2Vecs = 3, kQkx2Lanes = 8 * kQkx2Vecs, kQkx2MaxN = 32;

struct Qkx2Lanes {
  float iscale[kQkx2Lanes];
  F8 codes[kQkx2Vecs][kQkx2MaxN];
  float scale[kQkx2Lanes], min[kQkx2Lanes], D[kQkx2Lanes], error[kQkx2Lanes];
};

template <int Vecs, bool UseMad>
void evaluate_trials(int n, int nmax, const float* x, const float* weights, float min, float sum_w, float sum_x,
                     Qkx2Lanes& t) {
  F8 is8[Vecs], sum_l[Vecs], sum_l2[Vecs], sum_xl[Vecs];
  for (int v = 0; v < Vecs; ++v) {
    std::memcpy(&is8[v], t.iscale + 8 * v, sizeof is8[v]);
    sum_l[v] = sum_l2[v] = sum_xl[v] = splat(0.0f);
  }
  for (int i = 0; i < n; ++i) {
    const F8 xm = splat(x[i] - min), w = splat(weights[i]), xi = splat(x[i]);
#pragma GCC unroll 3
    for (int v = 0; v < Vecs; ++v) {
      const F8 fl = to_float(clamp(nearest_int8(is8[v] * xm), 0, nmax));
      t.codes[v][i] = fl;
      const F8 wl = w * fl;
      sum_l[v] += wl;
      sum_l2[v] += wl * fl;
      sum_xl[v] += wl * xi;
    }
  }
  F8 scale[Vecs], mn[Vecs];
  for (int v = 0; v < Vecs; ++v) {
    const F8 D = splat(sum_w) * sum_l2[v] - sum_l[v] * sum_l[v];
    scale[v] = (splat(sum_w) * sum_xl[v] - splat(sum_x) * sum_l[v]) / D;
    mn[v] = (sum_l2[v] * splat(sum_x) - sum_l[v] * sum_xl[v]) / D;
    const I8 positive = mn[v] > splat(0.0f);
    scale[v] = select(positive, sum_xl[v] / sum_l2[v], scale[v]);
    mn[v] = select(positive, splat(0.0f), mn[v]);
    std::memcpy(t.D + 8 * v, &D, sizeof D);
    std::memcpy(t.scale + 8 * v, &scale[v], sizeof scale[v]);
    std::memcpy(t.min + 8 * v, &mn[v], sizeof mn[v]);
  }
  F8 err[Vecs];
  for (int v = 0; v < Vecs; ++v) err[v] = splat(0.0f);
  for (int i = 0; i < n; ++i) {
    const F8 w = splat(weights[i]), xi = splat(x[i]);
#pragma GCC unroll 3
    for (int v = 0; v < Vecs; ++v) {
      const F8 diff = scale[v] * t.codes[v][i] + mn[v] - xi;
      err[v] += w * (UseMad ? abs(diff) : diff * diff);
    }
  }
  for (int v = 0; v < Vecs; ++v) std::memcpy(t.error + 8 * v, &err[v], sizeof err[v]);
}

template <bool UseMad>
void evaluate_trials(int vecs, int n, int nmax, const float* x, const float* weights, float min, float sum_w,
                     float sum_x, Qkx2Lanes& t) {
  switch (vecs) {
    case 1: evaluate_trials<1, UseMad>(n, nmax, x, weights, min, sum_w, sum_x, t); break;
    case 2: evaluate_trials<2, UseMad>(n, nmax, x, weights, min, sum_w, sum_x, t); break;
    default: evaluate_trials<3, UseMad>(n, nmax, x, weights, min, sum_w, sum_x, t); break;
  }
}

}  // namespace

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min, float rmin,
                       float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);  // (x < min ? x : min): the same for non-NaN input
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.0f;
  }
  auto error_of = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };

  // The starting grid nmax / (max - min) with its own scale and min.
  const float iscale0 = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale0;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_code(nearest_int(iscale0 * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += weights[i] * error_of(diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }

  // Trials is = 0..nstep, in ggml's order. A trial's grid depends on the min
  // of the best fit so far, so trials are evaluated speculatively under the
  // current min, up to 24 at a time, and scanned in order; an accepted trial
  // that moves the min invalidates the ones after it, which are evaluated
  // again (about 1 + 2.7 passes per sub-block for Q4_K).
  Qkx2Lanes t;
  const int n_trials = nstep + 1;
  int next = 0;  // the first trial not yet evaluated under the current min
  while (next < n_trials) {
    const int count = std::min(kQkx2Lanes, n_trials - next);
    for (int c = 0; c < kQkx2Lanes; ++c) {
      const int is = next + std::min(c, count - 1);  // padding lanes repeat the last trial
      t.iscale[c] = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    }
    const int vecs = (count + 7) / 8;
    if (use_mad)
      evaluate_trials<true>(vecs, n, nmax, x, weights, min, sum_w, sum_x, t);
    else
      evaluate_trials<false>(vecs, n, nmax, x, weights, min, sum_w, sum_x, t);
    bool moved = false;
    for (int c = 0; c < count && !moved; ++c) {
      if (!(t.D[c] > 0.0f && t.error[c] < best_error)) continue;
      for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(t.codes[c / 8][i][c % 8]);
      best_error = t.error[c];
      scale = t.scale[c];
      moved = t.min[c] != min;
      min = t.min[c];
      if (moved) next += c + 1;
    }
    if (!moved) next += count;
  }
  *the_min = -min;
  return scale;
}

}  // namespace nexus::quant
