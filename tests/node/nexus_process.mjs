// Spawns a `nexus` subcommand that prints "listening on SCHEME://HOST:PORT"
// (serve, gateway) and resolves once it does.
//
//   const serve = await startNexus(binary, ['serve', '-m', model, '--port', '0']);
//   serve.url      // 'http://127.0.0.1:PORT'
//   await serve.stop()  // SIGTERM; resolves to the exit code (null if killed by a signal)
// Rejects when no such line comes within 60 s or the process exits first.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

export function startNexus(binary, args) {
  const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  const stop = () => {
    proc.kill('SIGTERM');
    return exited;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`nexus ${args[0]}: no "listening on" line within 60 s`));
    }, 60000);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const m = /^listening on (https?:\/\/[^\s]+:\d+)$/.exec(line);
      if (!m) return;
      clearTimeout(timer);
      resolve({ url: m[1], stop });
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nexus ${args[0]} exited early (code ${code})`));
    });
  });
}
