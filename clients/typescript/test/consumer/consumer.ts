// Compiled with tsc --strict --noEmit by the consumer test: what a user's
// code would write type-checks against the published declarations.
import Nexus, { APIError, type ChatCompletionChunk, type ServerEvent, type StreamingResponse } from '@nexus-llm/client';

async function main(): Promise<void> {
  const client = new Nexus({ baseURL: 'http://127.0.0.1:8080', retry: { maxRetries: 1 } });
  const s: StreamingResponse<ChatCompletionChunk> = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  });
  for await (const chunk of s.stream) {
    const text: string | undefined = chunk.choices[0]?.delta.content;
    if (text) console.log(text);
  }
  const usage: number | undefined = s.metadata.usage?.completion_tokens;
  const whole = await client.completions.create({ prompt: 'Once', max_tokens: 4 });
  const t: string | undefined = whole.choices[0]?.text;
  const session = await client.realtime.connect({ signal: AbortSignal.timeout(1000), apiKey: 'sk-from-a-form' });
  session.send('hello');
  session.create({ temperature: 0 });
  for await (const ev of session) {
    const e: ServerEvent = ev;
    if (e.type === 'response.delta') console.log(e.text);
    if (e.type === 'response.done') break;
  }
  try {
    await client.models.list();
  } catch (e) {
    if (e instanceof APIError) console.log(e.status, e.error.code);
  }
  console.log(usage, t);
}
void main();
