"""The process's settings over an agent's memory options, before its ``Memory`` is built.

The registry applies them once per agent (``DEV_SERVER_WORKING_MEMORY``,
``DEV_SERVER_OM_*``, ``DEV_SERVER_SEMANTIC_RECALL``); each returns new options and
leaves the ones given unchanged, so the memory built from the result never changes after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from dev_server.memory.options import MemoryOptions, SemanticRecallSetting
from dev_server.memory.working_document import WorkingMemoryOptions
from dev_server.om.options.config import ObservationalMemoryOptions, merged_options, observational_memory_options


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


def with_semantic_recall(options: MemoryOptions, recall: SemanticRecallSetting = True) -> MemoryOptions:
    """Semantic recall on (``DEV_SERVER_SEMANTIC_RECALL``): True or Mastra's options."""
    return replace(options, semantic_recall=recall)
