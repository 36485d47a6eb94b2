"""Message shapes and the conversions between them.

- UI message (AI SDK, what ``useChat`` sends): ``{id, role, parts: [...], metadata?}``.
- Stored message (Mastra's "MastraDBMessage", content format 2; Mastra's Studio REST API: stored message format):
  ``content = {format: 2, parts: [...], content: <flat text>, metadata?}``.
- Model message (what litellm takes): ``{role, content}``; ``content`` is the flat text, or,
  when a user message carries files, a list of OpenAI content parts: ``text``, an image as
  ``image_url``, any other file as ``file`` (``file_data`` = its data URL). Whether the
  model may receive them is decided at the model seam (``dev_server.llm.content.fit_to_model``:
  litellm's ``supports_vision`` / ``supports_pdf_input``, else a placeholder). Files in
  system or assistant messages, and files given by a remote URL other than an image, become
  a text placeholder ``[file NAME (TYPE)]``.

An assistant reply's ``tool-invocation`` parts go back to the model as OpenAI's
``tool_calls`` + ``tool`` messages (``to_model_messages``).

Parts are kept as faithfully as the two formats allow; nothing a client sent is dropped,
and the model-facing conversion never changes the stored parts.
"""

from __future__ import annotations

import json
from typing import Any

from dev_server.kernel.messages import Message

MODEL_ROLES = {"system", "user", "assistant"}


