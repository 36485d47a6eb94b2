"""Recording a turn's input: what the client sent that the thread does not have yet.

History belongs to the server. From a client only ``user`` messages are stored; an
``assistant`` message is accepted only if its id is already stored in that thread (and is
then left as stored); a ``system`` message from a client is never stored. Of what remains,
the last message, when it is a user message, is the anchor: a new id is a new message; a
known id is a retry (nothing is written; the stored reply answers it), an edit
(``sendMessage({messageId})``) or a regenerate, whose rules (``dev_server.memory.turn_rules``) say
when what was stored after the anchor may be deleted. All of that is one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from dev_server.kernel.errors import invalid
from dev_server.kernel.messages import Message, Thread
from dev_server.memory.threads import ThreadNotOwned
from dev_server.memory.tool_results import complete_tool_calls
from dev_server.memory.turn_rules import AnchorDecision, TurnIntent, decide_anchor
from dev_server.om.tokens.counting import count_message
from dev_server.storage.conversations import ConversationStore, Following, TurnWrites


@dataclass(frozen=True)
class RecordedTurn:
    """What a turn's record did: the ids it stored, and for a retried turn whose reply is
    stored, that reply (the turn answers with it and calls no model)."""

    stored: list[str]
    replay: Message | None = None


class TurnRecorder:
    """Writes a turn's input. ``count_tokens``: messages are stored with their token
    estimates (Observational Memory counts them from the cache); ``saved`` is told when
    messages were written (the semantic indexer embeds them soon)."""

    def __init__(self, store: ConversationStore, *, count_tokens: bool, saved: Callable[[], None]) -> None:
        self.store = store
        self.count_tokens = count_tokens
        self.saved = saved

    async def record(self, thread: Thread, incoming: list[Message], intent: TurnIntent = TurnIntent()) -> RecordedTurn:
        """Store what the thread lacks, by the rules of the module docstring and
        ``dev_server.memory.turn_rules``, in one transaction; returns the ids stored and, for a
        retried turn, the stored reply to answer with. A client's output for a pending
        client tool call is no new turn: ``dev_server.memory.tool_results`` stores it instead."""
        if await complete_tool_calls(self.store, thread, incoming):
            return RecordedTurn([])
        resource_id = thread.resource_id
        if self.count_tokens:  # stored with their token estimates: no turn counts them again
            for message in incoming:
                count_message(message)

        def plan(stored: Thread, known: dict[str, tuple[str, str]], following: Following) -> TurnWrites:
            if stored.resource_id != resource_id:  # created elsewhere since the thread was opened
                raise ThreadNotOwned(stored.id)
            here = {mid: role for mid, (owner, role) in known.items() if owner == stored.id}
            accepted = []
            for message in incoming:
                if message.id in here:
                    if here[message.id] == message.role:  # a known message keeps its role
                        accepted.append(message)
                elif message.role == "user":
                    if message.id in known:
                        # An id already used in another thread (a client copying history into
                        # a new conversation): store it under a thread-scoped id, not drop it.
                        message.id = f"{message.id}@{stored.id}"
                    accepted.append(message)
            if not any(m.role == "user" for m in accepted):
                raise invalid("body", "messages", "the turn has no user message")
            for message in accepted:
                message.resource_id = stored.resource_id
            anchor = accepted[-1]
            decision = AnchorDecision()
            if anchor.role == "user" and anchor.id in here:
                named = intent.message_id
                if named is not None and f"{named}@{stored.id}" in here:  # the thread-scoped copy's id
                    named = f"{named}@{stored.id}"
                decision = decide_anchor(anchor, replace(intent, message_id=named), following)
            if decision.replay is not None:
                return TurnWrites(replay=decision.replay)
            return TurnWrites(decision.replace, [m for m in accepted if m.role == "user" and m.id not in here])

        _, writes = await self.store.record_turn(thread, incoming, plan)
        if writes.replay is None:
            self.saved()
        return RecordedTurn([m.id for m in writes.append], writes.replay)
