// The web chat: one realtime session (GET /v1/realtime, docs/protocol.md)
// per conversation, through the TypeScript SDK (clients/typescript; its
// compiled ESM is embedded as /ui/sdk/, see clients/typescript/web-assets.mjs):
// Send = session.send + session.create with the sampling settings; tokens
// are appended as response.delta events arrive; Stop = session.interrupt
// (response.cancel); editing the last message = session.redirect (the
// running answer, if any, is interrupted and a new one starts; the earlier
// turn stays in the session's context and is shown dimmed). Each answer's
// footer shows the server's TTFT, the page's time to first token (Send ->
// first text drawn), the decode rate and the tokens used.
import { Nexus } from '/ui/sdk/index.js';

const $ = (id) => document.getElementById(id);
const messages = $('messages'), input = $('input'), sendBtn = $('send'), stopBtn = $('stop');
let current = null;       // Promise<RealtimeSession> of this conversation, null once closed
let session = null;       // session.created's "session" (RealtimeSession.info)
let running = false;      // a response is expected or streaming
let pending = [];         // answer bubbles waiting for their response.created, in order
const answers = new Map(); // response id -> answer bubble
let lastTurn = null;      // {user, answer}: the turn the Edit button belongs to

// Opens the conversation's session (the key, if the server wants one, goes
// as the subprotocol openai-insecure-api-key.KEY: auth.js) and draws its
// events until it closes.
function connect() {
  setConn('connecting');
  const opened = new Nexus().realtime.connect({ apiKey: NexusAuth.key() || undefined });
  current = opened;
  (async () => {
    let why = 'the connection closed';
    try {
      const s = await opened;
      if (current !== opened) return s.close();  // New chat was pressed meanwhile
      session = s.info;
      onSessionCreated();
      for await (const ev of s) {
        if (current !== opened) return;
        onEvent(ev);
      }
    } catch (e) {
      why = e.message;
    }
    if (current === opened) closed(why);
  })();
}

function closed(why) {
  current = null;
  setConn('closed');
  running = false;
  for (const b of [...answers.values(), ...pending]) finishBubble(b, 'error', why);
  answers.clear();
  pending = [];
  updateButtons();
}

// Runs `use(session)` once the session is open (connecting first if needed).
function withSession(use) {
  if (!current) connect();
  current.then((s) => {
    try {
      use(s);
    } catch (e) {
      bubble('error', e.message);
    }
  }, () => {});  // a failed connection: closed() tells
}

function setConn(state) {
  const el = $('conn');
  el.textContent = state === 'open' && session ? `session ${session.id}` : state;
  el.className = `conn ${state}`;
}

function settings() {
  const r = {};
  const num = (id, key, int) => {
    const v = $(id).value.trim();
    if (v !== '') r[key] = int ? parseInt(v, 10) : parseFloat(v);
  };
  num('temperature', 'temperature');
  num('top-p', 'top_p');
  num('max-tokens', 'max_tokens', true);
  num('priority', 'priority', true);
  if ($('ignore-eos').checked) r.ignore_eos = true;
  return r;
}

function bubble(role, text) {
  const el = document.createElement('div');
  el.className = `msg ${role}`;
  const t = document.createElement('span');
  t.className = 'text';
  t.textContent = text || '';
  el.appendChild(t);
  messages.appendChild(el);
  messages.scrollTop = messages.scrollHeight;
  return el;
}

function answerBubble() {
  const b = bubble('assistant', '');
  b.sentAt = performance.now();
  pending.push(b);
  return b;
}

function finishBubble(b, finish, detail) {
  b.dataset.finish = finish;
  const meta = document.createElement('span');
  meta.className = 'meta';
  const f = document.createElement('span');
  f.className = `finish finish-${finish}`;
  f.textContent = finish === 'cancelled' ? 'stopped' : finish;
  meta.append(f, detail ? ` · ${detail}` : '');
  b.appendChild(meta);
}

function onSessionCreated() {
  $('model-name').textContent = session.model;
  $('model-ctx').textContent = String(session.n_ctx);
  $('max-tokens').max = String(session.n_ctx);
  if (parseInt($('max-tokens').value, 10) > session.n_ctx) $('max-tokens').value = String(session.n_ctx);
  setConn('open');
}

