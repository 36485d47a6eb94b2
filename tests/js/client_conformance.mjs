#!/usr/bin/env node
// Judge the studio's Mastra-compatible REST API (/api/...) with the real, unchanged
// official `@mastra/client-js` (the client the Mastra Studio and Mastra users call).
//
// stdin : ONE JSON object
//   { "baseUrl": "http://127.0.0.1:PORT",     (required; the client adds the /api prefix)
//     "only": ["listAgents", ...],            (optional; run just these checks, in this order)
//     "resource": "chat-agent",               (optional; the resourceId threads are made in, as the
//                                              Studio does with resourceId = agentId; default a fresh
//                                              res-<uuid> per check. Checks that count a resource's
//                                              threads keep a fresh one.)
//     "list": true }                          (optional; only print the check names)
//
// stdout: ONE JSON line
//   { "ok": bool,                 true when every check that ran passed
//     "results": [{ "name", "ok", "error"?, "detail"? }],
//     "sdkVersion": "1.47.0",     installed @mastra/client-js version
//     "checks": [names] }         (list mode only)
//   `error` is a one-line reason; for an HTTP error it names status and body.
//   `detail` holds what the check saw: on failure also `requests`, the last HTTP exchanges
//   of that check as the client made them ({method, path, body, status, response}).
//   `detail.warnings` lists deviations from the contract that client-js tolerates.
// Exit code 0 whenever the JSON was printed (also when ok=false), 2 for bad stdin, 1 for a
// harness bug. Each check is independent: it makes its own thread ids with randomUUID().
//
// Contract: Mastra's Studio REST contract (errors, agents, memory, observability, tools); method names and
// signatures are taken from node_modules/@mastra/client-js/dist/*.d.ts and dist/index.js.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { MastraClient, MastraClientError } from '@mastra/client-js';

// client-js may log; keep stdout for the one JSON line.
for (const level of ['log', 'info', 'warn', 'debug']) console[level] = (...args) => console.error(...args);

const sdkVersion = (() => {
  try {
    return JSON.parse(readFileSync(new URL('./node_modules/@mastra/client-js/package.json', import.meta.url), 'utf8')).version;
  } catch {
    return null;
  }
})();

// ---------------------------------------------------------------- HTTP exchange log

let exchanges = [];
const clip = (text, n = 600) => (typeof text === 'string' && text.length > n ? `${text.slice(0, n)}...(${text.length} chars)` : text);

function loggingFetch(baseUrl) {
  return async (url, init = {}) => {
    const entry = { method: init.method ?? 'GET', path: String(url).slice(baseUrl.replace(/\/$/, '').length) };
    if (init.body !== undefined) entry.body = clip(String(init.body), 400);
    exchanges.push(entry);
    try {
      const res = await fetch(url, init);
      entry.status = res.status;
      if (!res.ok || !(res.headers.get('content-type') ?? '').includes('event-stream')) {
        const copy = res.clone();
        copy.text().then((t) => { entry.response = clip(t); }, () => {});
      } else {
        entry.response = '<event-stream>';
      }
      return res;
    } catch (err) {
      entry.error = String(err?.cause?.code ?? err?.message ?? err);
      throw err;
    }
  };
}

// ---------------------------------------------------------------- assertion helpers

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isIso = (v) => typeof v === 'string' && !Number.isNaN(Date.parse(v)) && /^\d{4}-\d\d-\d\dT/.test(v);

function keys(obj, required, where) {
  assert.ok(isObj(obj), `${where}: expected an object, got ${JSON.stringify(obj)?.slice(0, 200)}`);
  const missing = required.filter((k) => !(k in obj));
  assert.deepEqual(missing, [], `${where}: missing keys ${missing.join(', ')} (has ${Object.keys(obj).join(', ')})`);
}

function type(value, expected, where) {
  const actual = Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
  const ok = expected.split('|').includes(actual);
  assert.ok(ok, `${where}: expected ${expected}, got ${actual} (${JSON.stringify(value)?.slice(0, 120)})`);
}

const THREAD_KEYS = ['id', 'title', 'resourceId', 'createdAt', 'updatedAt', 'metadata'];
function checkThread(t, where, ctx) {
  keys(t, ['id', 'resourceId', 'createdAt', 'updatedAt'], where);
  const extra = Object.keys(t).filter((k) => !THREAD_KEYS.includes(k));
  if (ctx && extra.length) ctx.warn(`${where} has keys the real schema strips: ${extra.join(', ')}`);
  if (ctx && 'metadata' in t && t.metadata == null) ctx.warn(`${where}.metadata is null (real server omits it when unset)`);
  type(t.id, 'string', `${where}.id`);
  type(t.resourceId, 'string', `${where}.resourceId`);
  assert.ok(isIso(t.createdAt), `${where}.createdAt not ISO: ${t.createdAt}`);
  assert.ok(isIso(t.updatedAt), `${where}.updatedAt not ISO: ${t.updatedAt}`);
  if ('title' in t) type(t.title, 'string', `${where}.title`);
  if ('metadata' in t) type(t.metadata, 'object', `${where}.metadata`);
}

function checkStoredMessage(m, where, ctx) {
  keys(m, ['id', 'role', 'createdAt', 'content'], where);
  if (ctx && m.type !== 'text') ctx.warn(`${where}.type=${JSON.stringify(m.type)} (stored messages carry type "text")`);
  if (ctx && (typeof m.threadId !== 'string' || typeof m.resourceId !== 'string')) ctx.warn(`${where} lacks threadId/resourceId`);
  type(m.id, 'string', `${where}.id`);
  assert.ok(['user', 'assistant', 'system', 'signal'].includes(m.role), `${where}.role=${m.role}`);
  assert.ok(isIso(m.createdAt), `${where}.createdAt not ISO: ${m.createdAt}`);
  keys(m.content, ['format', 'parts'], `${where}.content`);
  assert.equal(m.content.format, 2, `${where}.content.format`);
  type(m.content.parts, 'array', `${where}.content.parts`);
}

function checkMemoryPage(res, itemsKey, where) {
  keys(res, [itemsKey, 'total', 'page', 'perPage', 'hasMore'], where);
  type(res[itemsKey], 'array', `${where}.${itemsKey}`);
  type(res.total, 'number', `${where}.total`);
  type(res.page, 'number', `${where}.page`);
  assert.ok(typeof res.perPage === 'number' || res.perPage === false, `${where}.perPage must be number|false, got ${res.perPage}`);
  type(res.hasMore, 'boolean', `${where}.hasMore`);
}

function checkObsPagination(p, where) {
  keys(p, ['total', 'page', 'perPage', 'hasMore'], where);
  type(p.total, 'number', `${where}.total`);
  type(p.page, 'number', `${where}.page`);
  assert.ok(typeof p.perPage === 'number' || p.perPage === false, `${where}.perPage`);
  type(p.hasMore, 'boolean', `${where}.hasMore`);
}

/** Awaits `promise`, asserting it rejects with a MastraClientError of `status`. Returns the error. */
async function expectHttpError(promise, status, where) {
  let err;
  try {
    const value = await promise;
    assert.fail(`${where}: expected HTTP ${status}, got a 2xx answer ${JSON.stringify(value)?.slice(0, 200)}`);
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    err = e;
  }
  assert.ok(err instanceof MastraClientError, `${where}: expected MastraClientError, got ${err?.name}: ${err?.message}`);
  assert.equal(err.status, status, `${where}: status ${err.status} (body ${JSON.stringify(err.body)}), expected ${status}`);
  assert.ok(isObj(err.body), `${where}: error body must be JSON object, got ${JSON.stringify(err.body)}`);
  type(err.body.error ?? err.body.message, 'string', `${where}: body.error`);
  return err;
}

