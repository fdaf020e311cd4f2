// POST /v1/embeddings (OpenAI's API reference, "Create embeddings").
//
// Request:
//   input            a string, an array of strings, an array of token ids,
//                    or an array of arrays of token ids (at most 2048
//                    inputs); strings are tokenized as completions prompts
//                    are (BOS per the tokenizer's default, special tokens
//                    parsed). An empty string, array or token array: 400
//                    naming `input`; so is an id outside the vocabulary and
//                    an input of n_ctx tokens or more (context_length_exceeded).
//   model            as for completions (400 model_not_found otherwise)
//   encoding_format  "float" (default) | "base64" (the float32 values'
//                    little-endian bytes, base64-encoded, as OpenAI sends them)
//   dimensions       only the model's n_embd (400 naming it otherwise: no
//                    model here is trained for shortened embeddings)
//   user             accepted (an end-user id; no effect)
// Response: {"object": "list", "data": [{"object": "embedding", "index": i,
//   "embedding": [...] | "<base64>"}], "model": ..., "usage":
//   {"prompt_tokens": n, "total_tokens": n}} (n: the inputs' tokens).
//
// Each embedding is the model's final hidden states (after the output norm,
// BatchForward::hidden_states), pooled by the GGUF's <arch>.pooling_type:
// 1 mean (and a model without the key, or with 0 = none: the mean of the
// last hidden states), 2 CLS (the first token's), 3 last (the last
// token's); 4 (rank) is refused (500 naming the pooling type). Then
// L2-normalized. Computed on the calling (I/O) thread, one request at a time
// per backend (EngineBackend::embedding), beside the engine's generations.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "server/api_router.h"
#include "server/backend.h"

namespace nexus::server {

enum class Pooling { Mean, Cls, Last };

// <arch>.pooling_type (LlamaConfig::pooling_type, -1 absent) -> Pooling;
// throws ApiError 500 for rank or an unknown value.
Pooling pooling_of(int32_t pooling_type);

// hidden: [n_tokens, n_embd] (n_tokens >= 1) -> [n_embd].
std::vector<float> pool_hidden(std::span<const float> hidden, int32_t n_embd, Pooling pooling);

// v / |v|_2 (a zero vector stays zero).
void l2_normalize(std::vector<float>& v);

// Standard base64 (RFC 4648, with padding) of `bytes`.
std::string base64_encode(std::string_view bytes);

HttpReply embeddings_reply(const Backend& backend, std::string_view body);

}  // namespace nexus::server