// The session's events (ServerEvent), session.created aside.
function onEvent(ev) {
  switch (ev.type) {
    case 'response.created': {
      const b = pending.shift() || answerBubble();
      b.dataset.responseId = ev.response.id;
      answers.set(ev.response.id, b);
      break;
    }
    case 'response.delta': {
      const b = answers.get(ev.response_id);
      if (!b || !ev.text) break;
      if (b.firstTokenMs === undefined) {
        b.firstTokenMs = performance.now() - b.sentAt;
        b.dataset.firstTokenMs = b.firstTokenMs.toFixed(1);
      }
      b.firstChild.textContent += ev.text;
      messages.scrollTop = messages.scrollHeight;
      break;
    }
    case 'response.done': {
      const r = ev.response;
      const b = answers.get(r.id);
      answers.delete(r.id);
      if (b) {
        const u = r.usage;
        const parts = [`TTFT ${r.ttft_ms.toFixed(1)} ms`];
        if (b.firstTokenMs !== undefined) parts.push(`first token on page ${b.firstTokenMs.toFixed(1)} ms`);
        parts.push(`${r.tokens_per_s.toFixed(0)} tokens/s`,
                   `${u.completion_tokens} tokens (prompt ${u.prompt_tokens}, cached ${u.cached_tokens})`,
                   `context ${r.context_tokens}/${session ? session.n_ctx : '?'}`);
        if (r.error) parts.push(r.error);
        finishBubble(b, r.finish_reason, parts.join(' · '));
      }
      running = answers.size > 0 || pending.length > 0;
      updateButtons();
      break;
    }
    case 'error': {
      bubble('error', `${ev.error.code}: ${ev.error.message}`);
      // An error answering response.create / .redirect: no response started.
      if ((ev.error.event === 'response.create' || ev.error.event === 'response.redirect') && pending.length) {
        pending.pop().remove();
        running = answers.size > 0 || pending.length > 0;
        updateButtons();
      }
      break;
    }
  }
}

function updateButtons() {
  sendBtn.disabled = running;
  stopBtn.disabled = !running;
  for (const b of messages.querySelectorAll('.edit')) b.remove();
  if (!lastTurn) return;
  const edit = document.createElement('button');
  edit.type = 'button';
  edit.className = 'edit';
  edit.textContent = 'Edit';
  edit.onclick = () => startEdit(lastTurn);
  lastTurn.user.appendChild(edit);
}

function sendMessage(text) {
  const user = bubble('user', text);
  const response = settings();
  lastTurn = { user, answer: answerBubble() };
  withSession((s) => {
    s.send({ role: 'user', content: text });
    s.create(response);
  });
  running = true;
  updateButtons();
}

function startEdit(turn) {
  const old = turn.user.firstChild.textContent;
  const editor = document.createElement('div');
  editor.className = 'editor';
  const area = document.createElement('textarea');
  area.value = old;
  const resend = document.createElement('button');
  resend.type = 'button';
  resend.textContent = 'Resend';
  const cancel = document.createElement('button');
  cancel.type = 'button';
  cancel.textContent = 'Cancel';
  const row = document.createElement('div');
  row.append(cancel, resend);
  editor.append(area, row);
  turn.user.querySelector('.edit')?.remove();
  turn.user.appendChild(editor);
  area.focus();
  cancel.onclick = () => { editor.remove(); updateButtons(); };
  resend.onclick = () => {
    const text = area.value.trim();
    if (!text) return;
    editor.remove();
    // The session keeps the earlier turn (its KV is reused): shown dimmed.
    turn.user.classList.add('superseded');
    turn.answer.classList.add('superseded');
    const user = bubble('user', text);
    user.classList.add('edited');
    const response = settings();
    lastTurn = { user, answer: answerBubble() };
    withSession((s) => s.redirect({ role: 'user', content: text }, response));
    running = true;
    updateButtons();
  };
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || running) return;
  input.value = '';
  sendMessage(text);
});
input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
stopBtn.addEventListener('click', () => withSession((s) => s.interrupt()));
$('new-chat').addEventListener('click', () => {
  current?.then((s) => s.close(), () => {});
  current = null;
  messages.replaceChildren();
  answers.clear();
  pending = [];
  lastTurn = null;
  running = false;
  session = null;
  updateButtons();
  connect();
});

NexusAuth.ready().then(connect);
