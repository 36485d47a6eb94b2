#!/usr/bin/env node
// Judge a /api/chat endpoint with the real Vercel AI SDK (`ai` package).
//
// stdin : ONE JSON object
//   {
//     "api": "http://127.0.0.1:PORT/api/chat",   (required)
//     "messages": [UIMessage, ...],              (default [])
//     "body": {...},        extra top-level body fields (conversationId, agentId, ...)
//     "headers": {...},     extra request headers
//     "trigger": "submit-message" | "regenerate-message"   (default "submit-message")
//     "chatId": "...",      (default "chat-test")
//     "messageId": "...",   (optional; omitted from the JSON body when absent, like the SDK)
//     "raw": false,         true: POST with plain fetch + parseJsonEventStream(uiMessageChunkSchema)
//     "abortAfterChunks": N (optional; abort the request after N chunks -> aborted=true)
//     "timeoutMs": 30000    (optional; the request is aborted and ok=false after this)
//     "reconnect": false    true: only call transport.reconnectToStream({chatId}) (useChat's resume)
//                           and report "reconnected": whether it returned a stream (null on 204)
//   }
//
// stdout: ONE JSON object
//   {
//     "ok": bool,             false on HTTP error, network error, schema violation, JSON error,
//                             invalid chunk sequence (readUIMessageStream) or timeout
//     "aborted": bool,        true when abortAfterChunks fired
//     "chunks": [...],        every chunk that passed the SDK schema, in order
//     "message": UIMessage | null,   final message built by readUIMessageStream
//     "error": string | null, first error (for non-2xx: the response body text, as the SDK raises)
//     "errorName": string | null,    e.g. "AI_TypeValidationError", "AI_UIMessageStreamError"
//     "errorChunks": [string],       errorText of every {"type":"error"} chunk (valid protocol,
//                                    but useChat would go to status "error")
//     "status": number | null, "headers": {lower-case response headers} | null,
//     "validation": which SDK validation ran, "sdkVersion": installed `ai` version,
//     "rawText": string       (raw mode only: the full response body as received)
//   }
// Exit code 0 whenever the JSON was printed (even ok=false); 2 for bad stdin; 1 for harness bugs.

import { readFileSync } from 'node:fs';
import { BadInput, runAsScript } from './harness.mjs';
import {
  DefaultChatTransport,
  readUIMessageStream,
  parseJsonEventStream,
  uiMessageChunkSchema,
} from 'ai';

const sdkVersion = (() => {
  try {
    return JSON.parse(
      readFileSync(new URL('./node_modules/ai/package.json', import.meta.url), 'utf8'),
    ).version;
  } catch {
    return null;
  }
})();

function errorText(err) {
  if (err == null) return 'unknown error';
  if (typeof err === 'string') return err;
  const text = err.message || String(err);
  // undici's bare "fetch failed" hides the reason (ECONNREFUSED, ...) in err.cause
  return text === 'fetch failed' && err.cause ? `${text}: ${err.cause.message || err.cause}` : text;
}

function errorName(err) {
  return err && typeof err === 'object' ? err.name || err.constructor?.name || null : null;
}

function isAbortError(err) {
  return err && (err.name === 'AbortError' || err.code === 20 || err.code === 'ABORT_ERR');
}

// Build the final UIMessage exactly as useChat would: continue the last message if it is an
// assistant message, otherwise start a fresh assistant message.
async function buildMessage(chunks, messages) {
  const last = messages.length ? messages[messages.length - 1] : undefined;
  const startMessage = last && last.role === 'assistant' ? structuredClone(last) : undefined;
  const errors = [];
  const stream = new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
  let message = null;
  for await (const snapshot of readUIMessageStream({
    message: startMessage,
    stream,
    onError: (e) => errors.push(e),
  })) {
    message = snapshot;
  }
  if (message === null && startMessage) message = startMessage;
  return { message, errors };
}

function checkInput(input) {
  if (!input || typeof input !== 'object' || typeof input.api !== 'string') {
    throw new BadInput('stdin JSON needs a string "api"');
  }
}

