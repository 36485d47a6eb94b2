#!/usr/bin/env node
// Read a thread's Observational Memory with the real `@mastra/client-js` (what the Studio's memory tab calls).
//
// stdin : ONE JSON object { "baseUrl": "http://127.0.0.1:PORT", "agentId": "chat-agent",
//                           "resourceId": "...", "threadId": "..." }
// stdout: ONE JSON line { "ok": bool, "config", "status", "om", "buffer", "error"? }:
//   getMemoryConfig, getMemoryStatus, getObservationalMemory and awaitBufferStatus, as the client returns them.
// Exit code 0 whenever the JSON was printed, 2 for bad stdin.

import { MastraClient } from '@mastra/client-js';
import { readInput } from './stdin_input.mjs';

const input = readInput();
const client = new MastraClient({ baseUrl: input.baseUrl, retries: 0 });
const where = { agentId: input.agentId, resourceId: input.resourceId, threadId: input.threadId };
try {
  const config = await client.getMemoryConfig({ agentId: input.agentId });
  const status = await client.getMemoryStatus(input.agentId, undefined, {
    resourceId: input.resourceId, threadId: input.threadId,
  });
  const om = await client.getObservationalMemory(where);
  const buffer = await client.awaitBufferStatus(where);
  process.stdout.write(`${JSON.stringify({ ok: true, config, status, om, buffer })}\n`);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ ok: false, error: String(e?.message ?? e) })}\n`);
}
