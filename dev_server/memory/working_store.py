"""Where an agent's working memory document lives, and the only way it is written.

The document belongs to a thread (scope ``thread``) or to the thread's resource (scope
``resource``). The agent's tool (``dev_server.memory.working_memory``), Observational Memory's
``manageWorkingMemory`` and the Studio all write through ``WorkingMemoryStore``, which
checks every update against the format and schema (``WorkingMemoryInvalid`` leaves the
stored document unchanged). It answers the kernel's ``WorkingMemoryDocument`` port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from dev_server.kernel.messages import Thread
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.storage.conversations import ConversationStore


class WorkingMemoryOff(Exception):
    """Working memory is not enabled for this memory (or has nowhere to live)."""


class WorkingMemoryStore:
    """The document of one memory's options (``options`` None: working memory is off)."""

    def __init__(self, options: WorkingMemoryOptions | None, store: ConversationStore) -> None:
        self.options = options
        self.store = store

    @property
    def scope(self) -> Literal["thread", "resource"]:
        return self.options.scope if self.options is not None else "thread"

    @property
    def schema(self) -> Mapping[str, Any] | None:
        return self.options.schema if self.options is not None else None

    def place(self, thread: Thread | None, resource_id: str | None) -> dict[str, str] | None:
        """Where the document lives: ``{"thread_id": ...}`` or ``{"resource_id": ...}`` (the
        store's keywords). ``thread`` is a stored thread or None; resource scope uses the
        thread's own resource when there is one (the Studio may name it by the agent alias).
        None when working memory is off or there is nowhere to keep the document."""
        if self.options is None:
            return None
        if self.options.scope == "thread":
            return {"thread_id": thread.id} if thread is not None else None
        resource = thread.resource_id if thread is not None else resource_id
        return {"resource_id": resource} if resource else None

    async def read(self, thread: Thread | None, resource_id: str | None = None) -> str | None:
        place = self.place(thread, resource_id)
        return await self.store.working_memory(**place) if place else None

    def _place(self, thread: Thread | None, resource_id: str | None) -> dict[str, str]:
        place = self.place(thread, resource_id)
        if place is None:
            raise WorkingMemoryOff("working memory is off, or has no thread or resource to live in")
        return place

    async def replace(self, text: str, thread: Thread | None, resource_id: str | None = None) -> str:
        """Replace the document (checked against the format and schema: ``WorkingMemoryInvalid``);
        returns what was stored."""
        place = self._place(thread, resource_id)
        assert self.options is not None  # _place: working memory is on
        text = self.options.checked(text)
        await self.store.set_working_memory(text, **place)
        return text

    async def apply_update(self, update: Any, thread: Thread | None, resource_id: str | None = None) -> str:
        """The model's update (``WorkingMemoryOptions.apply``: Markdown replaced, JSON merged
        and checked) applied to the *stored* document under the write lock, so two turns
        updating one resource's memory at once both land; ``WorkingMemoryInvalid`` leaves it
        unchanged. Returns what was stored."""
        place = self._place(thread, resource_id)
        options = self.options
        assert options is not None  # _place: working memory is on
        if options.schema is None:  # Markdown: the update replaces the document, nothing to read first
            return await self.replace(options.apply(None, update), thread, resource_id)
        return await self.store.change_working_memory(lambda current: options.apply(current, update), **place)
