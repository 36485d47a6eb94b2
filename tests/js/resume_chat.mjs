#!/usr/bin/env node
// A page reload mid-reply, with the real Vercel AI SDK (`ai` package): send a message through
// DefaultChatTransport, hang up after a few chunks, then resume as useChat({resume: true})
// does after a reload: a fresh Chat (AbstractChat over a plain array state) holding the
// messages the page had, calling chat.resumeStream(), which GETs {api}/{chatId}/stream
// through DefaultChatTransport.reconnectToStream. The resume may go to another server.
//
// stdin : ONE JSON object
//   {
//     "api": "http://A/api/chat",            where the message is sent (required)
//     "resumeApi": "http://B/api/chat",      where the reload resumes (default: api)
//     "chatId": "...", "text": "...",        the chat id and the user's message
//     "body": {...}, "headers": {...},       extra body fields (conversationId), headers (auth)
//     "abortAfterChunks": N,                 hang up after N chunks (default 6)
//     "withPartial": false                   true: the reloaded page also has the partial reply
//                                            (as a server that checkpoints it gives it back)
//   }
// stdout: ONE JSON object
//   { "sentChunks": [...],            chunks seen before hanging up
//     "status": "ready" | "error",   the resumed Chat's status
//     "error": string | null,
//     "resumeStatus": number | null,  HTTP status of the resume GET
//     "resumedChunkTypes": [...],     chunk types the resume delivered
//     "messages": [UIMessage, ...],   the resumed Chat's messages
//     "sdkVersion": "..." }

import { readFileSync } from 'node:fs';
import { AbstractChat, DefaultChatTransport, readUIMessageStream } from 'ai';

const sdkVersion = JSON.parse(
  readFileSync(new URL('./node_modules/ai/package.json', import.meta.url), 'utf8'),
).version;

class ArrayState {
  constructor(messages) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

class PlainChat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new ArrayState(messages) });
  }
}

async function readStdin() {
  const parts = [];
  for await (const part of process.stdin) parts.push(part);
  return JSON.parse(Buffer.concat(parts).toString('utf8'));
}

async function main() {
  const input = await readStdin();
  const chatId = input.chatId ?? 'resume-chat';
  const headers = input.headers ?? {};
  const body = input.body ?? {};
  const abortAfter = Number.isInteger(input.abortAfterChunks) ? input.abortAfterChunks : 6;
  const userMessage = { id: `${chatId}-u1`, role: 'user', parts: [{ type: 'text', text: input.text }] };
  const out = { sentChunks: [], status: null, error: null, resumeStatus: null, resumedChunkTypes: [], messages: [],
                sdkVersion };

  // 1. The page sends the message and is reloaded after a few chunks (its fetch is aborted).
  const controller = new AbortController();
  const sending = new DefaultChatTransport({ api: input.api, headers, body });
  const stream = await sending.sendMessages({
    chatId, messages: [userMessage], trigger: 'submit-message', messageId: undefined,
    abortSignal: controller.signal, metadata: undefined,
  });
  const reader = stream.getReader();
  while (out.sentChunks.length < abortAfter) {
    const { done, value } = await reader.read();
    if (done) break;
    out.sentChunks.push(value);
  }
  controller.abort();
  await reader.cancel().catch(() => {});

  // 2. The reloaded page: its messages as the server gives them back before the reply is
  // done (the user's, and with withPartial the reply so far), and useChat({resume: true})'s call.
  const pageMessages = [userMessage];
  if (input.withPartial) {
    const seen = new ReadableStream({
      start(c) {
        for (const chunk of out.sentChunks) c.enqueue(chunk);
        c.close();
      },
    });
    let partial = null;
    for await (const snapshot of readUIMessageStream({ stream: seen })) partial = snapshot;
    pageMessages.push(partial);
  }
  const recordingFetch = async (url, init) => {
    const res = await globalThis.fetch(url, init);
    out.resumeStatus = res.status;
    if (!res.body) return res;
    // See which chunk types arrive without consuming the SDK's copy.
    const [mine, theirs] = res.body.tee();
    (async () => {
      const text = await new Response(mine).text();
      for (const line of text.split('\n')) {
        if (line.startsWith('data: ') && line !== 'data: [DONE]') out.resumedChunkTypes.push(JSON.parse(line.slice(6)).type);
      }
    })().catch(() => {});
    return new Response(theirs, { status: res.status, headers: res.headers });
  };
  const chat = new PlainChat({
    id: chatId,
    messages: pageMessages,
    transport: new DefaultChatTransport({ api: input.resumeApi ?? input.api, headers, body, fetch: recordingFetch }),
    onError: (e) => {
      out.error = e?.message ?? String(e);
    },
  });
  await chat.resumeStream();
  out.status = chat.status;
  if (chat.error && out.error === null) out.error = chat.error.message;
  out.messages = chat.messages;
  await new Promise((resolve) => setTimeout(resolve, 20)); // let the tee's reader finish
  await new Promise((resolve) => process.stdout.write(JSON.stringify(out) + '\n', resolve));
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`resume_chat: ${e?.stack || e}\n`);
    process.exit(1);
  },
);
