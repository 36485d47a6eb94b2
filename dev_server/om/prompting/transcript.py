"""Stored messages as the observer reads them: a plain dated transcript (docs/observational-memory.md#prompts).

The observer sees no JSON, only lines a person could read::

    Dec 4 2025:
    User (2:30 PM): Hello, I have two kids
    Assistant: Nice to meet you!
    Tool Call search: q: "acme"
    limit: 3
    Tool Result search: {
      "hits": 3
    }

Times are local (the process's zone unless ``tz`` is given), written en-US style. A date
line is written whenever the date changes, and a line carries ``(time)`` after its title only
when its time differs from the previous line's, whatever the line (text, reasoning, a tool's
call or result, an attachment). Reasoning becomes ``Reasoning: ...``. A tool exchange
appears once, however many parts repeat it: ``Tool Call <name>: <args>`` where its call is
first seen, then ``Tool Result <name>: ...`` (``Tool Error`` when it failed) where its result
is. Results are pretty-printed JSON (the ``providerMetadata.mastra.modelOutput`` form when the
part has one), with long ``encryptedContent`` strings redacted and the whole capped at
``TOOL_OUTPUT_TOKEN_CAP`` tokens. Arguments are an outline, a field a line
(``tool_arguments.py``). Images and files become numbered
placeholders on a line named after the part's type (``File: [Image #1: photo.png]``, ``File:
[File #1: report.pdf]``; the label is the file name, else a URL's last segment, else the
media type) and are returned beside the text, so the caller can forward the files themselves
(``attachment_parts``, by ``observation.observeAttachments``). So are the images and files of
a tool result that returns content (``{"type": "content", "value": [...]}``: ``image-data``,
``image-url``, ``media``, ``file-data``, ``file-url`` items): each item becomes ``{"type",
"placeholder"}`` in the result line.
``data-*`` and ``step-start`` parts carry nothing for the observer and are skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from dev_server.kernel.clock import parse_iso
from dev_server.om.options.attachments import DEFAULT_OBSERVE_ATTACHMENTS, AttachmentFilter, accepts
from dev_server.om.prompting.tool_arguments import format_arguments

if TYPE_CHECKING:
    from dev_server.kernel.messages import Message

TOOL_OUTPUT_TOKEN_CAP = 5000
ENCRYPTED_CONTENT_LIMIT = 256


@dataclass(frozen=True)
class Attachment:
    """An image or file a message carried, numbered as its placeholder in the transcript."""

    kind: str  # "image" or "file"
    number: int
    label: str
    media_type: str
    data: str  # a data: URL or a remote URL
    filename: str | None = None

    @property
    def placeholder(self) -> str:
        name = f"{self.kind.capitalize()} #{self.number}"
        return f"[{name}: {self.label}]" if self.label else f"[{name}]"

    def content_part(self) -> dict[str, Any] | None:
        """The OpenAI content part that sends it to a model, or None when it cannot be sent
        (a non-image file given only by a remote URL)."""
        if self.kind == "image":
            return {"type": "image_url", "image_url": {"url": self.data}}
        if not self.data.startswith("data:"):
            return None
        file: dict[str, Any] = {"file_data": self.data}
        if self.filename:
            file["filename"] = self.filename
        return {"type": "file", "file": file}


def format_transcript(messages: Sequence[Message], *, tz: tzinfo | None = None) -> tuple[str, list[Attachment]]:
    """The observer's view of ``messages`` (oldest first) and the attachments they carry."""
    writer = _TranscriptWriter(tz)
    for message in messages:
        writer.add(message)
    return "\n".join(writer.lines), writer.attachments


