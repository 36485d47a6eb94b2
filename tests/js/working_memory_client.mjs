#!/usr/bin/env node
// Drive the studio's working-memory (and memory search and clone) routes with the real,
// unchanged `@mastra/client-js`.
//
// stdin : ONE JSON object
//   { "baseUrl": "http://127.0.0.1:PORT",
//     "token": "ta",                              (optional; sent as a Bearer token)
//     "ops": [ { "op": "get", "agentId", "threadId", "resourceId"? },
//              { "op": "update", "agentId", "threadId", "workingMemory", "resourceId"? },
//              { "op": "createThread", "agentId", "threadId", "resourceId" },
//              { "op": "search", "agentId", "resourceId", "searchQuery", "threadId"? },
//              { "op": "clone", "agentId", "threadId", "newThreadId" } ] }
// stdout: ONE JSON line { "ok": true, "results": [ { "value" } | { "status", "body" } ] }
//   one result per op, in order: the client's answer, or the status and body of the
//   MastraClientError it threw. Exit 0 whenever the JSON was printed, 2 bad stdin, 1 harness bug.

import { MastraClient, MastraClientError } from '@mastra/client-js';
import { readInput } from './stdin_input.mjs';

const request = readInput((input) => {
  if (typeof input.baseUrl !== 'string' || !Array.isArray(input.ops)) throw new Error('baseUrl and ops are required');
});

const headers = request.token ? { authorization: `Bearer ${request.token}` } : {};
const client = new MastraClient({ baseUrl: request.baseUrl, retries: 0, headers });

async function run(op) {
  switch (op.op) {
    case 'get':
      return client.getWorkingMemory({ agentId: op.agentId, threadId: op.threadId, resourceId: op.resourceId });
    case 'update':
      return client.updateWorkingMemory({ agentId: op.agentId, threadId: op.threadId,
                                          workingMemory: op.workingMemory, resourceId: op.resourceId });
    case 'createThread':
      return client.createMemoryThread({ agentId: op.agentId, threadId: op.threadId, resourceId: op.resourceId,
                                         title: op.title ?? 'working memory test' });
    case 'search':
      return client.searchMemory({ agentId: op.agentId, resourceId: op.resourceId, searchQuery: op.searchQuery,
                                   threadId: op.threadId });
    case 'clone':
      return client.getMemoryThread({ threadId: op.threadId, agentId: op.agentId }).clone({ newThreadId: op.newThreadId });
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
