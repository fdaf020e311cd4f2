// Nexus client: `new Nexus({ baseURL })`, then chat.completions.create,
// completions.create, models.list, realtime.connect. See README.md.
import { ChatCompletions, Completions } from './completions.js';
import { Transport } from './http.js';
import { RealtimeSession } from './realtime.js';
export * from './errors.js';
export { RealtimeSession, realtimeProtocols } from './realtime.js';
export { backoffMs } from './retry.js';
export class Nexus {
    chat;
    completions;
    models;
    realtime;
    /** GET /metrics: the Prometheus text. */
    metrics;
    constructor(o = {}) {
        const origin = globalThis.location?.origin;
        const baseURL = o.baseURL ?? origin;
        if (!baseURL)
            throw new TypeError('Nexus: baseURL is required outside a browser page');
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
