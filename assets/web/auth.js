// The API key of a server started with --api-key (docs/server.md, "Web
// chat"). The page asks for it when GET /v1/models answers 401 and keeps it
// in this browser's localStorage. Browsers cannot put an Authorization
// header on a WebSocket or an EventSource: the chat gives key() to the SDK,
// whose realtime session offers it as the subprotocol
// "openai-insecure-api-key.KEY" beside "realtime" (the names OpenAI's
// browser clients use), and the dashboard reads its stream with fetch().
'use strict';

const NexusAuth = (() => {
  const STORE = 'nexus.apiKey';
  const key = () => localStorage.getItem(STORE) || '';
  const headers = () => (key() ? { Authorization: `Bearer ${key()}` } : {});
  let ready = null;

  // The key form in the header; resolves when a key was entered.
  function ask(message) {
    const form = document.getElementById('key-form'), input = document.getElementById('api-key');
    document.getElementById('key-note').textContent = message;
    form.hidden = false;
    input.focus();
    return new Promise((resolve) => {
      form.onsubmit = (e) => {
        e.preventDefault();
        localStorage.setItem(STORE, input.value.trim());
        input.value = '';
        form.hidden = true;
        resolve();
      };
    });
  }

  async function check() {
    for (;;) {
      let status = 0;
      try {
        status = (await fetch('/v1/models', { headers: headers() })).status;
      } catch (e) {
        return;  // the server is unreachable: the session shows it
      }
      if (status !== 401) return;
      await ask(key() ? 'The server refused this API key.' : 'This server needs an API key.');
    }
  }

  // Resolves once the server takes this page's key, or needs none (one
  // check for the whole page).
  return { key, headers, ready: () => (ready ??= check()) };
})();
