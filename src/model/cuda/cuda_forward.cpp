// CudaForward: weight upload, device buffers, the step's kernel sequence,
// and CUDA-graph capture/replay of decode steps (cuda_forward.h).
#include "model/cuda/cuda_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda_device.h"
#include "model/cpu_tail.h"
#include "model/forward_steps.h"
#include "model/gpu_plan.h"
#include "model/layer.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

using cuda::DeviceBuffer;
using cuda::DeviceWeight;
using cuda::PinnedBuffer;

namespace {

using GpuLayer = LayerWeightsT<DeviceWeight>;

// What of the model's description these kernels cannot compute yet, by
// name ("" when they can): refused at construction, never run wrong.
std::string unsupported_features(const LlamaModel& model) {
  const LlamaConfig& c = model.config();
  std::string s;
  auto need = [&](bool cond, const char* what) {
    if (cond) s += (s.empty() ? "" : ", ") + std::string(what);
  };
  bool biases = false;
  for (const LlamaLayer& L : model.layers())
    biases = biases || has(L.attn_norm_b) || has(L.bq) || has(L.bk) || has(L.bv) || has(L.bo) || has(L.ffn_norm_b) ||
             has(L.b_up) || has(L.b_down);
  need(c.traits->norm == NormType::Layer, "LayerNorm");
  need(biases, "biases");
  need(c.traits->rope == RopeType::Neox, "NEOX RoPE");
  need(has(model.rope_factors()) || has(model.rope_factors_long()) || has(model.rope_factors_short()) ||
           c.rope_freq_scale != 1.0f || c.yarn_ext_factor != 0.0f || c.rope_attn_factor != 1.0f,
       "RoPE factors or scaling (rope_freqs, LongRoPE, linear, YaRN, attention factor)");
  need(c.traits->act != FfnAct::Silu || !c.traits->gated_ffn, "GELU / plain FFN");
  need(c.n_swa > 0, "sliding-window attention");
  need(c.attn_softcap > 0 || c.final_softcap > 0, "logit soft-capping");
  need(c.embd_scale != 1.0f, "embedding scale");
  need(c.attn_scale != 1.0f / std::sqrt(static_cast<float>(c.head_dim)), "query scale");
  return s;
}

}  // namespace

struct CudaForward::Impl {
  const LlamaModel& model;
  const LlamaConfig& c;
  CudaForwardOptions opt;
  int32_t n_gpu = 0, bt_stride = 0;
  bool output_on_gpu = false;

  cudaStream_t stream = nullptr;
  std::vector<DeviceBuffer<uint8_t>> weight_bufs;
  uint64_t weight_bytes = 0;
  DeviceWeight tok_embd, output;
  const float* output_norm = nullptr;
  std::vector<GpuLayer> layers;

  DeviceBuffer<uint16_t> kv;
  cuda::PagedCache cache;

  // Activations [max_tokens, width] and logits [max_seqs, n_vocab].
  DeviceBuffer<float> x, xb, xb2, q, k, v, att, hb, hb2, logits;
  // Step metadata, int32: tokens, pos, seq [max_tokens each], rows, sampled
  // [max_seqs each], block tables [max_seqs][bt_stride]; mirrored in pinned memory.
  DeviceBuffer<int32_t> meta;
  PinnedBuffer<int32_t> meta_host;
  size_t off_tokens = 0, off_pos = 0, off_seq = 0, off_rows = 0, off_sampled = 0, off_bt = 0;
  std::unique_ptr<cuda::CudaMatmul> mm;

  std::unique_ptr<CpuTail> tail;
  std::vector<float> host_x, host_logits;
  std::vector<int32_t> ids;

  std::vector<int32_t> buckets;
  std::map<int32_t, cudaGraphExec_t> graphs;
  int32_t last_gpu_rows = 0;

