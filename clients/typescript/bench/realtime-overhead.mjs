// What the SDK's realtime session costs per streamed token over a bare
// WebSocket client (issue 23's target: <= 0.05 ms). Both clients use the
// same WebSocket (the platform's: Node 22+, or Node 20-21 with
// --experimental-websocket, which this script adds itself), run one
// response of TOKENS tokens (ignore_eos, temperature 0) against a real
// `nexus serve`, and do the same work per delta (JSON.parse, count the text).
// Rounds alternate the order (bare, sdk / sdk, bare) after one warm-up
// each. Reported per token: wall time from response.create to response.done
// (bounded by the server's decode rate) and this process's CPU time
// (user + system), the cost the SDK adds; then the SDK - bare differences.
//
//   npm run build && node bench/realtime-overhead.mjs [--binary PATH] [--model GGUF]
//                                                     [--tokens 2000] [--rounds 8]
// Default binary: ../../build/release/src/nexus; default model: the built-in one.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

if (typeof WebSocket !== 'function') {
  const child = spawn(process.execPath, ['--experimental-websocket', ...process.argv.slice(1)], { stdio: 'inherit' });
  child.on('exit', (code) => process.exit(code ?? 1));
} else {
  await main();
}

async function main() {
  const { values: o } = parseArgs({ options: {
    binary: { type: 'string', default: new URL('../../../build/release/src/nexus', import.meta.url).pathname },
    model: { type: 'string' },
    tokens: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '8' },
  } });
  const { Nexus } = await import('../dist/index.js');
  const tokens = Number(o.tokens), rounds = Number(o.rounds);
  const server = await serve(o.binary, o.model ? ['-m', o.model] : []);
  const response = { max_tokens: tokens, ignore_eos: true, temperature: 0 };
  const wsURL = `${server.url.replace(/^http/, 'ws')}/v1/realtime`;

  // Times one response; `run(onDelta)` starts it and resolves with the usage.
  async function measure(run) {
    let chars = 0;
    const t0 = performance.now(), c0 = process.cpuUsage();
    const usage = await run((text) => { chars += text.length; });
    const cpu = process.cpuUsage(c0), wall = performance.now() - t0;
    if (usage.completion_tokens !== tokens || chars === 0) throw new Error(`short response: ${JSON.stringify(usage)}`);
    return { wall: wall / tokens, cpu: (cpu.user + cpu.system) / 1000 / tokens };
  }

  const clients = {
    bare: async () => {
      const ws = new WebSocket(wsURL);
      await new Promise((resolve, reject) => {
        ws.onmessage = (m) => { if (JSON.parse(m.data).type === 'session.created') resolve(); };
        ws.onerror = () => reject(new Error('bare: connection failed'));
      });
      const r = await measure((onDelta) => new Promise((resolve) => {
        ws.onmessage = (m) => {
          const ev = JSON.parse(m.data);
          if (ev.type === 'response.delta') onDelta(ev.text);
          else if (ev.type === 'response.done') resolve(ev.response.usage);
        };
        ws.send(JSON.stringify({ type: 'input.append', text: 'Once upon a time' }));
        ws.send(JSON.stringify({ type: 'response.create', response }));
      }));
      ws.close();
      return r;
    },
    sdk: async () => {
      const session = await new Nexus({ baseURL: server.url }).realtime.connect();
      const r = await measure(async (onDelta) => {
        session.send('Once upon a time');
        session.create(response);
        for await (const ev of session) {
          if (ev.type === 'response.delta') onDelta(ev.text);
          else if (ev.type === 'response.done') return ev.response.usage;
        }
        throw new Error('sdk: the session closed');
      });
      session.close();
      return r;
    },
  };

  try {
    await clients.bare();
    await clients.sdk();
    const res = { bare: [], sdk: [] };
    for (let i = 0; i < rounds; i++) {
      for (const name of i % 2 ? ['sdk', 'bare'] : ['bare', 'sdk']) res[name].push(await clients[name]());
    }
    const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    const fmt = (x) => x.toFixed(4);
    console.log(`${rounds} rounds x ${tokens} tokens per client, ms per token (median over rounds):`);
    for (const name of ['bare', 'sdk'])
      console.log(`  ${name.padEnd(4)}  wall ${fmt(med(res[name].map((r) => r.wall)))}  cpu ${fmt(med(res[name].map((r) => r.cpu)))}`);
    const diff = (k) => med(res.sdk.map((r, i) => r[k] - res.bare[i][k]));
    console.log(`SDK - bare per token (median of paired rounds): wall ${fmt(diff('wall'))} ms, cpu ${fmt(diff('cpu'))} ms`);
  } finally {
    server.child.kill('SIGKILL');
  }
}

function serve(binary, extra) {
  const child = spawn(binary, ['serve', '--port', '0', '--threads', '1', ...extra], { stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`nexus serve exited (${code})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = /^listening on (http:\/\/\S+)$/.exec(line);
      if (m) resolve({ url: m[1], child });
    });
  });
}
