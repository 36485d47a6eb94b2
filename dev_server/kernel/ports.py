"""Ports: the narrow views a memory feature has of storage and of the other features.

History, semantic recall, working memory, titles and Observational Memory each take part
in a turn as processors (``dev_server.kernel.processors``). None of them reaches into
another's internals or into ``dev_server.memory``: each is handed, when its memory is
assembled, the ports below, and the memory (``dev_server.memory``) is the one place that
knows what answers them (the conversation store, the semantic index, the working memory
document, the process's background work). A port names only what its features call, so a
test can hand a feature a few lines instead of a database. The clock every feature reads
time from is ``dev_server.kernel.clock.Clock``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from dev_server.kernel.events import DataPart, Durable
from dev_server.kernel.messages import Message, Thread


class ThreadMessages(Protocol):
    """The messages (and threads) a feature reads and writes: the conversation store's
    methods of the same names (``dev_server.storage.conversations``)."""

    async def get_thread(self, thread_id: str) -> Thread | None: ...

    async def get_message(self, message_id: str) -> Message | None: ...

    async def recent_messages(self, thread_id: str, limit: int | None) -> list[Message]: ...

    async def messages_since(self, thread_id: str, since: str | None) -> list[Message]: ...

    async def window_since(self, thread_id: str, since: str | None, *,
                           advance: bool = True) -> tuple[list[Message], dict[int, Any]]: ...

    async def messages_around(self, thread_id: str, anchor_id: str, *, after: bool,
                              limit: int) -> list[Message] | None: ...

    async def page_messages(self, thread_id: str, *, page: int = 0, per_page: int | None = 40,
                            direction: Literal["ASC", "DESC"] = "DESC", roles: Sequence[str] | None = None,
                            after: str | None = None, before: str | None = None, after_inclusive: bool = True,
                            before_inclusive: bool = True) -> tuple[list[Message], int]: ...

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> list[str]: ...

    async def update_thread(self, thread_id: str, *, title: str | None = None,
                            metadata: dict[str, Any] | None = None,
                            resource_id: str | None = None) -> Thread | None: ...


class ResourceConversations(ThreadMessages, Protocol):
    """Reads across all the threads of a resource, as Observational Memory needs them in
    resource scope and for its recall tool: the threads newest first, the messages newer
    than each thread's own cursor (an ISO time at ``cursor_path`` in the thread's metadata),
    and a text search with each hit's thread title."""

    async def list_threads(self, *, resource_id: str | None = None, order_by: Literal["createdAt", "updatedAt"] = ...,
                           page: int = 0, per_page: int | None = 100) -> tuple[list[Thread], int]: ...

    async def resource_messages_after(self, resource_id: str, exclude_thread_id: str,
                                      cursor_path: str) -> list[Message]: ...

    async def search_messages(self, text: str, *, resource_id: str | None, thread_id: str | None,
                              limit: int) -> list[tuple[Message, str]]: ...


class ThreadTitles(ThreadMessages, Protocol):
    """The threads, and where a generated title goes: only onto a thread still in
    ``resource_id`` whose title still starts with ``placeholder`` (or is empty); True when
    it was written."""

    async def set_title_if_untitled(self, thread_id: str, resource_id: str, title: str,
                                    placeholder: str) -> bool: ...


@dataclass(frozen=True)
class SemanticHit:
    """A stored message found by meaning."""

    message: Message
    score: float  # cosine similarity, -1..1 (1 = same direction)
    thread_title: str = ""


class SemanticSearchUnavailable(Exception):
    """No vector search here: no embedder configured for this memory, or the embedder
    failed (provider down). Callers fall back (FTS) or go on without recall."""


class SemanticSearch(Protocol):
    """Search by meaning over stored messages; ``SemanticSearchUnavailable`` when there is
    no vector search for this memory or its embedder failed."""

    async def search(self, query: str, *, resource_id: str, thread_id: str | None = None, top_k: int = 4,
                     exclude_ids: Iterable[str] = (), threshold: float | None = None) -> list[SemanticHit]: ...


class WorkingMemoryDocument(Protocol):
    """The working memory document of a thread (or of its resource): read, and changed by
    an update the memory checks (a Markdown replacement, a JSON merge); an update that does
    not fit raises and leaves the stored document as it was."""

    @property
    def scope(self) -> Literal["thread", "resource"]: ...

    @property
    def schema(self) -> Mapping[str, Any] | None: ...

    async def read(self, thread: Thread | None, resource_id: str | None = None) -> str | None: ...

    async def apply_update(self, update: Any, thread: Thread | None, resource_id: str | None = None) -> str: ...


class Emit(Protocol):
    """The part channel into the live stream (``StepContext.emit``, or a background job's
    sink, which keeps what it emits once the reply is gone): durable parts are also kept in
    the reply, or on the one before (``PREVIOUS_REPLY``). Each channel has its own default
    for ``durable``."""

    def __call__(self, part: DataPart, *, durable: Durable = ...) -> None: ...


JobFactory = Callable[[], Awaitable[Any]]


class BackgroundJobs(Protocol):
    """Background work submission (``dev_server.background``): ``factory()`` runs later, one
    job per ``key`` at a time; False when it was not queued. Never blocks, never raises."""

    def submit(self, key: str, factory: JobFactory) -> bool: ...


__all__ = ["BackgroundJobs", "Emit", "JobFactory", "ResourceConversations", "SemanticHit", "SemanticSearch",
           "SemanticSearchUnavailable", "ThreadMessages", "ThreadTitles", "WorkingMemoryDocument"]
