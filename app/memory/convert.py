"""Message shapes and the conversions between them.

- UI message (AI SDK, what ``useChat`` sends): ``{id, role, parts: [...], metadata?}``.
- Stored message (Mastra's "MastraDBMessage", content format 2; STUDIO-REST.md 5.9):
  ``content = {format: 2, parts: [...], content: <flat text>, metadata?}``.
- Model message (what litellm takes): ``{role, content: str}``.

Parts are kept as faithfully as the two formats allow; nothing a client sent is dropped.
"""

from __future__ import annotations

from typing import Any

from app.storage.conversations import Message

MODEL_ROLES = {"system", "user", "assistant"}


def ui_part_to_stored(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "file":
        stored = {"type": "file", "mimeType": part.get("mediaType"), "data": part.get("url")}
        if part.get("filename"):
            stored["filename"] = part["filename"]
        return stored
    if kind == "reasoning":
        text = part.get("text", "")
        return {"type": "reasoning", "reasoning": text, "details": [{"type": "text", "text": text}]}
    if isinstance(kind, str) and kind.startswith("tool-"):
        state = "result" if part.get("state") == "output-available" else "call"
        invocation = {"state": state, "toolCallId": part.get("toolCallId"), "toolName": kind[5:],
                      "args": part.get("input")}
        if state == "result":
            invocation["result"] = part.get("output")
        return {"type": "tool-invocation", "toolInvocation": invocation}
    return dict(part)  # step-start, data-*, source-*: same shape in both formats


def flat_text(parts: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in parts if p.get("type") == "text")


def ui_to_stored(ui: dict[str, Any], thread_id: str, resource_id: str, created_at: str) -> Message:
    parts = [ui_part_to_stored(p) for p in ui.get("parts", [])]
    content: dict[str, Any] = {"format": 2, "parts": parts, "content": flat_text(parts)}
    if ui.get("metadata") is not None:
        content["metadata"] = ui["metadata"]
    return Message(id=ui["id"], thread_id=thread_id, resource_id=resource_id, role=ui["role"],
                   content=content, created_at=created_at)


def assistant_message(message_id: str, thread_id: str, resource_id: str, text: str, created_at: str,
                      metadata: dict[str, Any]) -> Message:
    parts = [{"type": "step-start"}, {"type": "text", "text": text}]
    return Message(id=message_id, thread_id=thread_id, resource_id=resource_id, role="assistant",
                   content={"format": 2, "parts": parts, "content": text, "metadata": metadata},
                   created_at=created_at)


def stored_to_model(message: Message) -> dict[str, str] | None:
    """The text a model sees for a stored message; None for messages models never see."""
    if message.role not in MODEL_ROLES:
        return None
    return {"role": message.role, "content": _model_text(message.content.get("parts", []))
            or message.content.get("content", "")}


def ui_to_model(ui: dict[str, Any]) -> dict[str, str] | None:
    if ui.get("role") not in MODEL_ROLES:
        return None
    return {"role": ui["role"], "content": _model_text([ui_part_to_stored(p) for p in ui.get("parts", [])])}


def _model_text(parts: list[dict[str, Any]]) -> str:
    pieces = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            pieces.append(part.get("text", ""))
        elif kind == "file":
            pieces.append(f"[file {part.get('filename') or part.get('mimeType') or ''}]".replace(" ]", "]"))
    return "".join(pieces)
