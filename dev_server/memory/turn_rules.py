"""What a turn may write to a thread, decided from what the client sent and what is stored.

The invariant: **no acknowledged message is deleted except by an explicit edit or
regenerate from a client whose request shows it has seen what it replaces**, and a retry
writes nothing. The rules, for the last message of the request (the *anchor*), when the
thread already holds its id:

- **Retry** (``submit-message``, the same content): nothing is written. When the anchor's
  reply is stored (the assistant message right after it, with the messages of the same run
  that continue it: ``answer``), the turn answers with that reply
  (``TurnWrites.replay``) instead of calling the model; a client that lost its connection,
  or failed over to another replica, gets the reply it missed. Without a stored reply the
  model answers the anchor again, and so it does when the stored reply is the thread's last
  message and never finished (its process died, or the provider failed mid-reply): that
  partial reply is replaced by a whole one.
- **Edit** (``submit-message`` with ``messageId`` naming the anchor, new content: the AI SDK's
  ``sendMessage({messageId})``): the anchor takes the new content and what followed it is
  deleted; the client's history ended at that message, which it chose to rewrite.
- **Regenerate** (``regenerate-message``): with ``messageId`` naming the anchor or a message
  stored after it, what followed the anchor is deleted. Without ``messageId`` (the SDK's
  ``regenerate()``) that is allowed only while nothing but the anchor's own reply follows it:
  a later user message is another turn this client may never have seen, so the request is a
  409 and nothing changes.
- The same id with other content and no ``messageId`` is no edit the client asked for: 409.

Everything here is plain code that runs inside the turn's write transaction
(``ConversationStore.record_turn``), against what that transaction reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from dev_server.kernel.errors import Conflict
from dev_server.kernel.messages import Message

Trigger = Literal["submit-message", "regenerate-message"]


@dataclass(frozen=True)
class TurnIntent:
    """What the client asked for: the AI SDK's ``trigger`` and ``messageId`` (the message
    being edited, or the reply being regenerated). The default is a plain new message."""

    trigger: Trigger = "submit-message"
    message_id: str | None = None

    @property
    def regenerate(self) -> bool:
        return self.trigger == "regenerate-message"


@dataclass(frozen=True)
class AnchorDecision:
    """``replace``: the anchor, its content brought up to date, what follows deleted;
    ``replay``: the stored reply a retry is answered with (nothing is written)."""

    replace: Message | None = None
    replay: Message | None = None


# (stored anchor, the messages after it in order, at most a few) for an id of this thread
Following = Callable[[str], tuple[Message, Sequence[Message]]]


def same_content(stored: Message, incoming: Message) -> bool:
    """What the client typed (parts, and their flat text) is what is stored; metadata and
    server-side bookkeeping in the content do not count (a part's ``metadata`` and
    ``providerMetadata``: Observational Memory's seal and token estimates)."""
    return (_typed(stored.content.get("parts")), stored.content.get("content")) == (
        _typed(incoming.content.get("parts")), incoming.content.get("content"))


def _typed(parts: Any) -> Any:
    if not isinstance(parts, list):
        return parts
    return [{k: v for k, v in p.items() if k not in ("metadata", "providerMetadata")} if isinstance(p, dict) else p
            for p in parts]


def decide_anchor(anchor: Message, intent: TurnIntent, following: Following) -> AnchorDecision:
    """The rules of the module docstring for an anchor whose id the thread holds."""
    stored, after = following(anchor.id)
    changed = not same_content(stored, anchor)
    reply, pieces = answer(after)
    later_turn = any(m.role == "user" for m in after)
    if intent.regenerate:
        named = intent.message_id
        if named is not None and named != anchor.id and not any(m.id == named for m in after):
            raise Conflict(f"Message {named} is not stored after message {anchor.id}; nothing was regenerated",
                           code="REGENERATE_TARGET_NOT_FOUND")
        if named is None and later_turn:
            raise Conflict(f"The thread has turns after message {anchor.id} that this request does not show;"
                           " name the reply to regenerate in messageId", code="THREAD_MOVED_ON")
        return AnchorDecision(replace=anchor)
    if intent.message_id == anchor.id and changed:
        return AnchorDecision(replace=anchor)  # sendMessage({messageId}): an edit
    if changed:
        raise Conflict(f"Message {anchor.id} is already stored with other content; to edit it, send its id"
                       " as messageId", code="MESSAGE_ID_REUSED")
    if reply is not None and len(after) == pieces and _unfinished(reply):
        return AnchorDecision(replace=anchor)
    return AnchorDecision(replay=reply)


def answer(after: Sequence[Message]) -> tuple[Message | None, int]:
    """The anchor's stored reply and how many messages it takes: the assistant message right
    after the anchor, joined with the messages of the same run that continue it (a reply
    split in the middle of its turn, ``dev_server.kernel.processors.ReplySoFar``), so a
    retry is told the whole reply under its first message's id."""
    if not after or after[0].role != "assistant":
        return None, 0
    run = _metadata(after[0]).get("runId")
    pieces = [after[0]]
    for message in after[1:]:
        if message.role != "assistant" or run is None or _metadata(message).get("runId") != run:
            break
        pieces.append(message)
    if len(pieces) == 1:
        return pieces[0], 1
    parts: list[dict[str, Any]] = []
    for piece in pieces:
        more = piece.content.get("parts") or []
        if parts and more and more[0].get("type") != "step-start":
            parts.append({"type": "step-start"})
        parts.extend(more)
    last = pieces[-1]
    content = {**last.content, "parts": parts, "content": "".join(p.content.get("content") or "" for p in pieces)}
    return replace(pieces[0], content=content, stored_digest=None), len(pieces)


def _metadata(message: Message) -> dict[str, Any]:
    metadata = message.content.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _unfinished(reply: Message) -> bool:
    metadata = reply.content.get("metadata") or {}
    return bool(metadata.get("interrupted") or metadata.get("error"))