def attachment_parts(attachments: Iterable[Attachment],
                     accepted: AttachmentFilter = DEFAULT_OBSERVE_ATTACHMENTS) -> list[dict[str, Any]]:
    """Content parts for the attachments ``accepted`` lets through (``observeAttachments``
    decided for the observer model, ``dev_server.om.options.attachments``), to pass to
    ``observer_messages``."""
    parts = []
    for attachment in attachments:
        if accepts(accepted, attachment.media_type, image=attachment.kind == "image"):
            part = attachment.content_part()
            if part is not None:
                parts.append(part)
    return parts


class _TranscriptWriter:
    def __init__(self, tz: tzinfo | None) -> None:
        self.tz = tz
        self.lines: list[str] = []
        self.attachments: list[Attachment] = []
        self._date: str | None = None
        self._time: tuple[str, str] | None = None  # (date, time) of the last line that had one
        self._calls_seen: set[str] = set()
        self._results_seen: set[str] = set()
        self._counts = {"image": 0, "file": 0}

    def add(self, message: Message) -> None:
        moment = self._local(message.created_at)
        if moment is not None:
            date = f"{moment:%b} {moment.day} {moment.year}"
            if date != self._date:
                self.lines.append(f"{date}:")
                self._date = date
        role = message.role.capitalize()
        for part in _parts(message.content):
            self._add_part(role, moment, part)

    def _add_part(self, role: str, moment: datetime | None, part: dict[str, Any]) -> None:
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                self.lines.append(f"{self._speaker(role, moment)}: {text}")
        elif kind == "reasoning":
            text = part.get("reasoning") or "".join(
                d.get("text", "") for d in part.get("details") or () if isinstance(d, dict))
            if isinstance(text, str) and text.strip():
                self.lines.append(f"{self._speaker('Reasoning', moment)}: {text}")
        elif kind == "tool-invocation":
            self._add_tool(part, moment)
        elif kind in ("file", "image"):
            attachment = self._attachment(part)
            if attachment is not None:  # the line is named after the part's type, as Mastra names it
                self.lines.append(f"{self._speaker(kind.capitalize(), moment)}: {attachment.placeholder}")

    def _speaker(self, role: str, moment: datetime | None) -> str:
        if moment is None:
            return role
        stamp = (self._date or "", _clock(moment))
        if stamp == self._time:
            return role
        self._time = stamp
        return f"{role} ({stamp[1]})"

    def _add_tool(self, part: dict[str, Any], moment: datetime | None) -> None:
        invocation = part.get("toolInvocation") or {}
        call_id = str(invocation.get("toolCallId") or id(invocation))
        name = invocation.get("toolName") or "unknown"
        if call_id not in self._calls_seen:
            self._calls_seen.add(call_id)
            arguments = format_arguments(invocation.get("args"))
            self.lines.append(f"{self._speaker(f'Tool Call {name}', moment)}: {arguments}")
        if invocation.get("state") == "result" and call_id not in self._results_seen:
            self._results_seen.add(call_id)
            label = "Tool Error" if invocation.get("isError") else "Tool Result"
            result = self._without_attachments(_model_output(part, invocation))
            self.lines.append(f"{self._speaker(f'{label} {name}', moment)}: {_capped(_output(result))}")

    def _without_attachments(self, result: Any) -> Any:
        """A content result with each image or file item numbered as an attachment and
        replaced by ``{"type", "placeholder"}`` (Mastra's ``extractToolResultAttachments``)."""
        if not isinstance(result, dict) or result.get("type") != "content" or not isinstance(result.get("value"), list):
            return result
        items = []
        for item in result["value"]:
            part = _result_attachment(item)
            attachment = self._attachment(part) if part is not None else None
            items.append(item if attachment is None else {"type": item["type"], "placeholder": attachment.placeholder})
        return {**result, "value": items}

    def _attachment(self, part: dict[str, Any]) -> Attachment | None:
        data = part.get("data") if part.get("type") == "file" else part.get("image")
        if not isinstance(data, str) or not data:
            return None
        declared = str(part.get("mimeType") or part.get("mediaType") or "")
        media = declared
        if not media and data.startswith("data:"):
            media = data[5:].split(";", 1)[0].split(",", 1)[0]
        is_image = part.get("type") == "image" or media.lower().startswith("image/") or data.startswith("data:image/")
        kind = "image" if is_image else "file"
        self._counts[kind] += 1
        filename = part.get("filename") if isinstance(part.get("filename"), str) else None
        label = (filename or "").strip() or _url_name(data) or declared
        attachment = Attachment(kind, self._counts[kind], label, media or ("image" if is_image else ""), data,
                                filename)
        self.attachments.append(attachment)
        return attachment

    def _local(self, created_at: str) -> datetime | None:
        try:
            moment = parse_iso(created_at)
        except (TypeError, ValueError):
            return None
        return moment.astimezone(self.tz) if self.tz is not None else moment.astimezone()


