// The studio's tool routes and client-tool loop, driven by the real, unchanged @mastra/client-js.
//
// stdin: {baseUrl, threadId, resourceId, agentId?}
// stdout: ONE JSON line {ok, results: {<name>: value | {error}}, sdkVersion}:
//   tools        client.listTools()
//   tool         client.getTool('calculator').details()
//   agentTool    agent.getTool('calculator')
//   execute      client.getTool('calculator').execute({data: {expression: '6 * 7'}})
//   invalid      the same with {data: {}}: {status, body} of the MastraClientError
//   clientOnServer  agent.executeTool('getUserLocation', ...): {status, body}
//   streamLoop   agent.stream with clientTools {getWeather} and a thread: the chunk types in
//                order, the client tool's calls (args it was run with), the texts
//   generate     agent.generate of a server tool turn: {finishReason, steps, toolCalls, toolResults}
//   generateLoop agent.generate with clientTools and no thread: {text, finishReason, calls}
// Exit 0 whenever the JSON was printed.
import { readFileSync } from 'node:fs';
import { MastraClient } from '@mastra/client-js';
import { z } from 'zod';

for (const level of ['log', 'info', 'warn', 'debug']) console[level] = (...args) => console.error(...args);
const sdkVersion = JSON.parse(readFileSync(new URL('./node_modules/@mastra/client-js/package.json', import.meta.url), 'utf8')).version;

async function readStdin() {
  let text = '';
  for await (const piece of process.stdin) text += piece;
  return JSON.parse(text);
}

const failure = (error) => ({ error: String(error?.message ?? error), status: error?.status, body: error?.body });

async function main() {
  const input = await readStdin();
  const client = new MastraClient({ baseUrl: input.baseUrl, retries: 0 });
  const agent = client.getAgent(input.agentId ?? 'chat-agent');
  const results = {};
  const run = async (name, fn) => {
    try { results[name] = await fn(); } catch (error) { results[name] = failure(error); }
  };
  const weatherCalls = [];
  const clientTools = {
    getWeather: {
      id: 'getWeather',
      description: 'The weather where the user is (runs in the client)',
      inputSchema: z.object({ city: z.string() }),
      execute: async (args) => {
        weatherCalls.push(args);
        return { city: args?.city ?? args?.context?.city, forecast: 'sunny' };
      },
    },
  };

  await run('tools', () => client.listTools());
  await run('tool', () => client.getTool('calculator').details());
  await run('agentTool', () => agent.getTool('calculator'));
  await run('execute', () => client.getTool('calculator').execute({ data: { expression: '6 * 7' } }));
  await run('invalid', async () => {
    await client.getTool('calculator').execute({ data: {} });
    return { unexpected: 'no error' };
  });
  await run('clientOnServer', async () => {
    await agent.executeTool('getUserLocation', { data: {} });
    return { unexpected: 'no error' };
  });
  await run('streamLoop', async () => {
    const response = await agent.stream('call getWeather with {"city": "Rome"}', {
      clientTools, memory: { thread: input.threadId, resource: input.resourceId },
    });
    const chunks = [];
    await response.processDataStream({ onChunk: async (chunk) => { chunks.push(chunk); } });
    return {
      types: chunks.map((c) => c.type),
      calls: [...weatherCalls],
      text: chunks.filter((c) => c.type === 'text-delta').map((c) => c.payload.text).join(''),
      finishes: chunks.filter((c) => c.type === 'finish').map((c) => c.payload.stepResult.reason),
      deltas: chunks.filter((c) => c.type === 'tool-call-delta').map((c) => c.payload.argsTextDelta),
    };
  });
  await run('generate', async () => {
    const r = await agent.generate('use the calculator tool: 2 * 21');
    return { finishReason: r.finishReason, text: r.text, steps: r.steps, toolCalls: r.toolCalls, toolResults: r.toolResults };
  });
  weatherCalls.length = 0;
  await run('generateLoop', async () => {
    const r = await agent.generate('call getWeather with {"city": "Oslo"}', { clientTools });
    return { finishReason: r.finishReason, text: r.text, calls: [...weatherCalls] };
  });
  const ok = Object.values(results).every((v) => !(v && typeof v === 'object' && 'error' in v && !('status' in v && v.status)));
  process.stdout.write(JSON.stringify({ ok, results, sdkVersion }) + '\n');
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + '\n');
});