  Impl(const LlamaModel& m, const CudaForwardOptions& o) : model(m), c(m.config()), opt(o) {}
  ~Impl() {
    for (auto& [b, g] : graphs) (void)cudaGraphExecDestroy(g);
    if (stream) (void)cudaStreamSynchronize(stream);
    mm.reset();  // the cuBLAS handle is bound to the stream: destroy it first
    if (stream) (void)cudaStreamDestroy(stream);
  }

  DeviceWeight upload(const WeightView& w, const char* what) {
    if (!cuda::supported_weight_type(w.type))
      throw Error(std::string("CUDA backend: ") + what + " has unsupported type " + std::string(ggml_type_name(w.type)));
    DeviceBuffer<uint8_t> buf(w.n_bytes());
    buf.upload(static_cast<const uint8_t*>(w.data), w.n_bytes());
    weight_bytes += w.n_bytes();
    DeviceWeight d{w.type, buf.get(), w.n_rows, w.n_cols, w.row_bytes};
    weight_bufs.push_back(std::move(buf));
    return d;
  }
  const float* upload_norm(const WeightView& w, const char* what) {
    if (!w.f32()) throw Error(std::string("CUDA backend: ") + what + " must be F32");
    return static_cast<const float*>(upload(w, what).data);
  }
  struct Ops;

  int32_t* dmeta(size_t off) { return meta.get() + off; }
  cuda::BatchMeta batch_meta() {
    return {dmeta(off_pos), dmeta(off_seq), dmeta(off_bt), bt_stride};
  }

  void setup();
  void validate(std::span<const SeqRun> runs) const;
  int32_t stage(std::span<const SeqRun> runs, int32_t pad_to, bool all_rows);
  void enqueue(int32_t n, int32_t n_out, bool greedy);
  int32_t gpu_step(std::span<const SeqRun> runs, bool greedy);
};

