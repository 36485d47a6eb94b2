// What the trace keeps of the engine's objects: enough to compare, without the bulk
// (token-estimate caches, image bytes, provider metadata).
const QUIET = new Set([
  'text-start', 'text-end', 'reasoning-start', 'reasoning-delta', 'reasoning-end', 'tool-call-input-streaming-start',
  'tool-call-delta', 'tool-call-input-streaming-end', 'response-metadata', 'raw',
]);

export function compactChunk(chunk) {
  const { type } = chunk;
  if (type.startsWith('data-')) return { type, data: chunk.data, ...(chunk.transient ? { transient: true } : {}) };
  if (QUIET.has(type)) return null;
  const payload = chunk.payload ?? {};
  if (type === 'text-delta') return { type: 'text' };
  if (type === 'tool-call' || type === 'tool-result' || type === 'tool-error') {
    return { type, toolName: payload.toolName, toolCallId: payload.toolCallId };
  }
  if (type === 'error') return { type, error: String(payload.error?.message ?? payload.error ?? '') };
  return { type };
}

function bytes(data) {
  if (typeof data === 'string') return data.length;
  if (data instanceof URL) return data.href.length;
  return data?.byteLength ?? data?.length ?? 0;
}

function promptPart(part) {
  switch (part.type) {
    case 'text':
    case 'reasoning':
      return { type: part.type, text: part.text };
    case 'file':
      return { type: 'file', mediaType: part.mediaType, filename: part.filename, bytes: bytes(part.data) };
    case 'tool-call':
      return { type: part.type, toolCallId: part.toolCallId, toolName: part.toolName, input: part.input };
    case 'tool-result':
      return { type: part.type, toolCallId: part.toolCallId, toolName: part.toolName, output: part.output };
    default:
      return { type: part.type };
  }
}

export function compactPrompt(prompt) {
  return prompt.map(message =>
    typeof message.content === 'string'
      ? { role: message.role, content: message.content }
      : { role: message.role, content: message.content.map(promptPart) },
  );
}

const RECORD_FIELDS = [
  'scope', 'threadId', 'generationCount', 'originType', 'activeObservations', 'observationTokenCount',
  'totalTokensObserved', 'pendingMessageTokens', 'lastObservedAt', 'observedMessageIds', 'isObserving', 'isReflecting',
  'isBufferingObservation', 'isBufferingReflection', 'lastBufferedAtTokens', 'lastBufferedAtTime', 'bufferedReflection',
  'bufferedReflectionTokens', 'bufferedReflectionInputTokens', 'reflectedObservationLineCount', 'createdAt', 'updatedAt',
];
const CHUNK_FIELDS = [
  'observations', 'tokenCount', 'messageTokens', 'messageIds', 'lastObservedAt', 'createdAt', 'currentTask',
  'suggestedContinuation', 'threadTitle', 'extractedValues',
];

const pick = (object, fields) =>
  Object.fromEntries(fields.filter(f => object[f] !== undefined).map(f => [f, object[f]]));

export function compactRecord(record) {
  if (!record) return null;
  const out = pick(record, RECORD_FIELDS);
  out.bufferedObservationChunks = (record.bufferedObservationChunks ?? []).map(chunk => pick(chunk, CHUNK_FIELDS));
  return JSON.parse(JSON.stringify(out)); // dates as ISO strings
}

function storedPart(part) {
  const out = { type: part.type };
  if (part.type === 'text' || part.type === 'reasoning') out.text = part.text;
  if (part.type === 'tool-invocation') {
    const call = part.toolInvocation ?? {};
    Object.assign(out, { toolName: call.toolName, toolCallId: call.toolCallId, state: call.state });
  }
  if (part.type === 'file' || part.type === 'image') out.mediaType = part.mediaType ?? part.mimeType;
  if (part.type.startsWith('data-') && part.data?.operationType) out.operationType = part.data.operationType;
  return out;
}

export function compactMessage(message) {
  const content = message.content ?? {};
  return JSON.parse(
    JSON.stringify({
      id: message.id,
      role: message.role,
      type: message.type,
      createdAt: message.createdAt,
      parts: typeof content === 'string' ? [{ type: 'text', text: content }] : (content.parts ?? []).map(storedPart),
      ...(content.metadata?.mastra?.sealed ? { sealed: true } : {}),
    }),
  );
}
