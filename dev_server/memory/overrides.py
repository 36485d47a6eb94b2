"""The process's settings over an agent's memory options, before its ``Memory`` is built.

The registry applies them once per agent, to the agents they name (``DEV_SERVER_WORKING_MEMORY``,
``DEV_SERVER_OM_*`` with ``DEV_SERVER_OM_AGENTS``, ``DEV_SERVER_AGENT_OM_MODELS``,
``DEV_SERVER_SEMANTIC_RECALL``), and ``DEV_SERVER_OM_MODEL`` where the code named no
model; each returns new options and leaves the ones given unchanged, so the memory built
from the result never changes after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from dev_server.memory.options import MemoryOptions, SemanticRecallSetting
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.options.config import ObservationalMemoryOptions, merged_options, observational_memory_options
from dev_server.om.options.models import parse_model_choice


def with_working_memory(options: MemoryOptions, working: WorkingMemoryOptions | None = None) -> MemoryOptions:
    """Working memory on (``DEV_SERVER_WORKING_MEMORY``), unless the agent configured its own."""
    if options.working is not None:
        return options
    return replace(options, working_memory=working or WorkingMemoryOptions())


def with_observational_memory(options: MemoryOptions,
                              settings: Mapping[str, Any] | ObservationalMemoryOptions | Literal[False] | None
                              ) -> MemoryOptions:
    """OM on with ``settings``, or off with None or False. Mastra's options object (the
    ``DEV_SERVER_OM_*`` settings) is merged over the agent's own options object, one level
    deep (``observation`` and ``reflection`` merge key by key), so what only code can give
    (hooks, extractors with transforms or Pydantic schemas) stays; resolved
    ``ObservationalMemoryOptions`` replace them, keeping the agent's hooks."""
    resolved: ObservationalMemoryOptions | None
    if isinstance(settings, Mapping):
        own = options.observational_memory
        resolved = observational_memory_options(merged_options(own if isinstance(own, Mapping) else {}, settings))
    elif not settings:  # None or False (DEV_SERVER_OM_ENABLED=false): off
        resolved = None
    elif not settings.hooks and options.om is not None:
        resolved = replace(settings, hooks=options.om.hooks)
    else:
        resolved = settings
    return replace(options, observational_memory=resolved or False)


def with_om_model(options: MemoryOptions, model: str, *, where_unset: bool = False) -> MemoryOptions:
    """Observational Memory's observer and reflector answered by ``model`` (a model id or
    ``"default"``): instead of whatever the options named (``DEV_SERVER_AGENT_OM_MODELS``),
    or, ``where_unset``, only for the ones they leave to the default (``DEV_SERVER_OM_MODEL``)."""
    om = options.om
    if om is None:
        return options
    choice = parse_model_choice("model", model)
    if not where_unset:
        resolved = replace(om, model=choice.label, model_choice=choice,
                           observation=replace(om.observation, model=None, model_choice=None),
                           reflection=replace(om.reflection, model=None, model_choice=None))
    elif om.model_choice is not None:
        return options
    else:
        observation, reflection = om.observation, om.reflection
        if observation.model_choice is None:
            observation = replace(observation, model=choice.label, model_choice=choice)
        if reflection.model_choice is None:
            reflection = replace(reflection, model=choice.label, model_choice=choice)
        resolved = replace(om, observation=observation, reflection=reflection)
    return replace(options, observational_memory=resolved)


def with_semantic_recall(options: MemoryOptions, recall: SemanticRecallSetting = True) -> MemoryOptions:
    """Semantic recall on (``DEV_SERVER_SEMANTIC_RECALL``): True or Mastra's options."""
    return replace(options, semantic_recall=recall)
