"""Chunks of the AI SDK UI message stream v1 (the AI SDK's UI message stream protocol), as plain dicts.

The SDK rejects optional fields sent as ``null`` (``{"messageId": null}`` fails its
schema), so every constructor leaves out what it was not given instead of sending None.
Keys typed ``unknown`` in the SDK (``data``) are always present, even when null.
"""

from __future__ import annotations

from typing import Any

FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "other"}


def _present(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def start(message_id: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "start", **_present(messageId=message_id, messageMetadata=metadata)}


def start_step() -> dict[str, Any]:
    return {"type": "start-step"}


def finish_step() -> dict[str, Any]:
    return {"type": "finish-step"}


def text_start(part_id: str) -> dict[str, Any]:
    return {"type": "text-start", "id": part_id}


def text_delta(part_id: str, delta: str) -> dict[str, Any]:
    return {"type": "text-delta", "id": part_id, "delta": delta}


def text_end(part_id: str) -> dict[str, Any]:
    return {"type": "text-end", "id": part_id}


def finish(reason: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    if reason is not None and reason not in FINISH_REASONS:
        reason = "other"
    return {"type": "finish", **_present(finishReason=reason, messageMetadata=metadata)}


def error(text: str) -> dict[str, Any]:
    return {"type": "error", "errorText": text}


def tool_input_start(call_id: str, name: str) -> dict[str, Any]:
    return {"type": "tool-input-start", "toolCallId": call_id, "toolName": name}


def tool_input_available(call_id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": input}


def tool_output_available(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "tool-output-available", "toolCallId": call_id, "output": output}


def tool_output_error(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}


def tool_input_delta(call_id: str, delta: str) -> dict[str, Any]:
    return {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": delta}


def reasoning_start(part_id: str) -> dict[str, Any]:
    return {"type": "reasoning-start", "id": part_id}


def reasoning_delta(part_id: str, delta: str) -> dict[str, Any]:
    return {"type": "reasoning-delta", "id": part_id, "delta": delta}


def reasoning_end(part_id: str) -> dict[str, Any]:
    return {"type": "reasoning-end", "id": part_id}


def data_part(name: str, data: Any, part_id: str | None = None, transient: bool = False) -> dict[str, Any]:
    return {"type": f"data-{name}", **_present(id=part_id), "data": data, **({"transient": True} if transient else {})}
