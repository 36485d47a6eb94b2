"""Attachments in model messages, fitted to what the model accepts.

``dev_server.kernel.convert`` turns a stored ``file`` part into OpenAI's content parts: an image
becomes ``{"type": "image_url", "image_url": {"url": ...}}``, any other file
``{"type": "file", "file": {"file_data": <data URL>, "filename": ...}}``, beside the text
parts. Before a call, ``fit_to_model`` keeps those parts only where litellm's model map says
the model takes them (``supports_vision`` for images, ``supports_pdf_input`` for PDFs) and
replaces the others by a text placeholder naming the file, so the model knows something was
attached and a provider never gets content it rejects. Other file types have no model-side
support flag in litellm and always become placeholders. Stored messages are not touched.
``for_trace`` shortens the data URLs for span inputs, which must stay small.
"""

from __future__ import annotations

from typing import Any

ATTACHMENT_TYPES = ("image_url", "file")


def media_type_of(part: dict[str, Any]) -> str:
    """The media type of an ``image_url`` / ``file`` content part (from its data URL)."""
    url = ""
    if part.get("type") == "image_url":
        url = str((part.get("image_url") or {}).get("url") or "")
    elif part.get("type") == "file":
        url = str((part.get("file") or {}).get("file_data") or "")
    if url.startswith("data:"):
        media = url[5:].split(";", 1)[0].split(",", 1)[0].strip().lower()
        if media:
            return media
    return "image" if part.get("type") == "image_url" else "application/octet-stream"


def attachments(content: Any) -> list[str]:
    """Media types of the attachments in one message's ``content``, in order."""
    if not isinstance(content, list):
        return []
    return [media_type_of(p) for p in content if isinstance(p, dict) and p.get("type") in ATTACHMENT_TYPES]


def placeholder(part: dict[str, Any], why: str) -> dict[str, str]:
    name = (part.get("file") or {}).get("filename") if part.get("type") == "file" else None
    label = f"{name} ({media_type_of(part)})" if name else media_type_of(part)
    return {"type": "text", "text": f"[attachment {label}: {why}]"}


def fit_to_model(messages: list[dict[str, Any]], *, vision: bool, pdf_input: bool,
                 model: str, copy: bool = True) -> list[dict[str, Any]]:
    """``messages`` with every attachment the model cannot take replaced by a placeholder;
    each message a copy: the provider's library may set keys of what it is given, and the
    messages handed in are the turn's, shared with what later steps and turns are shown
    (``dev_server.om.turn_window``). ``copy=False`` (a model that only reads them, the
    local one): a message with nothing replaced is passed as it is, not copied (with
    Observational Memory a step's input is the whole unobserved window)."""
    fitted = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            fitted.append(dict(message) if copy else message)
            continue
        parts, replaced = [], False
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ATTACHMENT_TYPES:
                parts.append(part)
                continue
            media = media_type_of(part)
            if vision if kind == "image_url" else (pdf_input and media == "application/pdf"):
                parts.append(part)
            else:
                parts.append(placeholder(part, f"not sent, {model} does not accept {media}"))
                replaced = True
        fitted.append({**message, "content": parts} if copy or replaced else message)
    return fitted


def for_trace(messages: list[dict[str, Any]], *, limit: int = 0) -> list[dict[str, Any]]:
    """``messages`` with each attachment's data URL replaced by ``data:<type>;base64,… (N chars)``.

    ``limit`` (characters of text, 0: no limit) bounds what a model generation's span records
    of its input (``DEV_SERVER_TRACE_INPUT_CHARS``, docs/studio.md#differences-from-mastra): the
    leading system messages (instructions, observations) within half of it, the last one kept
    cut to fit, then the newest messages within the other half; the messages left out are one
    system message after the kept system messages that says how many they were. With
    Observational Memory the input is the whole unobserved window: recorded whole, every turn
    of a long thread wrote and stored it again."""
    if limit <= 0:
        return [_traced(message) for message in messages]
    head = 0
    while head < len(messages) - 1 and messages[head].get("role") == "system":
        head += 1
    kept_from, room = len(messages), limit // 2
    while kept_from > head and (kept_from == len(messages) or _text_size(messages[kept_from - 1]) <= room):
        kept_from -= 1
        room -= _text_size(messages[kept_from])
    traced: list[dict[str, Any]] = []
    left_out = messages[head:kept_from]
    room = limit // 2
    for index, message in enumerate(messages[:head]):
        size = _text_size(message)
        if size > room and not (room > 0 and isinstance(message.get("content"), str)):
            left_out = [*messages[index:head], *left_out]
            break
        traced.append(_traced(_cut(message, room)))
        room -= min(size, room)
    if left_out:
        traced.append({"role": "system", "content": f"[{len(left_out)} earlier messages "
                       f"({sum(map(_text_size, left_out)):,} characters) not recorded in this trace: "
                       "DEV_SERVER_TRACE_INPUT_CHARS]"})
    traced.extend(_traced(message) for message in messages[kept_from:])
    return traced


def _text_size(message: dict[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(part.get("text") or "") if isinstance(part, dict) else 0 for part in content) + 64 * len(content)
    return 64


def _cut(message: dict[str, Any], limit: int) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str) and len(content) > limit:
        return {**message, "content": f"{content[:limit]}… [{len(content) - limit:,} more characters not recorded]"}
    return message


def _traced(message: dict[str, Any]) -> dict[str, Any]:
    def short(url: Any) -> Any:
        if isinstance(url, str) and url.startswith("data:") and len(url) > 64:
            return f"{url.split(',', 1)[0]},… ({len(url)} chars)"
        return url

    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            part = {**part, "image_url": {**(part.get("image_url") or {}),
                                          "url": short((part.get("image_url") or {}).get("url"))}}
        elif isinstance(part, dict) and part.get("type") == "file":
            part = {**part, "file": {**(part.get("file") or {}),
                                     "file_data": short((part.get("file") or {}).get("file_data"))}}
        parts.append(part)
    return {**message, "content": parts}
