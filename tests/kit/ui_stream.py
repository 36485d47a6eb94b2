"""The UI message stream read in Python: chunks in, the assistant message ``useChat`` would
show out (what the ``ai`` package's ``readUIMessageStream`` builds, for the chunk types the
gateway sends). Feature tests use it instead of a node process per turn; whether the chunks
pass the SDK's own schema is judged by ``tests.kit.chat.judge`` in the wire-format tests.

A chunk the SDK would refuse to apply (a delta of a part never started, output for an
unknown tool call) raises ``StreamError``, so an ordering bug still fails a feature test.
"""

from __future__ import annotations

import copy
import json
from typing import Any

FINAL_TOOL_STATES = ("output-available", "output-error")


class StreamError(ValueError):
    """A chunk that cannot apply to the message built so far."""


def merged(base: Any, extra: Any) -> Any:
    """The SDK's ``mergeObjects``: nested objects merge, anything else is replaced."""
    if not isinstance(base, dict) or not isinstance(extra, dict):
        return copy.deepcopy(extra)
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


def _present(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _partial_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class MessageBuilder:
    """One assistant message built chunk by chunk; continues ``last`` when it is an assistant
    message with the same id (a resumed or continued reply), as ``useChat`` does."""

    def __init__(self, last: dict[str, Any] | None = None) -> None:
        keep = last is not None and last.get("role") == "assistant"
        self.message: dict[str, Any] = copy.deepcopy(last) if keep else {"id": "", "role": "assistant", "parts": []}
        self.text: dict[str, dict[str, Any]] = {}
        self.reasoning: dict[str, dict[str, Any]] = {}
        self.partial_tools: dict[str, dict[str, Any]] = {}
        self.finish_reason: str | None = None

    @property
    def parts(self) -> list[dict[str, Any]]:
        return self.message["parts"]

    def _step_parts(self) -> list[dict[str, Any]]:
        starts = [i for i, p in enumerate(self.parts) if p["type"] == "step-start"]
        return self.parts[starts[-1] + 1:] if starts else self.parts

    def _tool(self, call_id: str) -> dict[str, Any]:
        for part in [*self._step_parts(), *reversed(self.parts)]:
            if _is_tool(part) and part.get("toolCallId") == call_id:
                return part
        raise StreamError(f'no tool invocation for tool call id "{call_id}"')

    def _update_tool(self, call_id: str, name: str, state: str, *, dynamic: bool = False,
                     existing: dict[str, Any] | None = None, **fields: Any) -> None:
        part = existing or next((p for p in self._step_parts() if p.get("toolCallId") == call_id and (
            p["type"] == "dynamic-tool" if dynamic else p["type"].startswith("tool-"))), None)
        if part is None:
            part = {"type": "dynamic-tool", "toolName": name} if dynamic else {"type": f"tool-{name}"}
            part["toolCallId"] = call_id
            self.parts.append(part)
        elif not dynamic and part["type"] != "dynamic-tool":
            part["type"] = f"tool-{name}"
        part["state"] = state
        metadata = fields.pop("providerMetadata", None)
        for key in ("input", "output", "errorText", "rawInput", "preliminary"):
            part.pop(key, None)
        part.update(_present(**fields))
        if metadata is not None:
            part["resultProviderMetadata" if state in FINAL_TOOL_STATES else "callProviderMetadata"] = metadata

    def apply(self, chunk: dict[str, Any]) -> None:  # noqa: C901 - one branch per chunk type, as the SDK's
        kind = chunk["type"]
        if kind == "start":
            if chunk.get("messageId") is not None and chunk["messageId"] != self.message["id"] and self.message["id"]:
                self.__init__()  # another message: start over, as readUIMessageStream does
            if chunk.get("messageId") is not None:
                self.message["id"] = chunk["messageId"]
            self._metadata(chunk.get("messageMetadata"))
        elif kind in ("finish", "message-metadata"):
            self.finish_reason = chunk.get("finishReason") or self.finish_reason
            self._metadata(chunk.get("messageMetadata"))
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "finish-step":
            self.text, self.reasoning = {}, {}
        elif kind in ("text-start", "reasoning-start"):
            part = {"type": kind.removesuffix("-start"), **({"id": chunk["id"]} if kind == "reasoning-start" else {}),
                    "text": "", **_present(providerMetadata=chunk.get("providerMetadata")), "state": "streaming"}
            (self.text if kind == "text-start" else self.reasoning)[chunk["id"]] = part
            self.parts.append(part)
        elif kind in ("text-delta", "reasoning-delta", "text-end", "reasoning-end"):
            active = self.text if kind.startswith("text") else self.reasoning
            part = active.get(chunk["id"])
            if part is None:
                raise StreamError(f'{kind} for a part never started: "{chunk["id"]}"')
            if kind.endswith("-delta"):
                part["text"] += chunk["delta"]
            else:
                part["state"] = "done"
                del active[chunk["id"]]
            if chunk.get("providerMetadata") is not None:
                part["providerMetadata"] = chunk["providerMetadata"]
        elif kind == "file":
            self.parts.append({"type": "file", "mediaType": chunk["mediaType"], "url": chunk["url"],
                               **_present(providerMetadata=chunk.get("providerMetadata"))})
        elif kind in ("source-url", "source-document"):
            self.parts.append({k: v for k, v in chunk.items() if v is not None})
        elif kind.startswith("tool-"):
            self._apply_tool(kind, chunk)
        elif kind in ("error", "abort"):
            pass  # valid protocol: the caller lists it (useChat would show the error)
        elif kind.startswith("data-"):
            if chunk.get("transient"):
                return
            same = next((p for p in self.parts if chunk.get("id") is not None and p["type"] == kind
                         and p.get("id") == chunk["id"]), None)
            if same is not None:
                same["data"] = copy.deepcopy(chunk.get("data"))
            else:
                self.parts.append(copy.deepcopy(chunk))
        else:
            raise StreamError(f"unknown chunk type {kind!r}")

    def _apply_tool(self, kind: str, chunk: dict[str, Any]) -> None:
        call_id = chunk["toolCallId"]
        common = {"providerExecuted": chunk.get("providerExecuted"), "providerMetadata": chunk.get("providerMetadata"),
                  "title": chunk.get("title")}
        if kind == "tool-input-start":
            self.partial_tools[call_id] = {"text": "", "toolName": chunk["toolName"], "dynamic": chunk.get("dynamic")}
            self._update_tool(call_id, chunk["toolName"], "input-streaming", dynamic=bool(chunk.get("dynamic")),
                              **common)
        elif kind == "tool-input-delta":
            partial = self.partial_tools.get(call_id)
            if partial is None:
                raise StreamError(f'tool-input-delta for a tool call never started: "{call_id}"')
            partial["text"] += chunk["inputTextDelta"]
            self._update_tool(call_id, partial["toolName"], "input-streaming", dynamic=bool(partial["dynamic"]),
                              input=_partial_json(partial["text"]), rawInput=partial["text"])
        elif kind == "tool-input-available":
            self._update_tool(call_id, chunk["toolName"], "input-available", dynamic=bool(chunk.get("dynamic")),
                              input=chunk.get("input"), **common)
        elif kind == "tool-input-error":
            existing = next((p for p in self._step_parts() if _is_tool(p) and p.get("toolCallId") == call_id), None)
            dynamic = existing["type"] == "dynamic-tool" if existing else bool(chunk.get("dynamic"))
            given = {"input": chunk.get("input")} if dynamic else {"rawInput": chunk.get("input")}
            self._update_tool(call_id, chunk["toolName"], "output-error", dynamic=dynamic,
                              errorText=chunk.get("errorText"), **given, **common)
        elif kind in ("tool-output-available", "tool-output-error"):
            part = self._tool(call_id)
            name = part["toolName"] if part["type"] == "dynamic-tool" else part["type"].removeprefix("tool-")
            final = {"output": chunk.get("output"), "preliminary": chunk.get("preliminary")} \
                if kind == "tool-output-available" else {"errorText": chunk.get("errorText"),
                                                         "rawInput": part.get("rawInput")}
            self._update_tool(call_id, name, kind.removeprefix("tool-"), dynamic=part["type"] == "dynamic-tool",
                              existing=part, input=part.get("input"), **final,
                              **{**common, "title": part.get("title")})
        elif kind == "tool-approval-request":
            part = self._tool(call_id)
            part["state"] = "approval-requested"
            part["approval"] = {"id": chunk["approvalId"]}
        elif kind == "tool-output-denied":
            self._tool(call_id)["state"] = "output-denied"
        else:
            raise StreamError(f"unknown chunk type {kind!r}")

    def _metadata(self, metadata: Any) -> None:
        if metadata is not None:
            current = self.message.get("metadata")
            self.message["metadata"] = merged(current, metadata) if current is not None else copy.deepcopy(metadata)


def _is_tool(part: dict[str, Any]) -> bool:
    return part["type"].startswith("tool-") or part["type"] == "dynamic-tool"


def build_message(chunks: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The assistant message the chunks make (continuing the history's last assistant message)."""
    builder = MessageBuilder(messages[-1] if messages else None)
    for chunk in chunks:
        builder.apply(chunk)
    return builder.message
