// Real-time sessions over `GET /v1/realtime` (docs/protocol.md): one
// WebSocket per conversation; the server keeps its KV between responses.
// Server events arrive in order through an async iterator; `error` events
// are yielded like the others (the session goes on, as the protocol says),
// while a failed connection ends the iteration with a thrown error.

import { AbortError, ConnectionError, NexusError, RealtimeError } from './errors.js';
import type { SamplingOptions } from './types.js';

export interface RealtimeSettings extends SamplingOptions {
  model?: string;
  system?: string;
  return_tokens?: boolean;
}

export type RealtimeInput = string | { role: 'user' | 'assistant' | 'system' | 'tool'; content: string };

export interface SessionInfo {
  id: string;
  model: string;
  n_ctx: number;
  chat_template: string;
}

export interface ResponseUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cached_tokens: number;
}

export type ServerEvent =
  | { type: 'session.created'; session: SessionInfo }
  | { type: 'session.updated'; session: Record<string, unknown> & { id: string } }
  | { type: 'response.created'; response: { id: string; prompt_tokens: number; input_tokens: number;
                                            prompt_token_ids?: number[] } }
  | { type: 'response.delta'; response_id: string; text: string; token?: number }
  | { type: 'response.done'; response: { id: string; finish_reason: 'stop' | 'length' | 'cancelled' | 'error';
                                         usage: ResponseUsage; ttft_ms: number; tokens_per_s: number;
                                         context_tokens: number; error?: string } }
  | { type: 'error'; error: { code: string; message: string; event?: string } };

/** The WebSocket constructor to use (the platform's by default). */
export type WebSocketLike = new (url: string, protocols?: string | string[]) => WebSocket;

export interface ConnectOptions {
  signal?: AbortSignal;
  /**
   * API key of a server started with `--api-key`, offered on the handshake as
   * the subprotocol `openai-insecure-api-key.KEY` beside `realtime` (a
   * browser cannot put an Authorization header on a WebSocket). Default: the
   * client's `apiKey`. "insecure": the key is visible to the page's code.
   */
  apiKey?: string;
  /** Needed on Node 18-21 without --experimental-websocket (e.g. the `ws` package). */
  WebSocket?: WebSocketLike;
  /** Sent as `session.update` once the session is created. */
  session?: RealtimeSettings;
}

/** The subprotocols that carry `apiKey` (none without a key). */
export function realtimeProtocols(apiKey?: string): string[] {
  return apiKey ? ['realtime', `openai-insecure-api-key.${apiKey}`] : [];
}

function inputFields(input: RealtimeInput): { text: string } | { message: { role: string; content: string } } {
  return typeof input === 'string' ? { text: input } : { message: input };
}

export class RealtimeSession implements AsyncIterable<ServerEvent> {
  /** session.created's session. */
  info!: SessionInfo;
  private readonly queue: ServerEvent[] = [];
  private waiter: (() => void) | undefined;
  private failure: Error | undefined;
  private closed = false;

  private constructor(private readonly ws: WebSocket) {}

  /** Opens the session; resolves once `session.created` arrived. */
  static async open(url: string, o: ConnectOptions = {}): Promise<RealtimeSession> {
    const Ctor = o.WebSocket ?? (globalThis as { WebSocket?: WebSocketLike }).WebSocket;
    if (!Ctor) throw new NexusError('no WebSocket implementation: run Node 18-21 with --experimental-websocket (Node 22+ has one), or pass ConnectOptions.WebSocket (e.g. the ws package)');
    if (o.signal?.aborted) throw new AbortError('aborted');
    const protocols = realtimeProtocols(o.apiKey);
    const s = new RealtimeSession(protocols.length ? new Ctor(url, protocols) : new Ctor(url));
    s.ws.onmessage = (m: MessageEvent) => s.push(JSON.parse(String(m.data)) as ServerEvent);
    s.ws.onerror = () => s.fail(new ConnectionError('the WebSocket connection failed'));
    s.ws.onclose = (c: CloseEvent) => {
      if (c.code !== 1000 && c.code !== 1005) s.fail(new ConnectionError(`the session closed (code ${c.code})`));
      s.end();
    };
    o.signal?.addEventListener('abort', () => {
      s.fail(new AbortError('aborted'));
      s.ws.close();
    }, { once: true });
    const first = await s.next();
    if (first.done || first.value.type !== 'session.created') {
      s.ws.close();
      if (!first.done && first.value.type === 'error')
        throw new RealtimeError(first.value.error.code, first.value.error.message, first.value.error.event);
      throw new ConnectionError('the server did not open a session');
    }
    s.info = first.value.session;
    if (o.session) s.update(o.session);
    return s;
  }

  /** session.update: merges settings (null removes one). */
  update(settings: RealtimeSettings): void {
    this.sendEvent({ type: 'session.update', session: settings });
  }
  /** input.append: queues a message or raw text for the next response. */
  send(input: RealtimeInput): void {
    this.sendEvent({ type: 'input.append', ...inputFields(input) });
  }
  /** response.create, with per-response overrides. */
  create(response?: RealtimeSettings): void {
    this.sendEvent(response ? { type: 'response.create', response } : { type: 'response.create' });
  }
  /** response.cancel: the running response ends with finish_reason "cancelled". */
  interrupt(): void {
    this.sendEvent({ type: 'response.cancel' });
  }
  /** response.redirect: cancel, append `input`, and start a new response. */
  redirect(input: RealtimeInput, response?: RealtimeSettings): void {
    this.sendEvent({ type: 'response.redirect', ...inputFields(input), ...(response ? { response } : {}) });
  }
  /** session.close: the server ends a running response, then closes. */
  close(): void {
    if (this.ws.readyState === 1) this.sendEvent({ type: 'session.close' });
    else this.ws.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<ServerEvent> {
    return { next: () => this.next() };
  }

  /** The next server event; done once the session closed. */
  async next(): Promise<IteratorResult<ServerEvent>> {
    for (;;) {
      const e = this.queue.shift();
      if (e) return { value: e, done: false };
      if (this.failure) throw this.failure;
      if (this.closed) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  private sendEvent(e: object): void {
    if (this.ws.readyState !== 1) throw new ConnectionError('the session is not open');
    this.ws.send(JSON.stringify(e));
  }
  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
  private push(e: ServerEvent): void {
    this.queue.push(e);
    this.wake();
  }
  private fail(e: Error): void {
    this.failure ??= e;
    this.wake();
  }
  private end(): void {
    this.closed = true;
    this.wake();
  }
}