// One judged turn: the answer described at the top of this file.
export async function run(input) {
  checkInput(input);
  const messages = Array.isArray(input.messages) ? input.messages : [];
  const chatId = input.chatId ?? 'chat-test';
  const trigger = input.trigger ?? 'submit-message';
  const messageId = input.messageId ?? undefined;
  const body = input.body ?? {};
  const headers = input.headers ?? {};
  const abortAfter = Number.isInteger(input.abortAfterChunks) ? input.abortAfterChunks : null;
  const timeoutMs = Number.isFinite(input.timeoutMs) ? input.timeoutMs : 30000;

  const out = {
    ok: false,
    aborted: false,
    chunks: [],
    message: null,
    error: null,
    errorName: null,
    errorChunks: [],
    status: null,
    headers: null,
    validation: input.raw
      ? 'fetch + parseJsonEventStream({schema: uiMessageChunkSchema}) + readUIMessageStream'
      : 'DefaultChatTransport.sendMessages (parseJsonEventStream + uiMessageChunkSchema) + readUIMessageStream',
    sdkVersion,
  };
  const fail = (err, name) => {
    if (out.error === null) {
      out.error = errorText(err);
      out.errorName = name ?? errorName(err);
    }
  };

  const controller = new AbortController();
  let userAborted = false;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);

  // Records status + headers without changing the request the SDK makes.
  const recordingFetch = async (url, init) => {
    const res = await globalThis.fetch(url, init);
    out.status = res.status;
    out.headers = Object.fromEntries(res.headers.entries());
    return res;
  };

  let chunkStream = null; // ReadableStream of {success, value|error} (raw) or of chunks (transport)
  let rawTextPromise = null;
  try {
    if (input.reconnect) {
      const transport = new DefaultChatTransport({ api: input.api, fetch: recordingFetch });
      chunkStream = await transport.reconnectToStream({ chatId, headers, body, metadata: undefined });
      out.reconnected = chunkStream !== null;
    } else if (input.raw) {
      // Same request DefaultChatTransport would make (messageId dropped by JSON.stringify if undefined).
      const res = await recordingFetch(input.api, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ ...body, id: chatId, messages, trigger, messageId }),
        signal: controller.signal,
      });
      if (!res.ok) throw new Error((await res.text()) ?? 'Failed to fetch the chat response.');
      if (!res.body) throw new Error('The response body is empty.');
      const [forParse, forText] = res.body.tee();
      rawTextPromise = new Response(forText).text().catch(() => null);
      chunkStream = parseJsonEventStream({ stream: forParse, schema: uiMessageChunkSchema });
    } else {
      const transport = new DefaultChatTransport({ api: input.api, fetch: recordingFetch });
      chunkStream = await transport.sendMessages({
        chatId,
        messages,
        trigger,
        messageId,
        abortSignal: controller.signal,
        body,
        headers,
        metadata: undefined,
      });
    }
  } catch (e) {
    fail(timedOut ? new Error(`timeout after ${timeoutMs} ms`) : e, timedOut ? 'Timeout' : undefined);
  }

  if (chunkStream) {
    const reader = chunkStream.getReader();
    try {
      while (true) {
        if (abortAfter !== null && out.chunks.length >= abortAfter) {
          userAborted = true;
          controller.abort();
          await reader.cancel().catch(() => {});
          break;
        }
        const { done, value } = await reader.read();
        if (done) break;
        let chunk = value;
        if (input.raw) {
          if (!value.success) {
            fail(value.error);
            await reader.cancel().catch(() => {});
            break;
          }
          chunk = value.value;
        }
        out.chunks.push(chunk);
        if (chunk.type === 'error') out.errorChunks.push(chunk.errorText);
      }
    } catch (e) {
      if (userAborted && isAbortError(e)) {
        // expected
      } else if (timedOut) {
        fail(new Error(`timeout after ${timeoutMs} ms`), 'Timeout');
      } else {
        fail(e);
      }
    }
  }
  clearTimeout(timer);
  if (rawTextPromise) out.rawText = await rawTextPromise;

  // Replay the accepted chunks through readUIMessageStream (this checks ordering rules such as
  // text-delta without text-start, tool output without a tool call, ...).
  if (out.chunks.length || chunkStream) {
    const { message, errors } = await buildMessage(out.chunks, messages);
    out.message = message;
    const pendingErrorChunks = [...out.errorChunks];
    for (const e of errors) {
      // {"type":"error"} chunks reach onError as plain Error(errorText): not a protocol failure.
      const i = pendingErrorChunks.indexOf(e?.message);
      if (e?.name === 'Error' && i !== -1) {
        pendingErrorChunks.splice(i, 1);
        continue;
      }
      fail(e);
    }
  }

  out.aborted = userAborted;
  out.ok = out.error === null;
  return out;
}

runAsScript(import.meta.url, run);
