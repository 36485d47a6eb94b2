"""The agents this server runs, and the process's settings applied to them.

The built-in demo agents (``DEFINITIONS``) run unless the user's own are loaded
(``dev_server.agents.loading``). Settings change what an agent's code gave it only where
they name that agent (``DEV_SERVER_AGENT_MODELS``, ``DEV_SERVER_AGENT_OM_MODELS``,
``DEV_SERVER_OM_AGENTS``, ``DEV_SERVER_WORKING_MEMORY``, ``DEV_SERVER_SEMANTIC_RECALL``);
the default models (``DEV_SERVER_MODEL``, ``DEV_SERVER_OM_MODEL``) only fill in what the
code left open (docs/configuration.md#models).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from dev_server.agents import chat_agent, docs_agent, orchestrator_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.background import BackgroundWork
from dev_server.kernel.model import DEFAULT_AGENT_MODEL
from dev_server.memory.memory import Memory
from dev_server.memory.options import MemoryOptions
from dev_server.memory.overrides import (
    with_observational_memory,
    with_om_model,
    with_semantic_recall,
    with_working_memory,
)
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


def with_models(definitions: Iterable[AgentDefinition], default: str = DEFAULT_AGENT_MODEL,
                models: Mapping[str, str] | None = None) -> tuple[AgentDefinition, ...]:
    """Each definition with its model: ``models[id]`` when a setting names the agent
    (``DEV_SERVER_AGENT_MODELS``), else its code's, else ``default`` (``DEV_SERVER_MODEL``)."""
    models = models or {}
    found = tuple(replace(d, model=models.get(d.id) or d.model or default) for d in definitions)
    _warn_unknown("DEV_SERVER_AGENT_MODELS", models, {d.id for d in found})
    return found


@dataclass(frozen=True)
class MemorySettings:
    """The process's settings over its agents' memory options, each naming the agents it
    changes: ``working_memory``: agent id -> scope, agents whose memory gets working memory
    on (``DEV_SERVER_WORKING_MEMORY``); ``observational_memory``: the ``DEV_SERVER_OM_*``
    settings (Mastra's options object, or False), applied over the code's options of the
    agents in ``om_agents`` (``DEV_SERVER_OM_AGENTS``) that turn Observational Memory on;
    ``om_models``: agent id -> the observer's and reflector's model, over the code's
    (``DEV_SERVER_AGENT_OM_MODELS``); ``om_model``: their model where the code names none
    (``DEV_SERVER_OM_MODEL``); ``semantic_recall``: agent id -> ``semanticRecall`` options
    (``DEV_SERVER_SEMANTIC_RECALL``). ``named``: the settings a user set (their agents
    are checked; a default that names no agent of this process is not)."""

    working_memory: Mapping[str, str] = field(default_factory=dict)
    observational_memory: Mapping[str, Any] | Literal[False] | None = None
    om_agents: frozenset[str] = frozenset()
    om_model: str | None = None
    om_models: Mapping[str, str] = field(default_factory=dict)
    semantic_recall: Mapping[str, Any] = field(default_factory=dict)
    named: frozenset[str] = frozenset()


def memory_options(definitions: Iterable[AgentDefinition],
                   settings: MemorySettings = MemorySettings()) -> dict[str, MemoryOptions]:
    """Each agent's memory options, by agent id, with the process's ``settings`` applied;
    calls each definition's memory factory once. Agents without memory are left out."""
    found: dict[str, MemoryOptions] = {}
    with_om: set[str] = set()
    om_settings = settings.observational_memory
    for definition in definitions:
        options = definition.memory_options()
        if options is None:
            continue
        if definition.id in settings.working_memory:
            options = with_working_memory(options, WorkingMemoryOptions(scope=settings.working_memory[definition.id]))
        if options.om is not None:
            with_om.add(definition.id)
            if definition.id in settings.om_agents and (om_settings is False or om_settings):
                options = with_observational_memory(options, om_settings)
        if options.om is not None and definition.id in settings.om_models:
            options = with_om_model(options, settings.om_models[definition.id])
        elif options.om is not None and settings.om_model:
            options = with_om_model(options, settings.om_model, where_unset=True)
        if definition.id in settings.semantic_recall:
            options = with_semantic_recall(options, settings.semantic_recall[definition.id] or True)
        found[definition.id] = options
    _warn_unknown("DEV_SERVER_WORKING_MEMORY", settings.working_memory, set(found), "an agent with memory")
    _warn_unknown("DEV_SERVER_SEMANTIC_RECALL", settings.semantic_recall, set(found), "an agent with memory")
    _warn_unknown("DEV_SERVER_AGENT_OM_MODELS", settings.om_models, with_om, "an agent with Observational Memory")
    if "DEV_SERVER_OM_AGENTS" in settings.named:
        _warn_unknown("DEV_SERVER_OM_AGENTS", settings.om_agents, with_om, "an agent with Observational Memory")
    elif (om_settings is False or om_settings) and with_om and not settings.om_agents & with_om:
        log.warning("the DEV_SERVER_OM_* settings apply to the agents DEV_SERVER_OM_AGENTS names (%s), none of which "
                    "is here: name yours (%s) to apply them", ",".join(sorted(settings.om_agents)) or "none",
                    ",".join(sorted(with_om)))
    return found


def _warn_unknown(setting: str, named: Iterable[str], known: set[str], what: str = "an agent") -> None:
    for agent_id in sorted(set(named) - known):
        log.warning("%s names %r, which is not %s here: ignored", setting, agent_id, what)


class AgentRegistry:
    """Agents by id, each with the memory built for it (once, at registration)."""

    def __init__(self, definitions: Iterable[AgentDefinition], conversations: ConversationStore,
                 memories: Mapping[str, MemoryOptions] | None = None, *,
                 background: BackgroundWork | None = None, semantic_index: SemanticIndex | None = None) -> None:
        """``memories``: each agent's memory options (``memory_options``; by default its
        definition's, with no settings applied); ``background``: the process's background
        work, given to each memory; ``semantic_index``: the process's vector search, given to
        each memory that searches by meaning. A definition that names no model gets the
        default one (the app gives definitions with the settings' models: ``with_models``)."""
        definitions = with_models(definitions)
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

    @property
    def default_id(self) -> str:
        """The agent ``POST /api/chat`` talks to when the body names none: chat-agent, or
        the first one when there is no chat-agent (the user's own agents)."""
        return DEFAULT_AGENT_ID if DEFAULT_AGENT_ID in self._agents else next(iter(self._agents), DEFAULT_AGENT_ID)

    def __iter__(self) -> Iterator[RegisteredAgent]:
        return iter(self._agents.values())

    def __len__(self) -> int:
        return len(self._agents)
