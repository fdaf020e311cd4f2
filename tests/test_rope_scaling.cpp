// RoPE scaling (issue 20): YaRN angles against an independent float64
// transcription of the published definition, the keys read as llama.cpp
// reads them, and the keys refused by name.
//
// YaRN (Peng, Quesnelle, Fan, Shippole 2023, "YaRN: Efficient Context
// Window Extension of Large Language Models", arXiv 2309.00071, sec. 3.2 and
// 3.4): for a RoPE of |D| dimensions, base b and scale s = L' / L (L the
// original context), pair d turns at theta_d = b^(-2d/|D|), wavelength
// lambda_d = 2 pi / theta_d, ratio r(d) = L / lambda_d. NTK-by-parts:
// h(theta_d) = (1 - gamma(r)) theta_d / s + gamma(r) theta_d with gamma = 0
// for r < alpha, 1 for r > beta (alpha = 1, beta = 32 for Llama); attention
// temperature sqrt(1/t) = 0.1 ln(s) + 1 on q and k alike.
// ggml's reading (ggml-cpu ops.cpp rope_yarn, ggml.c
// ggml_rope_yarn_corr_dims; the authors' own code, LlamaYaRNScaledRotaryEmbedding,
// does the same): gamma is a linear ramp over the pair index between
// floor(d(beta_fast)) and ceil(d(beta_slow)), d(x) the (fractional) pair
// where r = x, times ext_factor; the temperature multiplies cos and sin,
// times the attention factor the caller passes.
//
// The reference below is the ggml reading in float64, and the paper's
// regions are checked on Nexus's angles: every pair with r > beta keeps its
// frequency, every pair with r < alpha is divided by s.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/family_ops.h"
#include "model/llama_config.h"
#include "util/error.h"

using namespace nexus;

