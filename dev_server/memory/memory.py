"""An agent's memory: its processors and its thread rules, assembled once from its options.

A ``Memory`` is built by the registry, once per process, from the agent's options (with
the process's settings applied: ``dev_server.memory.overrides``) and everything it needs:
the conversation store, the agent's id and own resource, the process's background work and
semantic index. Nothing is set on it afterwards. Per turn it (1) opens the thread inside
its resource (``dev_server.memory.threads``), (2) records what the client sent that the
thread does not have yet (``dev_server.memory.turn_records``), and (3) gives the runner its
processors (``dev_server.memory.assembly``), which read what the model sees from storage,
never from the client's copy; then it stores the reply (``dev_server.memory.replies``).
The Studio's routes reach its working memory, its search and its Observational Memory
through it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.ports import BackgroundJobs, SemanticHit
from dev_server.kernel.processors import Processor, SpanOpener, no_span
from dev_server.memory.assembly import assemble
from dev_server.memory.om_wiring import OMParts
from dev_server.memory.options import MemoryOptions
from dev_server.memory.replies import Replies
from dev_server.memory.threads import AgentThreads, ThreadNotOwned
from dev_server.memory.titles import set_title
from dev_server.memory.turn_records import RecordedTurn, TurnRecorder
from dev_server.memory.turn_rules import TurnIntent
from dev_server.memory.vector_search import VectorSearch
from dev_server.memory.working_store import WorkingMemoryOff, WorkingMemoryStore
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.manual import ManualResult
from dev_server.storage.conversations import ConversationStore

if TYPE_CHECKING:
    from dev_server.recall.service import SemanticIndex

__all__ = ["Memory", "MemoryOptions", "RecordedTurn", "ThreadNotOwned", "WorkingMemoryOff"]


class Memory:
    def __init__(self, options: MemoryOptions, store: ConversationStore, *, agent_id: str | None = None,
                 agent_resource: str | None = None, background: BackgroundJobs | None = None,
                 semantic_index: SemanticIndex | None = None) -> None:
        """``agent_id``: the agent whose threads this memory creates, and whose own resource
        (``agent_resource``, e.g. ``ai-chat``) holds its gateway conversations;
        ``background``: the process's background work, where processors queue what the reply
        must not wait for; ``semantic_index``: the process's vector search, when this
        memory searches by meaning."""
        self.options = options
        self.store = store
        self.background = background
        self.vectors = VectorSearch(semantic_index)
        self.threads = AgentThreads(store, agent_id, agent_resource)
        counted = options.om is not None  # OM counts tokens from the estimates stored with each message
        self.turns = TurnRecorder(store, count_tokens=counted, saved=self.vectors.saved)
        self.replies = Replies(store, count_tokens=counted, saved=self.vectors.saved)
        self.working = WorkingMemoryStore(options.working, store)
        self.om = OMParts.build(options.om, store, background, self.working if options.working else None,
                                agent_id=agent_id, memory=self) if options.om is not None else None
        self.processors: tuple[Processor, ...] = assemble(options, store, om=self.om, search=self.vectors,
                                                          working=self.working, background=background)

    # -- a turn ------------------------------------------------------------------------

    async def open_thread(self, thread_id: str, resource_id: str) -> Thread:
        return await self.threads.open(thread_id, resource_id)

    async def ensure_thread(self, thread_id: str, resource_id: str) -> Thread:
        return await self.threads.ensure(thread_id, resource_id)

    async def record_turn(self, thread: Thread, incoming: list[Message],
                          intent: TurnIntent = TurnIntent()) -> RecordedTurn:
        return await self.turns.record(thread, incoming, intent)

    async def save_reply(self, thread: Thread, reply: Message) -> None:
        await self.replies.save(thread, reply)

    async def upsert_reply(self, thread: Thread, reply: Message) -> None:
        await self.replies.upsert(thread, reply)

    async def add_to_previous_reply(self, thread: Thread, parts: Sequence[dict[str, Any]]) -> bool:
        return await self.replies.add_to_previous(thread, parts)

    async def split_reply(self, thread: Thread, message: Message) -> None:
        await self.replies.split(thread, message)

    async def salvage_reply(self, thread_id: str, reply: Message, answered_id: str) -> bool:
        return await self.replies.salvage(thread_id, reply, answered_id)

    async def set_title(self, thread_id: str, resource_id: str, title: str) -> bool:
        return await set_title(self.store, thread_id, resource_id, title)

    # -- what the Studio reaches -------------------------------------------------------

    @property
    def semantic_index(self) -> SemanticIndex | None:
        return self.vectors.index

    @property
    def uses_vectors(self) -> bool:
        return self.options.uses_vectors

    async def semantic_search(self, query: str, *, resource_id: str, thread_id: str | None = None,
                              top_k: int = 4, exclude_ids: Iterable[str] = (),
                              threshold: float | None = None) -> list[SemanticHit]:
        """``SemanticSearchUnavailable`` when this memory has no vector search or the embedder failed."""
        return await self.vectors.search(query, resource_id=resource_id, thread_id=thread_id, top_k=top_k,
                                         exclude_ids=exclude_ids, threshold=threshold)

    def working_memory_roles(self) -> tuple[bool, bool]:
        return self.options.working_memory_roles()

    async def get_working_memory(self, thread: Thread | None, resource_id: str | None = None) -> str | None:
        return await self.working.read(thread, resource_id)

    async def update_working_memory(self, text: str, thread: Thread | None, resource_id: str | None = None) -> str:
        return await self.working.replace(text, thread, resource_id)

    async def apply_working_memory_update(self, update: Any, thread: Thread | None,
                                          resource_id: str | None = None) -> str:
        return await self.working.apply_update(update, thread, resource_id)

    def observational_memory(self) -> ObservationEngine | None:
        """The OM engine of this memory, None when OM is off."""
        return self.om.engine if self.om is not None else None

    def _om_parts(self) -> OMParts:
        if self.om is None:
            raise ValueError("Observational Memory is not enabled for this memory")
        return self.om

    async def observe(self, thread_id: str, resource_id: str, *, llm: LLMClient,
                      model: ResolvedModel | str | None = None, messages: list[Message] | None = None,
                      open_span: SpanOpener = no_span) -> ManualResult:
        return await self._om_parts().observe(thread_id, resource_id, llm=llm, model=model, messages=messages,
                                              open_span=open_span)

    async def reflect(self, thread_id: str, resource_id: str, *, llm: LLMClient,
                      model: ResolvedModel | str | None = None, open_span: SpanOpener = no_span) -> ManualResult:
        return await self._om_parts().reflect(thread_id, resource_id, llm=llm, model=model, open_span=open_span)
