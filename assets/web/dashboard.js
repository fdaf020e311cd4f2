// The live dashboard: one JSON snapshot a second from GET /v1/stats/stream
// (server-sent events; fields in docs/server.md, "Live stats"), drawn as
// charts of the last two minutes. The stream opens the first time the
// dashboard is shown and stays open (the charts keep their history).
'use strict';

const Dashboard = (() => {
  const $ = (id) => document.getElementById(id);
  const fmt = (v, unit = '') => (v === null || v === undefined ? '–' : LineChart.label(v) + unit);
  const charts = {
    ttft: new LineChart($('chart-ttft'), { series: [
      { name: 'p50', color: '#2563eb' }, { name: 'p90', color: '#d97706' }, { name: 'p99', color: '#b91c1c' }] }),
    itl: new LineChart($('chart-itl'), { series: [
      { name: 'p50', color: '#2563eb' }, { name: 'p90', color: '#d97706' }, { name: 'p99', color: '#b91c1c' }] }),
    tps: new LineChart($('chart-tps'), { series: [{ name: 'tokens/s', color: '#15803d' }] }),
    load: new LineChart($('chart-load'), { series: [
      { name: 'running', color: '#2563eb' }, { name: 'waiting', color: '#b91c1c' }] }),
    kv: new LineChart($('chart-kv'), { series: [
      { name: 'used', color: '#7c3aed' }, { name: 'cached', color: '#a3a3a3' }] }),
    step: new LineChart($('chart-step'), { series: [
      { name: 'batch', color: '#0891b2' }, { name: 'step ms', color: '#d97706' }] }),
  };
  let streaming = false;  // follow() is running
  let last = 0;

  function onSnapshot(s) {
    const t = s.ttft_ms, i = s.itl_ms;
    charts.ttft.push([t.p50, t.p90, t.p99]);
    charts.itl.push([i.p50, i.p90, i.p99]);
    charts.tps.push([s.tokens_per_s]);
    charts.load.push([s.running, s.waiting]);
    charts.kv.push([s.kv_used_blocks, s.kv_cached_blocks]);
    charts.step.push([s.batch_size, s.steps_per_s > 0 ? s.step_ms : null]);
    $('stat-ttft').textContent = `${fmt(t.p50, ' ms')} / ${fmt(t.p99, ' ms')}`;
    $('stat-itl').textContent = `${fmt(i.p50, ' ms')} / ${fmt(i.p99, ' ms')}`;
    $('stat-tps').textContent = fmt(s.tokens_per_s);
    $('stat-load').textContent = `${s.running} / ${s.waiting}`;
    $('stat-kv').textContent = `${s.kv_used_blocks} of ${s.kv_total_blocks}`;
    $('stat-step').textContent = `${fmt(s.batch_size)} · ${s.steps_per_s > 0 ? fmt(s.step_ms, ' ms') : '–'}`;
    last = Date.now();
    if (!$('dashboard-view').hidden) draw();
  }

  function draw() {
    for (const c of Object.values(charts)) c.draw();
  }

  // GET /v1/stats/stream read with fetch() (an EventSource cannot send the
  // API key, auth.js): one snapshot per `data:` event; reconnects a second
  // after the stream ends, as an EventSource would.
  async function follow() {
    await NexusAuth.ready();
    for (;;) {
      try {
        const r = await fetch('/v1/stats/stream', { headers: NexusAuth.headers() });
        if (r.ok) await readEvents(r.body.pipeThrough(new TextDecoderStream()).getReader());
      } catch (e) {
        // the server went away: retry below
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  async function readEvents(reader) {
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value.replace(/\r\n/g, '\n');
      for (let end; (end = buf.indexOf('\n\n')) >= 0; buf = buf.slice(end + 2)) {
        const data = buf.slice(0, end).split('\n').filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (data) onSnapshot(JSON.parse(data));
      }
    }
  }

  function show() {
    draw();
    if (streaming) return;
    streaming = true;
    follow();
    setInterval(() => {
      $('stats-age').textContent = last ? `last snapshot ${((Date.now() - last) / 1000).toFixed(0)} s ago`
                                        : 'waiting';
    }, 1000);
  }

  window.addEventListener('resize', () => { if (!$('dashboard-view').hidden) draw(); });
  return { show };
})();

// Views: / is the chat, /dashboard the dashboard; the tabs switch without a
// reload, so the chat's session stays open.
(() => {
  function showView(name, push) {
    document.getElementById('chat-view').hidden = name !== 'chat';
    document.getElementById('dashboard-view').hidden = name !== 'dashboard';
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === name);
    if (push) history.pushState({ view: name }, '', name === 'chat' ? '/' : '/dashboard');
    if (name === 'dashboard') Dashboard.show();
  }
  for (const a of document.querySelectorAll('nav a')) {
    a.addEventListener('click', (e) => {
      e.preventDefault();
      showView(a.dataset.view, true);
    });
  }
  window.addEventListener('popstate', () => showView(location.pathname === '/dashboard' ? 'dashboard' : 'chat', false));
  showView(location.pathname === '/dashboard' ? 'dashboard' : 'chat', false);
})();
