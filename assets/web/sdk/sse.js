// Server-sent events (WHATWG HTML, "Server-sent events", the event stream
// format): lines separated by \n, \r\n or \r; an empty line ends an event;
// `data:` lines are joined with \n; comments (`:`) and other fields ignored.
// Yields each event's data; the OpenAI streams end with the data `[DONE]`.
// Leaving the iteration early cancels the body.
export async function* sseData(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let data = [];
    let ended = false;
    try {
        for (;;) {
            const { value, done } = await reader.read();
            if (done) {
                ended = true;
                break;
            }
            buffer += decoder.decode(value, { stream: true });
            let nl;
            while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
                if (nl === buffer.length - 1 && buffer[nl] === '\r')
                    break; // maybe the first half of \r\n
                const line = buffer.slice(0, nl);
                buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1));
                if (line === '') {
                    if (data.length > 0)
                        yield data.join('\n');
                    data = [];
                }
                else if (line.startsWith('data:')) {
                    data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
                }
            }
        }
        if (data.length > 0)
            yield data.join('\n');
    }
    finally {
        // A consumer that stops early (break, abort) cancels the body: the
        // connection closes and the server cancels the generation.
        if (ended)
            reader.releaseLock();
        else
            await reader.cancel().catch(() => undefined);
    }
}
