#!/usr/bin/env node
// List a resource's threads with the real `@mastra/client-js` (what the Studio's sidebar shows).
//
// stdin : ONE JSON object
//   { "baseUrl": "http://127.0.0.1:PORT", "resourceId": "...", "agentId": "chat-agent",
//     "titled": "<thread id>",   (optional; poll until that thread is listed with a non-empty title)
//     "timeoutMs": 15000 }       (optional; how long to poll for `titled`)
// stdout: ONE JSON line { "ok": bool, "threads": [{id, title, resourceId, ...}], "polls": n, "error"? }
//   ok is false when `titled` never got a title within timeoutMs (threads = the last listing).
// Exit code 0 whenever the JSON was printed, 2 for bad stdin.

import { MastraClient } from '@mastra/client-js';
import { readInput } from './stdin_input.mjs';

const input = readInput();
const client = new MastraClient({ baseUrl: input.baseUrl, retries: 0 });
const deadline = Date.now() + (input.timeoutMs ?? 15000);
let threads = [];
let polls = 0;
try {
  for (;;) {
    polls += 1;
    threads = (await client.listMemoryThreads({ resourceId: input.resourceId, agentId: input.agentId })).threads;
    const target = input.titled && threads.find((t) => t.id === input.titled);
    if (!input.titled || (target && target.title)) break;
    if (Date.now() > deadline) {
      process.stdout.write(`${JSON.stringify({ ok: false, threads, polls, error: `no title for ${input.titled}` })}\n`);
      process.exit(0);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  process.stdout.write(`${JSON.stringify({ ok: true, threads, polls })}\n`);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ ok: false, threads, polls, error: String(e?.message ?? e) })}\n`);
}
