"""The agents this server runs. Adding one: a definition file, and one line below."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dev_server.agents import chat_agent, docs_agent, orchestrator_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.background import BackgroundWork
from dev_server.memory.memory import Memory
from dev_server.memory.options import MemoryOptions
from dev_server.memory.overrides import with_observational_memory, with_semantic_recall, with_working_memory
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.storage.conversations import ConversationStore

if TYPE_CHECKING:
    from dev_server.recall.service import SemanticIndex

log = logging.getLogger(__name__)

DEFINITIONS: tuple[AgentDefinition, ...] = (
    chat_agent.definition,
    docs_agent.definition,
    orchestrator_agent.definition,
)
DEFAULT_AGENT_ID = "chat-agent"


@dataclass(frozen=True)
class RegisteredAgent:
    definition: AgentDefinition
    memory: Memory | None

    @property
    def id(self) -> str:
        return self.definition.id


@dataclass(frozen=True)
class MemorySettings:
    """The process's settings over its agents' memory options: ``working_memory``: agent id
    -> scope, agents whose memory gets working memory on (``DEV_SERVER_WORKING_MEMORY``);
    ``observational_memory``: the ``DEV_SERVER_OM_*`` settings (Mastra's options object, or
    False), applied to the agents whose options turn Observational Memory on (unless they
    keep their own: ``om_follows_settings``); ``semantic_recall``: agent id ->
    ``semanticRecall`` options (``DEV_SERVER_SEMANTIC_RECALL``)."""

    working_memory: Mapping[str, str] = field(default_factory=dict)
    observational_memory: Mapping[str, Any] | Literal[False] | None = None
    semantic_recall: Mapping[str, Any] = field(default_factory=dict)


def memory_options(definitions: Iterable[AgentDefinition],
                   settings: MemorySettings = MemorySettings()) -> dict[str, MemoryOptions]:
    """Each agent's memory options, by agent id, with the process's ``settings`` applied;
    calls each definition's memory factory once. Agents without memory are left out."""
    found: dict[str, MemoryOptions] = {}
    for definition in definitions:
        if definition.memory is None:
            continue
        options = definition.memory()
        if definition.id in settings.working_memory:
            options = with_working_memory(options, WorkingMemoryOptions(scope=settings.working_memory[definition.id]))
        if options.om is not None and settings.observational_memory is not None and options.om_follows_settings:
            options = with_observational_memory(options, settings.observational_memory)
        if definition.id in settings.semantic_recall:
            options = with_semantic_recall(options, settings.semantic_recall[definition.id] or True)
        found[definition.id] = options
    for agent_id in sorted(set(settings.working_memory) - set(found)):
        log.warning("working memory asked for %r, which is not an agent with memory: ignored", agent_id)
    for agent_id in sorted(set(settings.semantic_recall) - set(found)):
        log.warning("semantic recall asked for %r, which is not an agent with memory: ignored", agent_id)
    return found


class AgentRegistry:
    """Agents by id, each with the memory built for it (once, at registration)."""

    def __init__(self, definitions: Iterable[AgentDefinition], conversations: ConversationStore,
                 memories: Mapping[str, MemoryOptions] | None = None, *,
                 background: BackgroundWork | None = None, semantic_index: SemanticIndex | None = None) -> None:
        """``memories``: each agent's memory options (``memory_options``; by default its
        definition's, with no settings applied); ``background``: the process's background
        work, given to each memory; ``semantic_index``: the process's vector search, given to
        each memory that searches by meaning."""
        definitions = tuple(definitions)
        self._agents: dict[str, RegisteredAgent] = {}
        seen: set[str] = set()
        for definition in definitions:
            if definition.id in seen:
                raise ValueError(f"agent id {definition.id!r} is registered twice")
            seen.add(definition.id)
        options = memory_options(definitions) if memories is None else memories
        for definition in definitions:
            own = options.get(definition.id) if definition.memory is not None else None
            memory = None if own is None else Memory(
                own, conversations, agent_id=definition.id, agent_resource=definition.resource, background=background,
                semantic_index=semantic_index if own.uses_vectors else None)
            self._agents[definition.id] = RegisteredAgent(definition, memory)

    def get(self, agent_id: str) -> RegisteredAgent | None:
        return self._agents.get(agent_id)

    def __iter__(self) -> Iterator[RegisteredAgent]:
        return iter(self._agents.values())

    def __len__(self) -> int:
        return len(self._agents)
