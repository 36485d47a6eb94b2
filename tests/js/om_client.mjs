#!/usr/bin/env node
// Read a thread's Observational Memory with the real `@mastra/client-js` (what the Studio's memory tab calls).
//
// input : { "baseUrl": "http://127.0.0.1:PORT", "agentId": "chat-agent", "resourceId": "...", "threadId": "..." }
// answer: { "ok": bool, "config", "status", "om", "buffer", "error"? }:
//   getMemoryConfig, getMemoryStatus, getObservationalMemory and awaitBufferStatus, as the client returns them.
// Run as a script (stdin/stdout, see harness.mjs) or inside serve.mjs.

import { MastraClient } from '@mastra/client-js';
import { runAsScript } from './harness.mjs';

export async function run(input) {
  const client = new MastraClient({ baseUrl: input.baseUrl, retries: 0 });
  const where = { agentId: input.agentId, resourceId: input.resourceId, threadId: input.threadId };
  try {
    const config = await client.getMemoryConfig({ agentId: input.agentId });
    const status = await client.getMemoryStatus(input.agentId, undefined, {
      resourceId: input.resourceId, threadId: input.threadId,
    });
    const om = await client.getObservationalMemory(where);
    const buffer = await client.awaitBufferStatus(where);
    return { ok: true, config, status, om, buffer };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e) };
  }
}

runAsScript(import.meta.url, run);
