// A client tool round trip through the real `ai` Chat (what useChat runs underneath).
//
// stdin: {api, conversationId, text, output?, errorText?, timeoutMs?}
//   - sends `text` with a Chat built on AbstractChat + DefaultChatTransport, with
//     sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls;
//   - when the reply stops at a client tool call (a tool part in state input-available),
//     answers it with chat.addToolResult({tool, toolCallId, output}) (or, with `errorText`,
//     state output-error), which makes the Chat send the continuation by itself;
//   - waits until the Chat is idle again.
// stdout: ONE JSON line {ok, first, messages, requests, status, error, sdkVersion}:
//   first = the messages after the first response, messages = at the end, requests = per
//   HTTP request {status, body (the JSON sent), chunks (parsed SSE data), text (non-SSE)}.
// Exit 0 whenever the JSON was printed.
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const sdkVersion = require('ai/package.json').version;

class State {
  constructor() { this.messages = []; this.status = 'ready'; this.error = undefined; }
  pushMessage(message) { this.messages = this.messages.concat(message); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }
  snapshot(value) { return structuredClone(value); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

async function readStdin() {
  let text = '';
  for await (const piece of process.stdin) text += piece;
  return JSON.parse(text);
}

function parseSse(text) {
  return text.split('\n\n').flatMap((frame) => frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)))
    .filter((data) => data !== '[DONE]').map((data) => JSON.parse(data));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const input = await readStdin();
  const requests = [];
  const pending = [];
  const recordingFetch = async (url, init) => {
    const response = await fetch(url, init);
    const record = { status: response.status, body: JSON.parse(init.body) };
    requests.push(record);
    pending.push(response.clone().text().then((text) => {
      if ((response.headers.get('content-type') || '').includes('text/event-stream')) record.chunks = parseSse(text);
      else record.text = text;
    }));
    return response;
  };
  const chat = new Chat({
    id: input.conversationId,
    transport: new DefaultChatTransport({ api: input.api, body: { conversationId: input.conversationId }, fetch: recordingFetch }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });
  const deadline = Date.now() + (input.timeoutMs ?? 30000);
  const idle = async (requestCount) => {
    while (Date.now() < deadline) {
      if (requests.length >= requestCount && chat.status !== 'submitted' && chat.status !== 'streaming') return;
      await sleep(20);
    }
    throw new Error(`timed out waiting for request ${requestCount} (status ${chat.status})`);
  };
  await chat.sendMessage({ text: input.text });
  await idle(1);
  const first = structuredClone(chat.messages);
  const last = chat.messages.at(-1);
  const call = last?.role === 'assistant' ? last.parts.find((p) => p.type.startsWith('tool-') && p.state === 'input-available') : undefined;
  if (call) {
    const tool = call.type.slice('tool-'.length);
    if (input.errorText) await chat.addToolResult({ tool, toolCallId: call.toolCallId, state: 'output-error', errorText: input.errorText });
    else await chat.addToolResult({ tool, toolCallId: call.toolCallId, output: input.output ?? {} });
    await idle(2);
  }
  await Promise.all(pending);
  const ok = chat.status === 'ready' && requests.every((r) => r.status === 200);
  process.stdout.write(JSON.stringify({ ok, first, messages: chat.messages, requests, status: chat.status,
    error: chat.error ? String(chat.error) : null, sdkVersion }) + '\n');
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + '\n');
});
