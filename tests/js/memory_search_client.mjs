#!/usr/bin/env node
// Search a studio's memory, and clone a thread, with the real, unchanged `@mastra/client-js`.
//
// stdin : ONE JSON object
//   { "baseUrl": "http://127.0.0.1:PORT",
//     "ops": [ { "op": "search", "agentId", "resourceId", "searchQuery", "threadId"?, "limit"? },
//              { "op": "clone", "agentId", "threadId", "newThreadId" } ] }
// stdout: ONE JSON line { "ok": true, "results": [ { "value" } | { "status", "body" } ] }
//   one result per op, in order: the client's answer, or the status and body of the
//   MastraClientError it threw. Exit 0 whenever the JSON was printed, 2 bad stdin, 1 harness bug.

import { MastraClient, MastraClientError } from '@mastra/client-js';
import { readInput } from './stdin_input.mjs';

const request = readInput((input) => {
  if (typeof input.baseUrl !== 'string' || !Array.isArray(input.ops)) throw new Error('baseUrl and ops are required');
});

const client = new MastraClient({ baseUrl: request.baseUrl, retries: 0 });

async function run(op) {
  switch (op.op) {
    case 'search':
      return client.searchMemory({ agentId: op.agentId, resourceId: op.resourceId, searchQuery: op.searchQuery,
                                   threadId: op.threadId, limit: op.limit });
    case 'clone':
      return client.getMemoryThread({ threadId: op.threadId, agentId: op.agentId })
        .clone({ newThreadId: op.newThreadId });
    default:
      throw new Error(`unknown op ${op.op}`);
  }
}

try {
  const results = [];
  for (const op of request.ops) {
    try {
      results.push({ value: await run(op) });
    } catch (err) {
      if (!(err instanceof MastraClientError)) throw err;
      results.push({ status: err.status, body: err.body });
    }
  }
  process.stdout.write(`${JSON.stringify({ ok: true, results })}\n`);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
