#include "model/quantize_model.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "gguf/gguf_writer.h"
#include "kernels/dequant.h"
#include "kernels/quant_blocks.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_kernels.h"
#include "model/quantize_ref.h"
#include "util/error.h"

namespace nexus {
namespace {

bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

// llama_model_loader's weight_name_comparer: by layer number ("blk.N.",
// -1 for tensors outside the layers), then by name.
bool processing_order(const TensorInfo* a, const TensorInfo* b) {
  int la = -1, lb = -1;
  std::sscanf(a->name.c_str(), "blk.%d.", &la);
  std::sscanf(b->name.c_str(), "blk.%d.", &lb);
  if (la != lb) return la < lb;
  return a->name < b->name;
}

uint64_t bytes_of(GgmlType type, const TensorInfo& t) { return ggml_row_size(type, t.ne[0]) * t.n_rows(); }

// The type `t` should be written as, before the "already that type" check.
GgmlType choose(const TensorInfo& t, const QuantizeOptions& opt, std::optional<MixRules>& rules,
                std::string* fallback) {
  GgmlType type = opt.mix->default_type;
  if (rules) {
    MixRules::Choice c = rules->tensor_type(t.name, t.ne);
    type = c.type;
    *fallback = std::move(c.fallback);
  }
  // llama.cpp applies the two overrides last, without a fallback.
  auto override_with = [&](const std::optional<GgmlType>& o, const char* option) {
    if (!o) return;
    type = *o;
    fallback->clear();
    const uint32_t block = ggml_type_traits(static_cast<uint32_t>(type))->block_size;
    if (t.ne[0] % block != 0)
      throw Error(fmt::format("{} {}: {} has rows of {} values, not a multiple of the {} block of {}", option,
                              ggml_type_name(type), t.name, t.ne[0], ggml_type_name(type), block));
  };
  if (t.name == "token_embd.weight") override_with(opt.token_embd_type, "--token-embedding-type");
  if (t.name == "output.weight") override_with(opt.output_type, "--output-type");
  return type;
}

// F16 / BF16 rows to float32, exactly (every half value is a float). The
// kernels' dequantize_row_f16 converts value by value through an out-of-line
// function, a quarter of the time of an F16 -> Q8_0 run; a 64K-entry table
// (256 KiB, built once) costs under a nanosecond a value.
void float_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  if (type == GgmlType::F16) {
    static const std::vector<float> table = [] {
      std::vector<float> t(65536);
      for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
      return t;
    }();
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = table[h[i]];
  } else if (type == GgmlType::BF16) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(h[i]) << 16;
      std::memcpy(&dst[i], &bits, sizeof(float));
    }
  } else {
    dequantize_row(type, src, dst, n);
  }
}

// Converts one tensor's rows into dst (its plan's n_bytes), in pieces of
// about 64K values spread over the pool.
void convert_tensor(const TensorPlan& p, std::span<uint8_t> dst, ThreadPool& pool) {
  const TensorInfo& src = *p.src;
  if (!p.convert) {
    std::memcpy(dst.data(), src.data, dst.size());
    return;
  }
  const int64_t n = static_cast<int64_t>(src.ne[0]);
  const size_t in_row = ggml_row_size(src.type, src.ne[0]), out_row = ggml_row_size(p.type, src.ne[0]);
  const int64_t grain = std::max<int64_t>(1, 65536 / n);
  pool.parallel_for_stealing(static_cast<int64_t>(src.n_rows()), grain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(src.type == GgmlType::F32 ? 0 : static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* in = src.data + static_cast<size_t>(r) * in_row;
      const float* x = reinterpret_cast<const float*>(in);
      if (src.type != GgmlType::F32) {
        float_row(src.type, in, row.data(), n);
        x = row.data();
      }
      quantize_row_ref(p.type, x, dst.data() + static_cast<size_t>(r) * out_row, n);
    }
  });
}

}  // namespace

QuantizePlan plan_quantization(const GgufFile& in, const QuantizeOptions& opt) {
  if (!opt.mix) throw Error("quantize: no target type");
  if (in.get_int("split.count").value_or(1) > 1)
    throw Error(in.path() + " is one part of a split model: merge the parts first");
  const MixModelInfo model = mix_model_info(in);
  std::optional<MixRules> rules;
  if (!is_float_type(opt.mix->default_type)) rules.emplace(*opt.mix, model, opt.output_type);

  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), processing_order);

  QuantizePlan plan;
  for (const TensorInfo* t : order) {
    TensorPlan p;
    p.src = t;
    p.type = t->type;
    if (tensor_is_quantizable(t->name, t->ne)) p.type = choose(*t, opt, rules, &p.fallback);
    p.convert = p.type != t->type;
    if (p.convert) {
      if (!is_float_type(t->type)) {
        if (!type_kernels(t->type))
          throw Error(fmt::format("{}: tensor {} is {}, which nexus cannot dequantize", in.path(), t->name,
                                  ggml_type_name(t->type)));
        plan.requantized.push_back(t->name);
      }
      if (!quantize_writable_type(p.type))
        throw Error(fmt::format("tensor {}: nexus cannot write type {}", t->name, ggml_type_name(p.type)));
    }
    p.n_bytes = bytes_of(p.type, *t);
    plan.tensors.push_back(std::move(p));
  }
  if (!plan.requantized.empty() && !opt.allow_requantize) {
    const TensorInfo& t = *in.find_tensor(plan.requantized.front());
    throw Error(fmt::format(
        "{} is already quantized ({} is {}, and {} quantized tensors would be converted again): requantizing "
        "adds a second rounding error to the first, so it is refused; quantize the F32/F16/BF16 original "
        "instead, or pass --allow-requantize",
        in.path(), t.name, ggml_type_name(t.type), plan.requantized.size()));
  }
  return plan;
}

QuantizeTotals write_quantized(const GgufFile& in, const QuantizePlan& plan, const QuantizeOptions& opt,
                               const std::string& out, const QuantizeProgress& progress) {
  GgufWriter w(static_cast<uint32_t>(in.alignment()));
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment" || key == "general.quantization_version" || key == "general.file_type" ||
        key == "split.no" || key == "split.count" || key == "split.tensors.count")
      continue;
    w.set(key, value);
  }
  w.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION
  w.set_u32("general.file_type", opt.mix->ftype);

  QuantizeTotals totals;
  for (const TensorPlan& p : plan.tensors) {
    w.add_tensor(p.src->name, p.type, p.src->ne);
    totals.data_in += p.src->n_bytes;
    totals.data_out += p.n_bytes;
    ++(p.convert ? totals.n_converted : totals.n_copied);
  }
  totals.file_out = w.file_size();

  ThreadPool pool(opt.n_threads);
  w.write(out, [&](size_t i, std::span<uint8_t> dst) {
    if (progress) progress(i, false);
    convert_tensor(plan.tensors[i], dst, pool);
    if (progress) progress(i, true);
  });
  return totals;
}

}  // namespace nexus
