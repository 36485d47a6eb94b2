"""The bodies of Mastra's agent routes (``/generate``, ``/stream``, ``/send-message``, the
signal routes), as typed models FastAPI validates before a handler runs (the app's one
``{"error", "issues"}`` 400 shape), and the conversion of their messages.

``messages`` may be a string, ``{role, content}`` items (content a string or parts), AI SDK
UI messages (``parts``) or stored messages (``content.format == 2``): all become stored
messages. ``memory: {thread, resource}`` is how a thread is named (Mastra's Studio REST API: agent runs).

Client tools (client-js's client-tool loop): ``clientTools`` (name -> ``{description,
inputSchema}``, JSON schemas) are offered to the model for that run only. When one was
called, client-js calls again with the output: a ``role: "tool"`` message of ``tool-result``
parts (with a thread: only that), or, after ``generate``, the step's assistant message
(``tool-call`` parts) followed by it. Assistant ``tool-call`` parts become
``tool-invocation`` parts, and a result folds into the call it answers (state ``result``);
a ``tool`` message whose calls are not in the input stays one, for the thread's pending
calls (``dev_server.memory.tool_results``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dev_server.kernel import ids
from dev_server.kernel.clock import Clock, spaced_iso
from dev_server.kernel.convert import flat_text, ui_part_to_stored
from dev_server.kernel.errors import BadRequest, invalid
from dev_server.kernel.messages import Message
from dev_server.kernel.tools import Tool, client_tool

ROLES = ("user", "assistant", "system", "tool")


class MemoryArgument(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread: str | dict[str, Any]
    resource: str | None = None
    readOnly: bool = False

    @field_validator("thread")
    @classmethod
    def thread_has_an_id(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        thread_id = value if isinstance(value, str) else value.get("id")
        if not isinstance(thread_id, str) or not thread_id or len(thread_id) > 256:
            raise ValueError("thread must be a non-empty id (at most 256 characters) or {id}")
        return value

    @property
    def thread_id(self) -> str:
        return self.thread if isinstance(self.thread, str) else self.thread["id"]


class ClientToolSpec(BaseModel):
    """One of client-js's ``clientTools`` as it arrives (its ``execute`` stays in the client)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    description: str = ""
    inputSchema: dict[str, Any] | None = None
    parameters: dict[str, Any] | None = None  # the older name of the schema


class AgentRunBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messages: str | list[Any] = Field(min_length=1, description="Only the new message(s); history comes from memory")
    memory: MemoryArgument | None = None
    runId: str | None = None
    instructions: str | None = None
    clientTools: dict[str, ClientToolSpec] | None = Field(None, description="Tools the client runs, offered to the "
                                                                         "model for this run only")

    def client_tools(self) -> tuple[Tool, ...]:
        return tuple(client_tool(name, spec.description, _schema(spec.inputSchema or spec.parameters))
                     for name, spec in (self.clientTools or {}).items())


def _schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A JSON schema as litellm's function parameters want it (no ``$schema`` / superjson wrapper)."""
    if schema is None:
        return None
    schema = schema.get("json", schema) if set(schema) <= {"json", "meta"} else schema
    return {k: v for k, v in schema.items() if k != "$schema"}


class ThreadRef(BaseModel):
    """``/threads/subscribe``: which thread's runs to receive."""

    model_config = ConfigDict(extra="ignore")

    threadId: str = Field(min_length=1, max_length=256, description="The thread (a new chat: a client-made UUID)")
    resourceId: str | None = None


class AbortBody(ThreadRef):
    expectedRunId: str | None = None


class SendMessageBody(ThreadRef):
    """``/send-message``; ``ifIdle`` / ``ifActive`` are accepted and ignored."""

    message: str | list[Any] | dict[str, Any] = Field(description="A string, parts, or {contents, metadata}")
    runId: str | None = None


def signal_contents(message: str | list[Any] | dict[str, Any]) -> tuple[str | list[Any], dict[str, Any]]:
    """(contents, metadata) of a signal's ``message``."""
    if isinstance(message, dict):
        if "contents" not in message:
            raise invalid("body", "message", "message must be a string, parts, or {contents, metadata}")
        contents = message["contents"]
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    else:
        contents, metadata = message, {}
    if not isinstance(contents, (str, list)):
        raise invalid("body", "message.contents", "contents must be a string or parts")
    if isinstance(contents, str) and not contents.strip():
        raise invalid("body", "message", "message must not be empty")
    return contents, metadata