namespace {

struct Yarn {
  int n_rot;
  double base, factor;
  int n_ctx_orig;
  double ext_factor = 1.0, attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
};

// The fractional pair index where r(d) = x: L / (2 pi b^(2d/|D|)) = x.
double pair_at_ratio(const Yarn& y, double x) {
  return y.n_rot * std::log(y.n_ctx_orig / (2.0 * M_PI * x)) / (2.0 * std::log(y.base));
}

// cos and sin of pair j at `pos`, ggml's reading in float64.
std::pair<double, double> reference(const Yarn& y, int j, double pos) {
  const double theta_d = std::pow(y.base, -2.0 * j / y.n_rot);
  const double low = std::max(0.0, std::floor(pair_at_ratio(y, y.beta_fast)));
  const double high = std::min(y.n_rot - 1.0, std::ceil(pair_at_ratio(y, y.beta_slow)));
  const double ramp = 1.0 - std::clamp((j - low) / std::max(0.001, high - low), 0.0, 1.0);
  const double gamma = ramp * y.ext_factor;
  const double h = (1.0 - gamma) * theta_d / y.factor + gamma * theta_d;
  const double m = y.attn_factor * (y.ext_factor != 0 ? 0.1 * std::log(y.factor) + 1.0 : 1.0);
  return {std::cos(pos * h) * m, std::sin(pos * h) * m};
}

std::vector<float> nexus_angles(const Yarn& y, int pos) {
  RopeParams p;
  p.freq_base = static_cast<float>(y.base);
  p.freq_scale = static_cast<float>(1.0 / y.factor);
  p.ext_factor = static_cast<float>(y.ext_factor);
  p.attn_factor = static_cast<float>(y.attn_factor);
  rope_yarn_corr_dims(y.n_rot, y.n_ctx_orig, p.freq_base, static_cast<float>(y.beta_fast),
                      static_cast<float>(y.beta_slow), &p.corr_low, &p.corr_high);
  std::vector<float> cs(static_cast<size_t>(y.n_rot));
  rope_angles_ext(pos, y.n_rot, p, cs.data());
  return cs;
}

const std::vector<Yarn>& yarn_cases() {
  static const std::vector<Yarn> c = {
      {128, 10000.0, 4.0, 4096},                       // head 128, base 1e4, factor 4 over 4k
      {128, 1000000.0, 4.0, 32768},                    // Qwen2.5 / Qwen3's YaRN: theta 1e6, 32k -> 128k
      {64, 10000.0, 16.0, 2048, 1.0, 1.0, 32.0, 1.0},  // a large factor on a small head
      {64, 500000.0, 8.0, 8192, 0.5, 1.2},             // half extrapolation, an attention factor
      {96, 10000.0, 2.0, 4096, 1.0, 1.0, 8.0, 2.0},    // other betas (grok's beta_fast 8)
  };
  return c;
}

TEST(RopeYarn, AnglesMatchTheFloat64Definition) {
  const int positions[] = {0, 1, 7, 100, 4095, 20000, 131071};
  for (const Yarn& y : yarn_cases()) {
    double worst = 0;
    for (int pos : positions) {
      const std::vector<float> cs = nexus_angles(y, pos);
      for (int j = 0; j < y.n_rot / 2; ++j) {
        const auto [c, s] = reference(y, j, pos);
        worst = std::max({worst, std::abs(cs[2 * j] - c), std::abs(cs[2 * j + 1] - s)});
      }
    }
    // Both in float64; Nexus rounds the results to float32 (6e-8 relative,
    // magnitude up to ~1.3) and its theta differs from this one only in the
    // order of the same float64 products: at position 131071 a relative
    // 2e-16 of theta ~ 1e5 moves cos and sin by ~3e-11.
    EXPECT_LE(worst, 2e-7) << "n_rot " << y.n_rot << " base " << y.base << " factor " << y.factor;
  }
}

// The paper's three regions, read off Nexus's own angles: a pair whose
// wavelength fits more than beta times into the original context keeps its
// frequency (gamma = 1), one that fits less than alpha times is
// interpolated (divided by s), and the magnitude is sqrt(1/t) = 0.1 ln s + 1.
TEST(RopeYarn, PaperRegionsAndTemperature) {
  for (const Yarn& y0 : yarn_cases()) {
    Yarn y = y0;
    y.ext_factor = 1.0;
    y.attn_factor = 1.0;
    const int pos = 3;  // small enough that theta stays below pi for every pair
    const std::vector<float> cs = nexus_angles(y, pos);
    int kept = 0, interpolated = 0;
    for (int j = 0; j < y.n_rot / 2; ++j) {
      const double theta_d = std::pow(y.base, -2.0 * j / y.n_rot);
      const double r = y.n_ctx_orig * theta_d / (2.0 * M_PI);
      const double mag = std::hypot(cs[2 * j], cs[2 * j + 1]);
      EXPECT_NEAR(mag, 0.1 * std::log(y.factor) + 1.0, 1e-6);
      const double angle = std::atan2(cs[2 * j + 1], cs[2 * j]);
      if (r > y.beta_fast) {
        EXPECT_NEAR(angle, std::remainder(pos * theta_d, 2 * M_PI), 1e-6) << "pair " << j << " r " << r;
        ++kept;
      } else if (r < y.beta_slow) {
        EXPECT_NEAR(angle, pos * theta_d / y.factor, 1e-6) << "pair " << j << " r " << r;
        ++interpolated;
      }
    }
    EXPECT_GT(kept, 0);  // each case has pairs in both outer regions
    EXPECT_GT(interpolated, 0);
  }
}

// Without YaRN (ext_factor 0) the angles are linear scaling's, and with an
// attention factor of 1 exactly rope_angles_ext's plain form.
TEST(RopeYarn, NoExtrapolationIsLinearScaling) {
  Yarn y{64, 10000.0, 4.0, 4096, 0.0, 1.0};
  const std::vector<float> cs = nexus_angles(y, 1000);
  for (int j = 0; j < 32; ++j) {
    const double theta = 1000 * std::pow(10000.0, -2.0 * j / 64) / 4.0;
    EXPECT_FLOAT_EQ(cs[2 * j], static_cast<float>(std::cos(theta)));
    EXPECT_FLOAT_EQ(cs[2 * j + 1], static_cast<float>(std::sin(theta)));
  }
}

// ---------------------------------------------------------------------------
// The keys, read from a metadata-only GGUF file of a small qwen2 model.

std::string write_keys(const std::string& stem, const std::function<void(GgufWriter&)>& add) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen2");
  w.set_u32("qwen2.context_length", 131072);
  w.set_u32("qwen2.embedding_length", 256);
  w.set_u32("qwen2.block_count", 2);
  w.set_u32("qwen2.feed_forward_length", 512);
  w.set_u32("qwen2.attention.head_count", 2);
  w.set_f32("qwen2.rope.freq_base", 1000000.0f);
  add(w);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("nexus-rope-" + stem + "-" + std::to_string(::getpid()) + ".gguf"))
          .string();
  w.write(path, [](size_t, std::span<uint8_t>) {});
  return path;
}