def ui_part_to_stored(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "file":
        # Also accepts an already-stored part (mimeType/data): the studio converts those.
        stored = {"type": "file", "mimeType": part.get("mediaType") or part.get("mimeType"),
                  "data": part.get("url") or part.get("data")}
        if part.get("filename"):
            stored["filename"] = part["filename"]
        return stored
    if kind == "reasoning":
        text = part.get("text", "")
        return {"type": "reasoning", "reasoning": text, "details": [{"type": "text", "text": text}]}
    if isinstance(kind, str) and kind.startswith("tool-") and kind != "tool-invocation":
        state = "result" if part.get("state") in ("output-available", "output-error") else "call"
        invocation = {"state": state, "toolCallId": part.get("toolCallId"), "toolName": kind[5:],
                      "args": part.get("input")}
        if part.get("state") == "output-error":
            invocation.update(result=part.get("errorText"), isError=True)
        elif state == "result":
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


def assistant_message(message_id: str, thread_id: str, resource_id: str, parts: list[dict[str, Any]],
                      created_at: str, metadata: dict[str, Any]) -> Message:
    """A reply: text and ``tool-invocation`` parts in the order streamed, a ``step-start`` between steps."""
    if not any(p.get("type") == "text" for p in parts) and not any(p.get("type") == "tool-invocation" for p in parts):
        parts = [*parts, {"type": "text", "text": ""}]
    return Message(id=message_id, thread_id=thread_id, resource_id=resource_id, role="assistant",
                   content={"format": 2, "parts": parts, "content": flat_text(parts), "metadata": metadata},
                   created_at=created_at)


def to_model_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The model messages of stored ones, in order (an assistant message with tool calls
    becomes several: see ``stored_to_model_all``)."""
    return [model for message in messages for model in stored_to_model_all(message)]


def stored_to_model_all(message: Message) -> list[dict[str, Any]]:
    """Like ``stored_to_model``, but an assistant message's ``tool-invocation`` parts are
    re-fed as OpenAI wants them: an assistant message with ``tool_calls`` (with the text
    that preceded them), one ``tool`` message per result, then the text after them."""
    parts = message.content.get("parts", [])
    if message.role != "assistant" or not any(p.get("type") == "tool-invocation" for p in parts):
        model = stored_to_model(message)
        return [model] if model else []
    out: list[dict[str, Any]] = []
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush_calls() -> None:
        if calls:
            out.append({"role": "assistant", "content": "".join(text) or None, "tool_calls": list(calls)})
            out.extend(results)
            text.clear(), calls.clear(), results.clear()

    for part in parts:
        kind = part.get("type")
        if kind == "tool-invocation":
            invocation = part.get("toolInvocation") or {}
            call_id = str(invocation.get("toolCallId") or f"call_{len(out)}_{len(calls)}")
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": str(invocation.get("toolName") or ""),
                                       "arguments": json.dumps(invocation.get("args") or {})}})
            result = invocation.get("result")
            body = ({"error": result} if invocation.get("isError") else result) if invocation.get("state") == "result" \
                else {"error": "The client sent no output for this tool call"}
            results.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(body, default=str)})
        else:
            if calls and kind in ("step-start", "text"):
                flush_calls()
            if kind == "text" and part.get("text"):
                text.append(part["text"])
    flush_calls()
    if text:
        out.append({"role": "assistant", "content": "".join(text)})
    return out


def stored_to_model(message: Message) -> dict[str, Any] | None:
    """What a model sees for a stored message; None for messages models never see."""
    if message.role == "signal":
        return signal_to_model(message)
    if message.role not in MODEL_ROLES:
        return None
    parts = message.content.get("parts", [])
    return {"role": message.role, "content": _model_content(message.role, parts)
            or message.content.get("content", "")}


def signal_to_model(message: Message) -> dict[str, Any]:
    """A stored signal (role ``signal``, Mastra's agent signals) as the model reads it: a user
    message; a plain user signal is its text, any other is its text wrapped in its tag with
    its attributes (``<system-reminder type="temporal-gap" …>25 minutes later — …</system-reminder>``)."""
    parts = message.content.get("parts") or []
    signal = (message.content.get("metadata") or {}).get("signal")
    signal = signal if isinstance(signal, dict) else {}
    kind = signal.get("type") or message.type
    tag = str(signal.get("tagName") or ("user" if kind in ("user", "user-message") else "system-reminder"))
    attributes = {k: v for k, v in (signal.get("attributes") or {}).items() if v is not None} \
        if isinstance(signal.get("attributes"), dict) else {}
    text = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text")
    files = [_file_content(p) for p in parts if p.get("type") == "file"]
    if kind in ("user", "user-message") and not attributes:
        return {"role": "user", "content": _model_content("user", parts) or text}
    markup = _xml_element(tag, attributes, text)
    return {"role": "user", "content": [{"type": "text", "text": markup}, *files] if files else markup}


def _xml_element(tag: str, attributes: dict[str, Any], text: str) -> str:
    def escape(value: str) -> str:
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def value_text(value: Any) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    attrs = "".join(f' {key}="{escape(value_text(value)).replace(chr(34), "&quot;")}"'
                    for key, value in attributes.items())
    return f"<{tag}{attrs}>{escape(text)}</{tag}>" if text else f"<{tag}{attrs} />"


def ui_to_model(ui: dict[str, Any]) -> dict[str, Any] | None:
    if ui.get("role") not in MODEL_ROLES:
        return None
    return {"role": ui["role"],
            "content": _model_content(ui["role"], [ui_part_to_stored(p) for p in ui.get("parts", [])])}


def _model_content(role: str, parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """OpenAI content parts for a user message of several parts (files, or text in pieces:
    kept apart, not glued together), else its text as a string."""
    pieces: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            pieces.append({"type": "text", "text": part["text"]})
        elif kind == "file":
            pieces.append(_file_content(part) if role == "user" else _file_placeholder(part))
    if all(p["type"] == "text" for p in pieces) and (role != "user" or len(pieces) <= 1):
        return "".join(p["text"] for p in pieces)
    return pieces


def _file_content(part: dict[str, Any]) -> dict[str, Any]:
    data = part.get("data")
    media = str(part.get("mimeType") or "")
    if not isinstance(data, str) or not data:
        return _file_placeholder(part)
    if media.startswith("image/") or data.startswith("data:image/"):
        return {"type": "image_url", "image_url": {"url": data}}
    if not data.startswith("data:"):
        return _file_placeholder(part)  # only images may be passed to a model by URL
    file: dict[str, Any] = {"file_data": data}
    if part.get("filename"):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


def _file_placeholder(part: dict[str, Any]) -> dict[str, str]:
    name, media = part.get("filename"), part.get("mimeType")
    label = f"{name} ({media})" if name and media else (name or media or "")
    return {"type": "text", "text": f"[file {label}]".replace(" ]", "]")}
