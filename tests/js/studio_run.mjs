#!/usr/bin/env node
// One agent run through the real, unchanged `@mastra/client-js`, reporting how it ended
// (tests/test_turn_rate_limit.py: what a rate-limited run looks like to a Mastra client).
//
// stdin : { "baseUrl": "http://127.0.0.1:PORT", "agentId": "chat-agent", "method": "generate" | "stream",
//           "text": "hello", "headers": {...} }
// stdout: { "ok": bool, "text": string | null,                 (the reply, when it ran)
//           "status": number | null, "message": string | null,  (a MastraClientError's status and message)
//           "body": object | null, "errorName": string | null }
// Exit 0 whenever the JSON was printed, 2 for bad stdin.

import { MastraClient } from '@mastra/client-js';
import { readInput } from './stdin_input.mjs';

const input = readInput((i) => {
  if (typeof i.baseUrl !== 'string' || typeof i.agentId !== 'string') throw new Error('needs baseUrl and agentId');
});
const client = new MastraClient({ baseUrl: input.baseUrl, headers: input.headers ?? {} });
const agent = client.getAgent(input.agentId);
const out = { ok: false, text: null, status: null, message: null, body: null, errorName: null };
try {
  const messages = [{ role: 'user', content: input.text ?? 'hello' }];
  if (input.method === 'stream') {
    const response = await agent.stream(messages);
    let text = '';
    await response.processDataStream({ onChunk: async (chunk) => { if (chunk.type === 'text-delta') text += chunk.payload.text; } });
    out.text = text;
  } else {
    out.text = (await agent.generate(messages)).text;
  }
  out.ok = true;
} catch (err) {
  out.errorName = err?.name ?? null;
  out.status = err?.status ?? null;
  out.message = err?.message ?? String(err);
  out.body = err?.body ?? null;
}
process.stdout.write(JSON.stringify(out) + '\n');
