"""dev-server: an agent gateway with durable conversation memory.

Your own agents are written with the names below and run with ``--agents`` (README.md,
"Your own agent")::

    from dev_server import Agent, Memory, WorkingMemory, tool

``Agent`` is an agent's definition; ``Memory`` its memory's options (Mastra's
``new Memory({options})``: ``last_messages``, ``working_memory``, ``semantic_recall``,
``observational_memory``, ``generate_title``); ``WorkingMemory`` working memory's options;
``tool`` makes a ``Tool`` of a function, and ``ToolContext`` is what a tool may ask for.

Importing this package does no work: those names are imported on first use, and the app
is built by ``dev_server.factory.create_app``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> (module, name there); imported by name, not statically, so that modules
# importing __version__ from here do not depend on the agents layer (.importlinter)
_PUBLIC = {
    "Agent": ("dev_server.agents.definition", "AgentDefinition"),
    "Memory": ("dev_server.memory.options", "MemoryOptions"),
    "WorkingMemory": ("dev_server.memory.working_document", "WorkingMemoryOptions"),
    "tool": ("dev_server.agents.tool_decorator", "tool"),
    "Tool": ("dev_server.kernel.tools", "Tool"),
    "ToolContext": ("dev_server.kernel.tools", "ToolContext"),
}
__all__ = ["Agent", "Memory", "Tool", "ToolContext", "WorkingMemory", "__version__", "tool"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'dev_server' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