LlamaConfig config_of(const std::string& stem, const std::function<void(GgufWriter&)>& add) {
  const std::string path = write_keys(stem, add);
  struct Remove {
    std::string p;
    ~Remove() { std::filesystem::remove(p); }
  } rm{path};
  return LlamaConfig::from_gguf(GgufFile(path));
}

std::string refusal_of(const std::string& stem, const std::function<void(GgufWriter&)>& add) {
  try {
    config_of(stem, add);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RopeScalingKeys, YarnAsLlamaCppReadsIt) {
  // Qwen2.5's YaRN: factor 4 over 32768, nothing else set.
  const LlamaConfig c = config_of("yarn", [](GgufWriter& w) {
    w.set_string("qwen2.rope.scaling.type", "yarn");
    w.set_f32("qwen2.rope.scaling.factor", 4.0f);
    w.set_u32("qwen2.rope.scaling.original_context_length", 32768);
  });
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.n_ctx_orig, 32768);
  EXPECT_EQ(c.yarn_ext_factor, 1.0f);  // llama.cpp: 1 under YaRN unless set
  EXPECT_EQ(c.yarn_beta_fast, 32.0f);
  EXPECT_EQ(c.yarn_beta_slow, 1.0f);
  // llama.cpp cancels its own mscale against ggml's: the kernel's factor is
  // rope.scaling.attn_factor (1), and ggml multiplies by 1 + 0.1 ln 4.
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.0f);
}

TEST(RopeScalingKeys, YarnKeysOverrideTheDefaults) {
  const LlamaConfig c = config_of("yarn-keys", [](GgufWriter& w) {
    w.set_string("qwen2.rope.scaling.type", "yarn");
    w.set_f32("qwen2.rope.scaling.factor", 8.0f);
    w.set_f32("qwen2.rope.scaling.attn_factor", 1.5f);
    w.set_f32("qwen2.rope.scaling.yarn_beta_fast", 8.0f);
    w.set_f32("qwen2.rope.scaling.yarn_beta_slow", 2.0f);
    w.set_f32("qwen2.rope.scaling.yarn_ext_factor", 0.5f);
    w.set_f32("qwen2.rope.scaling.yarn_log_multiplier", 0.1f);
  });
  EXPECT_EQ(c.n_ctx_orig, 131072);  // no original_context_length: context_length
  EXPECT_EQ(c.yarn_beta_fast, 8.0f);
  EXPECT_EQ(c.yarn_beta_slow, 2.0f);
  EXPECT_EQ(c.yarn_ext_factor, 0.5f);
  // llama-context.cpp: get_mscale(8, 1) / get_mscale(8, 0.1) / (1 + 0.1 ln 8) * 1.5
  // = 1.5 / (1 + 0.01 ln 8), so ggml's product is 1.5 (1 + 0.1 ln 8) / (1 + 0.01 ln 8).
  EXPECT_NEAR(c.rope_attn_factor, 1.5 / (1.0 + 0.01 * std::log(8.0)), 1e-6);
}

