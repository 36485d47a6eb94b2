"""The minimal memory tier: persist every message of a thread, feed the model the last N.

A ``Memory`` is built by an agent's factory (once per process) and attached to the
conversation store (and its agent's id) by the registry. Per turn it (1) opens the thread
inside its resource, (2) records what the client sent that the thread does not have yet,
and (3) reads the window the model gets from storage, never from the client's copy.

History belongs to the server. From a client only ``user`` messages are stored; an
``assistant`` message is accepted only if its id is already stored in that thread (and is
then left as stored); a ``system`` message from a client is never stored. Of what remains,
the last message, when it is a user message, is the anchor: a new id is a new message; a
known id is a retry (nothing is written; the stored reply answers it), an edit
(``sendMessage({messageId})``) or a regenerate, whose rules (``dev_server.memory.turn_rules``) say
when what was stored after the anchor may be deleted. All of that is one transaction
(``record_turn``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from dev_server.errors import invalid
from dev_server.memory.history import HistoryWindow
from dev_server.memory.titles import DEFAULT_TITLE_PREFIX, TitleGenerator
from dev_server.memory.tool_results import complete_tool_calls
from dev_server.memory.turn_rules import AnchorDecision, TurnIntent, decide_anchor
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.memory.working_memory import WorkingMemory
from dev_server.om.options.config import ObservationalMemoryOptions, describe_om, merged_options, observational_memory_options
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om import manual
from dev_server.om.manual import ManualResult
from dev_server.kernel.processors import no_span
from dev_server.llm import LiteLLMClient
from dev_server.kernel.model import ResolvedModel
from dev_server.om.engine.buffering import Buffering
from dev_server.om.engine.cycle_hooks import HookedCycles
from dev_server.om.engine.model_calls import ModelChoiceCaller
from dev_server.om.processor import BufferOnIdle, ObservationalMemoryStep, TokenEstimates
from dev_server.om.tokens.counting import count_message
from dev_server.recall.hits import SemanticHit, SemanticSearchUnavailable
from dev_server.recall.options import SemanticRecallOptions, semantic_recall_options
from dev_server.recall.processor import SemanticRecallStep
from dev_server.storage.conversations import ConversationStore, Following, TurnWrites
from dev_server.kernel.messages import Message, Thread
from dev_server.om.engine.record_store import om_record_store

if TYPE_CHECKING:
    from dev_server.kernel.processors import InputProcessor, OutputProcessor
    from dev_server.background import BackgroundWork
    from dev_server.recall.service import SemanticIndex


class WorkingMemoryOff(Exception):
    """Working memory is not enabled for this memory (or has nowhere to live)."""


@dataclass(frozen=True)
class RecordedTurn:
    """What ``record_turn`` did: the ids it stored, and for a retried turn whose reply is
    stored, that reply (the turn answers with it and calls no model)."""

    stored: list[str]
    replay: Message | None = None


class ThreadNotOwned(Exception):
    """The thread exists in another resource; callers answer 404 and reveal nothing."""


@dataclass(frozen=True)
class MemoryOptions:
    last_messages: int | Literal[False] = 10
    # True, False, Mastra's options object (a dict) or SemanticRecallOptions; checked here
    semantic_recall: Any = False
    working_memory: WorkingMemoryOptions | Literal[False] = False
    generate_title: bool = False
    # True, False, Mastra's options object (a dict) or ObservationalMemoryOptions; checked here
    observational_memory: Any = False

    def __post_init__(self) -> None:
        if self.working_memory is not False and not isinstance(self.working_memory, WorkingMemoryOptions):
            raise TypeError("working_memory is False or a WorkingMemoryOptions")
        object.__setattr__(self, "_om", observational_memory_options(self.observational_memory))
        object.__setattr__(self, "_recall", semantic_recall_options(self.semantic_recall))

    @property
    def om(self) -> ObservationalMemoryOptions | None:
        """Observational Memory's resolved options when it is on, else None."""
        return self._om  # type: ignore[attr-defined]

    @property
    def recall(self) -> SemanticRecallOptions | None:
        """Semantic recall's resolved options when it is on, else None."""
        return self._recall  # type: ignore[attr-defined]

    @property
    def working(self) -> WorkingMemoryOptions | None:
        """The working memory options when it is on, else None."""
        wm = self.working_memory
        return wm if wm is not False and wm.enabled else None

    def window(self, input_count: int) -> int:
        """How many stored messages the model sees: ``last_messages`` of history *before*
        this turn's input, plus the input itself (Mastra's MessageHistory does the same)."""
        history = 0 if self.last_messages is False else max(0, int(self.last_messages))
        return history + max(1, input_count)

    def working_memory_roles(self) -> tuple[bool, bool]:
        """(agentManaged, useStateSignals) of working memory: as configured, else decided by
        OM's ``manageWorkingMemory`` (on: the observer keeps it, the agent's tool is off)."""
        working, om = self.working, self.om
        by_om = om is not None and om.observation.manage_working_memory and working is not None
        agent = working.agent_managed if working is not None and working.agent_managed is not None else not by_om
        signals = working.use_state_signals if working is not None and working.use_state_signals is not None \
            else by_om
        return agent, signals

    def describe(self) -> dict[str, Any]:
        """The config as Mastra's ``GET /memory/config`` reports it."""
        working = self.working.describe() if self.working else {"enabled": False}
        if self.working is not None and (self.om is not None and self.om.observation.manage_working_memory
                                         or self.working.agent_managed is not None
                                         or self.working.use_state_signals is not None):
            working["agentManaged"], working["useStateSignals"] = self.working_memory_roles()
        return {"lastMessages": self.last_messages,
                "semanticRecall": self.recall.describe() if self.recall else False,
                "generateTitle": self.generate_title,
                "workingMemory": working,
                "observationalMemory": describe_om(self.om)}


