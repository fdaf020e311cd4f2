// HTTP transport: fetch (Node 18+ and browsers), JSON bodies, retries of
// attempts that delivered nothing (retry.ts), SSE streams (sse.ts).

import { AbortError, apiErrorFrom, ConnectionError, NexusError } from './errors.js';
import { backoffMs, retryableStatus, RetryOptions, sleep, withDefaults } from './retry.js';
import { sseData } from './sse.js';

export interface RequestOptions {
  signal?: AbortSignal;
  retry?: RetryOptions;
}

export interface TransportOptions {
  baseURL: string;
  apiKey?: string;
  fetch?: typeof fetch;
  retry?: RetryOptions;
  headers?: Record<string, string>;
}

function isAbort(e: unknown): boolean {
  return (e as { name?: string } | null)?.name === 'AbortError';
}

function wrap(e: unknown): NexusError {
  if (e instanceof NexusError) return e;
  if (isAbort(e)) return new AbortError('aborted', { cause: e });
  return new ConnectionError(`connection failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

export class Transport {
  private readonly o: TransportOptions;
  constructor(o: TransportOptions) {
    this.o = { ...o, baseURL: o.baseURL.replace(/\/+$/, '') };
  }

  get baseURL(): string {
    return this.o.baseURL;
  }

  private headers(): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json', ...this.o.headers };
    if (this.o.apiKey) h.authorization = `Bearer ${this.o.apiKey}`;
    return h;
  }

  /**
   * Runs `attempt` until it returns, retrying connection failures and
   * 429/503 answers (thrown as APIError by `attempt`) within the budget.
   */
  private async withRetries<T>(opts: RequestOptions | undefined, attempt: () => Promise<T>): Promise<T> {
    const r = withDefaults(opts?.retry ?? this.o.retry);
    for (let i = 0; ; ++i) {
      try {
        return await attempt();
      } catch (raw) {
        const e = wrap(raw);
        const status = (e as { status?: number }).status;
        const retryable = e instanceof ConnectionError || (status !== undefined && retryableStatus(status));
        if (!retryable || i >= r.maxRetries || opts?.signal?.aborted) throw e;
        const headers = (e as { headers?: Headers }).headers;
        await sleep(backoffMs(i, r, headers?.get('retry-after')), opts?.signal);
      }
    }
  }

  private async send(method: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    const f = this.o.fetch ?? globalThis.fetch;
    const init: RequestInit = { method, headers: this.headers() };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (signal) init.signal = signal;
    const res = await f(`${this.o.baseURL}${path}`, init);
    if (!res.ok) {
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: keep the text
      }
      throw apiErrorFrom(res.status, parsed, res.headers);
    }
    return res;
  }

  /** A JSON request; the parsed JSON answer. */
  json<T>(method: string, path: string, body?: unknown, opts?: RequestOptions): Promise<T> {
    return this.withRetries(opts, async () => {
      const res = await this.send(method, path, body, opts?.signal);
      return (await res.json()) as T;
    }).catch((e) => {
      throw wrap(e);
    });
  }

  /** A raw text answer (GET /metrics). */
  text(path: string, opts?: RequestOptions): Promise<string> {
    return this.withRetries(opts, async () => (await this.send('GET', path, undefined, opts?.signal)).text());
  }

  /**
   * A streamed request: resolves with the first parsed event once it arrived
   * (retrying while nothing has), and an iterator over the rest. Errors after
   * that are thrown by the iterator and never retried.
   */
  stream<T>(path: string, body: unknown, opts?: RequestOptions): Promise<{ first: T; rest: AsyncGenerator<T> }> {
    return this.withRetries(opts, async () => {
      const res = await this.send('POST', path, body, opts?.signal);
      if (!res.body) throw new ConnectionError('the response has no body');
      const events = parsedEvents<T>(sseData(res.body));
      let first: IteratorResult<T>;
      try {
        first = await events.next();
      } catch (e) {
        throw wrap(e);
      }
      if (first.done) throw new ConnectionError('the stream ended before its first event');
      return { first: first.value, rest: guarded(events) };
    });
  }
}

async function* parsedEvents<T>(data: AsyncGenerator<string>): AsyncGenerator<T> {
  let done = false;
  for await (const d of data) {
    if (d === '[DONE]') {
      done = true;
      break;
    }
    const j = JSON.parse(d) as { error?: unknown };
    if (j.error) throw apiErrorFrom(500, j);
    yield j as T;
  }
  if (!done) throw new ConnectionError('the stream was cut before [DONE]');
}

async function* guarded<T>(it: AsyncGenerator<T>): AsyncGenerator<T> {
  try {
    for (;;) {
      const r = await it.next();
      if (r.done) return;
      yield r.value;
    }
  } catch (e) {
    throw wrap(e);
  } finally {
    await it.return(undefined);
  }
}