TEST(RopeScalingKeys, LlamaCppDefaultsAndOldKeys) {
  // No type: llama.cpp's default "linear" with the factor.
  LlamaConfig c = config_of("notype", [](GgufWriter& w) { w.set_f32("qwen2.rope.scaling.factor", 2.0f); });
  EXPECT_EQ(c.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.5f);
  // The old key name.
  c = config_of("old", [](GgufWriter& w) { w.set_f32("qwen2.rope.scale_linear", 4.0f); });
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  // Type none never scales, whatever the factor (llama-context.cpp).
  c = config_of("none", [](GgufWriter& w) {
    w.set_string("qwen2.rope.scaling.type", "none");
    w.set_f32("qwen2.rope.scaling.factor", 4.0f);
  });
  EXPECT_EQ(c.rope_scaling, RopeScaling::None);
  EXPECT_EQ(c.rope_freq_scale, 1.0f);
  // rope.scaling.attn_factor multiplies cos and sin for every type (phi3 files carry it).
  c = config_of("attn", [](GgufWriter& w) { w.set_f32("qwen2.rope.scaling.attn_factor", 1.19f); });
  EXPECT_FLOAT_EQ(c.rope_attn_factor, 1.19f);
  EXPECT_EQ(c.yarn_ext_factor, 0.0f);
}

TEST(RopeScalingKeys, WhatNexusDoesNotImplementIsRefusedByName) {
  const std::pair<std::function<void(GgufWriter&)>, std::string> cases[] = {
      {[](GgufWriter& w) { w.set_string("qwen2.rope.scaling.type", "dynamic"); },
       "RoPE scaling type 'dynamic' is not implemented"},
      {[](GgufWriter& w) { w.set_f32("qwen2.rope.scaling.yarn_beta_fast", 16.0f); },
       "qwen2.rope.scaling.yarn_beta_fast is set but rope.scaling.type is 'linear', not yarn"},
      {[](GgufWriter& w) {
         w.set_string("qwen2.rope.scaling.type", "yarn");
         w.set_f32("qwen2.rope.scaling.factor", 4.0f);
         w.set_f32("qwen2.rope.scaling.yarn_attn_factor", 0.7f);
       },
       "qwen2.rope.scaling.yarn_attn_factor other than 1 is not implemented"},
      {[](GgufWriter& w) {
         w.set_string("qwen2.rope.scaling.type", "longrope");
         w.set_f32("qwen2.rope.scaling.factor", 4.0f);
       },
       "qwen2.rope.scaling.factor with rope.scaling.type longrope is not implemented"},
      {[](GgufWriter& w) { w.set_f32("qwen2.rope.scaling.factor", 0.5f); }, "invalid qwen2.rope.scaling.factor"},
      {[](GgufWriter& w) { w.set_string("qwen2.rope.scaling.factor", "4"); },
       "metadata 'qwen2.rope.scaling.factor' has type STRING, expected a number"},
      {[](GgufWriter& w) { w.set_f32("qwen2.rope.scaling.attn_factor", -1.0f); },
       "qwen2.rope.scaling.attn_factor must be positive"},
      {[](GgufWriter& w) { w.set_f32("qwen2.final_logit_softcapping", 30.0f); },
       "qwen2.final_logit_softcapping is not implemented for architecture qwen2"},
      {[](GgufWriter& w) { w.set_u32("qwen2.expert_count", 8); }, "qwen2.expert_count is not implemented"},
      {[](GgufWriter& w) { w.set_f32("qwen2.logit_scale", 0.5f); }, "qwen2.logit_scale is not implemented"},
      {[](GgufWriter& w) { w.set_bool("qwen2.attention.causal", false); },
       "qwen2.attention.causal false (non-causal attention) is not implemented"},
  };
  int i = 0;
  for (const auto& [add, want] : cases) {
    const std::string got = refusal_of("refused-" + std::to_string(i++), add);
    EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "', got '" << got << "'";
  }
  // Neutral values of those keys are accepted (real files carry expert_count 0).
  EXPECT_NO_THROW(config_of("neutral", [](GgufWriter& w) {
    w.set_u32("qwen2.expert_count", 0);
    w.set_bool("qwen2.attention.causal", true);
    w.set_u32("qwen2.attention.sliding_window", 0);  // Phi-4 style: 0 = none
  }));
}

}  // namespace
