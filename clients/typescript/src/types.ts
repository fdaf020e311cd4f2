// Request and response shapes of Nexus's OpenAI-compatible API
// (docs/server.md): the fields Nexus accepts, and what it answers.

export type Priority = 'interactive' | 'default' | 'batch' | number;

/** Sampling fields shared by completions, chat and real-time sessions. */
export interface SamplingOptions {
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  repeat_penalty?: number;
  seed?: number;
  stop?: string | string[];
  ignore_eos?: boolean;
  priority?: Priority;
}

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content: string | null;
}

export interface ChatCompletionParams extends SamplingOptions {
  model?: string;
  messages: ChatMessage[];
  max_completion_tokens?: number;
  logprobs?: boolean;
  top_logprobs?: number;
  logit_bias?: Record<string, number>;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

export interface CompletionParams extends SamplingOptions {
  model?: string;
  prompt: string | number[];
  logprobs?: number;
  logit_bias?: Record<string, number>;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

/** Nexus's own field on the final object / chunk (milliseconds). */
export interface Timings {
  queue_ms: number;
  prefill_ms: number;
  ttft_ms: number;
  decode_ms: number;
  decode_tokens_per_s: number;
}

export type FinishReason = 'stop' | 'length' | 'cancelled' | 'error' | null;

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: { index: number; message: { role: 'assistant'; content: string }; finish_reason: FinishReason;
             logprobs: unknown }[];
  usage: Usage;
  timings?: Timings;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: { role?: 'assistant'; content?: string }; finish_reason: FinishReason;
             logprobs: unknown }[];
  usage?: Usage | null;
  timings?: Timings;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: FinishReason; logprobs: unknown }[];
  usage?: Usage | null;
  timings?: Timings;
}

/** What a stream has told so far; filled in as chunks arrive. */
export interface StreamMetadata {
  model?: string;
  usage?: Usage;
  timings?: Timings;
  finish_reason?: FinishReason;
}

/**
 * A streamed response: `id` is known once the first chunk arrived (create()
 * resolves then), `stream` yields every chunk, `metadata` fills in as they come.
 */
export interface StreamingResponse<T> {
  readonly id: string;
  readonly stream: AsyncIterable<T>;
  readonly metadata: StreamMetadata;
}