class Memory:
    def __init__(self, options: MemoryOptions | None = None) -> None:
        self.options = options or MemoryOptions()
        self._store: ConversationStore | None = None
        self.agent_id: str | None = None
        self.agent_resource: str | None = None
        self.background: BackgroundWork | None = None
        self._om_engine: ObservationEngine | None = None
        self._om_buffering: Buffering | None = None  # the engine's background observer and reflector
        self.semantic_index: SemanticIndex | None = None  # the process's vector search, when this memory uses it

    def attach(self, store: ConversationStore, agent_id: str | None = None,
               agent_resource: str | None = None, background: BackgroundWork | None = None) -> None:
        """Bind to the store, and to the agent whose threads this memory creates (and whose
        own resource, e.g. ``ai-chat``, holds its gateway conversations); ``background`` is
        the process's background work, where processors queue what the reply must not wait for."""
        self._store = store
        self._om_engine = None  # rebuilt on first use, with this background work
        self.agent_id = agent_id
        self.agent_resource = agent_resource
        self.background = background

    @property
    def store(self) -> ConversationStore:
        if self._store is None:
            raise RuntimeError("memory is not attached to a conversation store")
        return self._store

    async def open_thread(self, thread_id: str, resource_id: str) -> Thread:
        """The thread, if it is in ``resource_id``; a new one (written by ``record_turn``, in
        the turn's transaction) if it does not exist; ``ThreadNotOwned`` otherwise.

        The Studio continues a gateway conversation with ``resource = <agent id>``: that
        names this agent's own threads in its resource too (as the Studio's lists do), and
        the turn then goes on in the thread's own resource."""
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            return Thread(thread_id, resource_id, agent_id=self.agent_id)
        alias = resource_id == self.agent_id and (thread.agent_id, thread.resource_id) == (
            self.agent_id, self.agent_resource)
        if thread.resource_id != resource_id and not alias:
            raise ThreadNotOwned(thread_id)
        return thread

    async def ensure_thread(self, thread_id: str, resource_id: str) -> Thread:
        """``open_thread``, and the thread written now if it is new: for a run accepted now
        and started later (the Studio's send-message re-reads the thread at once)."""
        thread = await self.open_thread(thread_id, resource_id)
        if not thread.created_at:
            thread = await self.store.ensure_thread(thread.id, thread.resource_id, agent_id=self.agent_id)
            if thread.resource_id != resource_id:  # created elsewhere meanwhile
                return await self.open_thread(thread_id, resource_id)
        return thread

    async def record_turn(self, thread: Thread, incoming: list[Message],
                          intent: TurnIntent = TurnIntent()) -> RecordedTurn:
        """Store what the thread lacks, by the rules of the module docstring and
        ``dev_server.memory.turn_rules``, in one transaction; returns the ids stored and, for a
        retried turn, the stored reply to answer with. A client's output for a pending
        client tool call is no new turn: ``dev_server.memory.tool_results`` stores it instead."""
        if await complete_tool_calls(self.store, thread, incoming):
            return RecordedTurn([])
        resource_id = thread.resource_id
        if self.options.om is not None:  # stored with their token estimates: no turn counts them again
            for message in incoming:
                count_message(message)

        def plan(stored: Thread, known: dict[str, tuple[str, str]], following: Following) -> TurnWrites:
            if stored.resource_id != resource_id:  # created elsewhere since open_thread
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

    async def window(self, thread_id: str, input_count: int = 1) -> list[Message]:
        """The model's view of the thread; ``input_count`` = messages this turn added
        (0 when the client re-submitted, edited or regenerated: the anchor is the input)."""
        return await self.store.recent_messages(thread_id, self.options.window(input_count))

    def input_processors(self) -> list[InputProcessor]:
        """What builds each step's context from this memory, in order (``dev_server.kernel.processors``)."""
        om = self.observational_memory()
        processors: list[InputProcessor] = [
            ObservationalMemoryStep(self, om, self._om_buffering) if om else HistoryWindow(self)]
        if self.options.recall is not None:
            processors.append(SemanticRecallStep(self, self.options.recall))
        if self.options.working is not None:
            processors.append(WorkingMemory(self, self.options.working, self.working_memory_roles()[0]))
        return processors

    def output_processors(self) -> list[OutputProcessor]:
        processors: list[OutputProcessor] = []
        if self.options.om is not None:
            processors.append(TokenEstimates())
            om = self.observational_memory()
            if self.options.om.buffer_on_idle and om is not None:
                processors.append(BufferOnIdle(self, om, self._om_buffering))
        if self.options.generate_title and self.background is not None:
            processors.append(TitleGenerator(self, self.background))
        return processors

    def observational_memory(self) -> ObservationEngine | None:
        """The OM engine of this memory (built on first use), None when OM is off."""
        if self.options.om is None:
            return None
        if self._om_engine is None or self._om_engine.options is not self.options.om:
            self._om_engine = ObservationEngine(self.options.om, om_record_store(self.store.db, clock=self.store.clock),
                                                self, ask=ModelChoiceCaller(self.options.om),
                                                hooks=HookedCycles(self.options.om.hooks))
            self._om_buffering = Buffering(self._om_engine, self.background, self.store)
        return self._om_engine

    def enable_observational_memory(self, options: Mapping[str, Any] | ObservationalMemoryOptions | Literal[False]
                                    | None) -> None:
        """Turn OM on with ``options``, or off with None or False. Mastra's options object (the
        ``DEV_SERVER_OM_*`` settings) is merged over the agent's own options object, one level
        deep (``observation`` and ``reflection`` merge key by key), so what only code can give
        (hooks, extractors with transforms or Pydantic schemas) stays; a resolved
        ``ObservationalMemoryOptions`` replaces them, keeping the agent's hooks."""
        if isinstance(options, Mapping):
            own = self.options.observational_memory
            options = observational_memory_options(merged_options(own if isinstance(own, Mapping) else {}, options))
        elif not options:  # None or False (DEV_SERVER_OM_ENABLED=false): off
            options = None
        elif not options.hooks and self.options.om is not None:
            options = replace(options, hooks=self.options.om.hooks)
        self.options = replace(self.options, observational_memory=options or False)

    async def _om_call(self, llm: Any, model: Any) -> tuple[ObservationEngine, Any, Any]:
        engine = self.observational_memory()
        if engine is None:
            raise ValueError("Observational Memory is not enabled for this memory")
        llm = llm or getattr(self, "llm", None) or LiteLLMClient()
        agent_model = model if isinstance(model, ResolvedModel) else await llm.resolve(model or "local/om")
        return engine, llm, agent_model

    async def observe(self, thread_id: str, resource_id: str, *, llm: Any = None, model: Any = None,
                      messages: Any = None, open_span: Any = no_span) -> ManualResult:
        """Observe the thread's unobserved messages now (``dev_server.om.manual``; in resource scope
        those of the resource's other threads too, into the resource's record); ``llm`` /
        ``model``: who answers when the OM model is the default (the agent's client and model)."""
        engine, llm, agent_model = await self._om_call(llm, model)
        return await manual.observe(engine, self.store, llm, agent_model, thread_id=thread_id,
                                    resource_id=resource_id, messages=messages, open_span=open_span)

    async def reflect(self, thread_id: str, resource_id: str, *, llm: Any = None, model: Any = None,
                      open_span: Any = no_span) -> ManualResult:
        """Reflect the thread's (resource scope: its resource's) whole observation log now
        (``dev_server.om.manual``)."""
        engine, llm, agent_model = await self._om_call(llm, model)
        return await manual.reflect(engine, self.store, llm, agent_model, thread_id=thread_id,
                                    resource_id=resource_id, open_span=open_span)

    def enable_semantic_recall(self, options: Any = True) -> None:
        """Turn semantic recall on (``DEV_SERVER_SEMANTIC_RECALL``): True or Mastra's options."""
        self.options = replace(self.options, semantic_recall=options)

    @property
    def uses_vectors(self) -> bool:
        """Whether this memory searches by meaning (semantic recall, or OM retrieval with vectors)."""
        retrieval = getattr(self.options.om, "retrieval", None)
        return self.options.recall is not None or bool(getattr(retrieval, "vector", False))

    def saved(self) -> None:
        """Messages were written: the indexer (if any) embeds them soon, not at its next poll."""
        if self.semantic_index is not None:
            self.semantic_index.saved()

    def enable_working_memory(self, options: WorkingMemoryOptions | None = None) -> None:
        """Turn working memory on (``DEV_SERVER_WORKING_MEMORY``), unless already configured."""
        if self.options.working is None:
            self.options = replace(self.options, working_memory=options or WorkingMemoryOptions())

    def working_memory_roles(self) -> tuple[bool, bool]:
        return self.options.working_memory_roles()

    def working_memory_place(self, thread: Thread | None, resource_id: str | None) -> dict[str, str] | None:
        """Where the document lives: ``{"thread_id": ...}`` or ``{"resource_id": ...}`` (the
        store's keywords). ``thread`` is a stored thread or None; resource scope uses the
        thread's own resource when there is one (the Studio may name it by the agent alias).
        None when working memory is off or there is nowhere to keep the document."""
        options = self.options.working
        if options is None:
            return None
        if options.scope == "thread":
            return {"thread_id": thread.id} if thread is not None else None
        resource = thread.resource_id if thread is not None else resource_id
        return {"resource_id": resource} if resource else None

    async def get_working_memory(self, thread: Thread | None, resource_id: str | None = None) -> str | None:
        place = self.working_memory_place(thread, resource_id)
        return await self.store.working_memory(**place) if place else None

    def _working_place(self, thread: Thread | None, resource_id: str | None) -> dict[str, str]:
        place = self.working_memory_place(thread, resource_id)
        if place is None:
            raise WorkingMemoryOff("working memory is off, or has no thread or resource to live in")
        return place

    async def update_working_memory(self, text: str, thread: Thread | None, resource_id: str | None = None) -> str:
        """Replace the document (checked against the format and schema: ``WorkingMemoryInvalid``);
        returns what was stored. With ``apply_working_memory_update`` the only write path: the
        tool and the Studio both use them."""
        place = self._working_place(thread, resource_id)
        text = self.options.working.checked(text)
        await self.store.set_working_memory(text, **place)
        return text

    async def apply_working_memory_update(self, update: Any, thread: Thread | None,
                                          resource_id: str | None = None) -> str:
        """The model's update (``WorkingMemoryOptions.apply``: Markdown replaced, JSON merged
        and checked) applied to the *stored* document under the write lock, so two turns
        updating one resource's memory at once both land; ``WorkingMemoryInvalid`` leaves it
        unchanged. Returns what was stored."""
        place = self._working_place(thread, resource_id)
        options = self.options.working
        if options.schema is None:  # Markdown: the update replaces the document, nothing to read first
            return await self.update_working_memory(options.apply(None, update), thread, resource_id)
        return await self.store.change_working_memory(lambda current: options.apply(current, update), **place)

    async def semantic_search(self, query: str, *, resource_id: str, thread_id: str | None = None,
                              top_k: int = 4, exclude_ids: Iterable[str] = (),
                              threshold: float | None = None) -> list[SemanticHit]:
        """The stored messages nearest to ``query`` by meaning, best first: of the thread, or
        of every thread of ``resource_id`` when ``thread_id`` is None (the caller has checked
        that the resource is the caller's), without ``exclude_ids``. ``SemanticSearchUnavailable``
        when this memory has no vector search or the embedder failed."""
        if self.semantic_index is None:
            raise SemanticSearchUnavailable("semantic search is not configured for this memory")
        return await self.semantic_index.search(query, resource_id=resource_id, thread_id=thread_id, top_k=top_k,
                                                exclude_ids=exclude_ids, threshold=threshold)

    async def first_user_message(self, thread_id: str) -> Message | None:
        messages, _ = await self.store.page_messages(thread_id, per_page=1, direction="ASC", roles=["user"])
        return messages[0] if messages else None

    async def set_title(self, thread_id: str, resource_id: str, title: str) -> bool:
        """Give the thread its generated title, only if it still exists in ``resource_id``
        and still has none (``titles.untitled``); True when it was written. One conditional
        UPDATE, so a thread deleted or renamed meanwhile is left alone, never re-created."""
        return await self.store.set_title_if_untitled(thread_id, resource_id, title, DEFAULT_TITLE_PREFIX)

    async def save_reply(self, thread: Thread, reply: Message) -> None:
        reply.resource_id = thread.resource_id
        await self.store.append_messages(thread.id, [reply])
        self.saved()

    async def salvage_reply(self, thread_id: str, reply: Message, answered_id: str) -> bool:
        """A reply rebuilt from a dead stream's frames (``dev_server.agents.salvage``), stored after
        the message it answers unless the thread already has it or another answer."""
        if self.options.om is not None:
            count_message(reply)
        stored = await self.store.salvage_reply(thread_id, reply, answered_id)
        if stored:
            self.saved()
        return stored

    async def upsert_reply(self, thread: Thread, reply: Message) -> None:
        """Store the reply, or overwrite the copy of it already stored under the same id:
        a reply is checkpointed while it streams, and its final save replaces the last
        checkpoint instead of adding a second message."""
        reply.resource_id = thread.resource_id
        if not await self.store.append_messages(thread.id, [reply]):
            await self.store.replace_message(reply)
        self.saved()
