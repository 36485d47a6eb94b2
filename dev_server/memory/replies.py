"""Storing an agent's reply: the final save, the checkpoints while it streams, the part of
it split off in the middle of a turn (``dev_server.kernel.processors.ReplySoFar``), and a
reply rebuilt from a dead stream (``dev_server.agents.salvage``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dev_server.kernel.messages import Message, Thread
from dev_server.om.tokens.counting import count_message
from dev_server.storage.conversations import ConversationStore


class Replies:
    """``count_tokens``: a reply that no processor counted (a salvaged one) is stored with
    its token estimates; ``saved`` is told when a reply was written."""

    def __init__(self, store: ConversationStore, *, count_tokens: bool, saved: Callable[[], None]) -> None:
        self.store = store
        self.count_tokens = count_tokens
        self.saved = saved

    async def save(self, thread: Thread, reply: Message) -> None:
        reply.resource_id = thread.resource_id
        await self.store.append_messages(thread.id, [reply])
        self.saved()

    async def upsert(self, thread: Thread, reply: Message) -> None:
        """Store the reply, or overwrite the copy of it already stored under the same id:
        a reply is checkpointed while it streams, and its final save replaces the last
        checkpoint instead of adding a second message."""
        reply.resource_id = thread.resource_id
        if not await self.store.append_messages(thread.id, [reply]):
            await self.store.replace_message(reply)
        self.saved()

    async def add_to_previous(self, thread: Thread, parts: Sequence[dict[str, Any]]) -> bool:
        """Append ``parts`` to the thread's newest stored reply (the one before the turn's
        own, when called before it is saved); False when the thread has none."""
        return await self.store.add_parts_to_last_reply(thread.id, parts)

    async def split(self, thread: Thread, message: Message) -> None:
        """The reply so far, stored as a message of its own (over its checkpoint, if one was
        written), with its token estimates: the reply goes on as another message, and a
        later turn counts this one from the cache."""
        if self.count_tokens:
            count_message(message)
        await self.upsert(thread, message)

    async def salvage(self, thread_id: str, reply: Message, answered_id: str) -> bool:
        """A reply rebuilt from a dead stream's frames, stored after the message it answers
        unless the thread already has it or another answer."""
        if self.count_tokens:
            count_message(reply)
        stored = await self.store.salvage_reply(thread_id, reply, answered_id)
        if stored:
            self.saved()
        return stored
