"""Client tool outputs: the one change a client may make to a stored assistant message.

When the model calls a client tool the turn stops and the reply is stored with that call
in state ``call``. The next request carries the output, in one of two shapes:

- the gateway (useChat's ``addToolResult``): the assistant message re-sent, last, with the
  tool part in ``output-available`` / ``output-error`` (``ui_to_stored`` makes those
  ``tool-invocation`` parts in state ``result``);
- the studio (client-js's client-tool loop): a ``role: "tool"`` message of ``tool-result``
  parts (``dev_server.api.studio.agent_input``).

``complete_tool_calls`` takes the outputs of the calls the thread has pending, in its last
message (the reply that stopped for them), and nothing else: the stored parts keep their
text, server tool results and metadata whatever the client sent. Every pending call needs
an output, and an output for a call that is not pending there is refused (400, nothing
written). The completed message replaces the client's input as a ``ContinuedReply``: the
turn then continues that same message (as useChat shows it: the continuation's ``start``
chunk carries its id, so the client appends to it), without a new user message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dev_server.kernel.convert import flat_text
from dev_server.kernel.errors import BadRequest
from dev_server.kernel.messages import Message, Thread
from dev_server.storage.conversations import ConversationStore


class ContinuedReply(Message):
    """A stored assistant message whose pending client tool calls now have their outputs."""


@dataclass(frozen=True)
class ToolOutput:
    result: Any
    is_error: bool = False


def carries_tool_outputs(message: Message) -> bool:
    """Whether this (last) input message is a client's tool output rather than a new turn."""
    return message.role == "tool" or (message.role == "assistant" and bool(client_outputs(message)))


def client_outputs(message: Message) -> dict[str, ToolOutput]:
    """The tool outputs a client message carries, by tool call id."""
    outputs: dict[str, ToolOutput] = {}
    for part in message.content.get("parts") or ():
        if part.get("type") == "tool-invocation":
            invocation = part.get("toolInvocation") or {}
            if invocation.get("state") == "result" and isinstance(invocation.get("toolCallId"), str):
                outputs[invocation["toolCallId"]] = ToolOutput(invocation.get("result"),
                                                               bool(invocation.get("isError")))
        elif part.get("type") == "tool-result" and isinstance(part.get("toolCallId"), str):
            outputs[part["toolCallId"]] = ToolOutput(part.get("result", part.get("output")),
                                                     bool(part.get("isError")))
    return outputs


async def complete_tool_calls(store: ConversationStore, thread: Thread, incoming: list[Message]) -> bool:
    """If the last incoming message carries tool outputs: check them against the calls the
    thread has pending, store them, and replace ``incoming`` by the ``ContinuedReply``.
    False (nothing done) for an ordinary turn; ``BadRequest`` for outputs that fit nothing."""
    if not incoming or not carries_tool_outputs(incoming[-1]):
        return False
    outputs = client_outputs(incoming[-1])
    if not outputs:  # a "tool" message with no tool-result part in it
        raise BadRequest("A tool message must carry tool results (tool-result parts with a toolCallId)",
                         [{"field": "messages", "message": "no tool result in the tool message"}])
    last = (await store.recent_messages(thread.id, 1)) if thread.created_at else []
    target = last[-1] if last and last[-1].role == "assistant" else None
    parts = [dict(p) for p in (target.content.get("parts") or ())] if target else []
    calls = {(p.get("toolInvocation") or {}).get("toolCallId"): p for p in parts if p.get("type") == "tool-invocation"}
    pending = {call_id for call_id, p in calls.items() if p["toolInvocation"].get("state") == "call"}
    unknown = sorted(set(outputs) - set(calls)) or ([] if pending else sorted(outputs))
    if unknown:
        raise BadRequest(f"No pending tool call {', '.join(map(repr, unknown))} in thread {thread.id}: a tool "
                         "result must answer a call of the thread's last reply that still waits for its output",
                         [{"field": "messages", "message": "unknown or already answered toolCallId"}])
    waiting = sorted(pending - set(outputs))
    if waiting:
        raise BadRequest(f"Tool call {', '.join(map(repr, waiting))} still waits for its output; send the outputs "
                         "of all pending calls together", [{"field": "messages", "message": "missing tool output"}])
    for call_id in pending:
        invocation = {**calls[call_id]["toolInvocation"], "state": "result", "result": outputs[call_id].result}
        if outputs[call_id].is_error:
            invocation["isError"] = True
        calls[call_id]["toolInvocation"] = invocation
    assert target is not None
    content = {**target.content, "parts": parts, "content": flat_text(parts)}
    completed = ContinuedReply(target.id, thread.id, thread.resource_id, "assistant", content, target.created_at,
                               target.type)
    await store.replace_message(completed)
    incoming[:] = [completed]
    return True
