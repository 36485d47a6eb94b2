"""The minimal memory tier: persist every message of a thread, feed the model the last N.

A ``Memory`` is built by an agent's factory (once per process) and attached to the
conversation store by the registry. Per turn it (1) opens the thread inside its resource,
(2) records what the client sent that the thread does not have yet, and (3) reads the
window the model gets from storage, never from the client's copy of the history.

Recording a turn, the last user message is the anchor. A new id is a new message. A known
id means the client re-submitted, edited (``sendMessage({messageId})``) or regenerated
from that message: its content is brought up to date and everything stored after it,
the reply being replaced, is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.storage.conversations import ConversationStore, Message, Thread


class ThreadNotOwned(Exception):
    """The thread exists in another resource; callers answer 404 and reveal nothing."""


@dataclass(frozen=True)
class MemoryOptions:
    last_messages: int | Literal[False] = 10
    semantic_recall: bool = False
    working_memory: bool = False
    generate_title: bool = False

    def window(self, input_count: int) -> int:
        """How many stored messages the model sees: ``last_messages`` of history *before*
        this turn's input, plus the input itself (Mastra's MessageHistory does the same)."""
        history = 0 if self.last_messages is False else max(0, int(self.last_messages))
        return history + max(1, input_count)

    def describe(self) -> dict[str, Any]:
        """The config as Mastra's ``GET /memory/config`` reports it."""
        return {"lastMessages": self.last_messages, "semanticRecall": self.semantic_recall,
                "generateTitle": self.generate_title,
                "workingMemory": {"enabled": self.working_memory},
                "observationalMemory": {"enabled": False}}


class Memory:
    def __init__(self, options: MemoryOptions | None = None) -> None:
        self.options = options or MemoryOptions()
        self._store: ConversationStore | None = None

    def attach(self, store: ConversationStore) -> None:
        self._store = store

    @property
    def store(self) -> ConversationStore:
        if self._store is None:
            raise RuntimeError("memory is not attached to a conversation store")
        return self._store

    async def open_thread(self, thread_id: str, resource_id: str) -> Thread:
        thread = await self.store.ensure_thread(thread_id, resource_id)
        if thread.resource_id != resource_id:
            raise ThreadNotOwned(thread_id)
        return thread

    async def record_turn(self, thread: Thread, incoming: list[Message]) -> list[str]:
        """Store what the thread lacks; returns the ids stored (see the module docstring)."""
        store = self.store
        anchor = incoming[-1]
        known = await store.locate(m.id for m in incoming)
        if any(owner != thread.id for owner in known.values()):
            # An id already used in another thread (a client copying history into a new
            # conversation): store it under a thread-scoped id rather than drop it.
            for message in incoming:
                if known.get(message.id, thread.id) != thread.id:
                    message.id = f"{message.id}@{thread.id}"
            known = await store.locate(m.id for m in incoming)
        known_here = {mid for mid, owner in known.items() if owner == thread.id}
        if anchor.id in known_here:
            await store.replace_message(anchor)
            await store.delete_after(thread.id, anchor.id)
        return await store.append_messages(thread.id, [m for m in incoming if m.id not in known_here])

    async def window(self, thread_id: str, input_count: int = 1) -> list[Message]:
        """The model's view of the thread; ``input_count`` = messages this turn added
        (0 when the client re-submitted, edited or regenerated: the anchor is the input)."""
        return await self.store.recent_messages(thread_id, self.options.window(input_count))

    async def save_reply(self, thread: Thread, reply: Message) -> None:
        await self.store.append_messages(thread.id, [reply])