def _result_attachment(item: Any) -> dict[str, Any] | None:
    """A tool result's content item as the image or file part it carries, if it carries one."""
    if not isinstance(item, dict):
        return None
    kind, media = item.get("type"), item.get("mediaType") if isinstance(item.get("mediaType"), str) else None
    data = item.get("url") if kind in ("image-url", "file-url") else item.get("data")
    if not isinstance(data, str) or kind not in ("image-data", "image-url", "media", "file-data", "file-url"):
        return None
    if kind in ("image-data", "media", "file-data") and media:
        data = f"data:{media};base64,{data}"
    elif kind == "media":
        return None  # Mastra needs the media type of a media item
    filename = item.get("filename") if isinstance(item.get("filename"), str) else None
    if kind.startswith("image") or (kind == "media" and media and media.lower().startswith("image/")):
        return {"type": "image", "image": data, "mimeType": media}
    return {"type": "file", "data": data, "mimeType": media, "filename": filename}


def _url_name(data: str) -> str:
    """The last path segment of an attachment given by URL (``dog.jpg``), else ""."""
    if data.startswith("data:"):
        return ""
    url = urlparse(data)
    if not url.scheme or len(url.scheme) < 2:  # not a URL (bare base64), or a Windows drive
        return ""
    segments = [s for s in url.path.split("/") if s]
    return unquote(segments[-1]) if segments else ""


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, dict):
        return []
    parts = content.get("parts")
    if isinstance(parts, list) and parts:
        return [p for p in parts if isinstance(p, dict)]
    text = content.get("content")
    return [{"type": "text", "text": text}] if isinstance(text, str) else []


def _clock(moment: datetime) -> str:
    """``2:30 PM``: en-US, 12-hour, no leading zero."""
    return f"{moment.hour % 12 or 12}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"


def _model_output(part: dict[str, Any], invocation: dict[str, Any]) -> Any:
    for holder in (part, invocation):
        mastra = (holder.get("providerMetadata") or {}).get("mastra") if isinstance(holder, dict) else None
        if isinstance(mastra, dict) and "modelOutput" in mastra:
            return mastra["modelOutput"]
    return invocation.get("result")


def _output(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(_redacted(result), indent=2, ensure_ascii=False, default=str)


def _redacted(value: Any) -> Any:
    """``value`` with every ``encryptedContent`` string over the limit replaced by a note."""
    if isinstance(value, dict):
        return {key: (f"[encrypted content redacted, {len(item)} chars]"
                      if key == "encryptedContent" and isinstance(item, str) and len(item) > ENCRYPTED_CONTENT_LIMIT
                      else _redacted(item)) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


def _rough_tokens(text: str) -> int:
    """Four characters a token: enough to cap a tool output."""
    return math.ceil(len(text) / 4)


def _capped(text: str) -> str:
    tokens = _rough_tokens(text)
    if tokens <= TOOL_OUTPUT_TOKEN_CAP:
        return text
    kept = text[: len(text) * TOOL_OUTPUT_TOKEN_CAP // tokens]
    return f"{kept}\n... [truncated ~{tokens - _rough_tokens(kept)} tokens]"