const textOfMessage = (m) => {
  const parts = Array.isArray(m?.content?.parts) ? m.content.parts : [];
  const fromParts = parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  return fromParts || (typeof m?.content?.content === 'string' ? m.content.content : '');
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Stored messages of a thread after a run (polls briefly: the server may store after [DONE]). */
async function storedTurn(client, threadId) {
  let stored = [];
  for (let i = 0; i < 40; i++) {
    const page = await client.getMemoryThread({ threadId, agentId: MEM }).listMessages({});
    stored = page.messages;
    if (stored.some((m) => m.role === 'assistant')) break;
    await sleep(50);
  }
  assert.ok(stored.length >= 2, `thread ${threadId} has ${stored.length} stored messages after the run`);
  return stored;
}

/** One plain-text agent run in Mastra's chunk format (Mastra's agent stream chunks). */
function checkRunChunks(allChunks, ctx, { agentId, storedAssistant }) {
  assert.ok(allChunks.length > 0, 'no chunks');
  // data-* chunks are custom chunks (Mastra's writer.custom, e.g. Observational Memory's
  // data-om-status), passed through as written: {type, data, transient?}, no run envelope
  const custom = allChunks.filter((c) => c.type.startsWith('data-'));
  custom.forEach((c, i) => type(c.data, 'object', `custom chunk[${i}](${c.type}).data`));
  const chunks = allChunks.filter((c) => !c.type.startsWith('data-'));
  const types = chunks.map((c) => c.type);
  const seq = types.filter((t, i, a) => t !== 'text-delta' || a[i - 1] !== 'text-delta').join(',');
  chunks.forEach((c, i) => {
    type(c.runId, 'string', `chunk[${i}](${c.type}).runId`);
    assert.equal(c.from, 'AGENT', `chunk[${i}](${c.type}).from`);
    type(c.payload, 'object', `chunk[${i}](${c.type}).payload`);
  });
  assert.equal(new Set(chunks.map((c) => c.runId)).size, 1, 'all chunks share one runId');
  for (const t of ['start', 'step-start', 'text-start', 'text-delta', 'text-end', 'step-finish', 'finish']) {
    assert.ok(types.includes(t), `missing ${t} chunk (got ${seq})`);
  }
  assert.equal(seq, 'start,step-start,text-start,text-delta,text-end,step-finish,finish', 'plain text turn chunk sequence');
  const by = (t) => chunks.find((c) => c.type === t);
  const textStart = by('text-start');
  type(textStart.payload.id, 'string', 'text-start.payload.id');
  chunks.filter((c) => c.type === 'text-delta').forEach((c, i) => {
    type(c.payload.text, 'string', `text-delta[${i}].payload.text`);
    assert.equal(c.payload.id, textStart.payload.id, `text-delta[${i}].payload.id must equal text-start id`);
  });
  assert.equal(by('text-end').payload.id, textStart.payload.id, 'text-end.payload.id');
  const stepStart = by('step-start');
  type(stepStart.payload.messageId, 'string', 'step-start.payload.messageId');
  if (storedAssistant) assert.equal(stepStart.payload.messageId, storedAssistant.id, 'step-start.payload.messageId must be the stored assistant message id');
  const start = by('start');
  if (start.payload.id !== agentId) ctx.warn(`start.payload.id=${JSON.stringify(start.payload.id)} (real server: the agent id)`);
  if (start.payload.messageId !== stepStart.payload.messageId) ctx.warn('start.payload.messageId differs from step-start.payload.messageId');
  const stepFinish = by('step-finish');
  type(stepFinish.payload.stepResult, 'object', 'step-finish.payload.stepResult');
  assert.equal(stepFinish.payload.stepResult.reason, 'stop', 'step-finish.payload.stepResult.reason');
  type(stepFinish.payload.output?.usage, 'object', 'step-finish.payload.output.usage');
  const finish = by('finish');
  assert.equal(finish.payload?.stepResult?.reason, 'stop', 'finish.payload.stepResult.reason');
  type(finish.payload?.output?.usage, 'object', 'finish.payload.output.usage');
  if (!isObj(finish.payload.messages)) ctx.warn('finish.payload.messages {all,user,nonUser} missing (client tools read messages.nonUser)');
}

// ---------------------------------------------------------------- checks

const MEM = 'chat-agent';
let FIXED_RESOURCE = null; // stdin "resource"
const newResource = () => FIXED_RESOURCE ?? `res-${randomUUID()}`;
const newIds = (prefix) => ({ thread: `${prefix}-${randomUUID()}`, resource: newResource() });

/** Puts two user/assistant turns into a fresh thread via generate; returns ids. */
async function seedThread(client, prefix, texts = ['my name is Ada', 'hello there']) {
  const ids = newIds(prefix);
  const agent = client.getAgent(MEM);
  for (const text of texts) await agent.generate(text, { memory: { thread: ids.thread, resource: ids.resource } });
  return ids;
}

const checks = {
  async listAgents(client, ctx) {
    const agents = await client.listAgents();
    assert.ok(isObj(agents), 'listAgents must return an object keyed by agent id');
    for (const id of ['chat-agent', 'docs-agent', 'orchestrator-agent']) {
      assert.ok(id in agents, `agent ${id} missing (keys: ${Object.keys(agents).join(', ')})`);
      const a = agents[id];
      keys(a, ['name', 'tools', 'agents', 'workflows', 'skills', 'workspaceTools', 'browserTools', 'hasBrowser',
        'inputProcessors', 'outputProcessors', 'instructions'], `agents[${id}]`);
      if ('id' in a) assert.equal(a.id, id, `agents[${id}].id`);
      type(a.tools, 'object', `agents[${id}].tools`);
      type(a.agents, 'object', `agents[${id}].agents`);
      type(a.workflows, 'object', `agents[${id}].workflows`);
      for (const k of ['skills', 'workspaceTools', 'browserTools', 'inputProcessors', 'outputProcessors']) type(a[k], 'array', `agents[${id}].${k}`);
      type(a.hasBrowser, 'boolean', `agents[${id}].hasBrowser`);
      assert.ok(['v2', 'v3'].includes(a.modelVersion), `agents[${id}].modelVersion=${a.modelVersion} (must be v2/v3)`);
      for (const [key, tool] of Object.entries(a.tools)) {
        type(tool.id, 'string', `agents[${id}].tools[${key}].id`);
        for (const s of ['inputSchema', 'outputSchema']) if (tool[s] != null) type(tool[s], 'string', `agents[${id}].tools[${key}].${s}`);
      }
    }
    assert.equal(agents['chat-agent'].modelVersion, 'v2', 'chat-agent.modelVersion');
    assert.equal(agents['chat-agent'].supportsMemory, true, 'chat-agent.supportsMemory');
    assert.equal(agents['docs-agent'].supportsMemory, true, 'docs-agent.supportsMemory');
    assert.equal(agents['orchestrator-agent'].supportsMemory, false, 'orchestrator-agent.supportsMemory');
    const partial = await client.listAgents(undefined, true);
    assert.ok(isObj(partial) && 'chat-agent' in partial, 'listAgents(partial=true) must still be keyed by id');
    return { ids: Object.keys(agents) };
  },

  async agentDetails(client, ctx) {
    const d = await client.getAgent('chat-agent').details();
    keys(d, ['name', 'instructions', 'tools', 'agents', 'workflows', 'skills', 'workspaceTools', 'browserTools',
      'hasBrowser', 'inputProcessors', 'outputProcessors'], 'details');
    assert.equal(d.modelVersion, 'v2', 'details.modelVersion');
    assert.equal(d.supportsMemory, true, 'details.supportsMemory');
    if ('id' in d) ctx.warn('single GET /agents/:id carries `id` (real server omits it; harmless)');
    return { name: d.name, provider: d.provider, modelId: d.modelId };
  },

  async agentDetailsUnknown404(client, ctx) {
    const id = `no-such-agent-${randomUUID().slice(0, 8)}`;
    const err = await expectHttpError(client.getAgent(id).details(), 404, 'details(unknown)');
    assert.deepEqual(err.body, { error: `Agent with id ${id} not found` }, '404 body');
  },

  async generateWithMemory(client, ctx) {
    const ids = newIds('gen');
    const agent = client.getAgent(MEM);
    const first = await agent.generate('my name is Ada', { memory: { thread: ids.thread, resource: ids.resource } });
    keys(first, ['text', 'finishReason', 'usage'], 'generate');
    type(first.text, 'string', 'generate.text');
    assert.ok(first.text.startsWith('[local model]'), `generate.text=${JSON.stringify(first.text)}`);
    assert.equal(first.finishReason, 'stop', 'generate.finishReason');
    type(first.usage, 'object', 'generate.usage');
    for (const k of ['totalUsage', 'steps', 'runId', 'traceId', 'messages', 'rememberedMessages', 'response', 'toolCalls', 'toolResults', 'reasoning', 'sources', 'files', 'warnings']) if (!(k in first)) ctx.warn(`generate response lacks ${k}`);
    if ('steps' in first) type(first.steps, 'array', 'generate.steps');
    const second = await agent.generate([{ role: 'user', content: 'what is my name?' }], { memory: { thread: ids.thread, resource: ids.resource } });
    assert.ok(second.text.startsWith('[local model]'), `second text=${JSON.stringify(second.text)}`);
    assert.ok(second.text.includes('Ada'), `memory not used: second answer ${JSON.stringify(second.text)}`);
    // the thread was auto-created with the given resource
    const thread = await client.getMemoryThread({ threadId: ids.thread, agentId: MEM }).get();
    checkThread(thread, 'auto-created thread', ctx);
    assert.equal(thread.resourceId, ids.resource, 'auto-created thread.resourceId');
    return { first: first.text, second: second.text };
  },

  async streamWithMemory(client, ctx) {
    const ids = newIds('stream');
    const agent = client.getAgent(MEM);
    const res = await agent.stream('my name is Grace. Please stream.', { memory: { thread: ids.thread, resource: ids.resource } });
    assert.equal(res.status, 200, 'stream status');
    const ctype = res.headers.get('content-type') ?? '';
    assert.ok(ctype.startsWith('text/event-stream'), `content-type ${ctype}`);
    const chunks = [];
    await res.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
    const stored = await storedTurn(client, ids.thread);
    checkRunChunks(chunks, ctx, { agentId: MEM, storedAssistant: stored[1] });
    const text = chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
    assert.ok(text.startsWith('[local model]'), `streamed text=${JSON.stringify(text)}`);
    const roles = stored.map((m) => m.role);
    assert.deepEqual(roles, ['user', 'assistant'], `stored roles after one streamed turn: ${roles.join(',')}`);
    assert.equal(textOfMessage(stored[1]), text, 'stored assistant text must equal concatenated text-delta payload.text');
    assert.ok(textOfMessage(stored[0]).includes('Grace'), 'stored user message text');
    stored.forEach((m, i) => checkStoredMessage(m, `stored[${i}]`, ctx));
    const second = await agent.stream([{ role: 'user', content: [{ type: 'text', text: 'what is my name?' }] }], { memory: { thread: ids.thread, resource: ids.resource } });
    const chunks2 = [];
    await second.processDataStream({ onChunk: async (chunk) => { chunks2.push(chunk); } });
    const text2 = chunks2.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join('');
    assert.ok(text2.includes('Grace'), `second streamed turn must answer from memory: ${JSON.stringify(text2)}`);
    return { types: chunks.map((c) => c.type).filter((t, i, a) => t !== 'text-delta' || a[i - 1] !== 'text-delta'), text };
  },

  async streamStudioBody(client, ctx) {
    // exactly what the Studio sends with signals off (Mastra's agent stream chunks)
    const thread = randomUUID();
    const runId = randomUUID();
    const res = await client.getAgent(MEM).stream([{ role: 'user', content: [{ type: 'text', text: 'What is the weather in Rome?' }] }], {
      runId, maxSteps: 15, untilIdle: true, modelSettings: { maxRetries: 2 }, requestContext: {}, memory: { thread, resource: MEM },
    });
    const chunks = [];
    await res.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
    const stored = await storedTurn(client, thread);
    checkRunChunks(chunks, ctx, { agentId: MEM, storedAssistant: stored[1] });
    assert.equal(chunks[0].runId, runId, 'chunk runId must be the runId the client sent');
    const t = await client.getMemoryThread({ threadId: thread, agentId: MEM }).get();
    if (t.resourceId !== MEM) ctx.warn(`thread made with memory.resource=${MEM} reports resourceId ${JSON.stringify(t.resourceId)} (real server: ${MEM}; server aliases agent id -> agent resource)`);
    // chat-agent generates titles in the background: "" until the job ran, then the local model's title
    assert.ok(['', 'What is the weather in Rome'].includes(t.title ?? ''), `auto-created thread title: ${JSON.stringify(t.title)}`);
    // what the Studio's sidebar then asks for
    const side = await client.listMemoryThreads({ resourceId: MEM, agentId: MEM });
    assert.ok(side.threads.some((x) => x.id === thread), 'listMemoryThreads({resourceId: agentId, agentId}) lists the new chat');
    const wm = await client.getWorkingMemory({ agentId: MEM, threadId: thread, resourceId: MEM });
    assert.equal(wm.threadExists, true, 'working-memory (resourceId = agentId) sees the thread');
    return { runId };
  },

  async signalsSubscribeSend(client, ctx) {
    const threadId = randomUUID();
    const agent = client.getAgent(MEM);
    const sub = await agent.subscribeToThread({ resourceId: MEM, threadId });
    assert.equal(sub.status, 200, 'subscribe status');
    const chunks = [];
    let resolveFinish;
    const finished = new Promise((r) => { resolveFinish = r; });
    const pump = sub.processDataStream({
      onChunk: async (c) => { chunks.push(c); if (c.type === 'finish') resolveFinish(); },
    }).catch((e) => { resolveFinish(); throw e; });
    const clientMessageId = `client-set-${randomUUID()}`;
    try {
      const accepted = await agent.sendMessage({
        message: { contents: 'my name is Lin', metadata: { clientMessageId } }, resourceId: MEM, threadId,
        ifIdle: { streamOptions: { maxSteps: 15, modelSettings: { maxRetries: 2 }, requestContext: {} } },
      });
      keys(accepted, ['accepted', 'runId'], 'send-message');
      assert.equal(accepted.accepted, true, 'accepted');
      type(accepted.runId, 'string', 'runId');
      if (!('signal' in accepted)) ctx.warn('send-message response lacks `signal`');
      let timer;
      const timeout = new Promise((r) => { timer = setTimeout(() => r('timeout'), 10_000); });
      const outcome = await Promise.race([finished, timeout]);
      clearTimeout(timer);
      assert.notEqual(outcome, 'timeout', `no finish chunk on the subscription within 10 s (got ${chunks.map((c) => c.type).join(',')})`);
      const echo = chunks.find((c) => c.type === 'data-user-message');
      assert.ok(echo, `no data-user-message echo (got ${chunks.map((c) => c.type).join(',')})`);
      assert.equal(echo.data?.metadata?.clientMessageId, clientMessageId, 'echo carries metadata.clientMessageId');
      assert.ok(chunks.indexOf(echo) < chunks.findIndex((c) => c.type === 'start'), 'echo comes before the run start');
      const run = chunks.filter((c) => c.type !== 'data-user-message' && c.runId === accepted.runId);
      const stored = await storedTurn(client, threadId);
      checkRunChunks(run, ctx, { agentId: MEM, storedAssistant: stored[1] });
      assert.ok(textOfMessage(stored[0]).includes('Lin'), 'stored user message');
      const aborted = await agent.abortThread({ resourceId: MEM, threadId });
      keys(aborted, ['aborted'], 'threads/abort');
      type(aborted.aborted, 'boolean', 'aborted');
    } finally {
      sub.unsubscribe();
      await Promise.race([pump, sleep(2000)]).catch(() => {});
    }
    return { types: chunks.map((c) => c.type).filter((t, i, a) => t !== 'text-delta' || a[i - 1] !== 'text-delta') };
  },

  async memoryLastMessages(client, ctx) {
    // lastMessages 10: the 7th turn sees exactly the 10 latest earlier messages (docs-agent:
    // chat-agent has Observational Memory, which feeds every unobserved message instead)
    const ids = newIds('lastmsg');
    const agent = client.getAgent('docs-agent');
    let last;
    for (let i = 1; i <= 7; i++) last = await agent.generate(`turn number ${i}`, { memory: { thread: ids.thread, resource: ids.resource } });
    // Mastra (core 1.68 MessageHistory.processInput) loads listMessages({perPage: lastMessages, DESC})
    // before the new user message is stored: 10 history messages + the new one reach the model.
    const seen = Number(/I can see (\d+) earlier message/.exec(last.text)?.[1]);
    assert.equal(seen, 10, `7th turn of a lastMessages=10 agent: the model saw ${seen} earlier messages, Mastra feeds 10 (+ the new one): ${JSON.stringify(last.text)}`);
    const page = await client.getMemoryThread({ threadId: ids.thread, agentId: 'docs-agent' }).listMessages({});
    assert.equal(page.total, 14, 'all 14 messages stored');
    return { text: last.text };
  },

  async orchestratorNoMemory(client, ctx) {
    const res = await client.getAgent('orchestrator-agent').generate('hello orchestrator');
    assert.ok(res.text.startsWith('[local model]'), `text=${JSON.stringify(res.text)}`);
    assert.equal(res.finishReason, 'stop', 'finishReason');
    return { text: res.text };
  },

  async createMemoryThread(client, ctx) {
    const threadId = `create-${randomUUID()}`;
    const resourceId = newResource();
    const t = await client.createMemoryThread({ agentId: MEM, resourceId, title: 'My title', metadata: { a: 1, tag: 'x' }, threadId });
    checkThread(t, 'createMemoryThread', ctx);
    assert.equal(t.id, threadId, 'created id');
    assert.equal(t.resourceId, resourceId, 'created resourceId');
    assert.equal(t.title, 'My title', 'created title');
    assert.deepEqual(t.metadata, { a: 1, tag: 'x' }, 'created metadata');
    const got = await client.getMemoryThread({ threadId, agentId: MEM }).get();
    assert.equal(got.title, 'My title', 'title read back');
    // no threadId -> server generates one
    const t2 = await client.createMemoryThread({ agentId: MEM, resourceId });
    checkThread(t2, 'createMemoryThread(no threadId)', ctx);
    assert.ok(t2.id && t2.id !== threadId, 'generated id');
    return { id: t.id, generated: t2.id };
  },

  async listMemoryThreads(client, ctx) {
    const resourceId = `res-${randomUUID()}`;
    const made = [];
    for (let i = 0; i < 3; i++) {
      made.push((await client.createMemoryThread({ agentId: MEM, resourceId, title: `t${i}`, threadId: `list-${i}-${randomUUID()}` })).id);
      await sleep(15);
    }
    const asc = await client.listMemoryThreads({ resourceId, agentId: MEM, orderBy: { field: 'updatedAt', direction: 'ASC' }, page: 0, perPage: 2 });
    checkMemoryPage(asc, 'threads', 'listMemoryThreads(ASC,p0)');
    asc.threads.forEach((t, i) => checkThread(t, `threads[${i}]`, ctx));
    assert.equal(asc.total, 3, 'total');
    assert.equal(asc.page, 0, 'page');
    assert.equal(asc.perPage, 2, 'perPage');
    assert.equal(asc.hasMore, true, 'hasMore on page 0');
    assert.deepEqual(asc.threads.map((t) => t.id), made.slice(0, 2), 'ASC by updatedAt, page 0');
    const asc1 = await client.listMemoryThreads({ resourceId, agentId: MEM, orderBy: { field: 'updatedAt', direction: 'ASC' }, page: 1, perPage: 2 });
    assert.deepEqual(asc1.threads.map((t) => t.id), made.slice(2), 'ASC page 1');
    assert.equal(asc1.hasMore, false, 'hasMore on last page');
    assert.equal(asc1.page, 1, 'page 1');
    const dflt = await client.listMemoryThreads({ resourceId, agentId: MEM });
    assert.deepEqual(dflt.threads.map((t) => t.id), [...made].reverse(), 'default order is createdAt DESC');
    assert.equal(dflt.perPage, 100, 'default perPage 100');
    assert.ok(dflt.threads.every((t) => t.resourceId === resourceId), 'filtered by resourceId');
    const none = await client.listMemoryThreads({ resourceId: `res-${randomUUID()}`, agentId: MEM });
    assert.deepEqual({ ...none }, { threads: [], total: 0, page: 0, perPage: 100, hasMore: false }, 'empty listing');
    return { made };
  },

  async threadGetUpdate(client, ctx) {
    const threadId = `upd-${randomUUID()}`;
    const resourceId = newResource();
    const created = await client.createMemoryThread({ agentId: MEM, resourceId, title: 'before', metadata: { k: 'v' }, threadId });
    const thread = client.getMemoryThread({ threadId, agentId: MEM });
    const got = await thread.get();
    checkThread(got, 'get', ctx);
    assert.equal(got.id, threadId);
    assert.equal(got.title, 'before');
    assert.deepEqual(got.metadata, { k: 'v' });
    await sleep(10);
    const upd = await thread.update({ title: 'after', metadata: { n: 2 } });
    checkThread(upd, 'update', ctx);
    assert.equal(upd.title, 'after', 'updated title');
    assert.deepEqual(upd.metadata, { n: 2 }, 'metadata replaced, not merged');
    assert.equal(upd.resourceId, resourceId, 'resourceId unchanged');
    assert.ok(Date.parse(upd.updatedAt) >= Date.parse(created.updatedAt), 'updatedAt not older');
    const again = await thread.get();
    assert.equal(again.title, 'after', 'title persisted');
    const err = await expectHttpError(client.getMemoryThread({ threadId: `missing-${randomUUID()}`, agentId: MEM }).update({ title: 'x' }), 404, 'update(missing)');
    return { updated: upd, missingBody: err.body };
  },

  async threadListMessages(client, ctx) {
    const ids = await seedThread(client, 'msgs', ['my name is Ada', 'second message', 'third message']);
    const thread = client.getMemoryThread({ threadId: ids.thread, agentId: MEM });
    const all = await thread.listMessages({});
    checkMemoryPage(all, 'messages', 'listMessages()');
    assert.ok('uiMessages' in all, 'listMessages response must carry uiMessages (null allowed)');
    assert.equal(all.total, 6, `total (3 turns) got ${all.total}`);
    assert.equal(all.messages.length, 6, 'all 6 messages');
    all.messages.forEach((m, i) => checkStoredMessage(m, `messages[${i}]`, ctx));
    assert.deepEqual(all.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant', 'user', 'assistant'], 'chronological roles');
    assert.ok(textOfMessage(all.messages[0]).includes('Ada') && textOfMessage(all.messages[4]).includes('third'), 'chronological texts');
    for (let i = 1; i < all.messages.length; i++) {
      assert.ok(Date.parse(all.messages[i].createdAt) >= Date.parse(all.messages[i - 1].createdAt), `createdAt non-decreasing at ${i}`);
    }
    all.messages.forEach((m, i) => {
      assert.equal(m.threadId, ids.thread, `messages[${i}].threadId`);
      assert.equal(m.resourceId, ids.resource, `messages[${i}].resourceId`);
    });
    const order = { field: 'createdAt', direction: 'DESC' };
    const p0 = await thread.listMessages({ perPage: 4, page: 0, orderBy: order });
    checkMemoryPage(p0, 'messages', 'listMessages(DESC,p0)');
    assert.equal(p0.total, 6, 'p0.total');
    assert.equal(p0.perPage, 4, 'p0.perPage');
    assert.equal(p0.page, 0, 'p0.page');
    assert.equal(p0.hasMore, true, 'p0.hasMore');
    assert.deepEqual(p0.messages.map((m) => m.id), all.messages.slice(2).map((m) => m.id), 'DESC window = newest 4, returned chronologically');
    const p1 = await thread.listMessages({ perPage: 4, page: 1, orderBy: order });
    assert.deepEqual(p1.messages.map((m) => m.id), all.messages.slice(0, 2).map((m) => m.id), 'DESC page 1 = oldest 2, chronological');
    assert.equal(p1.hasMore, false, 'p1.hasMore');
    const ascWin = await thread.listMessages({ perPage: 2, page: 0, orderBy: { field: 'createdAt', direction: 'ASC' } });
    assert.deepEqual(ascWin.messages.map((m) => m.id), all.messages.slice(0, 2).map((m) => m.id), 'ASC window = oldest 2');
    // the Studio's exact call
    const studio = await thread.listMessages({ perPage: 40, orderBy: order, includeSystemReminders: true });
    assert.equal(studio.messages.length, 6, 'studio call returns all');
    const viaClient = await client.listThreadMessages(ids.thread, { agentId: MEM, perPage: 2, orderBy: order });
    assert.deepEqual(viaClient.messages.map((m) => m.id), all.messages.slice(4).map((m) => m.id), 'listThreadMessages newest 2');
    await expectHttpError(client.getMemoryThread({ threadId: `missing-${randomUUID()}`, agentId: MEM }).listMessages({}), 404, 'listMessages(missing)');
    return { roles: all.messages.map((m) => m.role) };
  },

  async threadDelete(client, ctx) {
    const ids = await seedThread(client, 'del', ['hello']);
    const thread = client.getMemoryThread({ threadId: ids.thread, agentId: MEM });
    const res = await thread.delete();
    assert.deepEqual(res, { result: 'Thread deleted' }, 'delete result');
    const err = await expectHttpError(thread.get(), 404, 'get after delete');
    assert.deepEqual(err.body, { error: 'Thread not found' });
    await expectHttpError(thread.listMessages({}), 404, 'listMessages after delete');
    const err2 = await expectHttpError(thread.delete(), 404, 'delete twice');
    assert.deepEqual(err2.body, { error: 'Thread not found' });
  },

  async deleteThread(client, ctx) {
    const threadId = `delc-${randomUUID()}`;
    await client.createMemoryThread({ agentId: MEM, resourceId: `res-${randomUUID()}`, threadId });
    const res = await client.deleteThread(threadId, { agentId: MEM });
    assert.deepEqual(res, { result: 'Thread deleted' }, 'deleteThread result');
    await expectHttpError(client.getMemoryThread({ threadId, agentId: MEM }).get(), 404, 'get after deleteThread');
  },

  async threadNotFound404(client, ctx) {
    const err = await expectHttpError(client.getMemoryThread({ threadId: `missing-${randomUUID()}`, agentId: MEM }).get(), 404, 'get(missing)');
    assert.deepEqual(err.body, { error: 'Thread not found' }, '404 body');
    assert.match(err.message, /^HTTP error! status: 404 - /, 'client error message');
    // without agentId the client reads global storage; still a 404
    const err2 = await expectHttpError(client.getMemoryThread({ threadId: `missing-${randomUUID()}` }).get(), 404, 'get(missing, no agentId)');
    assert.deepEqual(err2.body, { error: 'Thread not found' });
  },

  async getMemoryStatus(client, ctx) {
    const s = await client.getMemoryStatus(MEM);
    keys(s, ['result'], 'status');
    assert.equal(s.result, true, 'chat-agent memory status');
    if ('memoryType' in s) assert.ok(['local', 'gateway'].includes(s.memoryType), `memoryType=${s.memoryType}`);
    const withIds = await client.getMemoryStatus(MEM, undefined, { resourceId: `res-${randomUUID()}`, threadId: `t-${randomUUID()}` });
    assert.equal(withIds.result, true, 'status with resourceId/threadId');
    assert.ok(isObj(withIds.observationalMemory), 'chat-agent reports its Observational Memory');
    assert.equal(withIds.observationalMemory.enabled, true, 'OM enabled on chat-agent');
    assert.equal(withIds.observationalMemory.hasRecord, false, 'no OM record for an unknown thread');
    const docs = await client.getMemoryStatus('docs-agent');
    if (isObj(docs.observationalMemory)) assert.equal(docs.observationalMemory.enabled, false, 'docs-agent: OM off');
    const orch = await client.getMemoryStatus('orchestrator-agent');
    assert.equal(orch.result, false, 'orchestrator-agent has no memory');
    return { chat: s, orchestrator: orch };
  },

  async getMemoryConfig(client, ctx) {
    const res = await client.getMemoryConfig({ agentId: MEM });
    keys(res, ['config'], 'memory config');
    const c = res.config;
    assert.ok(isObj(c), `config must be an object for chat-agent, got ${JSON.stringify(c)}`);
    assert.equal(c.lastMessages, 10, 'config.lastMessages');
    assert.ok(isObj(c.workingMemory), 'config.workingMemory object');
    assert.equal(c.workingMemory.enabled, false, 'workingMemory.enabled');
    assert.ok(isObj(c.observationalMemory), 'config.observationalMemory object');
    assert.equal(c.observationalMemory.enabled, true, 'observationalMemory.enabled (chat-agent has OM)');
    for (const k of ['scope', 'messageTokens', 'observationTokens', 'observationModel', 'reflectionModel']) {
      assert.ok(k in c.observationalMemory, `observationalMemory.${k}`);
    }
    const docs = (await client.getMemoryConfig({ agentId: 'docs-agent' })).config;
    assert.equal(docs.observationalMemory.enabled, false, 'docs-agent: observationalMemory.enabled');
    if ('semanticRecall' in c) assert.ok(c.semanticRecall === false || isObj(c.semanticRecall) || c.semanticRecall === true, 'semanticRecall bool|object');
    if (c.semanticRecall !== false) ctx.warn(`semanticRecall=${JSON.stringify(c.semanticRecall)} (expected false: not enabled)`);
    if (!('generateTitle' in c)) ctx.warn('config lacks generateTitle (Studio memory panel reads it)');
    const unknown = await client.getMemoryConfig({ agentId: `no-such-agent-${randomUUID().slice(0, 8)}` }).catch((e) => ({ error: e.status, body: e.body }));
    if (!(isObj(unknown) && unknown.config === null)) ctx.warn(`unknown agent config answer ${JSON.stringify(unknown)} (contract: {"config":null})`);
    return { config: c };
  },

  async getWorkingMemory(client, ctx) {
    const ids = await seedThread(client, 'wm', ['hello']);
    const existing = await client.getWorkingMemory({ agentId: MEM, threadId: ids.thread, resourceId: ids.resource });
    keys(existing, ['workingMemory', 'source', 'workingMemoryTemplate', 'threadExists'], 'getWorkingMemory(existing)');
    assert.equal(existing.threadExists, true, 'threadExists for existing thread');
    assert.ok(['thread', 'resource'].includes(existing.source), `source=${existing.source}`);
    type(existing.workingMemory, 'string|null', 'workingMemory');
    const fresh = await client.getWorkingMemory({ agentId: MEM, threadId: randomUUID(), resourceId: MEM });
    keys(fresh, ['workingMemory', 'source', 'workingMemoryTemplate', 'threadExists'], 'getWorkingMemory(new)');
    assert.equal(fresh.threadExists, false, 'threadExists for a not-yet-existing thread');
    // client-js sends the literal `resourceId=undefined` when resourceId is omitted: never 400/404
    const noRes = await client.getWorkingMemory({ agentId: MEM, threadId: randomUUID() });
    assert.equal(noRes.threadExists, false, 'no resourceId (client sends resourceId=undefined)');
    return { existing, fresh };
  },

  async updateWorkingMemory(client, ctx) {
    const ids = await seedThread(client, 'wmu', ['hello']);
    let outcome;
    try {
      const res = await client.updateWorkingMemory({ agentId: MEM, threadId: ids.thread, workingMemory: '# Notes\n- likes tea', resourceId: ids.resource });
      assert.deepEqual(res, { success: true }, 'updateWorkingMemory result');
      const after = await client.getWorkingMemory({ agentId: MEM, threadId: ids.thread, resourceId: ids.resource });
      assert.equal(after.workingMemory, '# Notes\n- likes tea', 'working memory read back');
      outcome = 'success:true and read back';
    } catch (err) {
      if (err instanceof assert.AssertionError) throw err;
      assert.ok(err instanceof MastraClientError, `expected {success:true} or MastraClientError 400, got ${err?.name}: ${err?.message}`);
      assert.equal(err.status, 400, `status ${err.status} body ${JSON.stringify(err.body)}; expected {success:true} or 400`);
      type(err.body?.error, 'string', '400 body.error');
      assert.match(err.body.error, /working memory/i, '400 error must say working memory is not enabled');
      outcome = `400 ${JSON.stringify(err.body)}`;
    }
    return { outcome };
  },

  async searchMemory(client, ctx) {
    const ids = newIds('search');
    const word = `zebra${randomUUID().slice(0, 6)}`;
    const agent = client.getAgent(MEM);
    await agent.generate(`the secret word is ${word}`, { memory: { thread: ids.thread, resource: ids.resource } });
    await agent.generate('unrelated second message', { memory: { thread: ids.thread, resource: ids.resource } });
    const res = await client.searchMemory({ agentId: MEM, resourceId: ids.resource, threadId: ids.thread, searchQuery: word });
    keys(res, ['results', 'count', 'query'], 'searchMemory');
    type(res.results, 'array', 'results');
    assert.equal(res.query, word, 'query echoed');
    assert.equal(res.searchType, 'text', 'searchType');
    assert.equal(res.searchScope, 'thread', 'searchScope with threadId');
    assert.ok(res.results.length >= 1, `no result for ${word}`);
    assert.equal(res.count, res.results.length, 'count');
    const hit = res.results.find((r) => r.role === 'user');
    assert.ok(hit, `user message with ${word} not found: ${JSON.stringify(res.results).slice(0, 300)}`);
    keys(hit, ['id', 'role', 'content', 'createdAt', 'threadId'], 'results[user]');
    type(hit.content, 'string', 'result.content');
    assert.ok(hit.content.includes(word), 'result content contains the word');
    assert.equal(hit.threadId, ids.thread, 'result.threadId');
    if (!('threadTitle' in hit)) ctx.warn('search result lacks threadTitle');
    if (hit.context !== undefined) { keys(hit.context, ['before', 'after'], 'result.context'); }
    assert.ok(res.results.every((r) => !r.content.includes('unrelated second')), 'no unrelated results');
    const resScope = await client.searchMemory({ agentId: MEM, resourceId: ids.resource, searchQuery: word });
    assert.ok(resScope.results.length >= 1, 'resource-scope search finds it');
    if ('searchScope' in resScope) assert.equal(resScope.searchScope, 'resource', 'searchScope without threadId');
    const miss = await client.searchMemory({ agentId: MEM, resourceId: ids.resource, threadId: ids.thread, searchQuery: `nothing${randomUUID()}` });
    assert.equal(miss.results.length, 0, 'miss');
    assert.equal(miss.count, 0, 'miss count');
    return { count: res.count, searchScope: res.searchScope };
  },

  async saveMessageToMemory(client, ctx) {
    const threadId = `save-${randomUUID()}`;
    const resourceId = newResource();
    await client.createMemoryThread({ agentId: MEM, resourceId, threadId });
    const t0 = Date.now() - 10_000;
    const v2 = {
      id: randomUUID(), role: 'user', type: 'text', threadId, resourceId, createdAt: new Date(t0).toISOString(),
      content: { format: 2, parts: [{ type: 'text', text: 'format two message' }] },
    };
    const v1 = { id: randomUUID(), role: 'assistant', type: 'text', content: 'v1 string message', threadId, resourceId, createdAt: new Date(t0 + 1000).toISOString() };
    const res = await client.saveMessageToMemory({ agentId: MEM, messages: [v2, v1] });
    keys(res, ['messages'], 'saveMessageToMemory');
    type(res.messages, 'array', 'saved messages');
    assert.equal(res.messages.length, 2, 'two saved');
    res.messages.forEach((m, i) => checkStoredMessage(m, `saved[${i}]`, ctx));
    const byId = Object.fromEntries(res.messages.map((m) => [m.id, m]));
    assert.ok(byId[v2.id] && byId[v1.id], 'ids preserved');
    assert.equal(textOfMessage(byId[v2.id]), 'format two message', 'v2 text');
    assert.equal(textOfMessage(byId[v1.id]), 'v1 string message', 'v1 normalized to a text part');
    assert.equal(byId[v1.id].role, 'assistant');
    const listed = await client.getMemoryThread({ threadId, agentId: MEM }).listMessages({});
    assert.deepEqual(listed.messages.map((m) => m.id), [v2.id, v1.id], 'saved messages listed chronologically');
    assert.equal(Date.parse(listed.messages[0].createdAt), t0, 'createdAt preserved');
    return { saved: res.messages.map((m) => ({ id: m.id, role: m.role, format: m.content.format })) };
  },

  async deleteMessages(client, ctx) {
    const ids = await seedThread(client, 'delmsg', ['first', 'second']);
    const thread = client.getMemoryThread({ threadId: ids.thread, agentId: MEM });
    const before = await thread.listMessages({});
    assert.equal(before.messages.length, 4, 'seeded 4 messages');
    const victim = before.messages[0].id;
    const res = await thread.deleteMessages([victim]);
    keys(res, ['success', 'message'], 'deleteMessages');
    assert.equal(res.success, true, 'success');
    type(res.message, 'string', 'message');
    const after = await thread.listMessages({});
    assert.deepEqual(after.messages.map((m) => m.id), before.messages.slice(1).map((m) => m.id), 'message gone, others kept');
    assert.equal(after.total, 3, 'total after delete');
    const res2 = await thread.deleteMessages({ id: before.messages[1].id });
    assert.equal(res2.success, true, 'single {id} form');
    return { message: res.message };
  },

  async getObservationalMemory400(client, ctx) {
    // docs-agent keeps the minimal memory (chat-agent's OM is read in tests/test_om_gateway.py)
    const err = await expectHttpError(client.getObservationalMemory({ agentId: 'docs-agent', resourceId: 'docs-agent', threadId: randomUUID() }), 400, 'getObservationalMemory');
    assert.match(String(err.body.error), /not enabled/i, `400 body ${JSON.stringify(err.body)}`);
    return { body: err.body };
  },

  async queryTraces(client, ctx) {
    // make sure at least one run happened, so rows are checked when the server records them
    await client.getAgent(MEM).generate('trace me', { memory: { thread: `trace-${randomUUID()}`, resource: MEM } }).catch(() => {});
    const now = Date.now();
    const res = await client.queryTraces({
      timeRange: { from: new Date(now - 3600_000).toISOString(), to: new Date(now + 60_000).toISOString() },
      orderBy: [{ field: 'startedAt', direction: 'desc' }],
      page: { limit: 25, after: null },
    });
    keys(res, ['traces', 'page'], 'queryTraces');
    type(res.traces, 'array', 'traces');
    keys(res.page, ['next'], 'page');
    type(res.page.next, 'string|null', 'page.next');
    const rowKeys = ['traceId', 'rootSpanId', 'name', 'entityId', 'parentSpanId', 'createdAt', 'metadata', 'inputPreview',
      'threadId', 'resourceId', 'startedAt', 'endedAt', 'entityName', 'entityType', 'environment', 'status'];
    res.traces.forEach((r, i) => {
      keys(r, rowKeys, `traces[${i}]`);
      for (const k of ['traceId', 'rootSpanId', 'name', 'status']) type(r[k], 'string', `traces[${i}].${k}`);
      for (const k of ['startedAt', 'endedAt', 'createdAt']) assert.ok(isIso(r[k]), `traces[${i}].${k} not ISO`);
      assert.ok(['success', 'error'].includes(r.status), `traces[${i}].status=${r.status}`);
      for (const k of ['entityId', 'entityName', 'entityType', 'threadId', 'resourceId', 'environment', 'inputPreview', 'parentSpanId']) type(r[k], 'string|null', `traces[${i}].${k}`);
      type(r.metadata, 'object|null', `traces[${i}].metadata`);
      if (i > 0) assert.ok(Date.parse(r.startedAt) <= Date.parse(res.traces[i - 1].startedAt), 'ordered by startedAt desc');
    });
    // the agent-tab predicate must be accepted
    const filtered = await client.queryTraces({
      timeRange: { from: new Date(now - 3600_000).toISOString(), to: new Date(now + 60_000).toISOString() },
      page: { limit: 25, after: null },
      where: { op: 'and', args: [{ op: 'eq', left: { path: 'entityType' }, right: { literal: 'agent' } },
        { spans: { some: { op: 'eq', left: { path: 'entityId' }, right: { literal: MEM } } } }] },
    });
    keys(filtered, ['traces', 'page'], 'queryTraces(where)');
    filtered.traces.forEach((r, i) => assert.equal(r.entityType, 'agent', `filtered[${i}].entityType`));
    return { rows: res.traces.length, filteredRows: filtered.traces.length };
  },

  async listTraces(client, ctx) {
    const res = await client.listTraces({ pagination: { page: 0, perPage: 5 }, orderBy: { field: 'startedAt', direction: 'DESC' } });
    keys(res, ['spans', 'pagination'], 'listTraces');
    type(res.spans, 'array', 'spans');
    checkObsPagination(res.pagination, 'pagination');
    assert.equal(res.pagination.page, 0, 'pagination.page');
    assert.equal(res.pagination.perPage, 5, 'pagination.perPage');
    assert.ok(res.spans.length <= 5, 'at most perPage rows');
    res.spans.forEach((s, i) => {
      keys(s, ['traceId', 'spanId', 'name', 'spanType', 'isEvent', 'startedAt', 'createdAt', 'status'], `spans[${i}]`);
      assert.ok(s.parentSpanId == null, `spans[${i}] must be a root span`);
    });
    const filtered = await client.listTraces({ filters: { threadId: `t-${randomUUID()}` }, pagination: { page: 0, perPage: 10 } });
    assert.deepEqual(filtered.spans, [], 'unknown threadId -> no rows');
    return { rows: res.spans.length, total: res.pagination.total };
  },

  async listTracesLight(client, ctx) {
    const res = await client.listTracesLight({ filters: { threadId: `t-${randomUUID()}` }, pagination: { page: 0, perPage: 25 } });
    keys(res, ['spans', 'pagination'], 'listTracesLight');
    type(res.spans, 'array', 'spans');
    checkObsPagination(res.pagination, 'pagination');
    assert.equal(res.pagination.perPage, 25, 'pagination.perPage');
    const all = await client.listTracesLight({ pagination: { page: 0, perPage: 3 } });
    checkObsPagination(all.pagination, 'pagination(all)');
    all.spans.forEach((s, i) => keys(s, ['traceId', 'spanId', 'name', 'spanType', 'isEvent', 'startedAt', 'createdAt'], `light[${i}]`));
    return { rows: all.spans.length };
  },

  async getTraceUnknown404(client, ctx) {
    const id = `no-such-trace-${randomUUID().slice(0, 8)}`;
    const err = await expectHttpError(client.getTrace(id), 404, 'getTrace(unknown)');
    assert.deepEqual(err.body, { error: `Trace with ID '${id}' not found` }, '404 body');
    // and a real one, when the list has rows
    const list = await client.listTraces({ pagination: { page: 0, perPage: 1 } }).catch(() => null);
    const traceId = list?.spans?.[0]?.traceId;
    if (traceId) {
      const t = await client.getTrace(traceId);
      keys(t, ['traceId', 'spans'], 'getTrace');
      assert.equal(t.traceId, traceId);
      t.spans.forEach((s, i) => keys(s, ['traceId', 'spanId', 'name', 'spanType', 'isEvent', 'startedAt', 'createdAt', 'status'], `trace.spans[${i}]`));
      assert.ok(t.spans.some((s) => s.parentSpanId == null), 'trace has a root span');
    }
    return { checkedRealTrace: Boolean(traceId) };
  },

  async traceOfRun(client, ctx) {
    // one generate -> one trace: found by threadId in every trace API, with a span tree
    const thread = `tr-${randomUUID()}`;
    const reply = await client.getAgent(MEM).generate('please trace this turn', { memory: { thread, resource: MEM } });
    const now = Date.now();
    const timeRange = { from: new Date(now - 600_000).toISOString(), to: new Date(now + 60_000).toISOString() };
    const where = { op: 'eq', left: { path: 'threadId' }, right: { literal: thread } };
    // The run's spans reach the store through the studio's export queue (a batch every 0.5 s),
    // and the trace row only with the root span, which ends last: allow a few batches.
    let rows = [];
    const deadline = Date.now() + 10_000;
    while (rows.length === 0 && Date.now() < deadline) {
      rows = (await client.queryTraces({ timeRange, where, page: { limit: 25, after: null } })).traces;
      if (rows.length === 0) await sleep(100);
    }
    assert.ok(rows.length > 0, `the run's trace (thread ${thread}) was not recorded within 10 s`);
    assert.equal(rows.length, 1, `one trace per run, got ${rows.length}`);
    const row = rows[0];
    assert.equal(row.threadId, thread, 'row.threadId');
    assert.equal(row.entityType, 'agent', 'row.entityType');
    assert.equal(row.entityId, MEM, 'row.entityId');
    assert.equal(row.parentSpanId, null, 'row.parentSpanId');
    assert.equal(row.status, 'success', 'row.status');
    assert.equal(row.name, `agent run: '${MEM}'`, 'row.name');
    if (reply.traceId !== undefined) assert.equal(reply.traceId, row.traceId, 'generate.traceId is the trace of the run');
    const t = await client.getTrace(row.traceId);
    keys(t, ['traceId', 'spans'], 'getTrace');
    assert.equal(t.traceId, row.traceId);
    const ids = new Set(t.spans.map((x) => x.spanId));
    t.spans.forEach((x, i) => {
      keys(x, ['traceId', 'spanId', 'name', 'spanType', 'isEvent', 'startedAt', 'createdAt', 'status'], `spans[${i}]`);
      assert.equal(x.traceId, row.traceId, `spans[${i}].traceId`);
      assert.ok(['success', 'error', 'running'].includes(x.status), `spans[${i}].status=${x.status}`);
      assert.match(x.spanType, /^[a-z_]+$/, `spans[${i}].spanType lowercase snake`);
      if (x.parentSpanId != null) assert.ok(ids.has(x.parentSpanId), `spans[${i}].parentSpanId points into the trace`);
    });
    const roots = t.spans.filter((x) => x.parentSpanId == null);
    assert.equal(roots.length, 1, 'exactly one root span');
    const root = roots[0];
    assert.equal(root.spanId, row.rootSpanId, 'root spanId = row.rootSpanId');
    assert.equal(root.spanType, 'agent_run', 'root spanType');
    assert.ok(JSON.stringify(root.input ?? null).includes('please trace this turn'), 'agent_run.input holds the user message (Studio Messages tab)');
    assert.equal(root.output?.text, reply.text, 'agent_run.output.text is the reply');
    const types = t.spans.map((x) => x.spanType);
    for (const want of ['model_generation', 'model_step']) assert.ok(types.includes(want), `trace has no ${want} span (types: ${[...new Set(types)].join(',')})`);
    const light = await client.listTracesLight({ filters: { threadId: thread }, pagination: { page: 0, perPage: 25 } });
    assert.deepEqual(light.spans.map((x) => x.traceId), [row.traceId], 'listTracesLight({filters:{threadId}})');
    assert.equal(light.pagination.total, 1, 'light total');
    const full = await client.listTraces({ filters: { threadId: thread }, pagination: { page: 0, perPage: 10 } });
    assert.deepEqual(full.spans.map((x) => x.traceId), [row.traceId], 'listTraces({filters:{threadId}})');
    const tl = await client.getTraceLight(row.traceId);
    keys(tl, ['traceId', 'spans'], 'getTraceLight');
    assert.equal(tl.spans.length, t.spans.length, 'light trace has every span');
    const span = await client.getSpan(row.traceId, root.spanId);
    type(span, 'object', 'getSpan');
    return { recorded: true, spanTypes: [...new Set(types)] };
  },

  async queryTracesCursor(client, ctx) {
    // Three runs on threads of their own, so exactly three traces match, whatever else the
    // store holds; then pages of 2 must return all three, once each, in order.
    const now = Date.now();
    const timeRange = { from: new Date(now - 3600_000).toISOString(), to: new Date(now + 60_000).toISOString() };
    const agent = client.getAgent(MEM);
    const threads = [0, 1, 2].map((i) => `cur-${i}-${randomUUID()}`);
    for (const [i, thread] of threads.entries()) await agent.generate(`cursor run ${i}`, { memory: { thread, resource: MEM } });
    const where = { op: 'in', value: { path: 'threadId' }, set: threads };
    const page = (direction, limit, after) => client.queryTraces({ timeRange, where, orderBy: [{ field: 'startedAt', direction }], page: { limit, after } });
    const started = Date.now();
    let all;
    do {
      all = await page('desc', 25, null);
      if (all.traces.length === 3) break;
      await sleep(100);
    } while (Date.now() - started < 10_000);
    assert.equal(all.traces.length, 3, `all three runs' traces recorded within 10 s (saw ${all.traces.length})`);
    assert.equal(all.page.next, null, 'no next page when everything fits');
    const p1 = await page('desc', 2, null);
    assert.equal(p1.traces.length, 2, 'limit 2');
    type(p1.page.next, 'string', 'page.next when more rows exist');
    const p2 = await page('desc', 2, p1.page.next);
    assert.equal(p2.traces.length, 1, 'the second page holds the rest');
    assert.equal(p2.page.next, null, 'no page after the last');
    const paged = [...p1.traces, ...p2.traces].map((r) => r.traceId);
    assert.equal(new Set(paged).size, 3, 'pages do not overlap');
    assert.deepEqual(paged, all.traces.map((r) => r.traceId), 'paging walks the same order as one page');
    for (let i = 1; i < 3; i++) assert.ok(Date.parse(all.traces[i].startedAt) <= Date.parse(all.traces[i - 1].startedAt), 'desc order');
    const asc = await page('asc', 2, null);
    const ascRest = await page('asc', 2, asc.page.next);
    assert.deepEqual([...asc.traces, ...ascRest.traces].map((r) => r.traceId), [...paged].reverse(), 'asc pages are the reverse');
    const lp = await client.listTraces({ pagination: { page: 0, perPage: 2 } });
    assert.ok(lp.pagination.total >= 3, 'listTraces total counts the runs');
    assert.equal(lp.pagination.hasMore, true, 'listTraces hasMore');
    return { next: p1.page.next, visibleAfterMs: Date.now() - started };
  },

  async traceQueryDiscovery(client, ctx) {
    // the Traces page's filter bar: fields of each scope, then values of one field
    const thread = `disc-${randomUUID()}`;
    await client.getAgent(MEM).generate('discover me', { memory: { thread, resource: MEM } });
    const { name } = await client.getAgent(MEM).details();
    const now = Date.now();
    const timeRange = { from: new Date(now - 3600_000).toISOString(), to: new Date(now + 60_000).toISOString() };
    for (const predicateScope of ['trace', 'spans', 'scores', 'feedback']) {
      const f = await client.getTraceQueryFields({ timeRange, predicateScope, limit: 25 });
      keys(f, ['canonicalFields', 'observedFields', 'observedFieldsTruncated'], `fields(${predicateScope})`);
      assert.ok(f.canonicalFields.length > 0, `fields(${predicateScope}) lists the registry`);
      f.canonicalFields.forEach((x, i) => keys(x, ['path', 'valueKind', 'operators', 'valueSuggestions'], `canonicalFields[${i}]`));
    }
    let values = [];
    const deadline = Date.now() + 10_000;
    while (!values.some((v) => v.value === name) && Date.now() < deadline) {
      const res = await client.getTraceQueryValues({ timeRange, predicateScope: 'trace', path: 'entityName', limit: 25 });
      keys(res, ['values', 'valuesTruncated'], 'values');
      values = res.values;
      if (!values.some((v) => v.value === name)) await sleep(100);
    }
    const hit = values.find((v) => v.value === name);
    assert.ok(hit && Number.isInteger(hit.count) && hit.count >= 1, `entityName values include ${name}: ${JSON.stringify(values)}`);
    const err = await expectHttpError(client.getTraceQueryValues({ timeRange, predicateScope: 'trace', path: 'traceId', limit: 25 }), 422, 'values(traceId)');
    assert.equal(err.body.code, 'TRACE_QUERY_INVALID', 'values of a field without suggestions');
    return { values };
  },

  async listLogsVNext(client, ctx) {
    const res = await client.listLogsVNext({
      filters: { timestamp: { start: new Date(Date.now() - 3600_000).toISOString() } },
      pagination: { page: 0, perPage: 20 },
      orderBy: { field: 'timestamp', direction: 'DESC' },
    });
    keys(res, ['logs'], 'listLogsVNext');
    type(res.logs, 'array', 'logs');
    if (res.pagination !== undefined) checkObsPagination(res.pagination, 'pagination');
    if (res.pagination === undefined) ctx.warn('no pagination object');
    res.logs.forEach((l, i) => {
      keys(l, ['timestamp', 'level', 'message'], `logs[${i}]`);
      assert.ok(['debug', 'info', 'warn', 'error', 'fatal'].includes(l.level), `logs[${i}].level=${l.level}`);
      assert.ok(isIso(l.timestamp), `logs[${i}].timestamp`);
      if (i > 0) assert.ok(Date.parse(l.timestamp) <= Date.parse(res.logs[i - 1].timestamp), 'DESC by timestamp');
    });
    return { rows: res.logs.length };
  },

  async unknownAgent404s(client) {
    const id = `no-such-agent-${randomUUID().slice(0, 8)}`;
    const body = { error: `Agent with id ${id} not found` };
    const g = await expectHttpError(client.getAgent(id).generate('hi'), 404, 'generate(unknown agent)');
    assert.deepEqual(g.body, body, 'generate 404 body');
    const s = await expectHttpError(client.getAgent(id).stream('hi'), 404, 'stream(unknown agent)');
    assert.deepEqual(s.body, body, 'stream 404 body');
  },

  async createThreadOverwrite(client, ctx) {
    const threadId = `ow-${randomUUID()}`;
    const resourceId = `res-${randomUUID()}`;
    await client.createMemoryThread({ agentId: MEM, resourceId, title: 'one', threadId });
    const again = await client.createMemoryThread({ agentId: MEM, resourceId, title: 'two', threadId });
    assert.equal(again.title, 'two', 'existing id is overwritten, no error');
    const listed = await client.listMemoryThreads({ resourceId, agentId: MEM });
    assert.equal(listed.total, 1, 'still one thread');
  },

  async listThreadsMetadataFilter(client, ctx) {
    const resourceId = `res-${randomUUID()}`;
    const a = await client.createMemoryThread({ agentId: MEM, resourceId, threadId: `md-a-${randomUUID()}`, metadata: { tag: 'red', n: 1 } });
    await client.createMemoryThread({ agentId: MEM, resourceId, threadId: `md-b-${randomUUID()}`, metadata: { tag: 'blue', n: 1 } });
    const red = await client.listMemoryThreads({ resourceId, agentId: MEM, metadata: { tag: 'red' } });
    assert.deepEqual(red.threads.map((t) => t.id), [a.id], 'metadata filter tag=red');
    assert.equal(red.total, 1, 'filtered total');
    const both = await client.listMemoryThreads({ resourceId, agentId: MEM, metadata: { n: 1 } });
    assert.equal(both.total, 2, 'metadata filter n=1 (number value)');
    const and = await client.listMemoryThreads({ resourceId, agentId: MEM, metadata: { n: 1, tag: 'blue' } });
    assert.equal(and.total, 1, 'metadata filter is an AND match');
  },

  async listMessagesNoLimitAndFilter(client, ctx) {
    const ids = await seedThread(client, 'nolimit', ['one', 'two']);
    const thread = client.getMemoryThread({ threadId: ids.thread, agentId: MEM });
    const all = await thread.listMessages({ perPage: false });
    assert.equal(all.messages.length, 4, 'perPage=false returns everything');
    assert.equal(all.perPage, false, 'response perPage is the literal false');
    assert.equal(all.hasMore, false, 'hasMore');
    const cut = all.messages[2].createdAt;
    const later = await thread.listMessages({ filter: { dateRange: { start: cut } } });
    assert.deepEqual(later.messages.map((m) => m.id), all.messages.filter((m) => m.createdAt >= cut).map((m) => m.id), 'filter.dateRange.start');
    const inc = await thread.listMessages({ perPage: 1, orderBy: { field: 'createdAt', direction: 'DESC' }, include: [{ id: all.messages[0].id }] });
    assert.ok(inc.messages.some((m) => m.id === all.messages[0].id), 'include brings in the requested message');
    assert.ok(inc.messages.some((m) => m.id === all.messages[3].id), 'and keeps the page');
    for (let i = 1; i < inc.messages.length; i++) assert.ok(inc.messages[i].createdAt >= inc.messages[i - 1].createdAt, 'include result chronological');
  },

  async threadClone(client, ctx) {
    const ids = await seedThread(client, 'clone', ['my name is Ada', 'second']);
    const src = client.getMemoryThread({ threadId: ids.thread, agentId: MEM });
    const res = await src.clone({ title: 'Fork of it' });
    keys(res, ['thread', 'clonedMessages'], 'clone');
    checkThread(res.thread, 'clone.thread', ctx);
    assert.notEqual(res.thread.id, ids.thread, 'new id');
    assert.equal(res.thread.title, 'Fork of it', 'clone title');
    assert.equal(res.thread.resourceId, ids.resource, 'clone keeps resourceId');
    type(res.clonedMessages, 'array', 'clonedMessages');
    assert.equal(res.clonedMessages.length, 4, 'all 4 messages cloned');
    const listed = await client.getMemoryThread({ threadId: res.thread.id, agentId: MEM }).listMessages({});
    assert.deepEqual(listed.messages.map((m) => textOfMessage(m)), (await src.listMessages({})).messages.map((m) => textOfMessage(m)), 'same texts, same order');
    const reply = await client.getAgent(MEM).generate('what is my name?', { memory: { thread: res.thread.id, resource: ids.resource } });
    assert.ok(reply.text.includes('Ada'), 'the fork remembers');
    return { id: res.thread.id };
  },

  async requestContextParam(client, ctx) {
    // client-js base64-encodes requestContext into a query param on GETs and puts it in POST bodies
    const rc = { tenant: 'acme', 'mastra__isStudio': true };
    const ids = newIds('rc');
    await client.listAgents(rc);
    await client.getAgent(MEM).details(rc);
    await client.listTools(rc);
    await client.listWorkflows(rc, true);
    await client.getMemoryStatus(MEM, rc);
    await client.getMemoryConfig({ agentId: MEM, requestContext: rc });
    await client.getAgent(MEM).generate('hi', { memory: { thread: ids.thread, resource: ids.resource }, requestContext: rc });
    await client.getMemoryThread({ threadId: ids.thread, agentId: MEM }).get(rc);
    await client.getMemoryThread({ threadId: ids.thread, agentId: MEM }).listMessages({ requestContext: rc, perPage: 40 });
    await client.listMemoryThreads({ resourceId: ids.resource, agentId: MEM, requestContext: rc });
    await client.getWorkingMemory({ agentId: MEM, threadId: ids.thread, resourceId: ids.resource, requestContext: rc });
  },

  async memoryStatusUnknownAgent(client, ctx) {
    const s = await client.getMemoryStatus(`no-such-agent-${randomUUID().slice(0, 8)}`);
    keys(s, ['result'], 'status(unknown agent)');
    type(s.result, 'boolean', 'result');
    if (s.result !== true) ctx.warn(`unknown agent status ${JSON.stringify(s)} (real server: {"result":true} when storage exists)`);
    return s;
  },

  async listAgentsModelProviders(client) {
    const p = await client.listAgentsModelProviders();
    keys(p, ['providers'], 'agents/providers');
    type(p.providers, 'array', 'providers');
    p.providers.forEach((x, i) => keys(x, ['id', 'name', 'models'], `providers[${i}]`));
    return { count: p.providers.length };
  },

  async voiceSpeakers(client) {
    const v = await client.getAgent(MEM).voice.getSpeakers();
    type(v, 'array', 'voice/speakers');
  },

  async observabilityDiscovery(client) {
    const names = await client.getEntityNames({ entityType: 'agent' });
    keys(names, ['names'], 'entity-names');
    type(names.names, 'array', 'names');
    const types = await client.getEntityTypes();
    keys(types, ['entityTypes'], 'entity-types');
    type(types.entityTypes, 'array', 'entityTypes');
    const env = await client.getEnvironments();
    keys(env, ['environments'], 'environments');
    type(env.environments, 'array', 'environments');
    const svc = await client.getServiceNames();
    keys(svc, ['serviceNames'], 'service-names');
    type(svc.serviceNames, 'array', 'serviceNames');
    const tags = await client.getTags();
    keys(tags, ['tags'], 'tags');
    type(tags.tags, 'array', 'tags');
    return { entityNames: names.names, entityTypes: types.entityTypes };
  },

  async scoresAndFeedback(client) {
    const scores = await client.listScoresBySpan({ traceId: `t-${randomUUID()}`, spanId: `s-${randomUUID()}`, page: 0, perPage: 10 });
    keys(scores, ['scores', 'pagination'], 'listScoresBySpan');
    type(scores.scores, 'array', 'scores');
    checkObsPagination(scores.pagination, 'scores.pagination');
    const fb = await client.listFeedback({ filters: { traceId: `t-${randomUUID()}` }, pagination: { page: 0, perPage: 10 } });
    keys(fb, ['feedback', 'pagination'], 'listFeedback');
    type(fb.feedback, 'array', 'feedback');
    checkObsPagination(fb.pagination, 'feedback.pagination');
    const inbox = await client.listFeedback({ filters: { reviewStatus: 'needs-review' }, pagination: { page: 0, perPage: 1 }, orderBy: { field: 'timestamp', direction: 'DESC' } });
    keys(inbox, ['feedback', 'pagination'], 'listFeedback(inbox)');
  },

  async listLogTransports(client) {
    const t = await client.listLogTransports();
    keys(t, ['transports'], 'logs/transports');
    type(t.transports, 'array', 'transports');
    return t;
  },

  async queryTracesBadCursor(client) {
    const now = Date.now();
    const err = await expectHttpError(client.queryTraces({
      timeRange: { from: new Date(now - 3600_000).toISOString(), to: new Date(now).toISOString() },
      page: { limit: 25, after: 'not-a-real-cursor' },
    }), 400, 'queryTraces(bad cursor)');
    type(err.body.code, 'string', 'body.code');
    assert.match(err.body.code, /^TRACE_QUERY_/, `body.code=${err.body.code}`);
    type(err.body.message, 'string', 'body.message');
    return { body: err.body };
  },

  async getSystemPackages(client, ctx) {
    const p = await client.getSystemPackages();
    keys(p, ['packages', 'isDev', 'cmsEnabled', 'liveKitConnectionRouteEnabled', 'observabilityEnabled'], 'system/packages');
    type(p.packages, 'array', 'packages');
    for (const k of ['isDev', 'cmsEnabled', 'liveKitConnectionRouteEnabled', 'observabilityEnabled']) type(p[k], 'boolean', k);
    if (p.observabilityStorageCapabilities !== undefined) {
      keys(p.observabilityStorageCapabilities, ['metrics', 'logs', 'traceQueryDiscovery'], 'observabilityStorageCapabilities');
    }
    assert.notEqual(p.observabilityStorageType, 'ObservabilityInMemory', 'must not claim ObservabilityInMemory');
    return p;
  },

  async listTools(client, ctx) {
    const t = await client.listTools();
    assert.ok(isObj(t), 'tools map');
    for (const [k, tool] of Object.entries(t)) type(tool.id, 'string', `tools[${k}].id`);
    return { keys: Object.keys(t) };
  },

  async listWorkflows(client, ctx) {
    const w = await client.listWorkflows();
    assert.ok(isObj(w), 'workflows map');
    return { keys: Object.keys(w) };
  },

  async listProcessors(client, ctx) {
    const p = await client.listProcessors();
    assert.ok(isObj(p), 'processors map');
    return { keys: Object.keys(p) };
  },

  async listScorers(client, ctx) {
    const s = await client.listScorers();
    assert.ok(isObj(s), 'scorers map');
    return { keys: Object.keys(s) };
  },

  async getMcpServers(client, ctx) {
    const m = await client.getMcpServers();
    keys(m, ['servers', 'total_count', 'next'], 'mcp servers');
    type(m.servers, 'array', 'servers');
    type(m.total_count, 'number', 'total_count');
    type(m.next, 'string|null', 'next');
    assert.equal(m.total_count, m.servers.length, 'total_count');
    return m;
  },

  async listWorkspaces(client, ctx) {
    const w = await client.listWorkspaces();
    keys(w, ['workspaces'], 'workspaces');
    type(w.workspaces, 'array', 'workspaces');
    return w;
  },
};

// ---------------------------------------------------------------- runner

function describeError(err) {
  if (err instanceof MastraClientError) return `MastraClientError ${err.status}: ${JSON.stringify(err.body ?? null)}`;
  if (err instanceof assert.AssertionError) {
    const extra = err.generatedMessage || (err.operator === '==' && err.expected === true) ? '' : (err.actual !== undefined || err.expected !== undefined
      ? ` (actual ${JSON.stringify(err.actual)?.slice(0, 300)}, expected ${err.expected instanceof RegExp ? String(err.expected) : JSON.stringify(err.expected)?.slice(0, 300)})` : '');
    return `${err.message.split('\n')[0]}${extra}`;
  }
  return `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
}

async function main() {
  let input;
  try {
    const parts = [];
    for await (const part of process.stdin) parts.push(part);
    input = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}');
  } catch (err) {
    process.stderr.write(`bad stdin: ${err.message}\n`);
    process.exit(2);
  }
  if (input.list) {
    process.stdout.write(`${JSON.stringify({ ok: true, results: [], sdkVersion, checks: Object.keys(checks) })}\n`);
    return;
  }
  if (typeof input.baseUrl !== 'string') {
    process.stderr.write('stdin needs {"baseUrl": "http://127.0.0.1:PORT"}\n');
    process.exit(2);
  }
  if (typeof input.resource === 'string') FIXED_RESOURCE = input.resource;
  const names = input.only ?? Object.keys(checks);
  const unknown = names.filter((n) => !(n in checks));
  if (unknown.length) {
    process.stderr.write(`unknown checks: ${unknown.join(', ')}\n`);
    process.exit(2);
  }
  const client = new MastraClient({ baseUrl: input.baseUrl, retries: 0, fetch: loggingFetch(input.baseUrl) });
  const results = [];
  for (const name of names) {
    exchanges = [];
    const started = Date.now();
    const warnings = [];
    const ctx = { warn: (w) => { if (!warnings.includes(w)) warnings.push(w); } };
    try {
      let detail = await checks[name](client, ctx);
      const result = { name, ok: true, ms: Date.now() - started };
      if (warnings.length) detail = { ...(detail ?? {}), warnings };
      if (detail !== undefined) result.detail = detail;
      results.push(result);
    } catch (err) {
      await sleep(5); // let the response-body snapshot of the failing exchange land
      const detail = { requests: exchanges.slice(-4) };
      if (warnings.length) detail.warnings = warnings;
      results.push({ name, ok: false, ms: Date.now() - started, error: describeError(err), detail });
    }
  }
  // exit once printed: a half-closed subscription or timer must not keep node alive
  process.stdout.write(`${JSON.stringify({ ok: results.every((r) => r.ok), results, sdkVersion })}\n`, () => process.exit(0));
}

main().catch((err) => {
  process.stderr.write(`harness bug: ${err?.stack ?? err}\n`);
  process.exit(1);
});
