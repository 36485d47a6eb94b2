"""What an agent's memory does: ``MemoryOptions``, Mastra's memory options in Python.

The options are a value, and the public ``dev_server.Memory``: an agent's definition makes
them, the registry applies the settings that name the agent to them
(``dev_server.memory.overrides``), and the ``Memory`` built from them keeps them as they
are. Semantic recall and Observational Memory take ``True``, a Mastra options object (a
dict) or their resolved options; both are checked when the options are made, so a bad
value fails where it is written (a user's agents file: at start), not at the first turn.
What only Python can hold (OM's hooks, an extractor's functions, Pydantic schemas) can be
given only in an agent's Python definition, never in the ``DEV_SERVER_OM_*`` settings (JSON).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.options.activation import NO_TRIGGERS
from dev_server.om.options.config import ObservationalMemoryOptions, describe_om, observational_memory_options
from dev_server.recall.options import SemanticRecallOptions, semantic_recall_options

log = logging.getLogger(__name__)
SemanticRecallSetting = bool | Mapping[str, Any] | SemanticRecallOptions
ObservationalMemorySetting = bool | Mapping[str, Any] | ObservationalMemoryOptions


@dataclass(frozen=True)
class MemoryOptions:
    last_messages: int | Literal[False] = 10
    semantic_recall: SemanticRecallSetting = False
    working_memory: WorkingMemoryOptions | Literal[False] = False
    generate_title: bool = False
    observational_memory: ObservationalMemorySetting = False

    def __post_init__(self) -> None:
        if self.working_memory is not False and not isinstance(self.working_memory, WorkingMemoryOptions):
            raise TypeError("working_memory is False or a WorkingMemoryOptions")
        _ = self.om, self.recall  # resolved (and checked) now

    @cached_property
    def om(self) -> ObservationalMemoryOptions | None:
        """Observational Memory's resolved options when it is on, else None. As through
        Mastra's ``Memory``, ``observation.activateAfterIdle`` / ``activateOnProviderChange``
        and the ``reflection`` ones have no effect here (the standalone class applies them)."""
        om = observational_memory_options(self.observational_memory)
        if om is not None and (om.observation.triggers != om.triggers or om.reflection.triggers != NO_TRIGGERS):
            log.info("observationalMemory: observation/reflection activateAfterIdle and activateOnProviderChange "
                     "take effect only on the standalone ObservationalMemory (as in Mastra); an agent's memory "
                     "reads the top-level ones")
        return om

    @cached_property
    def recall(self) -> SemanticRecallOptions | None:
        """Semantic recall's resolved options when it is on, else None."""
        return semantic_recall_options(self.semantic_recall)

    @property
    def working(self) -> WorkingMemoryOptions | None:
        """The working memory options when it is on, else None."""
        wm = self.working_memory
        return wm if wm is not False and wm.enabled else None

    @property
    def uses_vectors(self) -> bool:
        """Whether this memory searches by meaning (semantic recall, or OM retrieval with vectors)."""
        retrieval = self.om.retrieval if self.om is not None else None
        return self.recall is not None or bool(retrieval is not None and retrieval.vector)

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
