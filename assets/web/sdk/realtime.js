// Real-time sessions over `GET /v1/realtime` (docs/protocol.md): one
// WebSocket per conversation; the server keeps its KV between responses.
// Server events arrive in order through an async iterator; `error` events
// are yielded like the others (the session goes on, as the protocol says),
// while a failed connection ends the iteration with a thrown error.
import { AbortError, ConnectionError, NexusError, RealtimeError } from './errors.js';
/** The subprotocols that carry `apiKey` (none without a key). */
export function realtimeProtocols(apiKey) {
    return apiKey ? ['realtime', `openai-insecure-api-key.${apiKey}`] : [];
}
function inputFields(input) {
    return typeof input === 'string' ? { text: input } : { message: input };
}
export class RealtimeSession {
    ws;
    /** session.created's session. */
    info;
    queue = [];
    waiter;
    failure;
    closed = false;
    constructor(ws) {
        this.ws = ws;
    }
    /** Opens the session; resolves once `session.created` arrived. */
    static async open(url, o = {}) {
        const Ctor = o.WebSocket ?? globalThis.WebSocket;
        if (!Ctor)
            throw new NexusError('no WebSocket implementation: run Node 18-21 with --experimental-websocket (Node 22+ has one), or pass ConnectOptions.WebSocket (e.g. the ws package)');
        if (o.signal?.aborted)
            throw new AbortError('aborted');
        const protocols = realtimeProtocols(o.apiKey);
        const s = new RealtimeSession(protocols.length ? new Ctor(url, protocols) : new Ctor(url));
        s.ws.onmessage = (m) => s.push(JSON.parse(String(m.data)));
        s.ws.onerror = () => s.fail(new ConnectionError('the WebSocket connection failed'));
        s.ws.onclose = (c) => {
            if (c.code !== 1000 && c.code !== 1005)
                s.fail(new ConnectionError(`the session closed (code ${c.code})`));
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
        if (o.session)
            s.update(o.session);
        return s;
    }
    /** session.update: merges settings (null removes one). */
    update(settings) {
        this.sendEvent({ type: 'session.update', session: settings });
    }
    /** input.append: queues a message or raw text for the next response. */
    send(input) {
        this.sendEvent({ type: 'input.append', ...inputFields(input) });
    }
    /** response.create, with per-response overrides. */
    create(response) {
        this.sendEvent(response ? { type: 'response.create', response } : { type: 'response.create' });
    }
    /** response.cancel: the running response ends with finish_reason "cancelled". */
    interrupt() {
        this.sendEvent({ type: 'response.cancel' });
    }
    /** response.redirect: cancel, append `input`, and start a new response. */
    redirect(input, response) {
        this.sendEvent({ type: 'response.redirect', ...inputFields(input), ...(response ? { response } : {}) });
    }
    /** session.close: the server ends a running response, then closes. */
    close() {
        if (this.ws.readyState === 1)
            this.sendEvent({ type: 'session.close' });
        else
            this.ws.close();
    }
    [Symbol.asyncIterator]() {
        return { next: () => this.next() };
    }
    /** The next server event; done once the session closed. */
    async next() {
        for (;;) {
            const e = this.queue.shift();
            if (e)
                return { value: e, done: false };
            if (this.failure)
                throw this.failure;
            if (this.closed)
                return { value: undefined, done: true };
            await new Promise((resolve) => (this.waiter = resolve));
        }
    }
    sendEvent(e) {
        if (this.ws.readyState !== 1)
            throw new ConnectionError('the session is not open');
        this.ws.send(JSON.stringify(e));
    }
    wake() {
        const w = this.waiter;
        this.waiter = undefined;
        w?.();
    }
    push(e) {
        this.queue.push(e);
        this.wake();
    }
    fail(e) {
        this.failure ??= e;
        this.wake();
    }
    end() {
        this.closed = true;
        this.wake();
    }
}
