// Errors the client throws. Every failure is one of these classes, so callers
// can tell a server's answer (APIError, with the OpenAI-style error body)
// from a transport failure (ConnectionError) and from their own abort.
export class NexusError extends Error {
    constructor(message, options) {
        super(message, options);
        this.name = new.target.name;
    }
}
/** The server answered with an HTTP error status (or an error event mid-stream). */
export class APIError extends NexusError {
    status;
    error;
    headers;
    constructor(status, error, headers) {
        super(`${status} ${error.code ?? error.type ?? 'error'}: ${error.message}`);
        this.status = status;
        this.error = error;
        this.headers = headers;
    }
}
/** 429: the server's queue is full, or a rate limit. */
export class RateLimitError extends APIError {
}
/** The connection failed or was cut before the response was complete. */
export class ConnectionError extends NexusError {
}
/** The caller's AbortSignal fired. */
export class AbortError extends NexusError {
}
/** A real-time session event of type `error` (docs/protocol.md, error codes). */
export class RealtimeError extends NexusError {
    code;
    event;
    constructor(code, message, event) {
        super(`${code}: ${message}`);
        this.code = code;
        this.event = event;
    }
}
export function apiErrorFrom(status, body, headers) {
    const e = body?.error;
    const error = e && typeof e.message === 'string' ? e : { message: typeof body === 'string' ? body : `HTTP ${status}` };
    return status === 429 ? new RateLimitError(status, error, headers) : new APIError(status, error, headers);
}
