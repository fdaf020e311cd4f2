// HTTP transport: fetch (Node 18+ and browsers), JSON bodies, retries of
// attempts that delivered nothing (retry.ts), SSE streams (sse.ts).
import { AbortError, apiErrorFrom, ConnectionError, NexusError } from './errors.js';
import { backoffMs, retryableStatus, sleep, withDefaults } from './retry.js';
import { sseData } from './sse.js';
function isAbort(e) {
    return e?.name === 'AbortError';
}
function wrap(e) {
    if (e instanceof NexusError)
        return e;
    if (isAbort(e))
        return new AbortError('aborted', { cause: e });
    return new ConnectionError(`connection failed: ${e?.message ?? String(e)}`, { cause: e });
}
export class Transport {
    o;
    constructor(o) {
        this.o = { ...o, baseURL: o.baseURL.replace(/\/+$/, '') };
    }
    get baseURL() {
        return this.o.baseURL;
    }
    headers() {
        const h = { 'content-type': 'application/json', ...this.o.headers };
        if (this.o.apiKey)
            h.authorization = `Bearer ${this.o.apiKey}`;
        return h;
    }
    /**
     * Runs `attempt` until it returns, retrying connection failures and
     * 429/503 answers (thrown as APIError by `attempt`) within the budget.
     */
    async withRetries(opts, attempt) {
        const r = withDefaults(opts?.retry ?? this.o.retry);
        for (let i = 0;; ++i) {
            try {
                return await attempt();
            }
            catch (raw) {
                const e = wrap(raw);
                const status = e.status;
                const retryable = e instanceof ConnectionError || (status !== undefined && retryableStatus(status));
                if (!retryable || i >= r.maxRetries || opts?.signal?.aborted)
                    throw e;
                const headers = e.headers;
                await sleep(backoffMs(i, r, headers?.get('retry-after')), opts?.signal);
            }
        }
    }
    async send(method, path, body, signal) {
        const f = this.o.fetch ?? globalThis.fetch;
        const init = { method, headers: this.headers() };
        if (body !== undefined)
            init.body = JSON.stringify(body);
        if (signal)
            init.signal = signal;
        const res = await f(`${this.o.baseURL}${path}`, init);
        if (!res.ok) {
            const text = await res.text();
            let parsed = text;
            try {
                parsed = JSON.parse(text);
            }
            catch {
                // not JSON: keep the text
            }
            throw apiErrorFrom(res.status, parsed, res.headers);
        }
        return res;
    }
    /** A JSON request; the parsed JSON answer. */
    json(method, path, body, opts) {
        return this.withRetries(opts, async () => {
            const res = await this.send(method, path, body, opts?.signal);
            return (await res.json());
        }).catch((e) => {
            throw wrap(e);
        });
    }
    /** A raw text answer (GET /metrics). */
    text(path, opts) {
        return this.withRetries(opts, async () => (await this.send('GET', path, undefined, opts?.signal)).text());
    }
    /**
     * A streamed request: resolves with the first parsed event once it arrived
     * (retrying while nothing has), and an iterator over the rest. Errors after
     * that are thrown by the iterator and never retried.
     */
    stream(path, body, opts) {
        return this.withRetries(opts, async () => {
            const res = await this.send('POST', path, body, opts?.signal);
            if (!res.body)
                throw new ConnectionError('the response has no body');
            const events = parsedEvents(sseData(res.body));
            let first;
            try {
                first = await events.next();
            }
            catch (e) {
                throw wrap(e);
            }
            if (first.done)
                throw new ConnectionError('the stream ended before its first event');
            return { first: first.value, rest: guarded(events) };
        });
    }
}
async function* parsedEvents(data) {
    let done = false;
    for await (const d of data) {
        if (d === '[DONE]') {
            done = true;
            break;
        }
        const j = JSON.parse(d);
        if (j.error)
            throw apiErrorFrom(500, j);
        yield j;
    }
    if (!done)
        throw new ConnectionError('the stream was cut before [DONE]');
}
async function* guarded(it) {
    try {
        for (;;) {
            const r = await it.next();
            if (r.done)
                return;
            yield r.value;
        }
    }
    catch (e) {
        throw wrap(e);
    }
    finally {
        await it.return(undefined);
    }
}
