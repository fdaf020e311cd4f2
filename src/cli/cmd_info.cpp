// `nexus info MODEL`: what a GGUF file holds, without loading the model.
// Prints the header (version, alignment), every metadata entry (arrays
// abbreviated), the tensor table, a summary and the model line (family and
// what of it the file uses). A bad file, or one Nexus cannot run (the model
// line then says why), throws nexus::Error, which main() prints to stderr
// with exit status 1.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/open_model.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "model/quant_mix.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

struct InfoOptions {
  std::string model;
  size_t array_items = 8;
  bool no_tensors = false;
};

std::string shape_string(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.ne.size(); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

// 1234567 -> "1.23 M"; keeps the summary readable for both 260K and 7B models.
std::string human_count(uint64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.2f} K", n / 1e3);
  return std::to_string(n);
}

std::string human_bytes(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", n / double(uint64_t{1} << 30));
  if (n >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", n / double(uint64_t{1} << 20));
  if (n >= 1024) return fmt::format("{:.2f} KiB", n / 1024.0);
  return fmt::format("{} B", n);
}

int run_info(const InfoOptions& o) {
  const OpenedModel m = open_model(o.model);
  const GgufFile& f = *m.gguf;
  fmt::print("file:         {}\n", f.path());
  fmt::print("GGUF version: {}\n", f.version());
  fmt::print("alignment:    {}\n", f.alignment());
  fmt::print("file size:    {} bytes ({})\n", f.file_size(), human_bytes(f.file_size()));

  fmt::print("\nmetadata ({} entries):\n", f.metadata().size());
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, kv.first.size());
  for (const auto& [key, value] : f.metadata())
    fmt::print("  {:<{}}  {:<7}  {}\n", key, key_w, gguf_value_type_name(value.type),
               gguf_value_to_string(value, o.array_items));

  uint64_t params = 0, bytes = 0;
  std::map<std::string_view, size_t> type_counts;
  for (const TensorInfo& t : f.tensors()) {
    params += t.n_elements();
    bytes += t.n_bytes;
    ++type_counts[ggml_type_name(t.type)];
  }
  if (!o.no_tensors) {
    fmt::print("\ntensors ({}):\n", f.tensors().size());
    size_t name_w = 4, shape_w = 5;
    for (const TensorInfo& t : f.tensors()) {
      name_w = std::max(name_w, t.name.size());
      shape_w = std::max(shape_w, shape_string(t).size());
    }
    fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "name", name_w, "type", "shape", shape_w, "bytes",
               "offset");
    for (const TensorInfo& t : f.tensors())
      fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", t.name, name_w, ggml_type_name(t.type),
                 shape_string(t), shape_w, t.n_bytes, t.offset);
  }

  std::string types;
  for (const auto& [name, n] : type_counts) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, n);
  fmt::print("\nsummary: {} tensors, {} parameters ({}), {} bytes of tensor data ({})", f.tensors().size(),
             params, human_count(params), bytes, human_bytes(bytes));
  fmt::print("{}\n", types.empty() ? "" : "; types: " + types);
  // general.file_type is llama.cpp's LLAMA_FTYPE number: say which mix it is.
  try {
    if (const auto ftype = f.get_int("general.file_type")) {
      std::string name = "unknown to nexus quantize";
      for (const QuantMix& m : quant_mixes())
        if (static_cast<int64_t>(m.ftype) == *ftype) name = std::string(m.name);
      fmt::print("file type: {} (general.file_type {})\n", name, *ftype);
    }
  } catch (const Error&) {
    // A general.file_type that is no integer: the metadata listing above shows it as it is.
  }
  // What Nexus makes of it: the family and the parts of it this file uses,
  // or why it cannot run it (after the listing, so the file can still be
  // inspected; the exit status says it cannot run: 1, as `nexus run` would).
  if (f.get_string("general.architecture")) {
    try {
      fmt::print("\nmodel: {}\n", LlamaModel(f).describe());
    } catch (const Error& e) {
      fmt::print("\nmodel: not runnable: {}\n", e.what());
      std::fflush(stdout);
      throw Error(std::string("not runnable: ") + e.what());
    }
  }
  return 0;
}

const CommandRegistrar reg{{"info", "print a GGUF file's header, metadata and tensor table",
                            [](CLI::App& sub) -> std::function<int()> {
                              auto o = std::make_shared<InfoOptions>();
                              CLI::Option* file = sub.add_option(
                                  "model", o->model, kModelHelp)->check(model_path());
                              // -m as run, serve and tokenize take it.
                              sub.add_option("-m,--model", o->model, "the same, as an option")->excludes(file)->check(model_path());
                              sub.add_option("--array-items", o->array_items,
                                             "array elements shown per metadata array")
                                  ->capture_default_str()
                                  ->check(range(int64_t{0}, int64_t{1} << 40));
                              sub.add_flag("--no-tensors", o->no_tensors, "omit the tensor table");
                              return [o] { return run_info(*o); };
                            }}};

}  // namespace
}  // namespace nexus::cli
