"""Our gateway's objects in the trace's shapes (the recorder's ``compact.mjs``): stream
chunks as events, model requests as prompts, OM record rows, thread metadata and stored
messages under Mastra's names, so one comparison reads both traces."""

from __future__ import annotations

import json
from typing import Any

# -- stream chunks (the AI SDK's UI message stream) -------------------------------------------

_EVENTS = {"start": "start", "finish": "finish", "start-step": "step-start", "finish-step": "step-finish",
           "text-delta": "text"}


def events_of(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's chunks as the recorder keeps Mastra's stream chunks."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for chunk in chunks:
        kind = chunk["type"]
        if kind.startswith("data-"):
            out.append({"type": kind, "data": chunk.get("data"), **({"transient": True} if chunk.get("transient")
                                                                     else {})})
        elif kind in _EVENTS:
            out.append({"type": _EVENTS[kind]})
        elif kind == "tool-input-available":
            names[chunk["toolCallId"]] = chunk["toolName"]
            out.append({"type": "tool-call", "toolName": chunk["toolName"], "toolCallId": chunk["toolCallId"]})
        elif kind in ("tool-output-available", "tool-output-error"):
            out.append({"type": "tool-result" if kind == "tool-output-available" else "tool-error",
                        "toolName": names.get(chunk["toolCallId"]), "toolCallId": chunk["toolCallId"]})
        elif kind == "error":
            out.append({"type": "error", "error": str(chunk.get("errorText", ""))})
    return out


# -- model requests (OpenAI-style messages) ----------------------------------------------------


def _data_url(url: str) -> tuple[str, int]:
    head, _, data = url.partition(",")
    return head.removeprefix("data:").split(";")[0], len(data)


def _user_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "image_url":
        media, size = _data_url(part["image_url"]["url"])
        return {"type": "file", "mediaType": media, "bytes": size}
    if kind == "file":
        media, size = _data_url(part["file"].get("file_data", ""))
        return {"type": "file", "mediaType": media, "filename": part["file"].get("filename"), "bytes": size}
    return {"type": str(kind)}


def _output(content: Any) -> dict[str, Any]:
    try:
        value = json.loads(content) if isinstance(content, str) else content
    except ValueError:
        return {"type": "text", "value": content}
    return {"type": "text" if isinstance(value, str) else "json", "value": value}


def prompt_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A model request's messages as the recorder keeps Mastra's prompt."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message["role"], message.get("content")
        if role == "system":
            out.append({"role": "system", "content": content if isinstance(content, str) else json.dumps(content)})
        elif role == "tool":
            call_id = message.get("tool_call_id")
            out.append({"role": "tool", "content": [{"type": "tool-result", "toolCallId": call_id,
                                                     "toolName": names.get(call_id), "output": _output(content)}]})
        else:
            parts = ([{"type": "text", "text": content}] if isinstance(content, str) and content else
                     [_user_part(p) for p in content] if isinstance(content, list) else [])
            for call in message.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                try:
                    arguments = json.loads(call["function"]["arguments"] or "{}")
                except ValueError:
                    arguments = call["function"]["arguments"]
                parts.append({"type": "tool-call", "toolCallId": call["id"], "toolName": call["function"]["name"],
                              "input": arguments})
            out.append({"role": role, "content": parts})
    return out


# -- the OM record, thread metadata, stored messages -------------------------------------------

_RECORD = {
    "scope": "scope", "threadId": "thread_id", "generationCount": "generation_count", "originType": "origin_type",
    "activeObservations": "active_observations", "observationTokenCount": "observation_token_count",
    "totalTokensObserved": "total_tokens_observed", "pendingMessageTokens": "pending_message_tokens",
    "lastObservedAt": "last_observed_at", "lastBufferedAtTokens": "last_buffered_at_tokens",
    "lastBufferedAtTime": "last_buffered_at_time", "bufferedReflection": "buffered_reflection",
    "bufferedReflectionTokens": "buffered_reflection_tokens",
    "bufferedReflectionInputTokens": "buffered_reflection_input_tokens",
    "reflectedObservationLineCount": "reflected_observation_line_count", "createdAt": "created_at",
    "updatedAt": "updated_at",
}
_FLAGS = {"isObserving": "is_observing", "isReflecting": "is_reflecting",
          "isBufferingObservation": "is_buffering_observation", "isBufferingReflection": "is_buffering_reflection"}
_CHUNK_FIELDS = ("observations", "tokenCount", "messageTokens", "messageIds", "lastObservedAt", "createdAt",
                 "currentTask", "suggestedContinuation", "threadTitle", "extractedValues")


def _json(text: Any, default: Any) -> Any:
    return json.loads(text) if isinstance(text, str) and text else default


def record_of(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """An OM record row under Mastra's field names (flags, which carry a time here, as booleans)."""
    if row is None:
        return None
    out = {name: row[column] for name, column in _RECORD.items() if row.get(column) is not None}
    out.update({name: bool(row.get(column)) for name, column in _FLAGS.items()})
    out["observedMessageIds"] = _json(row.get("observed_message_ids"), None)
    out["bufferedObservationChunks"] = [{k: chunk[k] for k in _CHUNK_FIELDS if chunk.get(k) is not None}
                                        for chunk in _json(row.get("buffered_observation_chunks"), [])]
    return out


def thread_of(row: dict[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"title": None, "om": None}
    metadata = _json(row.get("metadata"), {}) or {}
    return {"title": row.get("title"), "om": (metadata.get("mastra") or {}).get("om")}


def _stored_part(part: dict[str, Any]) -> dict[str, Any]:
    kind = str(part.get("type"))
    out: dict[str, Any] = {"type": kind}
    if kind in ("text", "reasoning"):
        out["text"] = part.get("text")
    elif kind == "tool-invocation":
        call = part.get("toolInvocation") or {}
        out.update(toolName=call.get("toolName"), toolCallId=call.get("toolCallId"), state=call.get("state"))
    elif kind in ("file", "image"):
        out["mediaType"] = part.get("mediaType") or part.get("mimeType")
    elif kind.startswith("data-") and isinstance(part.get("data"), dict) and part["data"].get("operationType"):
        out["operationType"] = part["data"]["operationType"]
    return out


def message_of(row: dict[str, Any]) -> dict[str, Any]:
    """A stored message row as the recorder keeps Mastra's (id, role, time, parts, sealed)."""
    content = _json(row["content"], {})
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else \
        [_stored_part(p) for p in content.get("parts", [])]
    out: dict[str, Any] = {"id": row["id"], "role": row["role"], "createdAt": row["created_at"], "parts": parts}
    if isinstance(content, dict) and ((content.get("metadata") or {}).get("mastra") or {}).get("sealed"):
        out["sealed"] = True
    return out
