// chat.completions.create and completions.create: one call, streamed or not.

import { RequestOptions, Transport } from './http.js';
import type {
  ChatCompletion, ChatCompletionChunk, ChatCompletionParams, Completion, CompletionParams, StreamingResponse,
  StreamMetadata,
} from './types.js';

type Chunk = ChatCompletionChunk | Completion;

function observe(meta: StreamMetadata, c: Chunk): void {
  meta.model = c.model;
  if (c.usage) meta.usage = c.usage;
  if (c.timings) meta.timings = c.timings;
  const f = c.choices[0]?.finish_reason;
  if (f) meta.finish_reason = f;
}

async function streaming<T extends Chunk>(t: Transport, path: string, body: object,
                                          opts?: RequestOptions): Promise<StreamingResponse<T>> {
  const { first, rest } = await t.stream<T>(path, { ...body, stream: true }, opts);
  const metadata: StreamMetadata = {};
  observe(metadata, first);
  async function* all(): AsyncGenerator<T> {
    yield first;
    for await (const c of rest) {
      observe(metadata, c);
      yield c;
    }
  }
  return { id: first.id, stream: all(), metadata };
}

export class ChatCompletions {
  constructor(private readonly t: Transport) {}
  create(params: ChatCompletionParams & { stream: true }, opts?: RequestOptions):
      Promise<StreamingResponse<ChatCompletionChunk>>;
  create(params: ChatCompletionParams & { stream?: false }, opts?: RequestOptions): Promise<ChatCompletion>;
  create(params: ChatCompletionParams, opts?: RequestOptions):
      Promise<ChatCompletion | StreamingResponse<ChatCompletionChunk>> {
    if (params.stream) return streaming<ChatCompletionChunk>(this.t, '/v1/chat/completions', params, opts);
    return this.t.json<ChatCompletion>('POST', '/v1/chat/completions', params, opts);
  }
}

export class Completions {
  constructor(private readonly t: Transport) {}
  create(params: CompletionParams & { stream: true }, opts?: RequestOptions): Promise<StreamingResponse<Completion>>;
  create(params: CompletionParams & { stream?: false }, opts?: RequestOptions): Promise<Completion>;
  create(params: CompletionParams, opts?: RequestOptions): Promise<Completion | StreamingResponse<Completion>> {
    if (params.stream) return streaming<Completion>(this.t, '/v1/completions', params, opts);
    return this.t.json<Completion>('POST', '/v1/completions', params, opts);
  }
}
