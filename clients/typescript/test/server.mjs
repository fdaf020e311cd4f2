// Test helpers: a real `nexus serve` child process, and scripted fake servers.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';

export const SKIP_CODE = 77;

/** { binary, model } from the environment, or null with the reason to skip. */
export function serverInputs() {
  const binary = process.env.NEXUS_BINARY, model = process.env.NEXUS_MODEL;
  if (!binary || !existsSync(binary)) return { skip: `NEXUS_BINARY not found: ${binary}` };
  if (!model || !existsSync(model)) return { skip: `NEXUS_MODEL not found: ${model}` };
  return { binary, model };
}

/** Starts `nexus serve -m model --port 0`; resolves { url, stop }. */
export function startNexus(binary, model, extra = []) {
  const child = spawn(binary, ['serve', '-m', model, '--port', '0', '--threads', '1', ...extra],
                      { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('nexus serve: no "listening on" line within 60 s')), 60000);
    child.on('exit', (code) => reject(new Error(`nexus serve exited with ${code}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      resolve({
        url: m[1],
        stop: () => new Promise((done) => {
          child.removeAllListeners('exit');
          child.on('exit', done);
          child.kill('SIGTERM');
        }),
      });
    });
  });
}

/** A fake server whose handler gets (req, res, n) with n = 1-based request count. */
export function fakeServer(handler) {
  let n = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => handler(req, res, ++n, body));
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({ url: `http://127.0.0.1:${port}`, count: () => n, close: () => new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }) });
    });
  });
}

/** The value of a Prometheus sample `name{labels}` (labels as written), or undefined. */
export function metric(text, series) {
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return undefined;
}