def to_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append({"type": "text", "text": part})
            elif isinstance(part, dict) and isinstance(part.get("type"), str):
                if part["type"] == "tool-call":
                    parts.append({"type": "tool-invocation", "toolInvocation": {
                        "state": "call", "toolCallId": part.get("toolCallId"), "toolName": part.get("toolName"),
                        "args": part.get("input", part.get("args"))}})
                elif part["type"] == "tool-result":
                    parts.append({"type": "tool-result", "toolCallId": part.get("toolCallId"),
                                  "toolName": part.get("toolName"), "result": _tool_result(part)})
                elif part["type"] == "image":
                    parts.append({"type": "file", "mimeType": part.get("mimeType", "image/*"),
                                  "data": part.get("image")})
                elif part["type"] == "file" and "mediaType" in part:
                    parts.append(ui_part_to_stored(part))
                else:
                    parts.append(dict(part))
            else:
                raise ValueError("each content part must be a string or an object with a type")
        return parts
    if isinstance(content, dict) and content.get("format") == 2:
        return [dict(part) for part in _part_list(content.get("parts") or [])]
    raise ValueError("content must be a string, a list of parts or a format-2 object")


def message_parts(sent: Any, *, ui: bool) -> list[dict[str, Any]]:
    """The stored parts of a message sent with AI SDK ``parts`` (``ui``) or with Mastra's
    ``content`` (``to_parts``); ``ValueError``/``TypeError``/``KeyError`` when unreadable."""
    if ui:
        return _checked([ui_part_to_stored(p) for p in _part_list(sent)])
    return _checked(to_parts(sent))


def input_messages(messages: str | list[Any], thread_id: str, resource_id: str, clock: Clock) -> list[Message]:
    """Every input message as a stored message, in order, on distinct milliseconds."""
    items = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    stamps = spaced_iso(len(items), clock)
    stored = []
    for index, item in enumerate(items):
        field = f"messages.{index}"
        if isinstance(item, str):
            item = {"role": "user", "content": item}
        if not isinstance(item, dict) or item.get("role") not in ROLES:
            raise BadRequest("Invalid request body", [{"field": f"{field}.role", "message": f"must be one of {ROLES}"}])
        key = "parts" if "parts" in item else "content"
        try:
            parts = message_parts(item.get(key), ui=key == "parts")
        except (ValueError, TypeError, KeyError) as exc:
            raise BadRequest("Invalid request body", [{"field": f"{field}.{key}", "message": str(exc)}]) from None
        message_id = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else str(ids.uuid4())
        stored.append(Message(id=message_id, thread_id=thread_id, resource_id=resource_id, role=item["role"],
                              content={"format": 2, "parts": parts, "content": flat_text(parts)},
                              created_at=stamps[index]))
    return fold_tool_results(stored)


def _tool_result(part: dict[str, Any]) -> Any:
    """A ``tool-result`` part's value: ``result``, or AI SDK's ``output: {type: "json", value}``."""
    if "result" in part:
        return part["result"]
    output = part.get("output")
    return output.get("value") if isinstance(output, dict) and "value" in output else output


def fold_tool_results(messages: list[Message]) -> list[Message]:
    """Each ``tool-result`` put on the input's own call it answers (state ``result``); what
    answers no call of the input is kept, in a ``tool`` message, for the thread's pending calls."""
    calls: dict[str, dict[str, Any]] = {}
    folded: list[Message] = []
    for message in messages:
        parts = message.content["parts"]
        for part in parts:
            invocation = part.get("toolInvocation") if part.get("type") == "tool-invocation" else None
            if invocation and invocation.get("state") == "call" and isinstance(invocation.get("toolCallId"), str):
                calls[invocation["toolCallId"]] = part
        kept = []
        for part in parts:
            call = calls.get(part.get("toolCallId")) if part.get("type") == "tool-result" else None
            if call is None:
                kept.append(part)
            else:
                call["toolInvocation"] = {**call["toolInvocation"], "state": "result", "result": part.get("result")}
        if kept or not parts:
            message.content["parts"] = kept
            folded.append(message)
    return folded


def _part_list(parts: Any) -> list[dict[str, Any]]:
    if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in parts):
        raise ValueError("parts must be a list of objects with a string 'type'")
    return parts


def _checked(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts whose text the model and storage can read: a text part's ``text`` is a string."""
    for part in parts:
        if part.get("type") == "text" and not isinstance(part.get("text"), str):
            raise ValueError("a text part needs a string 'text'")
    return parts