void CudaForward::Impl::setup() {
  std::string why;
  if (!cuda_available(&why)) throw Error("no CUDA device: " + why);
  if (opt.max_seqs < 1 || opt.max_tokens < opt.max_seqs)
    throw Error("CUDA backend: need max_seqs >= 1 and max_tokens >= max_seqs");
  if (opt.block_size < 1 || opt.block_size % 16 != 0)
    throw Error("CUDA backend: block size must be a positive multiple of 16");
  if (c.head_dim > 256) throw Error("CUDA backend: head size above 256");
  if (const std::string missing = unsupported_features(model); !missing.empty())
    throw Error("CUDA backend: " + c.arch + " needs " + missing + ", which the CUDA kernels do not implement yet");
  n_gpu = resolve_gpu_layers(opt.gpu_layers, c.n_layer);
  output_on_gpu = n_gpu == c.n_layer;
  const int32_t max_ctx = opt.max_ctx > 0 ? std::min(opt.max_ctx, c.n_ctx_train) : c.n_ctx_train;
  bt_stride = (max_ctx + opt.block_size - 1) / opt.block_size;
  if (opt.n_blocks <= 0) {
    const int64_t nb = static_cast<int64_t>(opt.max_seqs) * bt_stride;
    if (nb > INT32_MAX - 1) throw Error("CUDA backend: KV cache too large; pass n_blocks");
    opt.n_blocks = static_cast<int32_t>(nb);
  }
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Weights, once.
  tok_embd = upload(model.tok_embd(), "token_embd.weight");
  layers.resize(static_cast<size_t>(n_gpu));
  int64_t max_q_elems = 0;
  auto note = [&](const DeviceWeight& w) {
    if (cuda::quantized_weight_type(w.type)) max_q_elems = std::max(max_q_elems, w.n_rows * w.n_cols);
  };
  for (int32_t l = 0; l < n_gpu; ++l) {
    const LlamaLayer& L = model.layers()[static_cast<size_t>(l)];
    GpuLayer& G = layers[static_cast<size_t>(l)];
    for (size_t i = 0; i < LlamaLayer::all().size(); ++i) {
      const WeightView& w = L.*LlamaLayer::all()[i];
      if (!has(w)) continue;
      if (w.n_rows == 1 && !w.f32()) throw Error("CUDA backend: norm and bias tensors must be F32");
      G.*GpuLayer::all()[i] = upload(w, "layer tensor");
    }
    for (auto m : GpuLayer::matrices()) note(G.*m);
  }
  if (output_on_gpu) {
    output_norm = upload_norm(model.output_norm(), "output_norm");
    // Tied embeddings: the output projection is the embedding, already uploaded.
    output = model.output().data == model.tok_embd().data ? tok_embd : upload(model.output(), "output.weight");
    note(output);
  }

  // KV arena: n_blocks + 1 blocks (the last takes padding rows' writes).
  cache.block_size = opt.block_size;
  cache.n_embd_kv = c.n_embd_kv();
  cache.layer_elems = 2LL * opt.block_size * c.n_embd_kv();
  cache.block_elems = static_cast<int64_t>(n_gpu) * cache.layer_elems;
  kv.resize(static_cast<size_t>(opt.n_blocks + 1) * static_cast<size_t>(cache.block_elems));
  cache.data = kv.get();

  const size_t T = static_cast<size_t>(opt.max_tokens), S = static_cast<size_t>(opt.max_seqs);
  const size_t E = static_cast<size_t>(c.n_embd), KV = static_cast<size_t>(c.n_embd_kv()),
               F = static_cast<size_t>(c.n_ff), Q = static_cast<size_t>(c.n_embd_q());
  for (auto* b : {&x, &xb, &xb2}) b->resize(T * E);
  for (auto* b : {&q, &att}) b->resize(T * Q);
  for (auto* b : {&k, &v}) b->resize(T * KV);
  for (auto* b : {&hb, &hb2}) b->resize(T * F);
  if (output_on_gpu) logits.resize(S * static_cast<size_t>(c.n_vocab));
  off_tokens = 0;
  off_pos = T;
  off_seq = 2 * T;
  off_rows = 3 * T;
  off_sampled = 3 * T + S;
  off_bt = 3 * T + 2 * S;
  const size_t meta_n = off_bt + S * static_cast<size_t>(bt_stride);
  meta.resize(meta_n);
  meta_host.resize(meta_n);
  std::memset(meta_host.get(), 0, meta_n * sizeof(int32_t));
  mm = std::make_unique<cuda::CudaMatmul>(stream, opt.max_tokens, std::max<int64_t>(E, F), max_q_elems);

  if (!output_on_gpu) tail = std::make_unique<CpuTail>(model, n_gpu, opt.n_blocks, opt.block_size, opt.n_threads, opt.max_ctx);
  buckets = decode_buckets(opt.max_seqs);
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

// BatchForward's checks, plus this object's capacity.
void CudaForward::Impl::validate(std::span<const SeqRun> runs) const {
  if (runs.empty()) throw Error("cuda forward: no sequences");
  if (static_cast<int64_t>(runs.size()) > opt.max_seqs)
    throw Error("cuda forward: " + std::to_string(runs.size()) + " sequences exceed max_seqs " +
                std::to_string(opt.max_seqs));
  int64_t total = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const SeqRun& run = runs[r];
    const std::string which = "cuda forward: sequence " + std::to_string(r);
    if (run.tokens.empty()) throw Error(which + " has no tokens");
    check_token_ids(c, run.tokens, which.c_str());
    total += static_cast<int64_t>(run.tokens.size());
    const int64_t end = static_cast<int64_t>(run.n_past) + static_cast<int64_t>(run.tokens.size());
    if (run.n_past < 0 || end > c.n_ctx_train)
      throw Error(which + ": positions " + std::to_string(run.n_past) + ".." + std::to_string(end - 1) +
                  " are outside the model's context of " + std::to_string(c.n_ctx_train));
    const int64_t n_blocks = (end + opt.block_size - 1) / opt.block_size;
    if (n_blocks > bt_stride)
      throw Error(which + ": " + std::to_string(end) + " positions exceed max_ctx (" +
                  std::to_string(static_cast<int64_t>(bt_stride) * opt.block_size) + ")");
    if (static_cast<int64_t>(run.block_table.size()) < n_blocks)
      throw Error(which + ": " + std::to_string(end) + " positions need " + std::to_string(n_blocks) +
                  " blocks, its block table has " + std::to_string(run.block_table.size()));
    for (int64_t i = 0; i < n_blocks; ++i)
      if (run.block_table[i] < 0 || run.block_table[i] >= opt.n_blocks)
        throw Error(which + ": block " + std::to_string(run.block_table[i]) + " is outside the cache of " +
                    std::to_string(opt.n_blocks) + " blocks");
  }
  if (total > opt.max_tokens)
    throw Error("cuda forward: " + std::to_string(total) + " tokens exceed max_tokens " +
                std::to_string(opt.max_tokens) + " (feed long prompts in chunks)");
}

