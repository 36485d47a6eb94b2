"""The agents this server runs. Adding one: a definition file, and one line below."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dev_server.agents import chat_agent, docs_agent, orchestrator_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.background import BackgroundWork
from dev_server.memory.memory import Memory
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.storage.conversations import ConversationStore

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


class AgentRegistry:
    """Agents by id, each with the memory its factory built (once, at registration)."""

    def __init__(self, definitions: Iterable[AgentDefinition], conversations: ConversationStore,
                 working_memory: Mapping[str, str] | None = None,
                 background: BackgroundWork | None = None,
                 observational_memory: Mapping[str, Any] | Literal[False] | None = None,
                 semantic_recall: Mapping[str, Any] | None = None) -> None:
        """``working_memory``: agent id -> scope, agents whose memory gets working memory on;
        ``background``: the process's background work, given to each memory;
        ``observational_memory``: the ``DEV_SERVER_OM_*`` settings (Mastra's options object, or
        False), applied to the agents whose definition turns Observational Memory on;
        ``semantic_recall``: agent id -> ``semanticRecall`` options (``DEV_SERVER_SEMANTIC_RECALL``)."""
        self._agents: dict[str, RegisteredAgent] = {}
        for definition in definitions:
            if definition.id in self._agents:
                raise ValueError(f"agent id {definition.id!r} is registered twice")
            memory = definition.memory() if definition.memory is not None else None
            if memory is not None:
                memory.attach(conversations, definition.id, definition.resource, background)
                if definition.id in (working_memory or {}):
                    memory.enable_working_memory(WorkingMemoryOptions(scope=working_memory[definition.id]))
                if memory.options.om is not None and observational_memory is not None:
                    memory.enable_observational_memory(observational_memory)
                if definition.id in (semantic_recall or {}):
                    memory.enable_semantic_recall(semantic_recall[definition.id] or True)
            self._agents[definition.id] = RegisteredAgent(definition, memory)
        with_memory = {a.id for a in self._agents.values() if a.memory}
        for agent_id in sorted(set(working_memory or ()) - with_memory):
            log.warning("working memory asked for %r, which is not an agent with memory: ignored", agent_id)
        for agent_id in sorted(set(semantic_recall or ()) - with_memory):
            log.warning("semantic recall asked for %r, which is not an agent with memory: ignored", agent_id)

    def memories_using_vectors(self) -> list[Memory]:
        return [a.memory for a in self._agents.values() if a.memory is not None and a.memory.uses_vectors]

    def get(self, agent_id: str) -> RegisteredAgent | None:
        return self._agents.get(agent_id)

    def __iter__(self):
        return iter(self._agents.values())

    def __len__(self) -> int:
        return len(self._agents)
