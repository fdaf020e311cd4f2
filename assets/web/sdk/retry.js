// Retries of requests of which nothing has reached the caller yet:
// connection failures and 429 / 503 answers. Exponential backoff with full
// jitter (Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog,
// 2015): wait uniform(0, min(maxDelay, base * 2^attempt)); a Retry-After
// header (seconds or an HTTP date, RFC 9110 section 10.2.3) replaces the
// computed wait when present, capped at maxDelay. A stream that has started
// is never retried: the caller would see its first tokens twice.
import { AbortError } from './errors.js';
export const retryableStatus = (status) => status === 429 || status === 503;
/** ms to wait before retry number `attempt` (0-based). */
export function backoffMs(attempt, o, retryAfter, random = Math.random) {
    if (retryAfter) {
        const secs = Number(retryAfter);
        const ms = Number.isFinite(secs) ? secs * 1000 : Date.parse(retryAfter) - Date.now();
        if (Number.isFinite(ms))
            return Math.min(Math.max(ms, 0), o.maxDelayMs);
    }
    return random() * Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** attempt);
}
export function withDefaults(o) {
    return { maxRetries: o?.maxRetries ?? 2, baseDelayMs: o?.baseDelayMs ?? 200, maxDelayMs: o?.maxDelayMs ?? 8000 };
}
export function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(new AbortError('aborted'));
        const t = setTimeout(() => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
        }, ms);
        const onAbort = () => {
            clearTimeout(t);
            reject(new AbortError('aborted'));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
    });
}
