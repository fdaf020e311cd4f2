// Nexus client: `new Nexus({ baseURL })`, then chat.completions.create,
// completions.create, models.list, realtime.connect. See README.md.

import { ChatCompletions, Completions } from './completions.js';
import { RequestOptions, Transport } from './http.js';
import { ConnectOptions, RealtimeSession } from './realtime.js';
import type { RetryOptions } from './retry.js';

export * from './errors.js';
export type * from './types.js';
export type { ConnectOptions, RealtimeInput, RealtimeSettings, ServerEvent, SessionInfo, ResponseUsage,
              WebSocketLike } from './realtime.js';
export { RealtimeSession, realtimeProtocols } from './realtime.js';
export type { RequestOptions } from './http.js';
export type { RetryOptions } from './retry.js';
export { backoffMs } from './retry.js';

export interface NexusOptions {
  /** Server URL, e.g. http://127.0.0.1:8080 (default: the page's origin in a browser). */
  baseURL?: string;
  apiKey?: string;
  retry?: RetryOptions;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}

export interface Model {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

export class Nexus {
  readonly chat: { completions: ChatCompletions };
  readonly completions: Completions;
  readonly models: { list(opts?: RequestOptions): Promise<{ object: 'list'; data: Model[] }> };
  readonly realtime: { connect(opts?: ConnectOptions): Promise<RealtimeSession> };
  /** GET /metrics: the Prometheus text. */
  readonly metrics: (opts?: RequestOptions) => Promise<string>;

  constructor(o: NexusOptions = {}) {
    const origin = (globalThis as { location?: { origin?: string } }).location?.origin;
    const baseURL = o.baseURL ?? origin;
    if (!baseURL) throw new TypeError('Nexus: baseURL is required outside a browser page');
    const t = new Transport({ baseURL, apiKey: o.apiKey, fetch: o.fetch, retry: o.retry, headers: o.headers });
    this.chat = { completions: new ChatCompletions(t) };
    this.completions = new Completions(t);
    this.models = { list: (opts) => t.json('GET', '/v1/models', undefined, opts) };
    this.metrics = (opts) => t.text('/metrics', opts);
    const wsURL = `${t.baseURL.replace(/^http/, 'ws')}/v1/realtime`;
    this.realtime = { connect: (opts) => RealtimeSession.open(wsURL, { ...opts, apiKey: opts?.apiKey ?? o.apiKey }) };
  }
}

export default Nexus;
