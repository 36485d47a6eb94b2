"""Which stored messages Observational Memory has not observed yet, and what leaves the window.

A message is observed when any of the marks of docs/observational-memory.md#record says so:

* its id is in the record's ``observed_message_ids`` (sync observation's id set);
* it carries a completed ``data-om-observation-end`` marker: then only the parts after the
  last end marker are unobserved (a virtual copy of the message holds just those), while a
  start marker with no end or failure after it means "in progress": the whole message
  counts as unobserved;
* otherwise the cursor decides: ``created_at > last_observed_at`` is unobserved.

``system`` messages are never observable. What the model sees is the unobserved messages;
after an observation ``drop_observed`` removes the observed ones again, keeping a retention
floor of tokens (none without async buffering) and the turn's own input.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

from dev_server.kernel.messages import Message
from dev_server.storage.om_records import OMRecord

START = "data-om-observation-start"
END = "data-om-observation-end"
FAILED = "data-om-observation-failed"
MARKERS = frozenset({START, END, FAILED})


def _marker_state(parts: Sequence[dict[str, Any]]) -> tuple[bool, int | None]:
    """(in progress, index of the last end marker)."""
    last_end: int | None = None
    open_start = False
    for index, part in enumerate(parts):
        kind = part.get("type")
        if kind == START:
            open_start = True
        elif kind in (END, FAILED):
            open_start = False
            if kind == END:
                last_end = index
    return open_start, last_end


def _has_content(parts: Sequence[dict[str, Any]]) -> bool:
    return any(not str(p.get("type", "")).startswith("data-") and p.get("type") != "step-start" for p in parts)


_RECORD = object()


def unobserved(messages: Sequence[Message], record: OMRecord | None, *, cursor: Any = _RECORD) -> list[Message]:
    """``cursor``: the time cursor to apply instead of the record's (a thread's own in
    resource scope, where the record's is the newest of all threads)."""
    observed_ids = set(record.observed_message_ids or ()) if record else set()
    if cursor is _RECORD:
        cursor = record.last_observed_at if record else None
    found: list[Message] = []
    for message in messages:
        if message.role == "system" or message.id in observed_ids:
            continue
        parts = message.content.get("parts") or []
        in_progress, last_end = _marker_state(parts)
        if in_progress:
            found.append(message)
        elif last_end is not None:
            rest = [p for p in parts[last_end + 1:] if p.get("type") not in MARKERS]
            if _has_content(rest):
                found.append(replace(message, content={**message.content, "parts": rest}, stored_digest=None))
        elif cursor is None or message.created_at > cursor:
            found.append(message)
    return found


def has_markers(message: Message) -> bool:
    """``message`` carries an observation marker: the cursor alone does not say whether it is observed."""
    return any(part.get("type") in MARKERS for part in message.content.get("parts") or ())


def has_incomplete_tool_calls(messages: Sequence[Message]) -> bool:
    """The newest message waits on a tool call (state ``call``): observing now would split it."""
    if not messages:
        return False
    for part in messages[-1].content.get("parts") or ():
        if part.get("type") == "tool-invocation" and (part.get("toolInvocation") or {}).get("state") in (
                "call", "partial-call"):
            return True
    return False


def drop_observed(messages: Sequence[Message], observed_ids: Collection[str], *, floor: int,
                  preserve: Collection[str], count: Callable[[Message], int],
                  total: int) -> list[Message]:
    """The window after an observation: observed messages removed oldest first, unless that
    would leave fewer than ``floor`` tokens; ``preserve`` (the turn's input) always stays."""
    remaining = total
    dropped: set[str] = set()
    for message in messages:
        if message.id not in observed_ids or message.id in preserve:
            continue
        tokens = count(message)
        if remaining - tokens < floor:
            break
        remaining -= tokens
        dropped.add(message.id)
    return [m for m in messages if m.id not in dropped]
