// Latency of the realtime WebSocket sessions against plain HTTP, on a running
// `nexus serve` (scripts/bench-realtime.sh starts one). Node 20 with
// --experimental-websocket (the built-in WebSocket client).
//   node --experimental-websocket bench-realtime.mjs PORT [REPS]
// Prints a Markdown table (median and p90, milliseconds, client-measured).
import http from 'node:http';

const port = Number(process.argv[2]);
const reps = Number(process.argv[3] ?? 100);
const now = () => Number(process.hrtime.bigint()) / 1e6;

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

function post(path, body, agent) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      let first = null;
      let text = '';
      res.on('data', (c) => { if (first === null) first = now(); text += c; });
      res.on('end', () => resolve({ status: res.statusCode, text, first }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// A streamed chat completion: resolves with the time of the first chunk
// that carries text (not the role-only opening chunk) and the whole text.
function postStream(path, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      let firstText = null, text = '', pending = '';
      res.on('data', (c) => {
        pending += c;
        let i;
        while ((i = pending.indexOf('\n\n')) >= 0) {
          const ev = pending.slice(0, i);
          pending = pending.slice(i + 2);
          if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
          const delta = JSON.parse(ev.slice(6)).choices?.[0]?.delta?.content ?? '';
          if (delta && firstText === null) firstText = now();
          text += delta;
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, text, firstText }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

// A session whose events are awaited one type at a time.
async function session(settings) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime`);
  const queue = [];
  let waiter = null;
  ws.onmessage = (m) => {
    const ev = JSON.parse(m.data);
    ev.at = now();
    if (waiter && (waiter.type === null || waiter.type === ev.type || ev.type === 'error')) {
      const w = waiter;
      waiter = null;
      w.resolve(ev);
    } else if (!waiter) queue.push(ev);  // skipped by the pending next() otherwise
  };
  await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
  // The next event of `type` (null: any type), skipping others; errors always.
  const next = (type) => {
    const i = queue.findIndex((e) => type === null || e.type === type || e.type === 'error');
    if (i >= 0) return Promise.resolve(queue.splice(0, i + 1).pop());
    return new Promise((resolve) => { queue.length = 0; waiter = { type, resolve }; });
  };
  const send = (ev) => ws.send(JSON.stringify(ev));
  await next('session.created');
  send({ type: 'session.update', session: settings });
  await next('session.updated');
  return { ws, next, send };
}

async function roundTrips() {
  const body = { prompt: 'Once', max_tokens: 1, temperature: 0 };
  const fresh = [], keep = [], wsTimes = [];
  for (let i = 0; i < reps; ++i) {
    const t = now();
    await post('/v1/completions', body, false);
    fresh.push(now() - t);
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  await post('/v1/completions', body, agent);
  for (let i = 0; i < reps; ++i) {
    const t = now();
    await post('/v1/completions', body, agent);
    keep.push(now() - t);
  }
  agent.destroy();
  const s = await session({ temperature: 0, max_tokens: 1 });
  for (let i = 0; i < reps; ++i) {
    const t = now();
    s.send({ type: 'input.append', text: ' a' });
    s.send({ type: 'response.create' });
    await s.next('response.done');
    wsTimes.push(now() - t);
  }
  s.ws.close();
  return { fresh, keep, wsTimes };
}

const userTurns = ['Tell me a story.', 'What happened next?', 'Who was there?', 'Was it fun?', 'How did it end?'];

async function turn5() {
  const wsT = [], httpT = [], wsServer = [];
  for (let r = 0; r < Math.max(5, reps / 10); ++r) {
    const s = await session({ temperature: 0, max_tokens: 32, ignore_eos: true });
    const history = [];
    for (let t = 0; t < 5; ++t) {
      // Each round's conversation starts with its own words: an identical
      // conversation in every round would find the previous round's blocks
      // in the prefix cache, which is not what a user's next turn finds.
      const content = t === 0 ? `Round ${r}. ${userTurns[t]}` : userTurns[t];
      history.push({ role: 'user', content });
      const start = now();
      s.send({ type: 'input.append', message: { role: 'user', content } });
      s.send({ type: 'response.create' });
      const d = await s.next('response.delta');
      const ttft = d.at - start;
      let text = d.text;
      for (;;) {
        const ev = await s.next(null);
        if (ev.type !== 'response.delta') { if (t === 4) wsServer.push(ev.response?.ttft_ms ?? NaN); break; }
        text += ev.text;
      }
      history.push({ role: 'assistant', content: text });
      if (t === 4) wsT.push(ttft);
    }
    s.ws.close();
    // Stateless: its own conversation (other words, so it cannot reuse what
    // the session computed), the whole history resent each turn over a new
    // connection, streamed; TTFT = first chunk that carries text. Nexus's
    // prefix cache still serves this conversation's earlier turns' full
    // 16-token blocks (up to where re-tokenizing a reply gives other ids).
    const msgs = [];
    for (let t = 0; t < 5; ++t) {
      msgs.push({ role: 'user', content: t === 0 ? `Again, round ${r}. ${userTurns[t].toLowerCase()}`
                                                  : `Again, ${userTurns[t].toLowerCase()}` });
      const t0 = now();
      const res = await postStream('/v1/chat/completions',
        { messages: msgs, max_tokens: 32, temperature: 0, ignore_eos: true, stream: true });
      msgs.push({ role: 'assistant', content: res.text });
      if (t === 4) httpT.push(res.firstText - t0);
    }
  }
  return { wsT, httpT, wsServer };
}

async function interrupts() {
  const lat = [];
  const s = await session({ temperature: 0, max_tokens: 1500, ignore_eos: true });
  for (let i = 0; i < Math.max(10, reps / 2); ++i) {
    s.send({ type: 'input.append', text: ' Once upon a time' });
    s.send({ type: 'response.create' });
    await s.next('response.delta');
    const t = now();
    s.send({ type: 'response.cancel' });
    const done = await s.next('response.done');
    lat.push(done.at - t);
  }
  s.ws.close();
  return lat;
}

const row = (name, xs) => `| ${name} | ${xs.length} | ${pct(xs, 0.5).toFixed(3)} | ${pct(xs, 0.9).toFixed(3)} |`;
const rt = await roundTrips();
const t5 = await turn5();
const cancel = await interrupts();
console.log('| measurement | n | median ms | p90 ms |');
console.log('| --- | ---: | ---: | ---: |');
console.log(row('1-token round trip, new HTTP connection per request', rt.fresh));
console.log(row('1-token round trip, HTTP keep-alive', rt.keep));
console.log(row('1-token round trip, WebSocket session', rt.wsTimes));
console.log(row('TTFT of turn 5, WebSocket session (client)', t5.wsT));
console.log(row('TTFT of turn 5, WebSocket session (server ttft_ms)', t5.wsServer));
console.log(row('TTFT of turn 5, stateless HTTP resending history (client, streamed)', t5.httpT));
console.log(row('interrupt: response.cancel sent -> response.done received', cancel));
process.exit(0);
