// What the reference servers stream for a scripted model: the AI SDK's own server
// (`streamText(...).toUIMessageStreamResponse()`, package `ai`) and Mastra's own agent loop
// (`new Agent(...).stream()` of `@mastra/core`, the version `@mastra/client-js` pins; Mastra's
// server sends its `fullStream` chunks as they are). Tests compare the gateway's and the
// studio's streams for the same script with these.
//
// Cases (the same scripts tests give dev_server.llm.scripted.ScriptedModel):
//   midStep      the model streams the text "Hel", then the provider reports an error
//   betweenSteps the model calls the server tool `calculator` (which runs), then the second
//                model call is refused at once
//   clientTool   the model calls `getUserLocation`, a tool with no server function (Mastra:
//                `createTool` without `execute`); the turn stops there (Mastra only)
//
// stdin: ONE JSON object (may be {}). stdout: ONE JSON line
//   { ai: {midStep: [chunk], betweenSteps: [chunk]}   the UI message stream chunks after
//                                                      parsing, then "[DONE]" when it was sent
//     mastra: {midStep, betweenSteps, clientTool: [chunk]}  Mastra chunks {type, payload?}
//     versions: {ai, mastraCore} }
// Exit code 0 whenever the JSON was printed, 1 for a harness bug.
import { readFileSync } from 'node:fs';
import { stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

const version = pkg => JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), 'utf8'))
  .version;

// A tool call as providers stream one (the same stream parts in both model specifications).
function toolCall(c, id, name, input) {
  c.enqueue({ type: 'tool-input-start', id, toolName: name });
  c.enqueue({ type: 'tool-input-delta', id, delta: input });
  c.enqueue({ type: 'tool-input-end', id });
  c.enqueue({ type: 'tool-call', toolCallId: id, toolName: name, input });
}

// -- the AI SDK ------------------------------------------------------------------------
const usageV3 = { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 2, text: 2, reasoning: 0 } };

function sdkModel(kind) {
  let calls = 0;
  return new MockLanguageModelV3({
    doStream: async () => {
      calls += 1;
      if (kind === 'betweenSteps' && calls === 2) throw new Error('second call refused');
      return { stream: new ReadableStream({ start(c) {
        c.enqueue({ type: 'stream-start', warnings: [] });
        if (kind === 'betweenSteps') {
          toolCall(c, 'c1', 'calculator', '{"expression":"1+1"}');
          c.enqueue({ type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage: usageV3 });
        } else {
          c.enqueue({ type: 'text-start', id: '0' });
          c.enqueue({ type: 'text-delta', id: '0', delta: 'Hel' });
          c.enqueue({ type: 'error', error: new Error('provider exploded') });
        }
        c.close();
      } }) };
    },
  });
}

async function sdkStream(kind) {
  const result = streamText({
    model: sdkModel(kind), prompt: 'hi', stopWhen: stepCountIs(5), onError: () => {},
    tools: { calculator: tool({ inputSchema: z.object({ expression: z.string() }), execute: async () => 2 }) },
  });
  const text = await result.toUIMessageStreamResponse().text();
  return frames(text).map(data => (data === '[DONE]' ? data : JSON.parse(data)));
}

function frames(text) {
  return text.split('\n\n').filter(Boolean).map(frame => frame.replace(/^data: /, ''));
}

// -- Mastra ----------------------------------------------------------------------------
const usageV2 = { inputTokens: 3, outputTokens: 2, totalTokens: 5 };

function mastraModel(kind) {
  let calls = 0;
  return {
    specificationVersion: 'v2', provider: 'scripted', modelId: 'scripted-1', supportedUrls: {},
    async doGenerate() { throw new Error('only doStream is scripted'); },
    async doStream() {
      calls += 1;
      if (kind === 'betweenSteps' && calls === 2) throw new Error('second call refused');
      return { stream: new ReadableStream({ start(c) {
        c.enqueue({ type: 'stream-start', warnings: [] });
        if (kind === 'betweenSteps' || kind === 'clientTool') {
          const [id, name, input] = kind === 'clientTool' ? ['c1', 'getUserLocation', '{"reason":"the weather"}']
            : ['c1', 'calculator', '{"expression":"1+1"}'];
          toolCall(c, id, name, input);
          c.enqueue({ type: 'finish', finishReason: 'tool-calls', usage: usageV2 });
        } else {
          c.enqueue({ type: 'text-start', id: 't1' });
          c.enqueue({ type: 'text-delta', id: 't1', delta: 'Hel' });
          c.enqueue({ type: 'error', error: new Error('provider exploded') });
        }
        c.close();
      } }) };
    },
  };
}

async function mastraStream(kind) {
  const agent = new Agent({
    id: 'reference-agent', name: 'Reference Agent', instructions: 'Answer.', model: mastraModel(kind),
    tools: {
      calculator: createTool({ id: 'calculator', description: 'Computes', inputSchema: z.object({ expression: z.string() }),
        execute: async () => ({ result: 2 }) }),
      getUserLocation: createTool({ id: 'getUserLocation', description: "The user's location (runs in the client)",
        inputSchema: z.object({ reason: z.string() }) }),
    },
  });
  const result = await agent.stream('hi');
  const chunks = [];
  for await (const chunk of result.fullStream) chunks.push(JSON.parse(JSON.stringify(chunk)));
  return chunks;
}

async function main() {
  for await (const _ of process.stdin) { /* the input is not used */ }
  // Mastra's loop logs the scripted provider failures: keep stdout for the JSON.
  console.error = () => {};
  console.warn = () => {};
  const out = { ai: {}, mastra: {}, versions: { ai: version('ai'), mastraCore: version('@mastra/core') } };
  for (const kind of ['midStep', 'betweenSteps']) out.ai[kind] = await sdkStream(kind);
  for (const kind of ['midStep', 'betweenSteps', 'clientTool']) out.mastra[kind] = await mastraStream(kind);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch(err => {
  process.stderr.write(`reference_streams.mjs: harness bug: ${err?.stack || err}\n`);
  process.exit(1);
});
