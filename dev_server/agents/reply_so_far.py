"""The reply so far of a turn with memory, as the step's processors see it
(``dev_server.kernel.processors.ReplySoFar``): its parts, the message they would be stored
as, and the split that stores them as a message of their own while the reply goes on as a
new one (Observational Memory splits it where it observes or buffers it mid-turn).

The split-off message is sealed as Mastra seals it (``content.metadata.mastra.sealed``, its last
part's ``metadata.mastra.sealedAt``: ``ReplyParts.seal``), complete (the run's metadata, not
``interrupted``) and keeps the
``createdAt`` the reply had since it was first read or checkpointed; the reply goes on under
a new id, stamped at least 2 ms later (a cursor set 1 ms past the split-off message, as
buffering sets it, must not hide the next one), its text counted in the turn's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol

from dev_server.kernel.clock import parse_iso, to_iso
from dev_server.kernel.loop import ReplyParts
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.processors import StepContext


class SplittableTurn(Protocol):
    """What a split reads and moves on of the runner's ``Turn``."""

    reply: ReplyParts
    reply_id: str
    thread: Thread | None
    step: StepContext
    checkpointed: bool
    reply_created_at: str | None
    not_before: str | None
    split_text: str

    def reply_metadata(self) -> dict[str, Any]: ...


class TurnReplySoFar:
    """``build``: the reply as stored, with the given metadata; ``stamp``: a ``createdAt`` for
    it now; ``store``: writes a split-off message; ``new_id``: the next reply's id."""

    def __init__(self, turn: SplittableTurn, *, build: Callable[[dict[str, Any]], Message],
                 stamp: Callable[[], str], store: Callable[[Message], Awaitable[None]],
                 new_id: Callable[[], str]) -> None:
        self.turn = turn
        self.build, self.stamp, self.store, self.new_id = build, stamp, store, new_id

    @property
    def parts(self) -> list[dict[str, Any]]:
        return self.turn.reply.parts

    def message(self) -> Message | None:
        turn = self.turn
        if not turn.reply.parts or turn.thread is None:
            return None
        turn.reply_created_at = turn.reply_created_at or self.stamp()
        return self.build({k: v for k, v in turn.reply_metadata().items() if k != "interrupted"})  # it is whole

    async def split(self) -> Message | None:
        turn = self.turn
        if not turn.reply.parts or turn.thread is None:
            return None
        turn.reply.seal()
        message = self.message()
        if message is None:
            return None
        metadata = message.content.get("metadata") or {}
        message.content["metadata"] = {**metadata, "mastra": {**(metadata.get("mastra") or {}), "sealed": True}}
        await self.store(message)
        turn.split_text += turn.reply.text
        turn.reply.take()
        turn.reply_id, turn.checkpointed, turn.reply_created_at = self.new_id(), False, None
        turn.not_before = to_iso(parse_iso(message.created_at) + timedelta(milliseconds=2))
        turn.step.progress.clear()  # the split-off message holds this turn's tool rounds now
        turn.step.split = True
        return message
