// chat.completions.create and completions.create: one call, streamed or not.
function observe(meta, c) {
    meta.model = c.model;
    if (c.usage)
        meta.usage = c.usage;
    if (c.timings)
        meta.timings = c.timings;
    const f = c.choices[0]?.finish_reason;
    if (f)
        meta.finish_reason = f;
}
async function streaming(t, path, body, opts) {
    const { first, rest } = await t.stream(path, { ...body, stream: true }, opts);
    const metadata = {};
    observe(metadata, first);
    async function* all() {
        yield first;
        for await (const c of rest) {
            observe(metadata, c);
            yield c;
        }
    }
    return { id: first.id, stream: all(), metadata };
}
export class ChatCompletions {
    t;
    constructor(t) {
        this.t = t;
    }
    create(params, opts) {
        if (params.stream)
            return streaming(this.t, '/v1/chat/completions', params, opts);
        return this.t.json('POST', '/v1/chat/completions', params, opts);
    }
}
export class Completions {
    t;
    constructor(t) {
        this.t = t;
    }
    create(params, opts) {
        if (params.stream)
            return streaming(this.t, '/v1/completions', params, opts);
        return this.t.json('POST', '/v1/completions', params, opts);
    }
}