// Fills the pinned metadata for `runs`, padded with dummy one-token runs up
// to pad_to sequences (their K/V go to the spare block), copies it to the
// device, and returns the number of logits rows. all_rows: every run is a
// logits row (decode), else only runs with want_logits.
int32_t CudaForward::Impl::stage(std::span<const SeqRun> runs, int32_t pad_to, bool all_rows) {
  int32_t* h = meta_host.get();
  const int32_t spare = opt.n_blocks;
  int32_t n = 0, n_out = 0;
  const int32_t n_seq = std::max<int32_t>(static_cast<int32_t>(runs.size()), pad_to);
  for (int32_t r = 0; r < n_seq; ++r) {
    int32_t* bt = h + off_bt + static_cast<size_t>(r) * bt_stride;
    if (r < static_cast<int32_t>(runs.size())) {
      const SeqRun& run = runs[static_cast<size_t>(r)];
      const int64_t end = static_cast<int64_t>(run.n_past) + static_cast<int64_t>(run.tokens.size());
      const int32_t used = static_cast<int32_t>((end + opt.block_size - 1) / opt.block_size);
      std::copy_n(run.block_table.begin(), used, bt);
      std::fill(bt + used, bt + bt_stride, spare);
      for (size_t i = 0; i < run.tokens.size(); ++i, ++n) {
        h[off_tokens + n] = run.tokens[i];
        h[off_pos + n] = run.n_past + static_cast<int32_t>(i);
        h[off_seq + n] = r;
      }
      if (all_rows || run.want_logits) h[off_rows + n_out++] = n - 1;
    } else {
      std::fill(bt, bt + bt_stride, spare);
      h[off_tokens + n] = 0;
      h[off_pos + n] = 0;
      h[off_seq + n] = r;
      h[off_rows + n_out++] = n;
      ++n;
    }
  }
  // One copy of the whole metadata block (tens of KiB at most).
  CUDA_CHECK(cudaMemcpyAsync(meta.get(), h, meta.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  return n_out;
}

// forward_layer's operations as kernel launches on the stream (every one
// graph-capturable); what unsupported_features() refuses is never reached.
struct CudaForward::Impl::Ops {
  using Weight = DeviceWeight;
  Impl& m;
  cuda::BatchMeta bm;

  static const float* f32(const DeviceWeight& w) { return static_cast<const float*>(w.data); }
  static int32_t i32(int64_t v) { return static_cast<int32_t>(v); }
  [[noreturn]] static void missing(const char* what) {
    throw Error(std::string("CUDA backend: ") + what + " is not implemented");
  }
  void rmsnorm(float* out, const float* x, const DeviceWeight& w, int64_t rows, int64_t width, float eps) {
    cuda::rmsnorm(out, x, nullptr, f32(w), i32(rows), i32(width), eps, m.stream);
  }
  void layernorm(float*, const float*, const DeviceWeight&, const DeviceWeight&, int64_t, int64_t, float) {
    missing("LayerNorm");
  }
  void matmul(std::initializer_list<Product<DeviceWeight>> ps, const float* x, int64_t n) {
    for (const Product<DeviceWeight>& p : ps) m.mm->run(*p.w, x, p.out, i32(n));
  }
  void add_bias(float*, const DeviceWeight&, int64_t, int64_t) { missing("bias"); }
  void rope(float* x, int32_t n_heads, int32_t, int64_t n) {
    cuda::rope(x, bm.pos, i32(n), n_heads, m.c.head_dim, m.c.n_rot, m.c.rope_freq_base, m.stream);
  }
  void attention(int32_t layer, const float* q, const float* k, const float* v, float* out, int64_t n) {
    cuda::kv_write(m.cache, bm, layer, k, v, i32(n), m.stream);
    cuda::paged_attention(m.cache, bm, layer, q, out, i32(n), m.c.n_head, m.c.n_head_kv, m.c.head_dim, m.stream);
  }
  void glu(FfnAct act, float* gate, const float* up, int64_t count) {
    if (act != FfnAct::Silu) missing("GEGLU");
    cuda::swiglu(gate, up, count, m.stream);
  }
  void act(FfnAct, float*, int64_t) { missing("plain FFN activation"); }
  void add(float* x, const float* y, int64_t count) { cuda::add_inplace(x, y, count, m.stream); }
};

// The step's kernels for n tokens; n_out logits rows (output head on the GPU).
void CudaForward::Impl::enqueue(int32_t n, int32_t n_out, bool greedy) {
  Ops ops{*this, batch_meta()};
  cuda::gather_rows_f32(tok_embd, dmeta(off_tokens), n, x.get(), stream);
  const LayerBuffers b{x.get(), xb.get(), xb2.get(), q.get(), k.get(), v.get(), att.get(), hb.get(), hb2.get()};
  for (int32_t l = 0; l < n_gpu; ++l) forward_layer(ops, c, layers[static_cast<size_t>(l)], l, b, n);
  if (!output_on_gpu || n_out == 0) return;
  cuda::rmsnorm(xb.get(), x.get(), dmeta(off_rows), output_norm, n_out, c.n_embd, c.rms_eps, stream);
  mm->run(output, xb.get(), logits.get(), n_out);
  if (greedy) cuda::argmax_rows(logits.get(), n_out, c.n_vocab, dmeta(off_sampled), stream);
}

// Eager step. Leaves the logits on the device (output_on_gpu) or in
// host_logits (CPU tail); greedy ids in `ids`. Returns the logits rows.
int32_t CudaForward::Impl::gpu_step(std::span<const SeqRun> runs, bool greedy) {
  validate(runs);
  const int32_t n_out = stage(runs, 0, false);
  int32_t n = 0;
  for (const SeqRun& r : runs) n += static_cast<int32_t>(r.tokens.size());
  enqueue(n, n_out, greedy);
  if (output_on_gpu) {
    last_gpu_rows = n_out;
    if (greedy) {
      ids.resize(static_cast<size_t>(n_out));
      CUDA_CHECK(cudaMemcpyAsync(meta_host.get() + off_sampled, dmeta(off_sampled), n_out * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::copy_n(meta_host.get() + off_sampled, n_out, ids.begin());
    } else {
      host_logits.resize(static_cast<size_t>(n_out) * c.n_vocab);
      CUDA_CHECK(cudaMemcpyAsync(host_logits.data(), logits.get(), host_logits.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    return n_out;
  }
  host_x.resize(static_cast<size_t>(n) * c.n_embd);
  CUDA_CHECK(cudaMemcpyAsync(host_x.data(), x.get(), host_x.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::span<const float> lg = tail->forward(host_x, runs);
  host_logits.assign(lg.begin(), lg.end());
  if (greedy) {
    ids.resize(static_cast<size_t>(n_out));
    for (int32_t i = 0; i < n_out; ++i) {
      // Sampler's greedy rule: lowest id among the maxima, NaN never wins.
      const float* row = host_logits.data() + static_cast<size_t>(i) * c.n_vocab;
      int32_t best = -1;
      for (int32_t j = 0; j < c.n_vocab; ++j)
        if (row[j] == row[j] && (best < 0 || row[j] > row[best])) best = j;
      ids[static_cast<size_t>(i)] = best < 0 ? 0 : best;
    }
  }
  return n_out;
}

CudaForward::CudaForward(const LlamaModel& model, const CudaForwardOptions& opt)
    : impl_(std::make_unique<Impl>(model, opt)) {
  impl_->setup();
}

CudaForward::~CudaForward() = default;

std::span<const float> CudaForward::forward(std::span<const SeqRun> runs) {
  impl_->gpu_step(runs, false);
  return impl_->host_logits;
}

std::span<const int32_t> CudaForward::forward_greedy(std::span<const SeqRun> runs) {
  impl_->gpu_step(runs, true);
  return impl_->ids;
}

std::span<const int32_t> CudaForward::decode_greedy(std::span<const SeqRun> runs) {
  Impl& m = *impl_;
  for (const SeqRun& r : runs)
    if (r.tokens.size() != 1) throw Error("cuda decode: every sequence of a decode step has exactly one token");
  if (!graphs_enabled()) {
    // Every run is a logits row in a decode step.
    std::vector<SeqRun> all(runs.begin(), runs.end());
    for (SeqRun& r : all) r.want_logits = true;
    m.gpu_step(all, true);
    return m.ids;
  }
  m.validate(runs);
  const int32_t n = static_cast<int32_t>(runs.size());
  const int32_t bucket = pick_bucket(m.buckets, n);  // n <= max_seqs was validated: found
  m.stage(runs, bucket, true);
  auto it = m.graphs.find(bucket);
  if (it == m.graphs.end()) {
    // Capture: the kernels read the metadata through fixed device pointers,
    // so the graph serves every later step of this bucket.
    CUDA_CHECK(cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeThreadLocal));
    try {
      m.enqueue(bucket, bucket, true);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      (void)cudaStreamEndCapture(m.stream, &broken);
      if (broken) (void)cudaGraphDestroy(broken);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(m.stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    CUDA_CHECK(err);
    it = m.graphs.emplace(bucket, exec).first;
  }
  CUDA_CHECK(cudaGraphLaunch(it->second, m.stream));
  m.last_gpu_rows = bucket;
  CUDA_CHECK(cudaMemcpyAsync(m.meta_host.get() + m.off_sampled, m.dmeta(m.off_sampled), n * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, m.stream));
  CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.ids.assign(m.meta_host.get() + m.off_sampled, m.meta_host.get() + m.off_sampled + n);
  return m.ids;
}

std::vector<float> CudaForward::last_logits(int32_t n_rows) const {
  const Impl& m = *impl_;
  if (!m.output_on_gpu) throw Error("cuda forward: the output head runs on the CPU (gpu_layers < n_layer)");
  if (n_rows < 0 || n_rows > m.last_gpu_rows) throw Error("cuda forward: last step had fewer logits rows");
  std::vector<float> out(static_cast<size_t>(n_rows) * m.c.n_vocab);
  if (!out.empty()) {
    CUDA_CHECK(cudaStreamSynchronize(m.stream));
    m.logits.download(out.data(), out.size());
  }
  return out;
}

int32_t CudaForward::gpu_layers() const { return impl_->n_gpu; }
int32_t CudaForward::n_blocks() const { return impl_->opt.n_blocks; }
int32_t CudaForward::block_size() const { return impl_->opt.block_size; }
int32_t CudaForward::max_blocks_per_seq() const { return impl_->bt_stride; }
bool CudaForward::graphs_enabled() const { return impl_->opt.graphs && impl_->output_on_gpu; }
int32_t CudaForward::graphs_captured() const { return static_cast<int32_t>(impl_->graphs.size()); }
uint64_t CudaForward::device_weight_bytes() const { return impl_->weight_bytes; }
uint64_t CudaForward::device_kv_bytes() const { return impl_->kv.bytes(); }

}  // namespace nexus
